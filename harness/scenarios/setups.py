"""Typed set-up steps and named waits shared by every case (a scenario file declares; these act).

`preemption_queues`: one ResourceFlavor, a ClusterQueue with `cpu: 1` nominal quota and
`withinClusterQueue: LowerPriority`, a LocalQueue in the case's namespace, two WorkloadPriorityClasses
(low=100, high=1000) — the set-up of kubernetes-sigs/kueue#11480 (docs/kueue-notes.md §11).
`cohort_queues`: several ClusterQueues of one cohort, a LocalQueue each, priority classes — the set-up of
the cohort races (kubernetes-sigs/kueue#13662, docs/kueue-notes.md §14). `submit_job` creates a Job and
waits for its Workload; `wait_workload` and `job_state` read them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness import objects as o
from harness.common.waiting import wait_for


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


@dataclass(frozen=True)
class CohortQueues:
    """What `cohort_queues` made: `cluster_queues` and `priorities` map the names the case gave to the
    cluster-scoped names; the LocalQueues are named as the case named the ClusterQueues."""

    flavor: str
    cohort: str
    cluster_queues: dict[str, str]
    priorities: dict[str, str]


#: The priority classes of every set-up, by the names cases use (preemption_queues makes the same two).
PRIORITIES = {"low": 100, "high": 1000}


def cohort_queues(case, quotas: dict[str, dict[str, str]], priorities: dict[str, int] | None = None,
                  **preemption: Any) -> CohortQueues:
    """Create, for `case` (a CaseContext), one ResourceFlavor `<prefix>-rf`; per entry of `quotas`
    ({"cq1": {"cpu": "10", "memory": "0"}}: nominal quotas as Kubernetes quantity strings) a ClusterQueue
    `<prefix>-cq1` in cohort `<prefix>-cohort` with spec.preemption `preemption` (API field names, e.g.
    reclaimWithinCohort="Any") and a LocalQueue `cq1` in the case's namespace; a WorkloadPriorityClass
    `<prefix>-<name>` per entry of `priorities` (default PRIORITIES: low=100, high=1000). Waits (30 s) until
    every ClusterQueue is Active; raises WaitTimeout naming the one that is not."""
    p, c = case.prefix, case.cluster
    priorities = PRIORITIES if priorities is None else priorities
    q = CohortQueues(flavor=f"{p}-rf", cohort=f"{p}-cohort", cluster_queues={n: f"{p}-{n}" for n in quotas},
                     priorities={n: f"{p}-{n}" for n in priorities})
    c.create(o.resource_flavor(q.flavor))
    for short, full in q.cluster_queues.items():
        cq = o.cluster_queue(full).flavor(q.flavor, **quotas[short]).cohort(q.cohort)
        c.create(cq.preemption_policy(**preemption) if preemption else cq)
        c.create(o.local_queue(short, case.ns, full))
    for short, value in priorities.items():
        c.create(o.workload_priority_class(q.priorities[short], value))
    for full in q.cluster_queues.values():
        wait_for(lambda full=full: o.is_true(c.get("ClusterQueue", full), "Active"), timeout=30,
                 what=f"ClusterQueue {full} to be Active",
                 describe=lambda full=full: o.conditions_summary(c.get("ClusterQueue", full)))
    case.record("cohort_queues_created", cluster_queues=list(q.cluster_queues.values()), cohort=q.cohort,
                local_queues=[f"{case.ns}/{n}" for n in q.cluster_queues], quotas=quotas)
    return q


def submit_job(case, queues: SeedQueues | CohortQueues, name: str, priority: str, cpu: str = "1",
               queue: str | None = None, **resources: str) -> dict[str, Any]:
    """Create a 1-pod batch/v1 Job `name` in the case's namespace and wait for its Workload to exist.
    `priority`: a WorkloadPriorityClass name (or, with CohortQueues, a name the case gave it); `cpu` and `resources` (memory="10Gi"): the pod's requests;
    `queue`: the LocalQueue (default: the seed set-up's; required with CohortQueues).

    Returns the Workload (dict). Its key "ns/name" is added to case.workload_keys. Raises ValueError
    without a LocalQueue to use.
    """
    priority = getattr(queues, "priorities", {}).get(priority, priority)
    lq = queue or getattr(queues, "local_queue", None)
    if not lq:
        raise ValueError(f"submit_job {name}: say which LocalQueue (queue=, one of "
                         f"{', '.join(getattr(queues, 'cluster_queues', {}))})")
    job = o.job(name, case.ns).queue(lq).priority_class(priority).requests(cpu=cpu, **resources)
    case.cluster.create(job)
    case.record("job_created", job=f"{case.ns}/{name}", priority=priority, cpu=cpu, queue=lq,
                **({"requests": dict(resources)} if resources else {}))
    wl = wait_for(lambda: case.cluster.workload_for_job(case.ns, name), timeout=30,
                  what=f"Kueue to create the Workload of Job {case.ns}/{name}")
    case.workload_keys.add(f"{case.ns}/{wl['metadata']['name']}")
    return wl


def admitted_jobs(case, queues: SeedQueues | CohortQueues, jobs: dict[str, dict[str, str]],
                  timeout: float = 30.0) -> dict[str, dict[str, Any]]:
    """Submit each Job of `jobs` in order ({"job-a": {"queue": "cq2", "priority": "low", "cpu": "1"}}: the
    keyword arguments of submit_job) and wait, at most `timeout` seconds each, until Kueue reserved quota
    for its Workload before submitting the next. Returns {job: Workload}. Raises WaitTimeout."""
    out = {}
    for name, kw in jobs.items():
        wl = submit_job(case, queues, name, **kw)
        out[name] = wait_workload(case, wl, lambda w: o.is_true(w, "QuotaReserved"), timeout, f"{name} admitted")
    return out


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


def read_pending_workloads(case, cluster_queue: str, reads: int, during: str | None = None) -> tuple[int, int]:
    """Read `cluster_queue`'s pending Workloads through Kueue's Visibility API `reads` times in a row (the case's
    Kueue needs `kueue_config(feature_gates={"VisibilityOnDemand": True})`: harness/env/visibility.py), and record
    it as `observed`. Returns (the fewest Workloads one read listed, Kueue's log lines of message `during` from
    the first read to the end: what ran meanwhile). Counted reads, never a duration. Raises HarnessError when a
    read is not answered 200."""
    import time

    from harness.kueue import log as kueue_log

    since = time.time()
    listed = [len(case.env.pending_workloads(cluster_queue)) for _ in range(reads)]
    lines = kueue_log.count(case.env.kueue_log, during, since=since) if during else 0
    case.record("observed", what=f"{reads} Visibility API reads of {cluster_queue}'s pending Workloads (listed "
                                 f"{min(listed)}-{max(listed)})" + (f"; {lines} '{during}' lines meanwhile" if during else ""))
    return min(listed), lines
