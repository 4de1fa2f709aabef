"""`kueue-harness bundle`: a full evidence bundle from a running `kueue-harness up` session, as a case
leaves one: history.jsonl built from the session's proxy events and Kueue's log (about the Workloads of one
namespace), the final objects with their managedFields apart (managed-fields.yaml), Kueue's log cut to the
session, its flows (flows.mitm, HAR, writes.json), report.md, bundle.json and the .tar.gz, redacted and
scanned for the session's secrets; `kueue-harness report` re-checks it.

A session has no case: nothing declared the checkers, so the bundle is judged by SESSION_CHECKERS (liveness
of every preempting Workload, quota, the log flood, ClusterQueue status, and the assumptions that hold for
hand-driven faults: as for a case, every plan step loaded ran and succeeded — steps_done — and Kueue kept
running, restarted only by the session's own process faults — kueue_not_restarted_unasked, from Kueue's state
the bundle records: session_kueue), at the time the bundle is made; bundle.json records them, so the re-check
runs the same.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.checkers import Selection, compose
from harness.common import paths
from harness.common.errors import HarnessError
from harness.common.redact import run_secrets
from harness.history.names import Names
from harness.history.record import History
from harness.kueue import log as kueue_log
from harness.kueue import versions
from harness.report.bundle import BUNDLE_SCHEMA
from harness.report.race import split_managed_fields
from harness.report.write import _feature_gates, complete_bundle, dump_objects, harness_version

#: The checkers a session's bundle is judged by (bundle.json "checkers").
SESSION_CHECKERS: dict[str, dict[str, Any]] = {
    "no_hold_expired": {}, "no_unexplained_proxy_failure": {}, "kueue_not_restarted_unasked": {"scope": "session"},
    "steps_done": {}, "liveness": {}, "quota": {}, "log_flood": {}, "reservation": {},
}
#: Kueue's log line at every start of its manager (cmd/kueue/main.go setupLog.Info("Initializing", …)).
KUEUE_START_LINE = "Initializing"


def session_kueue(rec: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Kueue's state in session `rec` as kueue_not_restarted_unasked reads it: {"first": {"starts", "alive"}
    and "since" (epoch s) when the session's Nemesis took over (the record's `kueue_baseline`; a session from
    before it: 1 start, since its first event), "restarts": [the session's restart_kueue process faults done
    ok since then: their `signal_done` events], "last": {"starts": the `Initializing` lines in its kueue.log,
    "alive": whether the pid processes.json records for Kueue runs (with that start time), "pid"}}. None
    when the session's process record cannot be read (nothing to judge)."""
    import json as _json

    from harness.common.procs import is_alive
    from harness.plan import actions

    try:
        procs = _json.loads((Path(rec["state"]) / "processes.json").read_text())["procs"]
    except (KeyError, TypeError, OSError, ValueError):
        return None
    kueue = next((r for r in procs if isinstance(r, Mapping) and r.get("name") == "kueue"), None)
    # No record: Kueue was stopped (a restart in progress, or it never came back).
    alive = kueue is not None and is_alive(int(kueue["pid"]), kueue.get("start"))
    log = Path(rec["kueue_log"]) if rec.get("kueue_log") else None
    starts = sum(1 for line in (kueue_log.lines(log) if log else ()) if line.get("msg") == KUEUE_START_LINE)
    base = rec.get("kueue_baseline") if isinstance(rec.get("kueue_baseline"), Mapping) else {}
    since = float(base.get("since") or min([e["ts"] for e in events] or [time.time()]))
    restart_kinds = {n for n in actions.names() if not actions.get(n).is_step and actions.get(n).consulted == "signal"}
    restarts = [e for e in events if e.get("event") == "signal_done" and e.get("action") in restart_kinds
                and e.get("ok") and e["ts"] >= since]
    return {"first": {"starts": int(base.get("starts") or 1), "alive": True}, "since": since, "restarts": restarts,
            "last": {"starts": starts, "alive": alive, **({"pid": kueue["pid"]} if kueue else {})}}


@dataclass
class SessionBundle:
    """What `bundle_session` wrote: the folder, its archive, the verdict and the namespace judged."""

    folder: Path
    archive: Path
    verdict: str
    reason: str
    namespace: str
    events: int


def _proxy_events(path: Path) -> list[dict[str, Any]]:
    """The session's proxy events (proxy-events.jsonl; a half-written last line is skipped)."""
    out = []
    try:
        fh = open(path, errors="replace")
    except OSError:
        return out
    with fh:
        for line in fh:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and isinstance(e.get("ts"), (int, float)) and "event" in e:
                out.append(e)
    return out


def _event_namespace(e: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(namespace, Workload name) a proxy event is about, or (None, None)."""
    w = e.get("write")
    if isinstance(w, Mapping) and w.get("kind") == "Workload":
        return w.get("namespace"), w.get("name")
    if e.get("event") in ("response", "watch_event", "watch_event_dropped", "watch_event_delayed") and e.get("name"):
        if e.get("event") != "response" or e.get("write") in ("admission", "eviction", "quota_release", "pending",
                                                                  "finish", "other"):
            return e.get("namespace"), e.get("name")
    return None, None


def _shown_path(file: str) -> str:
    """A plan file as a command should name it: relative to the kueue-harness checkout when inside it (the
    "run it again" line is run from there), else as recorded."""
    root = paths.ROOT
    p = Path(file)
    return str(p.relative_to(root)) if p.is_absolute() and p.is_relative_to(root) else file


def rerun_commands(rec: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """(the shell line that starts session record `rec` again with the plans it loaded, notes about what it
    cannot say). Plans come from the proxy's `rule_added` events (`plan`, and `plan_source`: the file,
    namespace and command that loaded it, harness/plan/load.py Plan.to_wire): the one `up --plan` loaded goes
    on the `up` line; each later `plan load` becomes `&& kueue-harness plan load FILE [--namespace NS]`, in
    the order they were loaded (a plan loaded twice, twice). A plan whose file was not recorded (a proxy
    from before plan_source) is named by its plan name, which `plan load` finds among the shipped plans;
    rules added one at a time through the control channel are only noted."""
    import shlex

    from harness.cli import session
    from harness.plan.load import shipped_plans

    name = session.name_option(rec.get("name"))
    loads: list[tuple[str | None, dict[str, Any]]] = []
    last: tuple | None = None
    ids: set[str] = set()  # the rule ids of the load being read
    singles = 0
    for e in events:
        if e.get("source", "proxy") != "proxy" or e.get("event") != "rule_added":
            continue
        if not e.get("plan"):
            singles += 1
            last = None
            continue
        src = e.get("plan_source") if isinstance(e.get("plan_source"), Mapping) else {}
        key = (e.get("plan"), json.dumps(src, sort_keys=True))
        rid = str((e.get("rule") or {}).get("id"))
        # One load's rules are logged together, one event each; the same plan again is another load.
        if key != last or rid in ids:
            loads.append((str(e["plan"]), dict(src)))
            ids = set()
        ids.add(rid)
        last = key
    notes: list[str] = []
    up = f"kueue-harness up{name} --kueue-version {rec.get('kueue_version')}"
    later = []
    for plan, src in loads:
        file = src.get("file")
        if not file:
            file = plan
            if plan not in shipped_plans():
                notes.append(f"plan {plan}'s file was not recorded (the session's proxy predates it): give its "
                             "file where the \"run it again\" line names the plan")
        ns = f" --namespace {shlex.quote(src['namespace'])}" if src.get("namespace") else ""
        if src.get("by") == "up --plan" and " --plan " not in up and not later:
            up += f" --plan {shlex.quote(_shown_path(file))}"
        else:
            later.append(f"kueue-harness plan load{name} {shlex.quote(_shown_path(file))}{ns}")
    if singles:
        notes.append(f"{singles} rule(s) were added one at a time through the control channel, not from a plan "
                     "file: the fault plan table has them, the \"run it again\" line does not")
    return " && ".join([up, *later]), notes


def choose_namespace(events: Sequence[Mapping[str, Any]], workloads: Sequence[Mapping[str, Any]],
                     namespace: str | None) -> str:
    """`namespace`, or the one namespace the session's Workloads live in (now, or in the proxy's events).
    Raises HarnessError when there is none, or several and none was named."""
    if namespace:
        return namespace
    seen = {str((w.get("metadata") or {}).get("namespace")) for w in workloads}
    seen |= {str(ns) for e in events for ns, _ in [_event_namespace(e)] if ns}
    seen.discard("None")
    if not seen:
        raise HarnessError("the session has no Workload yet, so there is nothing to bundle: create the queues and "
                           "Jobs first (docs/manual-session.md), or name a namespace with --namespace NS")
    if len(seen) > 1:
        raise HarnessError(f"the session has Workloads in several namespaces ({', '.join(sorted(seen))}): "
                           "choose one with --namespace NS")
    return seen.pop()


class _Objects:
    """Reads the session's final objects, with managedFields, through its admin kubeconfig: every
    Workload (the quota check needs every Workload of a ClusterQueue, whatever its namespace), every
    ClusterQueue, and the Jobs of one namespace."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import config as kconfig

        from harness.objects import Cluster

        try:
            self.c = Cluster(kconfig.new_client_from_config(config_file=kubeconfig))
        except Exception as e:  # noqa: BLE001 - a session whose files are gone: say so
            raise HarnessError(f"cannot read the session's kubeconfig {kubeconfig} ({e}); is the session still "
                               "up (`kueue-harness status`)?") from None

    def cluster_wide(self) -> dict[str, list[dict[str, Any]]]:
        return {"workloads": self.c.list("Workload"), "clusterqueues": self.c.list("ClusterQueue"),
                "cohorts": self.c.list("Cohort")}

    def jobs(self, namespace: str) -> list[dict[str, Any]]:
        return [self.c.api.sanitize_for_serialization(j) for j in self.c.batch.list_namespaced_job(namespace).items]


#: Seconds between "still …" lines while one step of `bundle` takes long (cutting a big flows.mitm).
PROGRESS_INTERVAL = 20.0


def _stderr(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _step(say: Callable[[str], None], what: str, interval: float = PROGRESS_INTERVAL) -> Iterator[None]:
    """Say `what` is under way, "still <what> (N s so far)" every `interval` seconds, and how long it took."""
    t0 = time.monotonic()
    say(f"bundle: {what} …")
    done = threading.Event()

    def tick() -> None:
        while not done.wait(interval):
            say(f"bundle: still {what} ({time.monotonic() - t0:.0f} s so far)")

    ticker = threading.Thread(target=tick, name="bundle-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
    say(f"bundle: {what}: {time.monotonic() - t0:.1f} s")


def bundle_session(name: str | None = None, namespace: str | None = None, out: Path | None = None,
                   objects: Mapping[str, Any] | None = None, say: Callable[[str], None] = _stderr,
                   interval: float = PROGRESS_INTERVAL) -> SessionBundle:
    """Write the evidence bundle of running session `name` (default "default") about the Workloads of
    `namespace` (default: the one namespace the session has Workloads in) into the new folder `out`
    (default <session artifacts>/bundles/<namespace>-<time>), pack it as `<out>.tar.gz`, and return what
    was written. `objects`: the final objects to judge (default: read from the session's kube-apiserver).

    Raises HarnessError when no such session runs (or it died, or is starting), when the namespace cannot
    be chosen, when `out` exists, or when the archive would hold a secret; OSError when the folder cannot
    be written. Progress: a line per step through `say` (stderr), and every `interval` seconds while a step
    lasts (the Kueue log and the proxy's flows of a long session take most of the time)."""
    from harness.cli import session

    rec = session.require_session(name)
    env_dir = Path(rec["artifacts"]) / "env"
    with _step(say, f"reading the proxy's events ({env_dir / 'proxy-events.jsonl'})", interval):
        events = _proxy_events(env_dir / "proxy-events.jsonl")
    reader = _Objects(rec["admin_kubeconfig"]) if objects is None else None
    with _step(say, "reading the Workloads, Jobs and ClusterQueues" + (" from kube-apiserver" if reader else ""),
               interval):
        objs = dict(objects) if objects is not None else reader.cluster_wide()
        ns = choose_namespace(events, [w for w in objs.get("workloads") or []], namespace)
        if reader is not None:
            objs = {"workloads": objs["workloads"], "jobs": reader.jobs(ns), "clusterqueues": objs["clusterqueues"],
                    "cohorts": objs.get("cohorts") or []}
    end = time.time()
    start = min([e["ts"] for e in events] + [end])
    d = Path(out) if out else env_dir.parent / "bundles" / f"{ns}-{time.strftime('%Y%m%d-%H%M%S')}"
    if d.exists() or d.with_name(d.name + ".tar.gz").exists():
        raise HarnessError(f"{d} already exists: a bundle is never written over another; choose another --out")
    d.mkdir(parents=True)
    keys = {f"{ns}/{(w.get('metadata') or {}).get('name')}" for w in objs.get("workloads") or []
            if (w.get("metadata") or {}).get("namespace") == ns}
    keys |= {f"{wns}/{wname}" for e in events for wns, wname in [_event_namespace(e)] if wns == ns and wname}
    dump_objects(d, objs)
    history = History(d / "history.jsonl")
    history.started = start
    kueue = session_kueue(rec, events)
    if kueue is not None:
        # Kueue's start count at the window's start, and each restart the session asked for (its plans'
        # process faults), as a case records them (kueue_not_restarted_unasked); its state now at the verdict.
        history.record("case_started", at=start, case=f"kueue-harness up session {rec['name']}", namespace=ns,
                       kueue=kueue["first"])
        for e in kueue["restarts"]:
            history.record("kueue_restart", at=e["ts"], kill=bool(e.get("kill")), rule=e.get("rule"))
    log_path = Path(rec["kueue_log"]) if rec.get("kueue_log") else None
    with _step(say, f"judging {len(events)} proxy events and Kueue's log of namespace {ns} with the session "
                      "checkers", interval):
        lines = [line for line in (kueue_log.lines(log_path) if log_path else ())
                 if line.get("msg") in history.milestones or line.get("race_read")]
        merged = history.merged(events, lines, keys)
        names = Names(merged, ns)
        plain, _ = split_managed_fields(objs)
        judged = merged
        if kueue is not None:
            # Kueue's state now goes with the verdict event (recorded below); the checkers see it there already.
            judged = merged + [{"ts": max([end] + [e["ts"] for e in merged]), "source": "harness", "event": "verdict",
                                "kueue": kueue["last"]}]
        verdict = compose(Selection(SESSION_CHECKERS), judged, plain, names)
        seen: dict[str, float] = {}
        for e in merged:
            seen[e["source"]] = max(seen.get(e["source"], e["ts"]), e["ts"])
        broken = [f.check for f in verdict.findings if f.bearing and not f.assumption and f.result == "violated"]
        history.record("verdict", invariant=",".join(dict.fromkeys(broken)) or "liveness,quota",
                       held=verdict.verdict == "passed", verdict=verdict.verdict,
                       reason=verdict.reason, seen=seen, session=rec["name"],
                       **({"kueue": kueue["last"]} if kueue is not None else {}))
        final = history.finalize(events, log_path, keys)
    message = verdict.reason + "\n" + "\n".join(f"  {f.check}: {f.result}: {f.evidence}" for f in verdict.findings
                                                  if f.result not in ("held", "not applicable") or not f.assumption)
    state = Path(rec["state"]) if rec.get("state") else None
    secrets = run_secrets(types.SimpleNamespace(state=state))
    rerun, rerun_notes = rerun_commands(rec, events)
    meta: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA,
        "case": f"kueue-harness up session {rec['name']}, namespace {ns}",
        "slug": d.name,
        "verdict": verdict.verdict,
        "expected": None,
        "detail": verdict.reason,
        "message": message,
        "seconds": round(end - start, 3),
        "bug": None,
        "kueue_version": rec.get("kueue_version"),
        "kueue": rec.get("kueue"),
        "kubernetes_version": versions.KUBERNETES_VERSION,
        "pods": rec.get("pods"),
        "target": f"local (kueue-harness up session {rec['name']})",
        "feature_gates": _feature_gates(types.SimpleNamespace(state=state)) if state else None,
        "namespace": ns,
        "prefix": "",
        "workloads": sorted(keys),
        "window": [start, end],
        "notes": [f"made by `kueue-harness bundle` from session {rec['name']} (started {rec.get('started')}): "
                  "its steps were done by hand, so the history holds no harness steps (only Kueue's start count "
                  "and liveness: case_started, kueue_restart, verdict); the verdict is the session checkers' at "
                  "the time of the bundle", *rerun_notes],
        "checkers": SESSION_CHECKERS,
        "harness": harness_version(),
        # `up` with the plan it loaded, then each `plan load` (from the proxy's rule_added events).
        "rerun": rerun,
        "session": {"name": rec["name"], "started": rec.get("started"), "artifacts": rec.get("artifacts")},
    }
    mentions = [ns] + sorted(k.split("/", 1)[1] for k in keys)
    with _step(say, f"cutting Kueue's log and the proxy's flows to the window, writing report.md and the archive "
                    f"into {d}", interval):
        archive = complete_bundle(d, meta, start, end, secrets, log_path, env_dir / "flows.mitm", mentions)
    return SessionBundle(d, archive, verdict.verdict, verdict.reason, ns, len(final))


def cli(name: str | None, namespace: str | None, out: str | None) -> int:
    """`kueue-harness bundle`: write the bundle and say where it is and what it found. Returns 0; raises as
    `bundle_session` (the CLI prints those errors and exits with their code)."""
    b = bundle_session(name, namespace, Path(out) if out else None)
    print(f"bundle of session {name or 'default'}, namespace {b.namespace}: {b.folder}")
    print(f"  report:  {b.folder / 'report.md'}")
    print(f"  archive: {b.archive}  (re-check: kueue-harness report {b.archive})")
    print(f"verdict at the time of the bundle: {b.verdict} ({b.reason})")
    return 0
