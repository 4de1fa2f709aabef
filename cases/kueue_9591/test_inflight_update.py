"""kubernetes-sigs/kueue#9591 (docs/corpus.md): a Workload updated while in flight is tried again at once."""

import pytest

from harness.checkers.bounds import STEP
from harness.scenarios import cohort_queues

# The scheduler's requeue of a finds a already queued (added=false): the update pushed it onto the heap.
CHECKS = dict(log_count={"msg": "^Workload re-queued$", "fields": {"added": False}, "objects": ["a"], "max": 0})


def _run(case, plan):  # two ClusterQueues in one cohort; the plan makes the LimitRange and both Jobs
    cohort_queues(case, {"a": {"cpu": "0"}, "b": {"cpu": "1"}})
    case.load_plan(plan)
    case.wait_plan(["b-released"], 3 * STEP)
    case.observe()


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#9591")
@pytest.mark.checkers("plan_happened", **CHECKS)
def test_inflight_update(case):
    _run(case, "inflight-update")


@pytest.mark.checkers(**CHECKS)
def test_inflight_update_control(case):  # the same Jobs and steps, b's Pending write not held
    _run(case, "inflight-update-control")
