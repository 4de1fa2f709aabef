"""The commands of a manual session (docs/manual-session.md): `up` starts one (its supervisor: session.py),
`status`, `sessions`, `holds`, `wait`, `release`, `fail`, `plan load|validate|clear`, `logs` and `down` drive
it through its session file and the proxy control channel.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Iterator

from harness.cli.options import _spec
from harness.common.errors import HarnessError
from harness.kueue import versions


def _kubectl_too(optional: bool):
    """The pinned kubectl, built now if needed (sessions print it), so the first `up` after `build` does
    not wait for it (`run` does not build it: its cases never use kubectl); None when Go is not on PATH to
    build it (every other binary may be given through KUEUE_HARNESS_* variables; then Go is not needed).
    `optional`: a failed kubectl build is a note, not an error."""
    from harness.build import binaries

    try:
        return binaries.kubectl_if_buildable()
    except HarnessError as e:
        if not optional:
            raise
        print(f"[kueue-harness] kubectl was not built ({str(e).splitlines()[0]}); `kueue-harness up` will try again",
              file=sys.stderr)
        return None


def check_intercept(expr: str) -> None:
    """Refuse an `--intercept` that mitmproxy's filter language cannot parse (mitmproxy.flowfilter), with its
    words. Raises HarnessError."""
    from mitmproxy import flowfilter

    try:
        ok = flowfilter.parse(expr) is not None
    except ValueError as e:
        ok, why = False, str(e)
    else:
        why = "not a filter expression"
    if not ok:
        raise HarnessError(f"--intercept {expr!r}: mitmproxy cannot parse it ({why}); see "
                           "https://docs.mitmproxy.org/stable/concepts-filters/, e.g. '~m PATCH & ~u /status'")


def _cmd_up(args: argparse.Namespace) -> int:
    from harness.cli import session

    name = session.check_name(args.name)
    spec = _spec(args)
    if args.plan:
        from harness.plan.load import load_plan

        from harness.plan.moved import refuse_outside_a_case

        refuse_outside_a_case(load_plan(args.plan), "up --plan")  # file:line errors before anything starts
    if args.kueue_config:
        from harness.kueue.config import load_file

        load_file(args.kueue_config)  # its problems before anything starts (gates are checked at start)
    if args.intercept:
        check_intercept(args.intercept)  # a typo in the filter before minutes of builds
    s = session.start(name, spec, args.plan, args.ui, args.artifacts_dir, intercept=args.intercept, pods=args.pods,
                      kueue_config=args.kueue_config)
    n = session.name_option(name)
    kubectl = (f"  kubectl {versions.KUBERNETES_VERSION} (built, if yours differs):    {s['kubectl']}\n" if s.get("kubectl")
               else "  kubectl:                                      your own (none built: Go is not on PATH)\n")
    print(f"""
kueue-harness session {name} is up (Kueue {s['kueue_version']}; supervisor pid {s['supervisor']['pid']}).
  kubectl as admin (direct to kube-apiserver):  export KUBECONFIG={s['admin_kubeconfig']}
{kubectl}  Kueue talks to kube-apiserver through:        {s['proxy_url']}
  proxy control channel (loopback, token):      127.0.0.1:{s['control_port']} (token in {s['control_token_file']})""")
    if s.get("web_url"):
        print(f"  mitmweb UI (loopback only, no login):        {s['web_url']}")
    if s.get("pods"):
        print(f"  Pods run (kube-scheduler {s['pods'].get('kube_scheduler')}, kwok {s['pods'].get('kwok')}): "
              "create Nodes annotated kwok.x-k8s.io/node=fake (docs/pods.md)")
    print(f"""  evidence:                                     {s['artifacts']}
Next: `kueue-harness holds{n}`, `kueue-harness release{n} ID`, `kueue-harness plan load{n} FILE`,
      `kueue-harness logs{n}`, `kueue-harness down{n}` (docs/manual-session.md walks through scenario 1).""")
    return 0


def _attach(args: argparse.Namespace):
    from harness.cli import session
    from harness.proxy.client import Proxy

    return Proxy.attach(session.require_session(args.name))


def _cmd_status(args: argparse.Namespace) -> int:
    from harness.cli import session
    from harness.common.procs import is_alive

    if args.all:
        return _cmd_sessions(args)
    name = session.check_name(args.name)
    s = session.describe(name)
    if s is None:
        print(f"no session named {name} is running (`kueue-harness up{session.name_option(name)}` starts one)."
              + session._others(name))
        return 1
    if s["phase"] == "starting":
        print(f"session {name} is starting (supervisor pid {s['supervisor']['pid']}; log: {s.get('log')})")
        return 0
    procs = _recorded_procs(s)
    if s["phase"] == "died":
        print(f"session {name}: {session.died_message(s)}")
        for r in procs:
            left = is_alive(r["pid"], r.get("start"))
            print(f"  {r['name']:<24} pid {r['pid']:<8} {'still running' if left else 'gone'}")
        return 1
    print(f"session {name}: supervisor pid {s['supervisor']['pid']}, Kueue {s['kueue_version']}, started {s['started']}")
    exited = [r["name"] for r in procs if not is_alive(r["pid"], r.get("start"))]
    for r in procs:
        print(f"  {r['name']:<24} pid {r['pid']:<8} {'EXITED' if r['name'] in exited else 'running'}")
    if "proxy" not in exited:
        st = _attach(args).state()
        print(f"  rules loaded: {len(st['rules'])}, holds: {len(st['holds'])}, proxy events: {st['events']}")
        for line in _rule_lines(st) + _expired_lines(st):
            print(f"    {line}")
    print(f"  KUBECONFIG={s['admin_kubeconfig']}")
    if exited:
        print(f"{', '.join(exited)} exited: see {s['artifacts']}/env/ for its log; "
              f"`kueue-harness down{session.name_option(name)}` ends the session")
        return 1
    return 0


def _cmd_sessions(args: argparse.Namespace) -> int:
    from harness.cli import session

    found = session.list_sessions()
    if not found:
        print("no sessions (`kueue-harness up [--name NAME]` starts one)")
        return 0
    print(f"{'name':<16} {'state':<9} {'Kueue':<22} {'supervisor':>10}  {'started':<19}  artifacts")
    from harness.common.procs import is_alive

    exited: dict[str, list[str]] = {}
    for s in found:
        if s["phase"] == "running":
            # A live supervisor whose Kueue (or another component) exited is not a running session.
            exited[s["name"]] = [r["name"] for r in _recorded_procs(s) if not is_alive(r["pid"], r.get("start"))]
        state = "degraded" if exited.get(s["name"]) else s["phase"]
        print(f"{s['name']:<16} {state:<9} {str(s.get('kueue_version') or '-'):<22} {s['supervisor']['pid']:>10}  "
              f"{s.get('started', ''):<19}  {s.get('artifacts', '')}")
    for s in found:
        if s["phase"] == "died":
            print(f"{s['name']}: {session.died_message(s)}")
        elif exited.get(s["name"]):
            print(f"{s['name']}: {', '.join(exited[s['name']])} exited; see {s.get('artifacts', '?')}/env/ for its log; "
                  f"`kueue-harness status{session.name_option(s['name'])}` says more, "
                  f"`kueue-harness down{session.name_option(s['name'])}` ends the session")
    return 0


def _recorded_procs(s: dict) -> list[dict]:
    """The processes a session's supervisor recorded (state/processes.json), [] when it has none."""
    try:
        return json.loads((Path(s["state"]) / "processes.json").read_text())["procs"] if s.get("state") else []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _hold_lines(st: dict) -> list[str]:
    """The held flows of a proxy state (GET /state) as a table: id, age, seconds until its max_hold
    releases it, stage, rule, label (and its release.timeout when that comes first)."""
    if not st["holds"]:
        return ["nothing is held"]
    lines = [f"{'id':<6} {'age s':>7} {'expires in s':>12}  {'stage':<8} {'rule':<22} what"]
    for h in st["holds"]:
        left = h.get("expires_in")
        timeout = f"  (its release.timeout ends it in {h['timeout_in']:.1f} s)" if h.get("timeout_in") is not None else ""
        lines.append(f"{h['id']:<6} {h['age']:>7.1f} {left if left is None else f'{left:.1f}':>12}  {h['stage']:<8} "
                     f"{h['rule']:<22} {h['label']}{timeout}")
    return lines


def _rule_lines(st: dict, now: float | None = None) -> list[str]:
    """The loaded rules with their hits (requests or events they acted on, of `times`) — or, for a plan step
    or process fault, its state (`signal_state`); for a rule without hits, a warning when a write came by
    that it names wrongly (`name: job1` for job-job1-62dce), else a note of the first write of its kind that
    came by with another name; the facts that can never hold (a glob that matched several objects)."""
    from harness.proxy.notices import unmatched_sentence

    if not st["rules"]:
        return []
    signals = {s["rule"]: s for s in st.get("signals") or ()}
    # Steps and process faults show their state under the hits column (docs/manual-session.md's layout otherwise).
    lines = [f"{'rule':<22} {'action':<18} {'hits':>9}" + (" / state of a step or process fault" if signals else "")]
    for r in st["rules"]:
        rule = r["rule"]
        if rule["id"] in signals:
            lines.append(f"{rule['id']:<22} {rule.get('action', ''):<18} {signal_state(signals[rule['id']], now)}")
            continue
        times = rule.get("times")
        hits = f"{r['hits']} of {times}" if times is not None else f"{r['hits']}"
        lines.append(f"{rule['id']:<22} {rule.get('action', ''):<18} {hits:>9}")
        if r.get("warning"):
            lines.append(f"  WARNING: {unmatched_sentence(rule['id'], r['warning'])}")
        elif r.get("near_miss"):
            lines.append(f"  note: nothing matched yet; {r['near_miss']['label']} came by: {r['near_miss']['hint']}")
    for problem in (st.get("fact_problems") or {}).values():
        lines.append(f"PROBLEM: {problem}")
    return lines


def signal_state(sig: dict, now: float | None = None) -> str:
    """A plan step's or process fault's state from `GET /state`'s `signals` entry (the proxy's `signalled` and
    `signal_done`): "waiting for triggers: step queues done, Workload/w1 QuotaReserved=True", "running (1.2 s)",
    "done ok (0.049 s)", "failed (StepError: …)"."""
    if sig.get("done"):
        res = sig.get("result") or {}
        if sig.get("ok"):
            from harness.proxy.notices import seconds_text

            return f"done ok ({seconds_text(res.get('seconds'))})" if "seconds" in res else "done ok"
        return f"failed ({res.get('error') or 'no error given'})"
    if sig.get("fired") is not None:
        return f"running ({max(0.0, (now or time.time()) - float(sig['fired'])):.1f} s)"
    waiting = list(sig.get("waiting_for") or ())
    timeout = f"; fires after its release.timeout of {sig['timeout']:g} s" if sig.get("timeout") else ""
    if waiting:
        return f"waiting for triggers: {', '.join(waiting)}{timeout}"
    return f"waiting{timeout or ' (its triggers hold: firing now)'}"


def _expired_lines(st: dict) -> list[str]:
    """The holds that reached their max_hold lately (the proxy released them): id, rule, label, when."""
    expired = st.get("expired") or []
    if not expired:
        return []
    lines = ["EXPIRED holds (they reached their max_hold; the proxy released them):"]
    for e in expired:
        ago = time.time() - e["ended"]
        lines.append(f"  {e['id']:<6} rule {e['rule']}, {e['label']}: expired at {e['at']} ({ago:.0f} s ago) after "
                     f"{e['max_hold']:g} s")
    return lines


def _cmd_holds(args: argparse.Namespace) -> int:
    from harness.cli import session

    proxy = _attach(args)
    if not args.watch:
        st = proxy.state()
        if args.json:
            print(json.dumps(st["holds"], indent=1))
            return 0
        print("\n".join(_hold_lines(st) + [""] * bool(st["rules"]) + _rule_lines(st) + _expired_lines(st)))
        return 0
    if not (HOLDS_WATCH_INTERVAL[0] <= args.interval <= HOLDS_WATCH_INTERVAL[1]):
        raise HarnessError(f"--interval must be {HOLDS_WATCH_INTERVAL[0]:g} to {HOLDS_WATCH_INTERVAL[1]:g} seconds, "
                           f"got {args.interval:g}")
    clear = sys.stdout.isatty()
    try:
        while True:
            st = proxy.state()
            if args.json:
                print(json.dumps(st["holds"]), flush=True)
            else:
                if clear:
                    sys.stdout.write("\x1b[H\x1b[2J")
                head = (f"kueue-harness holds{session.name_option(args.name)} at {time.strftime('%H:%M:%S')}, every "
                        f"{args.interval:g} s (Ctrl-C stops)")
                print("\n".join([head] + _hold_lines(st) + [""] * bool(st["rules"]) + _rule_lines(st)
                                + _expired_lines(st)) + "\n", flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


#: Bounds of `holds --watch --interval` (seconds).
HOLDS_WATCH_INTERVAL = (0.2, 60.0)


#: Bounds of `wait --timeout` (seconds).
WAIT_TIMEOUT_MAX = 24 * 3600.0


def _cmd_wait(args: argparse.Namespace) -> int:
    """Wait until a flow of rule RULE reached --state (as a release trigger sees it: now or earlier since the
    rule was loaded). 0 when it did; 1 after --timeout seconds, or when RULE is a plan step or process fault
    that ended failed (its error is said); 2 for a --status outside 100-599; 7 when the proxy refuses (rule not
    loaded, a state its action never reaches) or cannot be reached."""
    import math

    from harness.cli import session
    from harness.common.errors import ProxyError
    from harness.common.waiting import WaitTimeout, wait_for
    from harness.proxy.notices import unmatched_sentence

    if not (math.isfinite(args.timeout) and 0 < args.timeout <= WAIT_TIMEOUT_MAX):
        raise HarnessError(f"--timeout must be seconds above 0 (at most {WAIT_TIMEOUT_MAX:g}), got {args.timeout:g}")
    if args.status is not None and not HTTP_STATUS[0] <= args.status <= HTTP_STATUS[1]:
        raise HarnessError(f"--status must be an HTTP status code, {HTTP_STATUS[0]} to {HTTP_STATUS[1]}, got "
                           f"{args.status} (e.g. --status 409)")
    proxy = _attach(args)
    what = f"rule {args.rule} to be {args.state}" + (f" with status {args.status}" if args.status is not None else "")
    last = [proxy.reached(args.rule, args.state, args.status)]  # a refusal is exit 7 at once

    def probe() -> bool:
        last[0] = proxy.reached(args.rule, args.state, args.status)
        return bool(last[0]["reached"])

    t0 = time.monotonic()
    if not last[0]["reached"]:
        try:
            wait_for(probe, timeout=args.timeout, interval=0.1, what=what, fatal=(ProxyError,))
        except WaitTimeout:
            r = last[0]
            warn = (f" {unmatched_sentence(args.rule, r['warning'])}." if r.get("warning") else
                    f" Nothing matched it; {r['near_miss']['label']} came by: {r['near_miss']['hint']}."
                    if r.get("near_miss") else "")
            err = HarnessError(f"timed out after {args.timeout:g}s waiting for {what} (it has {r['hits']} hit(s)).{warn} "
                               f"`kueue-harness holds{session.name_option(args.name)}` shows the rules' hits and what "
                               "is held")
            err.exit_code = 1
            raise err from None
    took = time.monotonic() - t0
    failed = _failed_signal(proxy.state(), args.rule)
    if failed is not None:
        # A plan step or process fault that ended with an error is `released` too (it is over), but what
        # a script waits for did not happen: say so and exit 1.
        err = HarnessError(f"rule {args.rule}: {args.state} after {took:.1f} s, but it FAILED: {failed}. "
                           f"`kueue-harness holds{session.name_option(args.name)}` shows every step's state")
        err.exit_code = 1
        raise err
    print(f"rule {args.rule}: {args.state}{f' with status {args.status}' if args.status is not None else ''} "
          f"(after {took:.1f} s)")
    return 0


#: The HTTP status codes `wait --status` takes (RFC 9110 section 15: three digits, 1xx to 5xx).
HTTP_STATUS = (100, 599)


def _failed_signal(st: dict, rule_id: str) -> str | None:
    """The error of plan step or process fault `rule_id` if it is done and failed (`GET /state` signals:
    harness/proxy/addons/state.py signal_views), else None (not a step, not done, or done ok)."""
    sig = next((s for s in st.get("signals") or () if s.get("rule") == rule_id), None)
    if sig is None or not sig.get("done") or sig.get("ok"):
        return None
    return str((sig.get("result") or {}).get("error") or "no error given")


def _cmd_release(args: argparse.Namespace) -> int:
    proxy = _attach(args)
    if args.all:
        ids = proxy.release_all(why="kueue-harness release --all")
        print(f"released: {', '.join(ids) or 'nothing was held'}")
        return 0
    if not args.id:
        raise HarnessError("say which hold to release (`kueue-harness holds` lists them), or use --all")
    with _hold_remedy(args):
        proxy.release(args.id, why="kueue-harness release")
    print(f"released {args.id}")
    return 0


def _cmd_fail(args: argparse.Namespace) -> int:
    proxy = _attach(args)
    with _hold_remedy(args):
        proxy.fail(args.id, status=args.status, reason=args.reason, message=args.message, why="kueue-harness fail")
    print(f"failed {args.id} with {args.status} {args.reason}")
    return 0


@contextlib.contextmanager
def _hold_remedy(args: argparse.Namespace) -> Iterator[None]:
    """Add where to look to the proxy refusing a hold id (e.g. "no hold h9"); same error type and exit code."""
    from harness.cli import session
    from harness.common.errors import ProxyError

    try:
        yield
    except ProxyError as e:
        if "refused" not in str(e):
            raise
        raise ProxyError(f"{e}. `kueue-harness holds{session.name_option(args.name)}` lists what is held now") from None


def _cmd_plan_load(args: argparse.Namespace) -> int:
    from harness.plan.load import load_plan

    from harness.plan.moved import refuse_outside_a_case

    plan = load_plan(args.file, namespace=args.namespace)
    refuse_outside_a_case(plan, "plan load")
    try:
        _attach(args).load_plan(plan, by="plan load")
    except HarnessError as e:
        raise HarnessError(f"{str(e).rstrip('.')}. Nothing of plan {plan.name} was loaded; `kueue-harness plan clear` removes "
                           "the rules loaded before") from None
    print(f"plan {plan.name} loaded: {', '.join(r.id for r in plan.rules)}")
    return 0


def _cmd_plan_validate(args: argparse.Namespace) -> int:
    """Check plan files offline (no session): each valid one gets a line on stdout, every problem of the
    invalid ones a `file:line: …` line on stderr. 0 when all are valid, 2 otherwise."""
    from harness.plan.lint import name_warnings
    from harness.plan.load import PlanError, load_plan

    bad = 0
    for f in args.files:
        try:
            plan = load_plan(f, namespace=args.namespace)
        except PlanError as e:
            bad += 1
            for line in e.errors:
                print(line, file=sys.stderr)
            continue
        rules = ", ".join(r.id for r in plan.rules if r.id not in plan.steps)
        steps = f"steps {', '.join(plan.steps)}" if plan.steps else ""
        moves = f"moves the case's steps {', '.join(plan.steps_after)}" if plan.steps_after else ""
        deletes = f"changes how the case's steps {', '.join(plan.deletes_as)} delete" if plan.deletes_as else ""
        print(f"{plan.source}: valid, plan {plan.name}: {'; '.join(x for x in (rules, steps, moves, deletes) if x)}")
        for line in name_warnings(plan):  # valid, but a rule that can never match what Kueue writes
            print(line, file=sys.stderr)
    if bad:
        print(f"kueue-harness: {bad} of {len(args.files)} plan{'s' if len(args.files) > 1 else ''} invalid "
              "(docs/fault-plans.md, Validation)", file=sys.stderr)
        return 2
    return 0


def _cmd_plan_clear(args: argparse.Namespace) -> int:
    proxy = _attach(args)
    ids = [r["rule"]["id"] for r in proxy.state()["rules"]]
    for rid in ids:
        proxy.remove_rule(rid)
    print(f"removed rules: {', '.join(ids) or 'none were loaded'} (held flows stay held: `kueue-harness release --all`)")
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    from harness.cli import session
    from harness.kueue import log as kueue_log

    s = None if args.file else session.describe(args.name)
    # A session whose supervisor died still has its log: read it.
    path = Path(args.file) if args.file else Path(s["kueue_log"]) if s and s.get("kueue_log") else None
    if path is None:
        name = session.check_name(args.name)
        raise HarnessError(f"no session named {name} is running (or it is still starting); pass --file "
                           "artifacts/<run>/env/kueue.log to read a saved log")
    if not path.is_file():
        raise HarnessError(f"{path} is not a Kueue log file (artifacts/<run>/env/kueue.log)")
    shown = 0
    for line in kueue_log.lines(path):
        if args.grep and args.grep not in line.get("msg", ""):
            continue
        if args.workload and not any(kueue_log.mentions(line, k) for k in (args.workload,)) and \
                not any(isinstance(v, dict) and v.get("name") == args.workload for v in line.values()):
            continue
        if args.level and line.get("level") != args.level:
            continue
        shown += 1
        extra = {k: v for k, v in line.items() if k not in ("ts", "level", "msg", "caller", "logger")}
        print(f"{line.get('ts', '')} {line.get('level', ''):<9} {line.get('logger', ''):<12} {line.get('msg', '')} "
              f"{json.dumps(extra, default=str) if extra else ''}")
    if shown == 0:
        print(f"no matching lines in {path}", file=sys.stderr)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    from harness.cli import session

    if args.session and args.name and args.session != args.name:
        raise HarnessError(f"`down {args.session} --name {args.name}` names two sessions: give one")
    print(session.stop(args.session or args.name))
    return 0
