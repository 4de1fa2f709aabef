"""Typed set-up steps and named waits shared by every case (a scenario file declares; these act).

`preemption_queues`: one ResourceFlavor, a ClusterQueue with `cpu: 1` nominal quota and
`withinClusterQueue: LowerPriority`, a LocalQueue in the case's namespace, two WorkloadPriorityClasses
(low=100, high=1000) — the set-up of kubernetes-sigs/kueue#11480 (docs/kueue-notes.md §11). `submit_job`
creates a Job and waits for its Workload; `wait_workload` and `job_state` read them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness import objects as o
from harness.waiting import wait_for


@dataclass(frozen=True)
class SeedQueues:
    flavor: str
    cluster_queue: str
    local_queue: str
    low: str
    high: str


def preemption_queues(case, cpu: str = "1") -> SeedQueues:
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
    if getattr(case, "step_wait", None) is not None:
        # A perturbed run (harness/explore/plugin.py): the step paces the case and never fails it; it also
        # ends while the plan holds a request (Kueue acted; the plan delays the effect).
        return case.step_wait(lambda: workload(case, wl), pred, timeout, f"Workload {case.ns}/{name}: {what}")
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


#: The name the first cases used.
setup_queues = preemption_queues


def both_jobs_unsuspended(case, *jobs: str) -> bool:
    """Whether every Job in `jobs` is unsuspended now (a direct read)."""
    return all(job_state(case, j).startswith("unsuspended") for j in jobs)
