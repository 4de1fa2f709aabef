"""The setup shared by the kueue#11480 seed cases (notes §11): one ResourceFlavor, a ClusterQueue with
`cpu: 1` nominal quota and `withinClusterQueue: LowerPriority`, a LocalQueue in the case's namespace, two
WorkloadPriorityClasses (low=100, high=1000), and helpers to submit 1-cpu Jobs and watch their Workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness import objects as o
from harness.errors import HarnessError
from harness.waiting import wait_for


class FaultNotApplied(HarnessError):
    """The planned fault did not happen the way the case needs (so no verdict can be drawn)."""


@dataclass(frozen=True)
class SeedQueues:
    flavor: str
    cluster_queue: str
    local_queue: str
    low: str
    high: str


def setup_queues(case, cpu: str = "1") -> SeedQueues:
    """Create the seed objects for `case` (a CaseContext) and wait until the ClusterQueue is Active."""
    p = case.prefix
    q = SeedQueues(flavor=f"{p}-rf", cluster_queue=f"{p}-cq", local_queue="lq", low=f"{p}-low", high=f"{p}-high")
    c = case.cluster
    c.create(o.resource_flavor(q.flavor))
    c.create(o.cluster_queue(q.cluster_queue).flavor_quota(q.flavor, cpu=cpu)
             .preemption(within_cluster_queue="LowerPriority"))
    c.create(o.local_queue(q.local_queue, case.ns, q.cluster_queue))
    c.create(o.workload_priority_class(q.low, 100))
    c.create(o.workload_priority_class(q.high, 1000))
    wait_for(lambda: o.is_true(c.get("ClusterQueue", q.cluster_queue), "Active"), timeout=30,
             what=f"ClusterQueue {q.cluster_queue} to be Active",
             describe=lambda: o.conditions_summary(c.get("ClusterQueue", q.cluster_queue)))
    case.record("queues_created", cluster_queue=q.cluster_queue, local_queue=f"{case.ns}/{q.local_queue}",
                nominal_cpu=cpu)
    return q


def submit_job(case, queues: SeedQueues, name: str, priority: str, cpu: str = "1") -> dict[str, Any]:
    """Create a 1-pod batch/v1 Job `name` in the case's namespace and wait for its Workload to exist.

    Returns the Workload (dict). Its key "ns/name" is added to case.workload_keys.
    """
    job = o.job(name, case.ns).queue(queues.local_queue).priority_class(priority).requests(cpu=cpu)
    case.cluster.create(job)
    case.record("job_created", job=f"{case.ns}/{name}", priority=priority, cpu=cpu)
    wl = wait_for(lambda: case.cluster.workload_for_job(case.ns, name), timeout=30,
                  what=f"Kueue to create the Workload of Job {case.ns}/{name}")
    case.workload_keys.add(f"{case.ns}/{wl['metadata']['name']}")
    return wl


def workload(case, wl: dict[str, Any]) -> dict[str, Any]:
    """Re-read a Workload directly from kube-apiserver."""
    return case.cluster.get("Workload", wl["metadata"]["name"], case.ns)


def wait_workload(case, wl: dict[str, Any], pred: Callable[[dict[str, Any]], bool], timeout: float,
                  what: str) -> dict[str, Any]:
    """Wait until `pred(workload)` holds (direct reads); returns the Workload."""
    name = wl["metadata"]["name"]
    return wait_for(lambda: (lambda w: w if pred(w) else None)(workload(case, wl)), timeout=timeout,
                    what=f"Workload {case.ns}/{name}: {what}",
                    describe=lambda: o.conditions_summary(workload(case, wl)))


def job_state(case, name: str) -> str:
    """"suspended" / "running (active=N)" for failure messages."""
    j = case.cluster.job(case.ns, name)
    spec, status = j.get("spec") or {}, j.get("status") or {}
    if spec.get("suspend"):
        return "suspended"
    return f"unsuspended (active={status.get('active', 0)})"


def load_seed_plan(case, name: str) -> dict[str, Any]:
    """Load the shipped plan cases/plans/<name>.yaml into the proxy, limited to the case's namespace.
    Returns {rule id: RuleHandle}; the plan is recorded in the case's history."""
    from harness.plans import load_plan

    plan = load_plan(name, namespace=case.ns)
    handles = case.proxy.load_plan(plan)
    case.record("plan_loaded", plan=plan.name, rules=[r.id for r in plan.rules])
    return handles


def wait_plan_steps(case, rule_ids: list[str], timeout: float) -> dict[str, dict[str, Any]]:
    """Wait until each hold rule in `rule_ids` let its flow go; return each rule's "released" event.

    Raises FaultNotApplied if a hold ended another way (its plan timeout, a fail) instead of its release
    triggers: then the forced ordering did not happen and the case has no verdict. `timeout` in seconds
    per rule.
    """
    out = {}
    for rid in rule_ids:
        ev = case.proxy.wait_event(lambda e, rid=rid: e["event"] in ("released", "hold_timeout", "failed")
                                   and e.get("rule") == rid, timeout, f"plan rule {rid} to let its flow go")
        if ev["event"] != "released" or not str(ev.get("why", "")).startswith("triggers"):
            raise FaultNotApplied(f"plan rule {rid} did not end by its triggers ({ev['event']}: {ev.get('why')}), "
                                  "so the forced ordering did not happen")
        out[rid] = ev
        case.record("plan_step", rule=rid, why=ev.get("why"), label=ev.get("label"))
    return out
