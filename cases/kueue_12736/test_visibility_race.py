"""kubernetes-sigs/kueue#12736: a Visibility API read races the sticky Workload's write; needs --kueue-race."""
import pytest

from harness import objects as o
from harness.checkers.bounds import STEP
from harness.common.errors import HarnessError
from harness.scenarios import admitted_jobs, cohort_queues, read_pending_workloads, submit_job

pytestmark = [pytest.mark.kueue_config(feature_gates={"VisibilityOnDemand": True}),
              pytest.mark.checkers("no_data_race", "plan_happened")]


def _run(case, plan, step):
    q = cohort_queues(case, {"a": {"cpu": o.quota("1")}}, withinClusterQueue="LowerPriority")  # BestEffortFIFO
    admitted_jobs(case, q, {"victim": {"queue": "a", "priority": "low"}})
    case.load_plan(plan)
    [submit_job(case, q, n, "high", queue="a") for n in ("p", "p2")]  # two pending: the sort reads the sticky one
    case.wait_plan([step], 3 * STEP)
    return read_pending_workloads(case, q.cluster_queues["a"], 60, "Preemption already issued, waiting for observation")


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#12736")
def test_visibility_race(case):  # judged only when the reads overlapped sticky requeues (the racing write)
    listed, sticky = _run(case, "sticky-preemption", "sticky")
    if listed < 2 or sticky < 2:
        raise HarnessError(f"the racing paths did not both run: {listed} pending listed, {sticky} sticky requeues")


def test_visibility_race_control(case):  # the same Jobs and reads, no fault: the preemption completes
    _run(case, "sticky-preemption-control", "p-admitted")
