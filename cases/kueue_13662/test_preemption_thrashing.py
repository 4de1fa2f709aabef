"""kubernetes-sigs/kueue#13662: preemption thrashing while evictions end apart (docs/kueue-notes.md §14)."""
import pytest

from harness.checkers.bounds import LIVENESS_BOUND
from harness.scenarios import admitted_jobs, cohort_queues, submit_job

QUEUES = dict(quotas={"cq1": {"cpu": "4"}, "cq2": {"cpu": "0"}},
              withinClusterQueue="LowerPriority", reclaimWithinCohort="Any")
VICTIMS = {"job-b": dict(queue="cq1", priority="low", cpu="3"), "job-a": dict(queue="cq2", priority="low", cpu="1")}
CHECKS = dict(bounded_evictions={"until_quota": "preemptor"}, liveness={"jobs": ["preemptor"]})
pytestmark = pytest.mark.kueue_config(fair_sharing=True, feature_gates={"PrioritizePreemptorWorkloads": "if-known"},
                                      overrides={"controller": {"groupKindConcurrency": {"Job.batch": 5}}})  # §14


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#13662")
@pytest.mark.checkers(plan_happened={"windows": ["quota-release-job-b"]}, **CHECKS)
def test_preemption_thrashing(case):
    q = cohort_queues(case, **QUEUES)
    admitted_jobs(case, q, VICTIMS)  # job-a borrows cq1's cpu
    case.load_plan("thrashing")  # job-b's eviction ends after job-a's 4th ends (fixed Kueue: a 40 s window)
    submit_job(case, q, "preemptor", "high", cpu="4", queue="cq1")
    case.observe(timeout=40 + LIVENESS_BOUND + 1)  # affected: decided at job-a's 4th eviction


@pytest.mark.checkers(**CHECKS)
def test_preemption_thrashing_control(case):  # the same objects and order, no fault
    q = cohort_queues(case, **QUEUES)
    admitted_jobs(case, q, VICTIMS)
    submit_job(case, q, "preemptor", "high", cpu="4", queue="cq1")
    case.observe()
