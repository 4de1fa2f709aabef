"""kubernetes-sigs/kueue#1789 (docs/corpus.md): j1 deleted with propagation Orphan leaves its Workload without an
owner; affected Kueue keeps its quota for ever, so j2, which needs it, never gets quota."""

import pytest

from harness.checkers.bounds import FITS_BOUND, STEP
from harness.scenarios import admitted_jobs, preemption_queues, submit_job

CHECKS = dict(liveness={"jobs": ["j2"], "preemptors": False, "bound": FITS_BOUND})


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#1789")
@pytest.mark.checkers(**CHECKS)
def test_orphaned_workload(case):
    admitted_jobs(case, q := preemption_queues(case), {"j1": {"priority": q.low}})
    case.load_plan("orphan-delete")
    case.wait_plan(["j1-gone"], STEP)
    submit_job(case, q, "j2", q.low)
    case.observe()


@pytest.mark.checkers(**CHECKS)
def test_orphaned_workload_control(case):  # the same, j1 deleted in the background (its Workload goes too)
    admitted_jobs(case, q := preemption_queues(case), {"j1": {"priority": q.low}})
    case.load_plan("orphan-delete-control")
    case.wait_plan(["j1-gone"], STEP)
    submit_job(case, q, "j2", q.low)
    case.observe()
