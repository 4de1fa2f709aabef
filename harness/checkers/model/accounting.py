"""Kueue's Workload accounting in ClusterQueue and LocalQueue status, recomputed from the Workloads:
`status.pendingWorkloads`, `status.reservingWorkloads` and `status.admittedWorkloads` against the Workloads
that really wait, hold quota and are admitted. Pure functions over API objects (dicts).

Kueue's side (v0.16.1; the same through v0.19): the ClusterQueue reconciler writes pendingWorkloads =
`qManager.Pending(cq)` (heap + inadmissible + in flight, pkg/cache/queue/cluster_queue.go:409-436) and
reserving/admitted = `cache.Usage(cq)` (pkg/controller/core/clusterqueue_controller.go:556-580); the LocalQueue
reconciler the same per LocalQueue (localqueue_controller.go:519-532). Both run `constants.UpdatesBatchPeriod`
(1 s, pkg/constants/constants.go:31-33) after a Workload change reaches them (clusterqueue_controller.go:528,
localqueue_controller.go:423), so a mismatch shorter than that plus a reconcile is normal lag.

What counts here: a Workload is *pending* in the ClusterQueue its LocalQueue (spec.queueName, in its
namespace) points at when it exists, is not being deleted, is active (spec.active not false), holds no
quota (QuotaReserved not True) and is not Finished; *reserving* when QuotaReserved=True (in
status.admission.clusterQueue) and not Finished; *admitted* when also Admitted=True.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")


def _conds(obj: Mapping[str, Any]) -> dict[str, str]:
    return {c.get("type"): str(c.get("status")) for c in ((obj.get("status") or {}).get("conditions") or [])
            if isinstance(c, Mapping)}


def _key(obj: Mapping[str, Any]) -> str:
    m = obj.get("metadata") or {}
    return f"{m.get('namespace')}/{m.get('name')}" if m.get("namespace") else str(m.get("name"))


@dataclass(frozen=True)
class AccountingMismatch:
    """`kind` ("ClusterQueue" | "LocalQueue") `name` ("ns/name" for a LocalQueue) reports `status` in `field`
    while its Workloads make `counted`; `workloads` the "ns/name" of those counted."""

    kind: str
    name: str
    field: str
    status: int | None
    counted: int
    workloads: tuple[str, ...] = ()

    def describe(self) -> str:
        """"ClusterQueue cq: status.pendingWorkloads is 2 but 1 Workload is pending (ns/w1)"."""
        what = {"pendingWorkloads": "pending", "reservingWorkloads": "holding quota",
                "admittedWorkloads": "admitted"}[self.field]
        n = self.counted
        return (f"{self.kind} {self.name}: status.{self.field} is {self.status} but {n} Workload"
                f"{'' if n == 1 else 's'} {'is' if n == 1 else 'are'} {what}"
                + (f" ({', '.join(self.workloads)})" if self.workloads else ""))


def counted(workloads: Iterable[Mapping[str, Any]], localqueues: Iterable[Mapping[str, Any]]
            ) -> dict[tuple[str, str], dict[str, list[str]]]:
    """{(kind, name): {field: ["ns/name", ...]}} for every ClusterQueue and LocalQueue a Workload counts in."""
    lq_cq = {f"{(lq.get('metadata') or {}).get('namespace')}/{(lq.get('metadata') or {}).get('name')}":
             str((lq.get("spec") or {}).get("clusterQueue") or "") for lq in localqueues}
    out: dict[tuple[str, str], dict[str, list[str]]] = {}

    def add(kind: str, name: str, field: str, wl: str) -> None:
        out.setdefault((kind, name), {f: [] for f in FIELDS})[field].append(wl)

    for w in workloads:
        meta, spec, status = w.get("metadata") or {}, w.get("spec") or {}, w.get("status") or {}
        conds = _conds(w)
        if meta.get("deletionTimestamp") or conds.get("Finished") == "True":
            continue
        key = _key(w)
        lq = f"{meta.get('namespace')}/{spec.get('queueName')}" if spec.get("queueName") else None
        if conds.get("QuotaReserved") == "True":
            cq = str((status.get("admission") or {}).get("clusterQueue") or "")
            fields = ["reservingWorkloads"] + (["admittedWorkloads"] if conds.get("Admitted") == "True" else [])
            for f in fields:
                if cq:
                    add("ClusterQueue", cq, f, key)
                if lq:
                    add("LocalQueue", lq, f, key)
        elif spec.get("active", True) is not False and lq and lq_cq.get(lq):
            add("ClusterQueue", lq_cq[lq], "pendingWorkloads", key)
            add("LocalQueue", lq, "pendingWorkloads", key)
    return out


def mismatches(cluster_queues: Iterable[Mapping[str, Any]], localqueues: Iterable[Mapping[str, Any]],
               workloads: Iterable[Mapping[str, Any]]) -> list[AccountingMismatch]:
    """Every FIELDS value of `cluster_queues` and `localqueues` status that disagrees with `workloads` (a
    missing status field counts as 0, as Kueue omits zero values)."""
    lqs = list(localqueues)
    c = counted(list(workloads), lqs)
    out = []
    for kind, objs in (("ClusterQueue", cluster_queues), ("LocalQueue", lqs)):
        for obj in objs:
            name = _key(obj) if kind == "LocalQueue" else str((obj.get("metadata") or {}).get("name"))
            st = obj.get("status") or {}
            mine = c.get((kind, name), {f: [] for f in FIELDS})
            for f in FIELDS:
                got = int(st.get(f) or 0)
                if got != len(mine[f]):
                    out.append(AccountingMismatch(kind, name, f, got, len(mine[f]), tuple(sorted(mine[f]))))
    return out
