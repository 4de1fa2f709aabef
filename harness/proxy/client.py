"""The harness side of the fault proxy: starts `mitmdump` with proxy_addons/kueue_faults.py (the parts of
harness/proxy/addons) in reverse mode in front of kube-apiserver, and drives it over its control channel
(loopback + per-run token). Process faults and watch ticks are done by harness/nemesis/runner.py.

Use: `rule = proxy.hold(Match(write="admission", name="job-job1-*"))`, `h = rule.wait_held(30)`,
`proxy.release(h)`; `proxy.hold_response(...)`; `proxy.wait_delivered("ns/name", rv)`.
"""

from __future__ import annotations

import http.client
import json
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from harness.common import paths, pki
from harness.common.errors import EnvironmentNotReady, ProxyError
from harness.common.procs import ProcessGroup, cpu_ticks
from harness.common.waiting import WaitTimeout, wait_for, wait_progressing
from harness.kueue import api as kueue_api
from harness.plan.rules import Match, Rule

ADDON = paths.ADDON
#: mitmweb flow-list columns in `--ui` mode: its defaults plus "comment" (the addon's classification label).
WEB_COLUMNS = ("tls", "icon", "path", "comment", "method", "status", "size", "time")


def _mitm_tool(name: str = "mitmdump") -> str:
    # The mitmdump/mitmweb of the interpreter running the harness (the project's venv), else PATH.
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise ProxyError(f"{name} is not installed: `pip install 'mitmproxy>=11.0.2,<11.1'` (see README).")
    return found


@dataclass
class HeldFlow:
    """A request or response parked in the proxy: `id` ("h3"), rule id, stage, label, since (epoch s)."""

    id: str
    rule: str
    stage: str
    label: str
    since: float
    flow: int


class RuleHandle:
    """A rule loaded in the proxy, with waits on what it caught."""

    def __init__(self, proxy: "Proxy", rule: Rule) -> None:
        self.proxy = proxy
        self.rule = rule

    @property
    def id(self) -> str:
        return self.rule.id

    def hits(self) -> int:
        for r in self.proxy.state()["rules"]:
            if r["rule"]["id"] == self.id:
                return r["hits"]
        return 0

    def wait_held(self, timeout: float) -> HeldFlow:
        """Wait until this rule holds a flow; return it. Raises WaitTimeout naming the rule."""

        def probe() -> HeldFlow | None:
            for h in self.proxy.state()["holds"]:
                if h["rule"] == self.id:
                    return HeldFlow(h["id"], h["rule"], h["stage"], h["label"], h["since"], h["flow"])
            return None

        return wait_for(probe, timeout=timeout, what=f"rule {self.id} ({self.rule.match}) to hold a flow",
                        describe=lambda: self.proxy.state()["holds"])


class Proxy:
    """A running mitmdump with the kueue_faults addon. Start with `Proxy.start(...)`."""

    def __init__(self, url: str, ca_file: Path, control_port: int, token: str, events_file: Path,
                 procs: ProcessGroup, say: Callable[[str], None]) -> None:
        self.url = url
        self.ca_file = ca_file
        self.control_port = control_port
        self._token = token
        self.events_file = events_file
        self.procs = procs
        self.say = say
        self._events: list[dict[str, Any]] = []
        self.web_url: str | None = None
        self._next = 0
        self._scope = 0  # index of the first event the current case may see (begin_case)

    @classmethod
    def start(cls, upstream: str, upstream_ca: Path | None, state: Path, artifacts: Path, procs: ProcessGroup,
              port: int, control_port: int, say: Callable[[str], None],
              listen_host: str = "127.0.0.1", web_port: int | None = None,
              intercept: str | None = None) -> "Proxy":
        """Start mitmdump in reverse mode on `listen_host`:`port` towards `upstream`, verifying its certificate
        against `upstream_ca` (None: the system's trust store). Raises EnvironmentNotReady with mitmdump's log
        tail if it does not come up.

        `listen_host` is where Kueue reaches the proxy: 127.0.0.1 for the local target, a bridge address (the
        kind network's gateway) when Kueue runs in a cluster. The control channel stays on 127.0.0.1 always
        (the addon binds it there).

        `web_port`: run mitmweb instead of mitmdump, its UI on 127.0.0.1:`web_port` (mitmweb 11 has no
        login on its UI, so it stays on loopback); `intercept`: a mitmproxy filter expression whose flows
        the UI pauses for a person to resume (e.g. `~q & ~m PATCH & ~u /workloads/[^/]+/status\\b`; not
        `status$`: mitmproxy's `~u` sees the query string, and Kueue's patches carry `?fieldManager=…`)."""
        confdir = state / "mitmproxy"
        confdir.mkdir(mode=0o700, exist_ok=True)
        # mitmproxy reloads a script whose file changes; a run uses its own copy, so editing the source
        # tree during a run cannot swap the addon (and its rules and holds) out from under a case.
        addon = state / ADDON.name
        shutil.copyfile(ADDON, addon)
        token = secrets.token_urlsafe(24)
        pki.write_private(state / "control.token", token.encode())
        events = artifacts / "proxy-events.jsonl"
        log = artifacts / "mitmdump.log"
        procs.start(
            "proxy",
            [
                *([_mitm_tool("mitmweb"), "--set", "web_host=127.0.0.1", "--set", f"web_port={web_port}",
                   "--set", "web_open_browser=false",
                   # The flow list shows each flow's comment, where the addon writes its label
                   # ("admission demo/job-job1-x (kueue-admission, loose)"); mitmweb hides it by default.
                   *[a for c in WEB_COLUMNS for a in ("--set", f"web_columns={c}")]]
                  if web_port else [_mitm_tool("mitmdump")]),
                *(["--set", f"intercept={intercept}"] if intercept else []),
                "-q", "--mode", f"reverse:{upstream}@{port}", "--listen-host", listen_host,
                "-s", str(addon),
                "--set", f"confdir={confdir}",
                *(["--set", f"ssl_verify_upstream_trusted_ca={upstream_ca}"] if upstream_ca else []),
                "--set", "connection_strategy=eager",
                "--set", f"kh_control_port={control_port}",
                "--set", f"kh_token_file={state / 'control.token'}",
                "--set", f"kh_events={events}",
                # Every completed flow, Authorization redacted, flushed per flow (harness/report.py cuts
                # each case's flows out of it for its bundle).
                "--set", f"kh_flows={artifacts / 'flows.mitm'}",
            ],
            log,
        )
        url_host = f"[{listen_host}]" if ":" in listen_host else listen_host
        p = cls(f"https://{url_host}:{port}", confdir / "mitmproxy-ca-cert.pem", control_port, token, events,
                procs, say)
        p.web_url = f"http://127.0.0.1:{web_port}/" if web_port else None

        def up() -> bool:
            if not procs.alive("proxy"):
                raise EnvironmentNotReady(f"mitmdump exited during start-up. Last lines of {log}:\n"
                                          + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
            return p.ca_file.exists() and bool(p.state())

        pid = procs.procs["proxy"][0].pid

        def state() -> tuple[Any, int]:  # mitmdump starting: its CPU time or its log grows (a slow machine)
            return cpu_ticks(pid), log.stat().st_size if log.exists() else 0

        try:
            wait_progressing(up, state=state, stall=30, cap=600, what="the proxy's control channel", interval=0.1,
                             say=say, fatal=(EnvironmentNotReady,))
        except WaitTimeout as e:
            raise EnvironmentNotReady(f"{e}. mitmdump log: {log}") from None
        return p

    @classmethod
    def attach(cls, session: dict[str, Any]) -> "Proxy":
        """A control-only handle on the proxy of a running `kueue-harness up` session (harness.cli.session)."""
        try:
            token = Path(session["control_token_file"]).read_text().strip()
        except OSError as e:
            raise ProxyError(f"cannot read the session's control token ({e}); is the session yours?") from None
        p = cls(session["proxy_url"], Path(session["state"]) / "mitmproxy" / "mitmproxy-ca-cert.pem",
                session["control_port"], token, Path(session["artifacts"]) / "env" / "proxy-events.jsonl",
                None, lambda s: None)  # type: ignore[arg-type]
        p.web_url = session.get("web_url")
        return p

    # ---- control channel -------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.control_port, timeout=10)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"}
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            payload = json.loads(r.read() or b"null")
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise ProxyError(
                f"cannot talk to the proxy's control channel at 127.0.0.1:{self.control_port} ({type(e).__name__}: "
                f"{e}); the proxy may have exited or be stuck: `kueue-harness status` shows its process, its log "
                "is mitmdump.log in the run's env/ folder"
            ) from None
        finally:
            conn.close()
        if r.status >= 300:
            reason = payload.get("error") if isinstance(payload, dict) else payload
            raise ProxyError(f"the proxy refused {method} {path} ({r.status}): {reason}")
        return payload

    def state(self) -> dict[str, Any]:
        """{"rules": [{"rule", "hits", "warning"?, "near_miss"?}], "holds": [{"id", "rule", "stage", "label",
        "since", "age", "flow", "max_hold", "expires_in", "timeout_in"}], "expired": [the last expired holds:
        "id", "rule", "label", "ended", "at", …], "signals", "events"} (seconds; epoch seconds for
        since/ended). While a rule has no hit, `warning` is a write it names wrongly, else `near_miss` the
        first write of its kind with another name (faultproxy/state.py `near_misses`)."""
        return self._call("GET", "/state")

    def reached(self, rule_id: str, state: str = "answered", status: int | None = None) -> dict[str, Any]:
        """Whether a flow of rule `rule_id` reached `state` (held, released, answered; with HTTP `status`),
        as a release trigger would see it now: {"reached": bool, "hits": int, "warning": dict | None,
        "near_miss": dict | None}.
        Raises ProxyError when the rule is not loaded (404) or never reaches that state (400)."""
        q = f"state={quote(state, safe='')}" + (f"&status={int(status)}" if status is not None else "")
        return self._call("GET", f"/rules/{quote(rule_id, safe='')}/reached?{q}")

    def add_rule(self, rule: Rule) -> RuleHandle:
        """Load `rule` into the proxy. Raises ProxyError if the proxy rejects it."""
        self._call("POST", "/rules", rule.to_dict())
        return RuleHandle(self, rule)

    def load_plan(self, plan, by: str | None = None) -> dict[str, RuleHandle]:
        """Load a validated harness.plan.load.Plan atomically (all rules or none); returns handles by rule id.
        `by`: the command that loads it ("up --plan", "plan load"), recorded with the plan's file and
        namespace in each `rule_added` event's `plan_source`. Raises ProxyError with the proxy's reason if
        it refuses the plan. A plan with no rules (only `steps_after` or `deletes_as`: harness/plan/moved.py) sends nothing."""
        if not plan.rules:
            return {}
        body = plan.to_wire()
        if by:
            body["source"] = {**(body.get("source") or {}), "by": by}
        self._call("POST", "/plan", body)
        return {r.id: RuleHandle(self, r) for r in plan.rules}

    def hold(self, match: Match, rule_id: str | None = None, times: int | None = 1,
             max_hold: float = 600.0) -> RuleHandle:
        """Hold matching requests before kube-apiserver sees them."""
        return self.add_rule(Rule(id=rule_id or f"hold-{secrets.token_hex(3)}", match=match, action="hold",
                                  stage="request", times=times, params=(("max_hold", max_hold),)))

    def hold_response(self, match: Match, rule_id: str | None = None, times: int | None = 1,
                      max_hold: float = 600.0) -> RuleHandle:
        """Let matching requests reach kube-apiserver, but hold the answer before Kueue gets it."""
        return self.add_rule(Rule(id=rule_id or f"holdresp-{secrets.token_hex(3)}", match=match,
                                  action="hold", stage="response", times=times, params=(("max_hold", max_hold),)))

    def release(self, hold: HeldFlow | str, why: str = "test") -> None:
        hid = hold.id if isinstance(hold, HeldFlow) else hold
        self._call("POST", f"/holds/{quote(hid, safe='')}/release", {"why": why})

    def fail(self, hold: HeldFlow | str, status: int = 500, reason: str = "InternalError",
             message: str = "injected by kueue-harness", why: str = "test") -> None:
        """Answer held flow `hold` with a Kubernetes Status (`status`, `reason`, `message`) instead of letting
        it go on; `why` is recorded with the proxy's `failed` event ("kueue-harness fail" from the CLI)."""
        hid = hold.id if isinstance(hold, HeldFlow) else hold
        self._call("POST", f"/holds/{quote(hid, safe='')}/fail",
                   {"status": status, "reason": reason, "message": message, "why": why})

    def release_all(self, why: str = "end of case") -> list[str]:
        """Release every held flow; returns their ids (recorded by the proxy as released)."""
        return self._call("POST", "/release-all", {"why": why})["released"]

    def remove_rule(self, rule_id: str) -> None:
        self._call("DELETE", f"/rules/{quote(rule_id, safe='')}")

    def signal_done(self, rule_id: str, ok: bool = True, **detail: Any) -> dict[str, Any]:
        """Tell the proxy that the harness finished process fault `rule_id` (harness/nemesis/runner.py does):
        it logs `signal_done` (with `detail`: kill, seconds, error) and the rule counts as `released` for
        triggers. Steps add `objects` or `matched`. Returns that event. Raises ProxyError if the rule is
        unknown or has not fired."""
        return self._call("POST", f"/signals/{quote(rule_id, safe='')}/done", {"ok": ok, **detail})

    def add_fact(self, key: str, detail: dict[str, Any]) -> dict[str, Any]:
        """Tell the proxy that the harness saw fact `key` (harness.plan.rules.Trigger.fact_key: a Kueue log line,
        an object's state) that a loaded rule's trigger or wait step names (harness/nemesis/runner.py does): it logs
        `fact` and re-evaluates triggers. Returns that event. Raises ProxyError when no loaded rule waits for
        it (404)."""
        return self._call("POST", "/facts", {"fact": key, "detail": detail})

    def fact_problem(self, key: str, problem: str) -> dict[str, Any]:
        """Tell the proxy that fact `key` can never hold (`problem`: why, e.g. its name glob matched several
        objects when it mattered; harness/plan/steps.py FactObserver): it logs `fact_problem` once, and the fact
        stays unseen. Returns that event. Raises ProxyError when no loaded rule waits for it (404)."""
        return self._call("POST", "/facts", {"fact": key, "problem": problem})

    def begin_case(self) -> None:
        """From now on, waits see only events that happen from here on: a case must never be satisfied by
        an event of an earlier case (rule ids such as "admission-job1" recur in every seed case)."""
        self.events()
        self._scope = len(self._events)

    def case_events(self) -> list[dict[str, Any]]:
        """The events since begin_case()."""
        return self.events()[self._scope:]

    def events(self) -> list[dict[str, Any]]:
        """All proxy events so far (the same records as proxy-events.jsonl), fetched incrementally."""
        new = self._call("GET", f"/events?since={self._next}")
        self._events.extend(new["events"])
        self._next = new["next"]
        return self._events

    # ---- waits -----------------------------------------------------------------------------------
    def wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        """Wait until a proxy event satisfies `pred`; return the first such event."""

        def probe() -> dict[str, Any] | None:
            return next((e for e in self.case_events() if pred(e)), None)

        return wait_for(probe, timeout=timeout, what=what, interval=0.05,
                        describe=lambda: [e for e in self._events[-5:]])

    def wait_answered(self, flow: int, timeout: float) -> dict[str, Any]:
        """Wait for the response event of proxy flow number `flow` (delivered to Kueue)."""
        return self.wait_event(lambda e: e["event"] == "response" and e.get("flow") == flow, timeout,
                               f"the answer to proxy flow {flow}")

    def wait_delivered(self, namespace: str, name: str, min_rv: str | int, timeout: float) -> dict[str, Any]:
        """Wait until Kueue's Workload watch delivered `namespace/name` at resourceVersion >= `min_rv`."""
        return self.wait_event(
            lambda e: e["event"] == "watch_event" and e.get("namespace") == namespace
            and e.get("name") == name and kueue_api.rv_at_least(e.get("resource_version"), min_rv),
            timeout, f"Kueue's watch to deliver Workload {namespace}/{name} at resourceVersion >= {min_rv}",
        )
