"""kubernetes-sigs/kueue#9428 (docs/corpus.md): while Kueue's watch has not delivered the victim's
eviction, affected Kueue evicts the victim again in every scheduling cycle; the victim must be evicted once."""

import pytest

from harness.scenarios import admitted_jobs, preemption_queues, submit_job

# Exactly one eviction PATCH for the victim: it was preempted (≥ 1), once (≤ 1).
CHECKS = dict(write_count={"write": "eviction", "objects": ["victim"], "min": 1, "max": 1})


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#9428")
@pytest.mark.checkers("plan_happened", **CHECKS)
def test_repeated_eviction(case):
    admitted_jobs(case, q := preemption_queues(case), {"victim": {"priority": q.low}})
    case.load_plan("repeated-eviction")  # the victim's watch events reach Kueue 2 s late
    submit_job(case, q, "preemptor", q.high)
    case.observe()


@pytest.mark.checkers(**CHECKS)
def test_repeated_eviction_control(case):  # the same Jobs and order, no fault
    admitted_jobs(case, q := preemption_queues(case), {"victim": {"priority": q.low}})
    submit_job(case, q, "preemptor", q.high)
    case.observe()
