"""Kueue's own view of its state, as Kueue dumps it on SIGUSR2 (pkg/debugger/debugger.go, every version here):
the scheduler cache's snapshot — per ClusterQueue its usage and the Workloads it counts (admitted or assumed), per
cohort its quota and usage — and the queue manager's pending and inadmissible Workloads per ClusterQueue
(pkg/cache/scheduler/snapshot.go Snapshot.Log, pkg/cache/queue/dumper.go LogDump), between "Started dump" and
"Ended dump" lines of the "dumper" logger. Pure parsing here; the environments send the signal and fetch the
goroutine stacks (pprofBindAddress).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.kueue import log as kueue_log

STARTED, ENDED = "Started dump", "Ended dump"


def _refs(v: Any) -> list[str]:
    """Workload references of a dump field as "ns/name": Kueue logs them as strings ("ns/name") or KObj maps."""
    out = []
    for x in v or []:
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, Mapping) and x.get("name"):
            out.append(f"{x.get('namespace')}/{x['name']}" if x.get("namespace") else str(x["name"]))
    return out


def last_dump(lines: Iterable[Mapping[str, Any]], since: float) -> dict[str, Any] | None:
    """The last complete dump in Kueue's log `lines` (parsed JSON) written at or after `since` (epoch s):
    {"at": ts, "cluster_queues": {cq: {"cohort", "usage", "workloads": [...], "pending": [...],
    "inadmissible": [...]}}, "cohorts": {name: {"quota", "usage"}}}, or None when no dump ended after `since`."""
    cur: dict[str, Any] | None = None
    done: dict[str, Any] | None = None
    for line in lines:
        ts = kueue_log.parse_ts(line.get("ts")) or 0.0
        if ts < since:
            continue
        msg = line.get("msg")
        if msg == STARTED:
            cur = {"at": ts, "cluster_queues": {}, "cohorts": {}}
        elif cur is None:
            continue
        elif msg == ENDED:
            done, cur = cur, None
        elif msg == "Found ClusterQueue":
            cq = cur["cluster_queues"].setdefault(_name(line.get("clusterQueue")), {})
            cq.update(cohort=line.get("cohort"), usage=line.get("usage"), workloads=sorted(_refs(line.get("workloads"))))
        elif msg == "Found cohort":
            cur["cohorts"][str(line.get("cohort"))] = {"quota": line.get("resources"), "usage": line.get("usage")}
        elif msg == "Found pending and inadmissible workloads in ClusterQueue":
            cq = cur["cluster_queues"].setdefault(_name(line.get("clusterQueue")), {})
            cq.update(pending=sorted(_refs(line.get("pending"))), inadmissible=sorted(_refs(line.get("inadmissible"))))
    return done


def _name(v: Any) -> str:
    if isinstance(v, Mapping):
        return str(v.get("name"))
    return str(v)


def where(dump: Mapping[str, Any], workload: str) -> list[str]:
    """What the dump says of Workload `workload` ("ns/name"), one phrase each: "counted in cq's usage (admitted
    or assumed in the scheduler cache)", "pending in cq", "inadmissible in cq"; [] when the dump names it nowhere."""
    out = []
    for cq, d in (dump.get("cluster_queues") or {}).items():
        if workload in (d.get("workloads") or []):
            out.append(f"counted in {cq}'s usage (admitted or assumed in the scheduler cache)")
        if workload in (d.get("pending") or []):
            out.append(f"pending in {cq}'s queue")
        if workload in (d.get("inadmissible") or []):
            out.append(f"inadmissible in {cq} (parked until something changes)")
    return out
