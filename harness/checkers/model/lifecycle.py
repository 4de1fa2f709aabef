"""Object lifecycle facts the invariant monitor records (pure): what changed between two versions of an
object as its watch delivered them — deletion started (deletionTimestamp) and done, a Workload's
spec.active, its quota reservations and evictions — and, for Pods that run, whether the running Pods of a
ClusterQueue request more than its admitted Workloads hold. The checkers of harness/checkers/ judge these
facts from the history (docs/history.md, source `monitor`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.checkers.model import quota as checks


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def key_of(kind: str, obj: Mapping[str, Any]) -> str:
    """"ns/name" for a namespaced object, "name" for a cluster-scoped one."""
    meta = _meta(obj)
    return f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def _cond(obj: Mapping[str, Any] | None, ctype: str) -> Mapping[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == ctype:
            return c
    return None


def _true(obj: Mapping[str, Any] | None, ctype: str) -> bool:
    c = _cond(obj, ctype)
    return bool(c and c.get("status") == "True")


def _active(obj: Mapping[str, Any] | None) -> bool:
    """spec.active, true when unset (apis/kueue/v1beta2/workload_types.go: Active defaults to true)."""
    return ((obj or {}).get("spec") or {}).get("active", True) is not False


def evictions_total(obj: Mapping[str, Any]) -> int | None:
    """Sum of status.schedulingStats.evictions[].count (Kueue's own count, v0.17: workload_types.go:728-763),
    or None when the Workload has none recorded."""
    ev = (((obj.get("status") or {}).get("schedulingStats")) or {}).get("evictions")
    if not isinstance(ev, list):
        return None
    return sum(int(e.get("count") or 0) for e in ev if isinstance(e, Mapping))


def lifecycle_events(kind: str, ev_type: str, obj: Mapping[str, Any], prev: Mapping[str, Any] | None,
                     evictions_seen: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The monitor events for one watch event: `kind` ("Workload", "ClusterQueue", "LocalQueue", "Cohort",
    "Pod"), `ev_type` (ADDED | MODIFIED | DELETED), the object now and the version seen before (None: first
    sight). `evictions_seen`: how many evictions of this Workload were recorded before. Returns
    [(event, fields)] in the order they happened:

    - `object_deleting` (kind, key, finalizers, deletion_timestamp): first version with metadata.deletionTimestamp;
    - `object_deleted` (kind, key, finalizers): the DELETED event;
    - Workloads: `workload_seen` (key, queue, active, priority) at first sight; `workload_active_changed`
      (key, active) when spec.active changes (or is false at first sight); `workload_quota_reserved` (key,
      cluster_queue, active) when QuotaReserved turns True; `workload_quota_released` (key, reason) when it
      turns False or goes; `workload_evicted` (key, reason, count: the n-th seen, evictions_total: Kueue's
      status.schedulingStats count) when Evicted turns True (admission resets it to False:
      pkg/workload/workload.go:849-875 SetQuotaReservation, so each eviction is one such turn).

    Every event also has `resource_version` of the version it was read from.
    """
    key = key_of(kind, obj)
    rv = _meta(obj).get("resourceVersion")
    out: list[tuple[str, dict[str, Any]]] = []
    if ev_type == "DELETED":
        return [("object_deleted", {"kind": kind, "key": key, "finalizers": list(_meta(obj).get("finalizers") or []),
                                    "resource_version": rv})]
    if _meta(obj).get("deletionTimestamp") and not _meta(prev).get("deletionTimestamp"):
        out.append(("object_deleting", {"kind": kind, "key": key, "finalizers": list(_meta(obj).get("finalizers") or []),
                                        "deletion_timestamp": _meta(obj).get("deletionTimestamp"), "resource_version": rv}))
    if kind != "Workload":
        return out
    spec = obj.get("spec") or {}
    if prev is None:
        out.append(("workload_seen", {"key": key, "queue": spec.get("queueName"), "active": _active(obj),
                                      "priority": spec.get("priority"), "resource_version": rv}))
    if (prev is None and not _active(obj)) or (prev is not None and _active(prev) != _active(obj)):
        out.append(("workload_active_changed", {"key": key, "active": _active(obj), "resource_version": rv}))
    if _true(obj, "QuotaReserved") and not _true(prev, "QuotaReserved"):
        cq = ((obj.get("status") or {}).get("admission") or {}).get("clusterQueue")
        out.append(("workload_quota_reserved", {"key": key, "cluster_queue": cq, "active": _active(obj),
                                                "resource_version": rv}))
    elif prev is not None and _true(prev, "QuotaReserved") and not _true(obj, "QuotaReserved"):
        c = _cond(obj, "QuotaReserved") or {}
        out.append(("workload_quota_released", {"key": key, "reason": c.get("reason"), "resource_version": rv}))
    if _true(obj, "Evicted") and not _true(prev, "Evicted"):
        c = _cond(obj, "Evicted") or {}
        out.append(("workload_evicted", {"key": key, "reason": c.get("reason"),
                                         "message": str(c.get("message") or "")[:200], "count": evictions_seen + 1,
                                         "evictions_total": evictions_total(obj), "resource_version": rv}))
    return out


# ---- running Pods within the quota their Workloads hold -----------------------------------------------

@dataclass(frozen=True)
class PodsOverQuota:
    """Running Pods of ClusterQueue `cluster_queue` request `running_milli` of `resource`, more than the
    `held_milli` its admitted Workloads hold; `pods` are the running Pods counted ("ns/name")."""

    cluster_queue: str
    resource: str
    running_milli: int
    held_milli: int
    pods: tuple[str, ...]

    def describe(self) -> str:
        return (f"ClusterQueue {self.cluster_queue}: running Pods request {self.running_milli}m {self.resource}, "
                f"its admitted Workloads hold {self.held_milli}m ({len(self.pods)} Pod(s): {', '.join(self.pods[:5])})")


def _pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """A Pod's requests in milli-units on Kueue's grid: the sum over containers, or the largest init
    container where that is more (the Pod's effective request, as the scheduler and Kueue count it)."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for r, q in (((c.get("resources") or {}).get("requests")) or {}).items():
            total[r] = total.get(r, 0) + checks.kueue_milli(r, q)
    for c in spec.get("initContainers") or []:
        for r, q in (((c.get("resources") or {}).get("requests")) or {}).items():
            total[r] = max(total.get(r, 0), checks.kueue_milli(r, q))
    return total


def pod_owner_uids(pod: Mapping[str, Any]) -> set[str]:
    return {str(r.get("uid")) for r in _meta(pod).get("ownerReferences") or [] if r.get("uid")}


def workload_of_pod(pod: Mapping[str, Any], workloads: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Workload a Pod runs for: one whose owner is the Pod's owner (a Job's Pods: the Job owns both) or
    the Pod itself (the pod integration), else one named in the Pod's kueue.x-k8s.io/workload annotation."""
    owners = pod_owner_uids(pod) | {str(_meta(pod).get("uid"))}
    ann = (_meta(pod).get("annotations") or {}).get("kueue.x-k8s.io/workload")
    for wl in workloads:
        wl_owners = {str(r.get("uid")) for r in _meta(wl).get("ownerReferences") or [] if r.get("uid")}
        if wl_owners & owners or (ann and _meta(wl).get("name") == ann and _meta(wl).get("namespace") == _meta(pod).get("namespace")):
            return wl
    return None


def _orphaned(pod: Mapping[str, Any], wl: Mapping[str, Any]) -> bool:
    """A Pod with no owner that its Workload does not name as owner either: a Job's Pod left behind by a delete
    with propagation Orphan (the garbage collector removed its ownerReference). The user took it out of
    Kueue's hands, and Kueue finishes such a Job's Workload to free its quota (kubernetes-sigs/kueue#1789,
    fixed by #11596: that is the fix working, not an oversubscription). Kueue's pod integration owns its
    Workload by the Pod itself, so such a Pod is never "orphaned"."""
    if _meta(pod).get("ownerReferences"):
        return False
    return str(_meta(pod).get("uid")) not in {str(r.get("uid")) for r in _meta(wl).get("ownerReferences") or []}


def pods_over_quota(pods: Iterable[Mapping[str, Any]], workloads: Iterable[Mapping[str, Any]],
                    localqueues: Iterable[Mapping[str, Any]] = ()) -> list[PodsOverQuota]:
    """Per ClusterQueue and resource: the requests of its running Pods (status.phase Running, not being
    deleted) against the usage its admitted Workloads hold (checks.usage_by_cluster_queue, summed over
    flavors). A Pod counts for the ClusterQueue its Workload is admitted to, else the one its Workload's
    LocalQueue (spec.queueName, `localqueues`) points at: a Pod that runs for a Workload holding no quota is
    exactly what this catches. Pods of no known Workload, and orphaned Pods (`_orphaned`: their Job deleted
    with propagation Orphan), are not counted. Returns the excesses, sorted."""
    workloads = list(workloads)
    lq_cq = {f"{_meta(lq).get('namespace')}/{_meta(lq).get('name')}": (lq.get("spec") or {}).get("clusterQueue")
             for lq in localqueues}
    held: dict[tuple[str, str], int] = {}
    for (cq, _flavor, resource), (milli, _keys) in checks.usage_by_cluster_queue(workloads).items():
        held[(cq, resource)] = held.get((cq, resource), 0) + milli
    running: dict[tuple[str, str], int] = {}
    who: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running" or _meta(pod).get("deletionTimestamp"):
            continue
        wl = workload_of_pod(pod, workloads)
        if wl is None or _orphaned(pod, wl):
            continue
        cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") if checks.holds_quota(wl) else None
        cq = cq or lq_cq.get(f"{_meta(wl).get('namespace')}/{(wl.get('spec') or {}).get('queueName')}")
        if not cq:
            continue
        for r, milli in _pod_requests(pod).items():
            running[(cq, r)] = running.get((cq, r), 0) + milli
            who.setdefault((cq, r), []).append(key_of("Pod", pod))
    return [PodsOverQuota(cq, r, m, held.get((cq, r), 0), tuple(sorted(who[(cq, r)])))
            for (cq, r), m in sorted(running.items()) if m > held.get((cq, r), 0)]
