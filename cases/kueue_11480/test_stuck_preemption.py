"""kubernetes-sigs/kueue#11480 scenario 1: a late admission PATCH overwrites the eviction of its own
Workload, and the preemptor waits forever ("Preemption already issued, waiting for observation").

The ordering is the plan plans/stuck-preemption.yaml; the verdict is the checkers': liveness (job2
gets quota within the bound once every fault is lifted, decided early when conclusively stuck), with the
assumptions that the plan's holds ended by their triggers and the late admission removed Evicted.
"""

import pytest

from harness import objects as o
from harness.checkers.bounds import STEP
from harness.scenarios import preemption_queues, submit_job, wait_workload

FORCED = ["admission-job1", "eviction-job1"]
# Held only if Kueue releases job1's quota before the late admission landed; Kueue may not release it at all
# (its watch delivers the overwrite before its job reconciler acts: seen on kind under load).
GUARDS = ["quota-release-job1"]


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#11480")
@pytest.mark.checkers("log_flood", liveness={"jobs": ["job2"]}, forced={"rules": FORCED, "guards": GUARDS},
                      write_landed={"rule": "admission-job1", "overwrote": "Evicted"})
def test_stuck_preemption(case):
    q = preemption_queues(case)
    plan = case.load_plan("stuck-preemption")
    submit_job(case, q, "job1", q.low)
    plan["admission-job1"].wait_held(STEP)
    submit_job(case, q, "job2", q.high)
    case.wait_plan(FORCED, 3 * STEP)
    case.observe()


@pytest.mark.checkers("log_flood", liveness={"jobs": ["job2"]})
def test_stuck_preemption_control(case):
    """The same objects and order with no fault: job1 is admitted, job2 preempts it and gets quota."""
    q = preemption_queues(case)
    wl1 = submit_job(case, q, "job1", q.low)
    wait_workload(case, wl1, lambda w: o.is_true(w, "QuotaReserved"), STEP, "job1 admitted")
    submit_job(case, q, "job2", q.high)
    case.observe()
