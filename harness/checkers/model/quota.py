"""Quota checkers: pure functions from Workload, ClusterQueue and Cohort objects to findings.

Objects are plain dicts as the Kubernetes API returns them (camelCase JSON); no API calls, no sleeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.common.quantity import format_milli, parse_quantity

__all__ = [
    "QuotaFinding",
    "StatusMismatch",
    "available",
    "check_flavors_reservation",
    "check_quota",
    "cohorts_in_scope",
    "holds_quota",
    "kueue_milli",
    "usage_by_cluster_queue",
    "workload_key",
]

CLUSTER_QUEUE = "ClusterQueue"
COHORT = "Cohort"

#: (flavor, resource); the flavor is "" when a PodSetAssignment names no flavor for the resource, as in
#: Kueue's Info.FlavorResourceUsage (pkg/workload/workload.go).
FlavorResource = tuple[str, str]
#: (ClusterQueue, flavor, resource)
UsageKey = tuple[str, str, str]


@dataclass(frozen=True)
class QuotaFinding:
    """One quota limit that the Workloads holding quota exceed.

    `scope` is "ClusterQueue" or "Cohort", `name` that object's name. `allowed_milli` and `used_milli`
    are milli-units (see harness.common.quantity). For a ClusterQueue, `used_milli` is the sum of its Workloads'
    usage; for a Cohort it is the usage counted against the cohort's subtree quota (each member's usage
    above its guaranteed, non-lendable quota). `workloads` are "namespace/name" keys of the Workloads
    holding that flavor and resource there. `limit` names the rule, e.g. "nominal quota".
    """

    scope: str
    name: str
    flavor: str
    resource: str
    allowed_milli: int
    used_milli: int
    workloads: tuple[str, ...]
    limit: str = "nominal quota"

    def describe(self) -> str:
        """One line, quantities as Kubernetes strings, e.g.
        "ClusterQueue cq flavor default cpu: 2 used of 1 allowed by nominal quota, held by ns/wl-a, ns/wl-b".
        """
        binary = _formats_binary(self.resource)
        held = ", ".join(self.workloads) if self.workloads else "no Workload"
        return (
            f"{self.scope} {self.name} flavor {self.flavor or '<none>'} {self.resource}: "
            f"{format_milli(self.used_milli, binary=binary)} used of "
            f"{format_milli(self.allowed_milli, binary=binary)} allowed by {self.limit}, held by {held}"
        )


@dataclass(frozen=True)
class StatusMismatch:
    """A ClusterQueue whose status.flavorsReservation total disagrees with its Workloads' usage.

    `status_milli` is what the ClusterQueue status reports, `workloads_milli` the sum over Workloads
    holding quota in it, both in milli-units; `workloads` are their "namespace/name" keys.
    """

    cq: str
    flavor: str
    resource: str
    status_milli: int
    workloads_milli: int
    workloads: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line, e.g. "ClusterQueue cq flavor default cpu: status.flavorsReservation reports 1 but
        Workloads holding quota add up to 2 (ns/wl-a, ns/wl-b)"."""
        binary = _formats_binary(self.resource)
        held = ", ".join(self.workloads) if self.workloads else "no Workload"
        return (
            f"ClusterQueue {self.cq} flavor {self.flavor or '<none>'} {self.resource}: "
            f"status.flavorsReservation reports {format_milli(self.status_milli, binary=binary)} but "
            f"Workloads holding quota add up to {format_milli(self.workloads_milli, binary=binary)} ({held})"
        )


def kueue_milli(resource: str, quantity: str | int | float) -> int:
    """Return `quantity` in milli-units on Kueue's integer grid for `resource`.

    Kueue keeps cpu in milli-units and every other resource in whole units, each rounded up
    (pkg/resources/requests.go, ResourceValue: MilliValue for cpu, Value otherwise). So memory "1.5"
    counts as 2 bytes; this returns 2000. Raises ValueError/TypeError as harness.common.quantity.parse_quantity.
    """
    milli = parse_quantity(quantity)
    if resource == "cpu":
        return milli
    return -(-milli // 1000) * 1000


def workload_key(workload: Mapping[str, Any]) -> str:
    """Return "namespace/name", the key Kueue uses for a Workload (pkg/workload, Key)."""
    meta = _dict(workload.get("metadata"))
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def holds_quota(workload: Mapping[str, Any]) -> bool:
    """Whether Kueue counts this Workload's usage against its ClusterQueue.

    True when condition QuotaReserved is True, condition Finished is not True, spec.active is not false,
    and status.admission names a clusterQueue. Source: pkg/cache/scheduler/cache.go
    (addOrUpdateWorkloadWithoutLock, which drops any Workload failing HasActiveQuotaReservation) and
    pkg/workload/workload.go (HasActiveQuotaReservation = HasQuotaReservation && !IsFinished && IsActive;
    kubernetes-sigs/kueue#8919, in v0.17.0).
    """
    status = _dict(workload.get("status"))
    conditions = {
        c.get("type"): c.get("status") for c in _list(status.get("conditions")) if isinstance(c, Mapping)
    }
    if conditions.get("QuotaReserved") != "True" or conditions.get("Finished") == "True":
        return False
    if _dict(workload.get("spec")).get("active", True) is False:
        return False
    return bool(_dict(status.get("admission")).get("clusterQueue"))


#: The annotation a new Workload slice names the slice it replaces with (Kueue pkg/workloadslicing).
SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"


def usage_by_cluster_queue(workloads: Iterable[Mapping[str, Any]]) -> dict[UsageKey, tuple[int, list[str]]]:
    """Sum the usage of the Workloads that hold quota, per (ClusterQueue, flavor, resource).

    Returns {(cq, flavor, resource): (milli-units, sorted "namespace/name" keys)}, sorted by key.
    Workloads failing `holds_quota` are skipped. Each status.admission.podSetAssignments[] entry adds
    `resourceUsage[resource]` (the pod set's total, already multiplied by its count) under flavor
    `flavors[resource]`, or "" when no flavor is named. Quantities are taken on Kueue's grid (see
    `kueue_milli`). When status.reclaimablePods leaves fewer pods than the assignment's `count`
    (default: spec.podSets[].count), the usage is scaled down per pod with integer division, as Kueue
    does. Source: pkg/workload/workload.go (totalRequestsFromAdmission, podSetsCountsAfterReclaim,
    Info.FlavorResourceUsage); field names: apis/kueue/v1beta2/workload_types.go (Admission,
    PodSetAssignment).

    A Workload slice that an admitted slice replaces (the new slice's annotation
    `kueue.x-k8s.io/workload-slice-replacement-for` names it, "namespace/name") is not counted: the new
    slice was assigned with the old one's quota as its own, and Kueue finishes the old one right after
    admitting the new one — the same Pods, scaled up, not a second set (pkg/workloadslicing/workloadslicing.go
    WorkloadSliceReplacementFor, ReplacedWorkloadSlice; pkg/scheduler/scheduler.go replaceWorkloadSlice;
    the window between the two writes was 25 ms on v0.17.4, where kubernetes-sigs/kueue#9015 is fixed).
    """
    workloads = list(workloads)
    replaced = {str(_dict(_dict(w.get("metadata")).get("annotations")).get(SLICE_REPLACEMENT_FOR))
                for w in workloads if holds_quota(w)} - {"None"}
    totals: dict[UsageKey, int] = {}
    holders: dict[UsageKey, set[str]] = {}
    for workload in workloads:
        if not holds_quota(workload) or workload_key(workload) in replaced:
            continue
        cq = str(_dict(_dict(workload.get("status")).get("admission")).get("clusterQueue"))
        key = workload_key(workload)
        for (flavor, resource), milli in _workload_usage(workload).items():
            usage_key = (cq, flavor, resource)
            totals[usage_key] = totals.get(usage_key, 0) + milli
            holders.setdefault(usage_key, set()).add(key)
    return {k: (totals[k], sorted(holders[k])) for k in sorted(totals)}


def check_quota(
    workloads: Sequence[Mapping[str, Any]],
    cluster_queues: Sequence[Mapping[str, Any]],
    cohorts: Sequence[Mapping[str, Any]] = (),
) -> list[QuotaFinding]:
    """Return every quota limit that the Workloads holding quota exceed; [] when all fit.

    Usage comes from `usage_by_cluster_queue`. The ClusterQueues and Cohorts form Kueue's cohort tree
    and each node's limits are computed as pkg/cache/scheduler/resource_node.go does, per flavor and
    resource, in milli-units:

    - A ClusterQueue's subtree quota is its nominalQuota (0 where its spec.resourceGroups do not list
      the flavor and resource; pkg/cache/scheduler/resource.go, createResourceQuotas).
    - A node's guaranteed ("local") quota is subtree quota - lendingLimit when lendingLimit is set, else
      0: that part is never lent to the parent (resource_node.go, localQuota).
    - A Cohort's subtree quota is its own nominalQuota (Cohort spec.resourceGroups) plus, for each child,
      the child's subtree quota minus its guaranteed quota. Its usage is the sum over children of what
      each uses beyond its guaranteed quota (resource_node.go, updateCohortResourceNode,
      accumulateFromChild).

    The limits checked, each as Kueue's `available` (resource_node.go) would have to stay >= 0:

    - ClusterQueue without a cohort: usage <= nominalQuota ("nominal quota").
    - ClusterQueue in a cohort with borrowingLimit: usage <= nominalQuota + borrowingLimit.
    - ClusterQueue usage of a flavor and resource its resourceGroups do not list: allowed 0, cohort or
      not (only listed pairs can be assigned or borrowed; apis/kueue/v1beta2/clusterqueue_types.go,
      cohortName). A Workload admitted to a ClusterQueue not passed in is reported the same way.
    - Cohort with a parent and a borrowingLimit: usage <= subtree quota + borrowingLimit.
    - Root Cohort: usage <= subtree quota.

    A ClusterQueue's cohort is spec.cohortName (v1beta1: spec.cohort); a Cohort's parent is
    spec.parentName (or spec.parent). Cohorts named but not passed in are implicit: no quota, no limits,
    no parent (apis/kueue/v1beta2/cohort_types.go). A parent link that would close a cycle is ignored
    (Kueue stops admitting in a cyclic tree; pkg/cache/hierarchy).

    Findings are reported at the most specific level: an exceeded Cohort limit is reported only when its
    excess is more than the excess already reported below it. ClusterQueue findings come first, then
    Cohort findings, each sorted by name, flavor and resource.

    Raises ValueError (TypeError) when a quantity in the objects is malformed (not a quantity).
    """
    usage = usage_by_cluster_queue(workloads)
    tree = _Tree.build(cluster_queues, cohorts, usage)
    findings: list[QuotaFinding] = []
    for root in tree.roots():
        for fr in sorted(tree.flavor_resources):
            _check_node(root, fr, findings)
    findings.sort(key=lambda f: (f.scope != CLUSTER_QUEUE, f.name, f.flavor, f.resource))
    return findings


def cohorts_in_scope(
    cohorts: Iterable[Mapping[str, Any]], cluster_queues: Iterable[Mapping[str, Any]], prefix: str = ""
) -> list[dict[str, Any]]:
    """The Cohort objects a case's quota tree is made of: those named with `prefix` and every Cohort a
    ClusterQueue of `cluster_queues` names (spec.cohortName, v1beta1 spec.cohort), with their ancestors
    along spec.parentName (a parent link that loops stops there). Sorted by name; the input is not changed.

    A Cohort of another tree (another case's) would only add roots with no usage, but it is left out so
    objects.yaml shows the case's tree. Source of the links: apis/kueue/v1beta2/cohort_types.go (parentName),
    clusterqueue_types.go (cohortName).
    """
    by_name = {str(_dict(c.get("metadata")).get("name", "")): dict(c) for c in cohorts}
    wanted = {n for n in by_name if prefix and n.startswith(prefix)}
    todo = [str(_dict(cq.get("spec")).get("cohortName") or _dict(cq.get("spec")).get("cohort") or "")
            for cq in cluster_queues]
    todo += list(wanted)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if not name or name in seen:
            continue
        seen.add(name)
        if name in by_name:
            wanted.add(name)
            spec = _dict(by_name[name].get("spec"))
            todo.append(str(spec.get("parentName") or spec.get("parent") or ""))
    return [by_name[n] for n in sorted(wanted)]


def available(
    cluster_queues: Sequence[Mapping[str, Any]],
    cohorts: Sequence[Mapping[str, Any]],
    usage: Mapping[str, Mapping[FlavorResource, int]],
    potential: bool = False,
) -> dict[str, dict[FlavorResource, int]]:
    """What each ClusterQueue could still admit, per flavor and resource, as Kueue's scheduler computes it.

    `usage` is {ClusterQueue name: {(flavor, resource): milli-units}} (as the quota the ClusterQueue's
    Workloads hold: `usage_by_cluster_queue` summed per ClusterQueue). Returns {ClusterQueue name:
    {(flavor, resource): milli-units}} for the pairs each ClusterQueue's spec.resourceGroups lists, never
    below 0 (pkg/cache/scheduler/clusterqueue_snapshot.go, Available: max(0, available)). With
    `potential`, usage is ignored and the limit with an empty tree is returned.

    Source: pkg/cache/scheduler/resource_node.go at v0.17.0: `available` (a root: subtree quota -
    usage; else the node's LocalAvailable plus what its parent has left, capped by borrowingLimit as
    storedInParent - usedInParent + borrowingLimit) and `potentialAvailable`; the tree and its subtree
    quotas as in `check_quota` (updateCohortResourceNode, accumulateFromChild). Kueue's own tables for
    these numbers: pkg/cache/scheduler/resource_test.go (TestAvailable). Raises ValueError (TypeError)
    on a malformed quantity.
    """
    flat = {(cq, fr[0], fr[1]): (0 if potential else milli, []) for cq, frs in usage.items()
            for fr, milli in frs.items()}
    tree = _Tree.build(cluster_queues, cohorts, flat)
    out: dict[str, dict[FlavorResource, int]] = {}
    for name, node in sorted(tree.cluster_queues.items()):
        if node.known:
            out[name] = {fr: max(0, _available(node, fr)) for fr in sorted(node.quotas)}
    return out


def check_flavors_reservation(
    cluster_queues: Sequence[Mapping[str, Any]], workloads: Sequence[Mapping[str, Any]]
) -> list[StatusMismatch]:
    """Compare each ClusterQueue's status.flavorsReservation with the usage summed from Workloads.

    For every (flavor, resource) listed in the ClusterQueue's spec.resourceGroups or in
    status.flavorsReservation[].resources[], `total` (missing = 0) must equal the sum from
    `usage_by_cluster_queue`; each disagreement is one StatusMismatch, sorted by ClusterQueue, flavor,
    resource. Pairs the spec does not list are not compared, because Kueue never reports them
    (pkg/cache/scheduler/cache.go, getUsage; `check_quota` flags their usage). Kueue writes the status
    asynchronously, so a mismatch right after a change may be transient. Field names:
    apis/kueue/v1beta2/clusterqueue_types.go (ClusterQueueStatus.flavorsReservation, FlavorUsage,
    ResourceUsage).
    """
    usage = usage_by_cluster_queue(workloads)
    mismatches: list[StatusMismatch] = []
    for cq in cluster_queues:
        name = str(_dict(cq.get("metadata")).get("name", ""))
        reported: dict[FlavorResource, int] = {}
        for flavor_usage in _list(_dict(cq.get("status")).get("flavorsReservation")):
            flavor = str(_dict(flavor_usage).get("name", ""))
            for resource_usage in _list(_dict(flavor_usage).get("resources")):
                resource = str(_dict(resource_usage).get("name", ""))
                total = _dict(resource_usage).get("total")
                reported[(flavor, resource)] = 0 if total is None else kueue_milli(resource, total)
        pairs = set(reported) | set(_parse_quotas(_dict(cq.get("spec"))))
        for flavor, resource in sorted(pairs):
            used, keys = usage.get((name, flavor, resource), (0, []))
            status_milli = reported.get((flavor, resource), 0)
            if status_milli != used:
                mismatches.append(StatusMismatch(name, flavor, resource, status_milli, used, tuple(keys)))
    return mismatches


# ---------------------------------------------------------------------------------------------------------
# The cohort tree


@dataclass(frozen=True)
class _Quota:
    """One flavor and resource of a ClusterQueue or Cohort spec, in milli-units; None = no limit."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(eq=False)
class _Node:
    """A ClusterQueue or Cohort with its quotas and, once computed, its subtree quota and usage."""

    scope: str
    name: str
    quotas: dict[FlavorResource, _Quota]
    parent_name: str = ""
    known: bool = True
    parent: _Node | None = None
    children: list[_Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    holders: dict[FlavorResource, set[str]] = field(default_factory=dict)

    def local_quota(self, fr: FlavorResource) -> int:
        """Quota kept inside this subtree by its lendingLimit (resource_node.go, localQuota)."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - quota.lending_limit)


@dataclass
class _Tree:
    cluster_queues: dict[str, _Node]
    cohorts: dict[str, _Node]
    flavor_resources: set[FlavorResource]

    @classmethod
    def build(
        cls,
        cluster_queues: Sequence[Mapping[str, Any]],
        cohorts: Sequence[Mapping[str, Any]],
        usage: Mapping[UsageKey, tuple[int, list[str]]],
    ) -> _Tree:
        cq_nodes: dict[str, _Node] = {}
        for obj in cluster_queues:
            spec = _dict(obj.get("spec"))
            name = str(_dict(obj.get("metadata")).get("name", ""))
            cohort = spec.get("cohortName") or spec.get("cohort") or ""
            cq_nodes[name] = _Node(CLUSTER_QUEUE, name, _parse_quotas(spec), parent_name=str(cohort))
        for (cq, flavor, resource), (milli, keys) in usage.items():
            node = cq_nodes.setdefault(cq, _Node(CLUSTER_QUEUE, cq, {}, known=False))
            node.usage[(flavor, resource)] = milli
            node.holders[(flavor, resource)] = set(keys)

        cohort_nodes: dict[str, _Node] = {}
        for obj in cohorts:
            spec = _dict(obj.get("spec"))
            name = str(_dict(obj.get("metadata")).get("name", ""))
            parent = spec.get("parentName") or spec.get("parent") or ""
            cohort_nodes[name] = _Node(COHORT, name, _parse_quotas(spec), parent_name=str(parent))
        referenced = [n.parent_name for n in (*cq_nodes.values(), *cohort_nodes.values()) if n.parent_name]
        for name in referenced:
            cohort_nodes.setdefault(name, _Node(COHORT, name, {}, known=False))

        for name in sorted(cohort_nodes):
            node = cohort_nodes[name]
            if node.parent_name and not _is_ancestor_or_self(node, cohort_nodes[node.parent_name]):
                _link(node, cohort_nodes[node.parent_name])
        for name in sorted(cq_nodes):
            node = cq_nodes[name]
            if node.parent_name:
                _link(node, cohort_nodes[node.parent_name])

        frs: set[FlavorResource] = set()
        for node in (*cq_nodes.values(), *cohort_nodes.values()):
            frs.update(node.quotas)
            frs.update(node.usage)
        tree = cls(cq_nodes, cohort_nodes, frs)
        for root in tree.roots():
            _accumulate(root, frs)
        return tree

    def roots(self) -> list[_Node]:
        nodes = [*self.cluster_queues.values(), *self.cohorts.values()]
        return sorted((n for n in nodes if n.parent is None), key=lambda n: (n.scope, n.name))


def _link(child: _Node, parent: _Node) -> None:
    child.parent = parent
    parent.children.append(child)
    parent.children.sort(key=lambda n: (n.scope, n.name))


def _is_ancestor_or_self(node: _Node, candidate_parent: _Node) -> bool:
    """Whether linking node -> candidate_parent would close a cycle."""
    current: _Node | None = candidate_parent
    while current is not None:
        if current is node:
            return True
        current = current.parent
    return False


def _accumulate(node: _Node, frs: set[FlavorResource]) -> None:
    """Fill subtree quota and usage bottom-up (resource_node.go, updateCohortResourceNode)."""
    for child in node.children:
        _accumulate(child, frs)
    for fr in frs:
        quota = node.quotas.get(fr)
        node.subtree[fr] = quota.nominal if quota else 0
        if node.scope == COHORT:
            node.usage[fr] = 0
            node.holders[fr] = set()
        for child in node.children:
            local = child.local_quota(fr)
            node.subtree[fr] += child.subtree[fr] - local
            above_local = max(0, child.usage.get(fr, 0) - local)
            node.usage[fr] += above_local
            if above_local > 0:  # a member within its guaranteed quota holds nothing of the shared pool
                node.holders[fr] |= child.holders.get(fr, set())


def _limit(node: _Node, fr: FlavorResource) -> tuple[int, str] | None:
    """The (allowed milli-units, rule name) that bounds `node`'s usage by itself, or None."""
    quota = node.quotas.get(fr)
    if node.scope == CLUSTER_QUEUE:
        if not node.known:
            return 0, "no quota (ClusterQueue not found)"
        if quota is None:
            return 0, "no quota (flavor and resource not in the ClusterQueue's resourceGroups)"
        if node.parent is None:
            return quota.nominal, "nominal quota"
        if quota.borrowing_limit is not None:
            return quota.nominal + quota.borrowing_limit, "nominal quota + borrowingLimit"
        return None
    if node.parent is None:
        return node.subtree.get(fr, 0), "cohort subtree quota"
    if quota is not None and quota.borrowing_limit is not None:
        return node.subtree.get(fr, 0) + quota.borrowing_limit, "cohort subtree quota + borrowingLimit"
    return None


def _available(node: _Node, fr: FlavorResource) -> int:
    """resource_node.go `available` for one node (recursive up to the root)."""
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = _available(node.parent, fr)
    quota = node.quotas.get(fr)
    local = node.local_quota(fr)
    if quota is not None and quota.borrowing_limit is not None:
        stored_in_parent = node.subtree.get(fr, 0) - local
        used_in_parent = max(0, node.usage.get(fr, 0) - local)
        parent_available = min(stored_in_parent - used_in_parent + quota.borrowing_limit, parent_available)
    return max(0, local - node.usage.get(fr, 0)) + parent_available


def _check_node(node: _Node, fr: FlavorResource, findings: list[QuotaFinding]) -> int:
    """Append findings for `node`'s subtree; return the excess already reported there.

    A child's excess always reaches its parent's usage whole (it is above the child's guaranteed
    quota), so a parent whose own excess is not larger adds nothing new and is not reported.
    """
    reported_below = sum(_check_node(child, fr, findings) for child in node.children)
    limit = _limit(node, fr)
    if limit is None:
        return reported_below
    allowed, rule = limit
    used = node.usage.get(fr, 0)
    excess = used - allowed
    if excess <= reported_below:
        return reported_below
    findings.append(
        QuotaFinding(
            scope=node.scope,
            name=node.name,
            flavor=fr[0],
            resource=fr[1],
            allowed_milli=allowed,
            used_milli=used,
            workloads=tuple(sorted(node.holders.get(fr, set()))),
            limit=rule,
        )
    )
    return excess


# ---------------------------------------------------------------------------------------------------------
# Reading objects


def _parse_quotas(spec: Mapping[str, Any]) -> dict[FlavorResource, _Quota]:
    """spec.resourceGroups[].flavors[].resources[] of a ClusterQueue or Cohort, on Kueue's grid."""
    quotas: dict[FlavorResource, _Quota] = {}
    for group in _list(spec.get("resourceGroups")):
        for flavor in _list(_dict(group).get("flavors")):
            flavor_name = str(_dict(flavor).get("name", ""))
            for resource in _list(_dict(flavor).get("resources")):
                resource = _dict(resource)
                name = str(resource.get("name", ""))
                borrowing, lending = resource.get("borrowingLimit"), resource.get("lendingLimit")
                quotas[(flavor_name, name)] = _Quota(
                    nominal=kueue_milli(name, resource.get("nominalQuota") or 0),
                    borrowing_limit=None if borrowing is None else kueue_milli(name, borrowing),
                    lending_limit=None if lending is None else kueue_milli(name, lending),
                )
    return quotas


def _workload_usage(workload: Mapping[str, Any]) -> dict[FlavorResource, int]:
    """Usage of one Workload per (flavor, resource), in milli-units on Kueue's grid."""
    spec_counts = {
        str(ps.get("name", "main")): _int(ps.get("count"), 1)
        for ps in map(_dict, _list(_dict(workload.get("spec")).get("podSets")))
    }
    status = _dict(workload.get("status"))
    reclaimable = {
        str(rp.get("name", "")): _int(rp.get("count"), 0)
        for rp in map(_dict, _list(status.get("reclaimablePods")))
    }
    usage: dict[FlavorResource, int] = {}
    for assignment in map(_dict, _list(_dict(status.get("admission")).get("podSetAssignments"))):
        name = str(assignment.get("name", "main"))
        flavors = _dict(assignment.get("flavors"))
        count = _int(assignment.get("count"), spec_counts.get(name, 0))
        # Only scale when the spec names the pod set; without it Kueue's arithmetic is meaningless.
        remaining = max(0, spec_counts[name] - reclaimable.get(name, 0)) if name in spec_counts else None
        for resource, quantity in _dict(assignment.get("resourceUsage")).items():
            milli = kueue_milli(resource, quantity)
            if count and remaining is not None and remaining < count:
                milli = _scale(resource, milli, count, remaining)
            fr = (str(flavors.get(resource, "")), str(resource))
            usage[fr] = usage.get(fr, 0) + milli
    return usage


def _scale(resource: str, milli: int, count: int, remaining: int) -> int:
    """Per-pod integer division, then multiplication, in Kueue's units.

    Source: pkg/workload/workload.go, totalRequestsFromAdmission.
    """
    unit = 1 if resource == "cpu" else 1000
    return (milli // unit) // count * remaining * unit


def _formats_binary(resource: str) -> bool:
    """Kueue prints memory, ephemeral-storage and hugepages-* as BinarySI (pkg/resources ResourceQuantity)."""
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
