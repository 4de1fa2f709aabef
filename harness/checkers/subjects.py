"""The subjects a checker judges, found in the history and the objects judged, whoever created them: the
case (`job_created`), a builder, a plan step (the proxy's `signal_done` of a `create` step names each object
it created: "Job ns/p rv 12"), or Kueue (a Job's Workload). A checker whose declared subject is not found
here says `error`, never "not applicable" (harness/checkers/base.py compose).

All functions are pure: `history` is the merged history (docs/history.md), `objects` the objects.yaml
mapping ({"workloads": [...], "jobs": [...], ...}); times are epoch seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.checkers.base import History, Objects
from harness.kueue import log as kueue_log

#: "Job ns/p rv 12" in a create step's `objects` (harness/plan/steps.py object_label + " rv N").
_STEP_OBJECT = re.compile(r"^(?P<kind>\S+) (?:(?P<ns>[^/\s]+)/)?(?P<name>\S+)(?: rv \S+)?$")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def step_created(history: History, kind: str, namespace: str) -> dict[str, float]:
    """{name: when its create step finished} for the objects of `kind` in `namespace` that a plan step
    created (the proxy's `signal_done` events of `create` steps)."""
    out: dict[str, float] = {}
    for e in history:
        if e.get("source") != "proxy" or e.get("event") != "signal_done" or e.get("action") != "create":
            continue
        for label in e.get("objects") or []:
            m = _STEP_OBJECT.match(str(label))
            if m and m["kind"] == kind and (m["ns"] or "") == namespace:
                out.setdefault(m["name"], e["ts"])
    return out


def jobs_created(history: History, objects: Objects, namespace: str) -> dict[str, float]:
    """{Job name: when it was created} for every Job of `namespace` the history or the objects know: the
    case's `job_created` record, a plan step's create, else the Job's metadata.creationTimestamp in the
    objects judged (whole seconds, as the API server writes it)."""
    out: dict[str, float] = {}
    for e in history:
        if e.get("source") == "harness" and e.get("event") == "job_created":
            ns, _, name = str(e.get("job", "")).rpartition("/")
            if (ns or namespace) == namespace:
                out.setdefault(name, e["ts"])
    for name, ts in step_created(history, "Job", namespace).items():
        out.setdefault(name, ts)
    for job in objects.get("jobs") or []:
        meta = _meta(job)
        if meta.get("namespace") == namespace and meta.get("name"):
            ts = kueue_log.parse_ts(meta.get("creationTimestamp"))
            out.setdefault(str(meta["name"]), ts if ts is not None else 0.0)
    return out


def workloads_seen(history: History, objects: Objects, namespace: str) -> dict[str, float]:
    """{Workload name: when it was first seen} for every Workload of `namespace`: the invariant monitor's
    `workload_seen`, Kueue's watch delivering it (the proxy's `watch_event`), a write about it, a plan step's
    create, else its creationTimestamp in the objects judged."""
    out: dict[str, float] = {}
    for e in history:
        name = None
        if e.get("source") == "monitor" and e.get("event") == "workload_seen":
            ns, _, n = str(e.get("key", "")).partition("/")
            name = n if ns == namespace else None
        elif e.get("source") == "proxy":
            w = e.get("write")
            if isinstance(w, Mapping) and w.get("kind") == "Workload" and w.get("namespace") == namespace and w.get("name"):
                name = str(w["name"])  # a write Kueue sent about it
            elif e.get("event") in ("watch_event", "watch_event_dropped") and e.get("namespace") == namespace \
                    and e.get("name"):
                name = str(e["name"])  # Kueue's watch delivered it
        if name:
            out[name] = min(out.get(name, e["ts"]), e["ts"])
    for name, ts in step_created(history, "Workload", namespace).items():
        out[name] = min(out.get(name, ts), ts)
    for wl in objects.get("workloads") or []:
        meta = _meta(wl)
        if meta.get("namespace") == namespace and meta.get("name") and meta["name"] not in out:
            ts = kueue_log.parse_ts(meta.get("creationTimestamp"))
            out[str(meta["name"])] = ts if ts is not None else 0.0
    return out


def workload_of_job(history: History, objects: Objects, namespace: str, job: str) -> str | None:
    """The name of Job `job`'s Workload, or None when none was seen: the Workload in the objects whose
    ownerReferences name the Job, else a Workload the history names `job-<job>-<5 chars>` (Kueue's
    GetWorkloadNameForOwnerWithGVK: pkg/controller/jobframework/workload_names.go; a long Job name is cut,
    so only the owner reference is exact)."""
    for wl in objects.get("workloads") or []:
        meta = _meta(wl)
        if meta.get("namespace") != namespace:
            continue
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("kind") == "Job" and ref.get("name") == job:
                return str(meta.get("name"))
    pattern = re.compile(rf"job-{re.escape(job)}-[0-9a-z]{{5}}")
    seen = workloads_seen(history, objects, namespace)
    return next((n for n in sorted(seen, key=lambda n: seen[n]) if pattern.fullmatch(n)), None)
