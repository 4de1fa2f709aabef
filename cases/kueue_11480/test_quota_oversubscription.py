"""kubernetes-sigs/kueue#11480 scenario 2: job1's admission PATCH is held until job1 was evicted, its quota
released and job2 admitted; then it lands as a loose, forced server-side apply and re-admits job1 with no
quota check. Two 1-cpu Workloads then hold quota in a 1-cpu ClusterQueue.

The ordering is the plan plans/quota-oversubscription.yaml; the verdict is the quota checker's (no
ClusterQueue over its quota, watched continuously by the invariant monitor and on the objects judged),
with the assumptions that the hold ended by its triggers and the late admission landed.
"""

import pytest

from harness import objects as o
from harness.checkers.bounds import PERSIST, SETTLE, STEP
from harness.common.waiting import WaitTimeout, wait_for
from harness.scenarios import both_jobs_unsuspended, preemption_queues, submit_job, wait_workload


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#11480-oversubscription")
@pytest.mark.checkers("quota", "reservation", forced={"rules": ["admission-job1"]},
                      write_landed={"rule": "admission-job1"})
def test_quota_oversubscription(case):
    q = preemption_queues(case)
    with case.monitor(q.cluster_queue) as monitor:
        plan = case.load_plan("quota-oversubscription")
        wl1 = submit_job(case, q, "job1", q.low)
        held = plan["admission-job1"].wait_held(STEP)
        submit_job(case, q, "job2", q.high)
        case.wait_plan(["admission-job1"], 4 * STEP)
        case.proxy.wait_answered(held.flow, STEP)
        case.observe(timeout=SETTLE)
        if monitor.ever_violated:
            # How long it lasts is part of the finding: let Kueue act on the re-admission (its job
            # reconciler unsuspends job1), then see whether the violation outlives PERSIST seconds.
            try:
                wait_for(lambda: not monitor.open_quota or both_jobs_unsuspended(case, "job1", "job2"),
                         timeout=STEP, what="both Jobs to be unsuspended (or the violation to clear)")
                wait_for(lambda: not monitor.open_quota, timeout=PERSIST, what=f"the violation to clear within {PERSIST:g}s")
                case.record("oversubscription_lasted", persisted=False)
            except WaitTimeout:
                case.record("oversubscription_lasted", persisted=True, seconds=PERSIST,
                            job1=o.conditions_summary(case.cluster.get("Workload", wl1["metadata"]["name"], case.ns)))


@pytest.mark.checkers("quota", "reservation")
def test_quota_oversubscription_control(case):
    """No fault: job2 preempts job1 and the ClusterQueue never holds more than 1 cpu."""
    q = preemption_queues(case)
    with case.monitor(q.cluster_queue):
        wl1 = submit_job(case, q, "job1", q.low)
        wait_workload(case, wl1, lambda w: o.is_true(w, "QuotaReserved"), STEP, "job1 admitted")
        wl2 = submit_job(case, q, "job2", q.high)
        wait_workload(case, wl2, lambda w: o.is_true(w, "QuotaReserved"), STEP, "job2 admitted")
        wait_workload(case, wl1, lambda w: not o.is_true(w, "QuotaReserved"), STEP, "job1 released quota")
