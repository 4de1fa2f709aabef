"""kubernetes-sigs/kueue#10901 (docs/kueue-notes.md §15): b, deactivated while its cycle waits on v's eviction,
is requeued by it and retried in every cycle after (affected); v fits once released but is never admitted."""

import pytest

from harness.checkers.bounds import STEP
from harness.scenarios import admitted_jobs, preemption_queues

CHECKS = dict(pending_fits_admitted={"bound": 3})  # without the bug v is admitted ms after its quota release
LOG = ("Workload will not be queued because the workload is not active", "Attempting to schedule workload")


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#10901")
@pytest.mark.kueue_log(*LOG)
@pytest.mark.checkers("plan_happened", forced={"rules": ["evict-v"]}, **CHECKS)
def test_deactivated_in_flight(case):
    admitted_jobs(case, q := preemption_queues(case), {"v": {"priority": q.low}})
    case.load_plan("deactivated-in-flight")
    case.wait_plan(["evict-v", "v-released"], 2 * STEP)
    case.observe()


@pytest.mark.kueue_log(*LOG)
@pytest.mark.checkers(**CHECKS)
def test_deactivated_in_flight_control(case):
    """The same Jobs and deactivation, no fault: b is deactivated once admitted; v is admitted again."""
    admitted_jobs(case, q := preemption_queues(case), {"v": {"priority": q.low}})
    case.load_plan("deactivated-in-flight-control")
    case.wait_plan(["b-released"], 3 * STEP)
    case.observe()
