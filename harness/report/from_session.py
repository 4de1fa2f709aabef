"""`kueue-harness bundle`: a full evidence bundle from a running `kueue-harness up` session, as a case
leaves one: history.jsonl built from the session's proxy events and Kueue's log (about the Workloads of one
namespace), the final objects with their managedFields apart (managed-fields.yaml), Kueue's log cut to the
session, its flows (flows.mitm, HAR, writes.json), report.md, bundle.json and the .tar.gz, redacted and
scanned for the session's secrets; `kueue-harness report` re-checks it.

A session has no case: nothing declared the checkers, so the bundle is judged by SESSION_CHECKERS (liveness
of every preempting Workload, quota, the log flood, ClusterQueue status, and the assumptions that hold for
hand-driven faults), at the time the bundle is made; bundle.json records them, so the re-check runs the same.
"""

from __future__ import annotations

import json
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import kueue_log, versions
from harness.checkers import Selection, compose
from harness.errors import HarnessError
from harness.history import History
from harness.names import Names
from harness.redact import run_secrets
from harness.report.bundle import BUNDLE_SCHEMA
from harness.report.race import split_managed_fields
from harness.report.write import _feature_gates, complete_bundle, dump_objects, harness_version

#: The checkers a session's bundle is judged by (bundle.json "checkers").
SESSION_CHECKERS: dict[str, dict[str, Any]] = {
    "no_hold_expired": {}, "no_unexplained_proxy_failure": {},
    "liveness": {}, "quota": {}, "log_flood": {}, "reservation": {},
}


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
        return {"workloads": self.c.list("Workload"), "clusterqueues": self.c.list("ClusterQueue")}

    def jobs(self, namespace: str) -> list[dict[str, Any]]:
        return [self.c.api.sanitize_for_serialization(j) for j in self.c.batch.list_namespaced_job(namespace).items]


def bundle_session(name: str | None = None, namespace: str | None = None, out: Path | None = None,
                   objects: Mapping[str, Any] | None = None) -> SessionBundle:
    """Write the evidence bundle of running session `name` (default "default") about the Workloads of
    `namespace` (default: the one namespace the session has Workloads in) into the new folder `out`
    (default <session artifacts>/bundles/<namespace>-<time>), pack it as `<out>.tar.gz`, and return what
    was written. `objects`: the final objects to judge (default: read from the session's kube-apiserver).

    Raises HarnessError when no such session runs (or it died, or is starting), when the namespace cannot
    be chosen, when `out` exists, or when the archive would hold a secret; OSError when the folder cannot
    be written."""
    from harness import session

    rec = session.require_session(name)
    env_dir = Path(rec["artifacts"]) / "env"
    events = _proxy_events(env_dir / "proxy-events.jsonl")
    reader = _Objects(rec["admin_kubeconfig"]) if objects is None else None
    objs = dict(objects) if objects is not None else reader.cluster_wide()
    ns = choose_namespace(events, [w for w in objs.get("workloads") or []], namespace)
    if reader is not None:
        objs = {"workloads": objs["workloads"], "jobs": reader.jobs(ns), "clusterqueues": objs["clusterqueues"]}
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
    log_path = Path(rec["kueue_log"]) if rec.get("kueue_log") else None
    lines = [line for line in (kueue_log.lines(log_path) if log_path else ())
             if line.get("msg") in history.milestones]
    merged = history.merged(events, lines, keys)
    names = Names(merged, ns)
    plain, _ = split_managed_fields(objs)
    verdict = compose(Selection(SESSION_CHECKERS), merged, plain, names)
    seen: dict[str, float] = {}
    for e in merged:
        seen[e["source"]] = max(seen.get(e["source"], e["ts"]), e["ts"])
    broken = [f.check for f in verdict.findings if f.bearing and not f.assumption and f.result == "violated"]
    history.record("verdict", invariant=",".join(dict.fromkeys(broken)) or "liveness,quota",
                   held=verdict.verdict == "passed", verdict=verdict.verdict,
                   reason=verdict.reason, seen=seen, session=rec["name"])
    final = history.finalize(events, log_path, keys)
    message = verdict.reason + "\n" + "\n".join(f"  {f.check}: {f.result}: {f.evidence}" for f in verdict.findings
                                                  if f.result not in ("held", "not applicable") or not f.assumption)
    state = Path(rec["state"]) if rec.get("state") else None
    secrets = run_secrets(types.SimpleNamespace(state=state))
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
                  "its steps were done by hand, so the history holds no harness steps; the verdict is the "
                  "session checkers' at the time of the bundle"],
        "checkers": SESSION_CHECKERS,
        "harness": harness_version(),
        "rerun": f"kueue-harness up{session.name_option(rec['name'])} --kueue-version {rec.get('kueue_version')}",
        "session": {"name": rec["name"], "started": rec.get("started"), "artifacts": rec.get("artifacts")},
    }
    mentions = [ns] + sorted(k.split("/", 1)[1] for k in keys)
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
