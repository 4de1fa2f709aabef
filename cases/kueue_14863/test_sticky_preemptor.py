"""kubernetes-sigs/kueue#14863 (docs/kueue-notes.md §12): p's eviction of v2 keeps failing, so p stays the sticky
head and s, which fits, never gets quota (liveness judges s alone). Fixed build (must pass; Kueue logs "Clearing sticky
workload"): pytest cases/kueue_14863 --kueue-version v0.17.0 --kueue-patch cases/kueue_14863/backport.patch"""

import pytest

from harness.checkers.bounds import FITS_BOUND, STEP
from harness.scenarios import admitted_jobs, cohort_queues

QUEUES = dict(quotas={"cq": {"cpu": "2"}}, priorities=dict(low=10, mid=100, high=1000), withinClusterQueue="LowerPriority")
VICTIMS = {"v1": dict(queue="cq", priority="low"), "v2": dict(queue="cq", priority="low")}
CHECKS = dict(liveness={"workloads": ["s"], "preemptors": False, "bound": FITS_BOUND})


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#14863")
@pytest.mark.kueue_log("Failed to preempt workloads", "Clearing sticky workload")
@pytest.mark.checkers("plan_happened", forced={"rules": ["evict-v2"]}, **CHECKS)
def test_sticky_preemptor(case):
    admitted_jobs(case, cohort_queues(case, **QUEUES), VICTIMS)
    case.load_plan("sticky-preemptor")
    case.wait_plan(["evict-v2", "s"], STEP)
    case.observe()


@pytest.mark.checkers(**CHECKS)
def test_sticky_preemptor_control(case):  # the same objects and steps (plans/…-control.yaml), no fault
    admitted_jobs(case, cohort_queues(case, **QUEUES), VICTIMS)
    case.load_plan("sticky-preemptor-control")
    case.wait_plan(["s"], STEP)
    case.observe()
