"""kubernetes-sigs/kueue#10181 (docs/corpus.md): after a stale preemption expectation, p2 never preempts the victim."""

import pytest

from harness import objects as o
from harness.checkers.bounds import STEP
from harness.scenarios import admitted_jobs, cohort_queues, submit_job

CHECKS = dict(liveness={"jobs": ["p2"], "preemptors": False})  # p2 preempts the re-admitted victim, gets quota


def _run(case, plan):  # top: e1, which a cycle takes before p; borrowingLimit 0: x never takes a's quota
    q = cohort_queues(case, dict.fromkeys("ac", {"cpu": o.quota("1", borrow="0")}),
                      {"low": 100, "high": 1000, "top": 2000}, withinClusterQueue="LowerPriority")
    admitted_jobs(case, q, {"victim": {"queue": "a", "priority": "low"}, "x": {"queue": "c", "priority": "low"}})
    case.load_plan(plan)  # before p exists: the victim's next watch event is its eviction
    submit_job(case, q, "p", "high", queue="a")
    case.wait_plan(["p2"], 3 * STEP)
    case.observe()


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#10181")
@pytest.mark.checkers("plan_happened", **CHECKS)
def test_stale_expectation(case):
    _run(case, "stale-expectation")


@pytest.mark.checkers(**CHECKS)
def test_stale_expectation_control(case):  # the same Jobs and steps, no fault
    _run(case, "stale-expectation-control")
