"""Fluent builders for Kueue's and Kubernetes' objects — ResourceFlavor, ClusterQueue (quotas with
borrowing/lending limits, cohorts, fair-sharing weight, preemption policies), Cohort (hierarchical),
LocalQueue, WorkloadPriorityClass, Workload, batch/v1 Job, finalizers, kwok-managed Node — one module
for cases, plans and unit tests (the client that creates and reads them is harness/objects/cluster.py).
API shapes: Kueue v0.17 apis/kueue/v1beta2.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Self

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants/constants.go
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"  # pkg/controller/constants/constants.go


class _Builder:
    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    def obj(self) -> dict[str, Any]:
        """A deep copy of the object as a dict, ready to send."""
        return copy.deepcopy(self._obj)

    build = obj

    def finalizer(self, name: str) -> Self:
        """Add metadata.finalizers entry `name` (a deletion then waits for whoever removes it)."""
        self._obj["metadata"].setdefault("finalizers", []).append(name)
        return self

    def label(self, key: str, value: str) -> Self:
        """Add metadata.labels entry `key`=`value`."""
        self._obj["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        """Add metadata.annotations entry `key`=`value` (e.g. kueue.x-k8s.io/elastic-job: "true" on a Job)."""
        self._obj["metadata"].setdefault("annotations", {})[key] = value
        return self

    def set(self, **paths: Any) -> Self:
        """Set any field by its path, besides the named steps: `spec.backoffLimit=0`,
        `spec.template.spec.containers[0].resources.limits.cpu="1"` (a plan: `with: [{set: {spec.backoffLimit: 0}}]`);
        missing mappings are made, a list index must exist. Raises ValueError naming a path that cannot be set."""
        for path, value in paths.items():
            node: Any = self._obj
            parts = _path_parts(path)
            for here, nxt in zip(parts, parts[1:]):
                node = _step_into(node, here, nxt, path)
            last = parts[-1]
            if isinstance(last, int):
                if not isinstance(node, list) or not -len(node) <= last < len(node):
                    raise ValueError(f"set {path}: no item [{last}] there")
                node[last] = copy.deepcopy(value)
            elif isinstance(node, dict):
                node[last] = copy.deepcopy(value)
            else:
                raise ValueError(f"set {path}: {last!r} is not a field of a mapping there")
        return self

    @property
    def name(self) -> str:
        return self._obj["metadata"]["name"]


def _path_parts(path: str) -> list[str | int]:
    """"a.b[0].c" -> ["a", "b", 0, "c"]. Raises ValueError for an empty part or a bad index."""
    out: list[str | int] = []
    for piece in path.split("."):
        name, _, rest = piece.partition("[")
        if not name:
            raise ValueError(f"set {path}: an empty field name")
        out.append(name)
        while rest:
            idx, _, rest = rest.partition("]")
            try:
                out.append(int(idx))
            except ValueError:
                raise ValueError(f"set {path}: [{idx}] is not a list index") from None
            rest = rest[1:] if rest.startswith("[") else rest
    return out


def _step_into(node: Any, here: str | int, nxt: str | int, path: str) -> Any:
    """The child `here` of `node` on the way to `nxt`, a mapping made when it is missing."""
    if isinstance(here, int):
        if not isinstance(node, list) or not -len(node) <= here < len(node):
            raise ValueError(f"set {path}: no item [{here}] there")
        return node[here]
    if not isinstance(node, dict):
        raise ValueError(f"set {path}: {here!r} is not a field of a mapping there")
    if node.get(here) is None:
        if isinstance(nxt, int):
            raise ValueError(f"set {path}: {here} has no list to index")
        node[here] = {}
    return node[here]


class ResourceFlavorBuilder(_Builder):
    pass


def resource_flavor(name: str) -> ResourceFlavorBuilder:
    """A ResourceFlavor `name` with an empty spec (no node labels, no taints)."""
    return ResourceFlavorBuilder({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}})


@dataclasses.dataclass(frozen=True)
class Quota:
    """A nominal quota with optional borrowingLimit / lendingLimit (Kubernetes quantity strings), for the
    keyword arguments of `.flavor(...)`."""

    nominal: str
    borrowing_limit: str | None = None
    lending_limit: str | None = None


def quota(nominal: str, *, borrow: str | None = None, lend: str | None = None) -> Quota:
    """`quota("2", borrow="1")`: nominal 2, borrowingLimit 1."""
    return Quota(nominal, borrow, lend)


class _QuotaHolder(_Builder):
    """The `.flavor()` step shared by ClusterQueue and Cohort (spec.resourceGroups)."""

    def flavor(self, name: str, **resources: str | Quota) -> Self:
        """Add flavor `name` with quotas per resource (`cpu="1"`, `memory=quota("1Gi", lend="0")`);
        flavors that cover the same resources share a resource group, as Kueue requires."""
        covered = list(resources)
        groups = self._obj["spec"].setdefault("resourceGroups", [])
        group = next((g for g in groups if g["coveredResources"] == covered), None)
        if group is None:
            group = {"coveredResources": covered, "flavors": []}
            groups.append(group)
        entries = []
        for resource, value in resources.items():
            q = value if isinstance(value, Quota) else Quota(value)
            entry: dict[str, Any] = {"name": resource, "nominalQuota": q.nominal}
            if q.borrowing_limit is not None:
                entry["borrowingLimit"] = q.borrowing_limit
            if q.lending_limit is not None:
                entry["lendingLimit"] = q.lending_limit
            entries.append(entry)
        group["flavors"].append({"name": name, "resources": entries})
        return self

    def fair_sharing(self, weight: str) -> Self:
        """spec.fairSharing.weight (a quantity string, e.g. "2")."""
        self._obj["spec"]["fairSharing"] = {"weight": weight}
        return self


class ClusterQueueBuilder(_QuotaHolder):
    def flavor_quota(self, flavor: str, borrowing_limit: dict[str, str] | None = None,
                     lending_limit: dict[str, str] | None = None, **nominal: str) -> "ClusterQueueBuilder":
        """Add `flavor` with nominal quotas (`cpu="1"`, `memory="1Gi"`) to the first resource group."""
        groups = self._obj["spec"].setdefault("resourceGroups", [])
        if not groups:
            groups.append({"coveredResources": [], "flavors": []})
        g = groups[0]
        resources = []
        for res, q in nominal.items():
            r: dict[str, Any] = {"name": res, "nominalQuota": q}
            if borrowing_limit and res in borrowing_limit:
                r["borrowingLimit"] = borrowing_limit[res]
            if lending_limit and res in lending_limit:
                r["lendingLimit"] = lending_limit[res]
            resources.append(r)
            if res not in g["coveredResources"]:
                g["coveredResources"].append(res)
        g["flavors"].append({"name": flavor, "resources": resources})
        return self

    def preemption(self, within_cluster_queue: str | None = None,
                   reclaim_within_cohort: str | None = None) -> "ClusterQueueBuilder":
        """spec.preemption.withinClusterQueue and .reclaimWithinCohort (Never, LowerPriority, Any, …)."""
        p = self._obj["spec"].setdefault("preemption", {})
        if within_cluster_queue:
            p["withinClusterQueue"] = within_cluster_queue
        if reclaim_within_cohort:
            p["reclaimWithinCohort"] = reclaim_within_cohort
        return self

    def preemption_policy(self, **policy: Any) -> "ClusterQueueBuilder":
        """Any spec.preemption field by its API name, e.g. borrowWithinCohort={"policy": "LowerPriority"}."""
        self._obj["spec"].setdefault("preemption", {}).update(policy)
        return self

    def borrow_within_cohort(self, policy: str = "LowerPriority",
                             max_priority_threshold: int | None = None) -> "ClusterQueueBuilder":
        """spec.preemption.borrowWithinCohort: preempt in the cohort while borrowing (`policy` Never or
        LowerPriority; only Workloads at or below `max_priority_threshold`). apis/kueue/v1beta2/clusterqueue_types.go."""
        bwc: dict[str, Any] = {"policy": policy}
        if max_priority_threshold is not None:
            bwc["maxPriorityThreshold"] = max_priority_threshold
        self._obj["spec"].setdefault("preemption", {})["borrowWithinCohort"] = bwc
        return self

    def stop_policy(self, policy: str = "Hold") -> "ClusterQueueBuilder":
        """spec.stopPolicy: Hold (admit nothing new) or HoldAndDrain (also evict what is admitted)."""
        self._obj["spec"]["stopPolicy"] = policy
        return self

    def cohort(self, name: str, *, field: str = "cohortName") -> "ClusterQueueBuilder":
        """Join cohort `name` (spec.cohortName; `field="cohort"` for the older spelling)."""
        self._obj["spec"][field] = name
        return self

    def reservation(self, flavor: str, **totals: str) -> "ClusterQueueBuilder":
        """Add status.flavorsReservation for `flavor` with `total` per resource (as Kueue reports it), for synthetic
        objects: kube-apiserver drops a ClusterQueue's status on create."""
        reservations = self._obj.setdefault("status", {}).setdefault("flavorsReservation", [])
        resources = [{"name": r, "total": t, "borrowed": "0"} for r, t in totals.items()]
        reservations.append({"name": flavor, "resources": resources})
        return self


def cluster_queue(name: str) -> ClusterQueueBuilder:
    """A ClusterQueue `name` for every namespace (spec.namespaceSelector {}), no quota until a `flavor_quota` or
    `flavor` step."""
    return ClusterQueueBuilder({
        "apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}},
    })


def cluster_queues(*names: str, flavor: str, cohort: str | None = None, weights: dict[str, str] | None = None,
                   **quotas: str | Quota) -> list[ClusterQueueBuilder]:
    """Several ClusterQueues of one shape: each with `flavor` and the same `quotas` (`cpu="2"`,
    `cpu=quota("2", borrow="1")`), in `cohort` when given, and a fair-sharing weight per name from `weights`
    ({"cq-a": "2"}). Returns the builders in `names` order, to refine further (`.preemption(...)`).
    Raises ValueError when `weights` names a ClusterQueue not in `names`."""
    unknown = sorted(set(weights or {}) - set(names))
    if unknown:
        raise ValueError(f"weights names {', '.join(unknown)}, not among the ClusterQueues {', '.join(names)}")
    out = []
    for n in names:
        b = cluster_queue(n).flavor(flavor, **quotas)
        if cohort:
            b.cohort(cohort)
        if weights and n in weights:
            b.fair_sharing(weights[n])
        out.append(b)
    return out


class CohortBuilder(_QuotaHolder):
    def parent(self, name: str) -> "CohortBuilder":
        """spec.parentName: a hierarchical cohort."""
        self._obj["spec"]["parentName"] = name
        return self


def cohort(name: str) -> CohortBuilder:
    """A Cohort `name` (kueue.x-k8s.io/v1beta2) with an empty spec: quotas with `flavor`, a parent with `parent`."""
    return CohortBuilder({"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": name}, "spec": {}})


class WorkloadBuilder(_Builder):
    """A plain Workload (no Job): pod sets, and for synthetic objects the status Kueue would write."""

    def queue(self, local_queue: str) -> "WorkloadBuilder":
        """spec.queueName: the LocalQueue it is submitted to (default lq)."""
        self._obj["spec"]["queueName"] = local_queue
        return self

    def priority_class(self, name: str) -> "WorkloadBuilder":
        """A WorkloadPriorityClass (spec.priorityClassSource kueue.x-k8s.io/workloadpriorityclass)."""
        self._obj["spec"].update(priorityClassName=name, priorityClassSource="kueue.x-k8s.io/workloadpriorityclass")
        return self

    def pod_set(self, name: str, count: int, **requests: str) -> "WorkloadBuilder":
        """A pod set of `count` pods, each requesting `requests` (`cpu="1"`)."""
        container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10"}
        if requests:
            container["resources"] = {"requests": dict(requests)}
        self._obj["spec"]["podSets"].append({"name": name, "count": count,
                                             "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}})
        return self

    def reserved_in(self, cq: str) -> "WorkloadBuilder":
        """status.admission for `cq` and QuotaReserved=True, as Kueue's admission write sets them (status: see
        `condition`)."""
        self._obj.setdefault("status", {})["admission"] = {"clusterQueue": cq, "podSetAssignments": []}
        return self.condition("QuotaReserved", "True", "QuotaReserved")

    def assignment(self, flavor: str, *, pod_set: str = "main", count: int | None = 1, **usage: str) -> "WorkloadBuilder":
        """A podSetAssignment giving every resource in `usage` (pod-set totals) the flavor `flavor` (status: see
        `condition`)."""
        psa: dict[str, Any] = {"name": pod_set, "flavors": {resource: flavor for resource in usage},
                               "resourceUsage": dict(usage)}
        if count is not None:
            psa["count"] = count
        self._obj["status"]["admission"]["podSetAssignments"].append(psa)
        if not any(ps["name"] == pod_set for ps in self._obj["spec"]["podSets"]):
            self.pod_set(pod_set, count or 1)
        return self

    def condition(self, type_: str, status: str, reason: str = "Test") -> "WorkloadBuilder":
        """status.conditions entry `type_` (replacing one of that type), for synthetic objects: kube-apiserver
        drops a Workload's status on create (a plan sets it with a `patch` step, `subresource: status`).
        The same holds for `reserved_in`, `assignment`, `finished` and `reclaimable`."""
        st = self._obj.setdefault("status", {})
        conditions = [c for c in st.setdefault("conditions", []) if c["type"] != type_]
        conditions.append({"type": type_, "status": status, "reason": reason, "message": ""})
        st["conditions"] = conditions
        return self

    def finished(self) -> "WorkloadBuilder":
        """Condition Finished=True, reason Succeeded (status: see `condition`)."""
        return self.condition("Finished", "True", "Succeeded")

    def inactive(self) -> "WorkloadBuilder":
        """spec.active=false: a deactivated Workload."""
        self._obj["spec"]["active"] = False
        return self

    def active(self, flag: bool = True) -> "WorkloadBuilder":
        """spec.active (a Workload is active unless it says false)."""
        self._obj["spec"]["active"] = bool(flag)
        return self

    def priority(self, value: int) -> "WorkloadBuilder":
        """spec.priority: the priority value itself (what a WorkloadPriorityClass would give it)."""
        self._obj["spec"]["priority"] = int(value)
        return self

    def reclaimable(self, pod_set: str, count: int) -> "WorkloadBuilder":
        """status.reclaimablePods entry: `count` pods of `pod_set` done (status: see `condition`)."""
        self._obj.setdefault("status", {}).setdefault("reclaimablePods", []).append({"name": pod_set, "count": count})
        return self


def workload(name: str, namespace: str = "ns") -> WorkloadBuilder:
    """A plain Workload `name` (no Job) in LocalQueue lq with no pod sets until a `pod_set` step."""
    return WorkloadBuilder({"apiVersion": KUEUE_API, "kind": "Workload", "metadata": {"name": name, "namespace": namespace},
                            "spec": {"queueName": "lq", "podSets": []}, "status": {"conditions": []}})


class LocalQueueBuilder(_Builder):
    def fair_sharing(self, weight: str) -> "LocalQueueBuilder":
        """spec.fairSharing.weight (a quantity string): the LocalQueue's weight in admission fair sharing."""
        self._obj["spec"]["fairSharing"] = {"weight": weight}
        return self

    def stop_policy(self, policy: str = "Hold") -> "LocalQueueBuilder":
        """spec.stopPolicy: Hold or HoldAndDrain."""
        self._obj["spec"]["stopPolicy"] = policy
        return self


def local_queue(name: str, namespace: str, cluster_queue: str) -> LocalQueueBuilder:
    """A LocalQueue `name` in `namespace` pointing at ClusterQueue `cluster_queue`."""
    return LocalQueueBuilder({
        "apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    })


def workload_priority_class(name: str, value: int) -> _Builder:
    """A WorkloadPriorityClass `name` with priority `value` (a Job or Workload names it with `priority_class`)."""
    return _Builder({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                     "value": value, "description": f"kueue-harness priority {value}"})


def barrier(namespace: str, name: str = "barrier") -> list[_Builder]:
    """The sacrificial objects of a scheduler barrier (docs/fault-plans.md, "A scheduler barrier"), in
    creation order: ResourceFlavor and ClusterQueue `<namespace>-<name>` (nominal quota cpu 0, no cohort),
    LocalQueue `<name>` and Workload `<name>` (one pod, cpu 1) in `namespace`. Kueue's scheduler can never
    fit that Workload, so the cycle that first considers it ends with a synchronous write of it
    (QuotaReserved=False, reason Pending; a loose `kueue-admission` apply, classified `pending`:
    pkg/scheduler/scheduler.go:853-866 at v0.17.0). A plan holds that write (`match: {write: pending,
    name: <name>}`), and the scheduler waits inside that cycle until the hold ends."""
    cq = f"{namespace}-{name}"
    return [resource_flavor(cq),
            cluster_queue(cq).flavor_quota(cq, cpu="0"),
            local_queue(name, namespace, cq),
            workload(name, namespace).queue(name).pod_set("main", 1, cpu="1")]


class JobBuilder(_Builder):
    def queue(self, local_queue: str) -> "JobBuilder":
        """Label kueue.x-k8s.io/queue-name: the LocalQueue Kueue submits its Workload to."""
        self._obj["metadata"]["labels"][QUEUE_LABEL] = local_queue
        return self

    def priority_class(self, name: str) -> "JobBuilder":
        """Label kueue.x-k8s.io/priority-class: a WorkloadPriorityClass for its Workload."""
        self._obj["metadata"]["labels"][PRIORITY_CLASS_LABEL] = name
        return self

    def requests(self, **res: str) -> "JobBuilder":
        """Resource requests of its one container, per resource (`cpu="1"`, `memory="1Gi"`)."""
        self._obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].update(res)
        return self

    def parallelism(self, n: int) -> "JobBuilder":
        """spec.parallelism and spec.completions `n` (default 1): `n` pods, each with the requests."""
        self._obj["spec"]["parallelism"] = n
        self._obj["spec"]["completions"] = n
        return self

    def completions(self, n: int) -> "JobBuilder":
        """spec.completions `n` alone, after `parallelism`: more completions than Pods at a time, so a later
        patch of spec.parallelism (mutable; completions is not, for a NonIndexed Job) adds Pods."""
        self._obj["spec"]["completions"] = n
        return self


def job(name: str, namespace: str) -> JobBuilder:
    """A batch/v1 Job created suspended. Its Pods stay Pending unless the case asks for Pods that run
    (`@pytest.mark.pods`: kube-scheduler binds them to kwok's Nodes, harness/env/pods.py)."""
    return JobBuilder({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {
            "suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {}}}],
            }},
        },
    })


#: The Node annotation kwok's controller selects the Nodes it manages by (harness/env/pods.py runs kwok with
#: --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake, kwok's own convention).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: A Pod annotated with this ("Succeeded" or "Failed") is ended in that phase by kwok (harness/env/pods.py).
FINISH_ANNOTATION = "kueue-harness.x-k8s.io/finish"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Topology levels by short name, for NodeBuilder.topology(): the well-known zone label and the block and
#: rack labels of Kueue's own tests (pkg/util/testing/defaults.go), which a Topology's levels can name.
TOPOLOGY_LABELS = {"zone": "topology.kubernetes.io/zone", "block": "cloud.provider.com/topology-block",
                   "rack": "cloud.provider.com/topology-rack", "hostname": HOSTNAME_LABEL}


class NodeBuilder(_Builder):
    """A fake Node that kwok manages (annotated KWOK_NODE_ANNOTATION): Ready once kwok sees it; the Pods
    kube-scheduler binds to it turn Running and Ready. Capacity and allocatable are set at creation (a Node
    may be created with its status; kwok's node-initialize Stage keeps them)."""

    def capacity(self, resources: dict[str, str] | None = None, **res: str) -> "NodeBuilder":
        """status.capacity and status.allocatable, per resource (`cpu="8"`, `memory="32Gi"`, `pods="110"`;
        extended resources in `resources`: {"nvidia.com/gpu": "4"}). Replaces what was set for them."""
        both = {**(resources or {}), **res}
        for key in ("capacity", "allocatable"):
            self._obj["status"][key].update(both)
        return self

    def allocatable(self, resources: dict[str, str] | None = None, **res: str) -> "NodeBuilder":
        """status.allocatable only (less than capacity: what the scheduler and Kueue's TAS count)."""
        self._obj["status"]["allocatable"].update({**(resources or {}), **res})
        return self

    def labels(self, labels: dict[str, str]) -> "NodeBuilder":
        """Add metadata.labels (e.g. the node labels a ResourceFlavor's spec.nodeLabels selects)."""
        self._obj["metadata"].setdefault("labels", {}).update(labels)
        return self

    def topology(self, **levels: str) -> "NodeBuilder":
        """Topology labels by short name (TOPOLOGY_LABELS): `.topology(zone="z1", block="b1", rack="r1")`.
        kubernetes.io/hostname is the Node's name already. Raises ValueError for an unknown level name (use
        .labels() for any other label)."""
        unknown = sorted(set(levels) - set(TOPOLOGY_LABELS))
        if unknown:
            raise ValueError(f"unknown topology level(s) {', '.join(unknown)}: use {', '.join(TOPOLOGY_LABELS)}, "
                             "or .labels({...}) for another label")
        return self.labels({TOPOLOGY_LABELS[k]: v for k, v in levels.items()})

    def taint(self, key: str, value: str | None = None, effect: str = "NoSchedule") -> "NodeBuilder":
        """Add spec.taints entry (`effect`: NoSchedule, PreferNoSchedule or NoExecute)."""
        t: dict[str, str] = {"key": key, "effect": effect}
        if value is not None:
            t["value"] = value
        self._obj["spec"].setdefault("taints", []).append(t)
        return self

    def unschedulable(self) -> "NodeBuilder":
        """spec.unschedulable=true (cordoned)."""
        self._obj["spec"]["unschedulable"] = True
        return self

    def unmanaged(self) -> "NodeBuilder":
        """Without kwok's annotation: no controller touches it, so it never turns Ready and Pods bound to it
        stay Pending (a node whose kubelet is gone)."""
        self._obj["metadata"]["annotations"].pop(KWOK_NODE_ANNOTATION[0], None)
        return self

    def renamed(self, name: str) -> "NodeBuilder":
        """A copy named `name` (its hostname label too), e.g. with a case's prefix."""
        b = NodeBuilder(self.obj())
        b._obj["metadata"]["name"] = name
        b._obj["metadata"]["labels"][HOSTNAME_LABEL] = name
        return b


def node(name: str, cpu: str = "8", memory: str = "32Gi", pods: str = "110") -> NodeBuilder:
    """A kwok-managed Node `name` with capacity = allocatable `cpu`, `memory`, `pods` and the label
    kubernetes.io/hostname=`name` (as a kubelet sets it)."""
    res = {"cpu": cpu, "memory": memory, "pods": pods}
    return NodeBuilder({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name},
                     "annotations": {KWOK_NODE_ANNOTATION[0]: KWOK_NODE_ANNOTATION[1]}},
        "spec": {},
        "status": {"capacity": dict(res), "allocatable": dict(res)},
    })
