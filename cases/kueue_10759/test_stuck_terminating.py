"""kubernetes-sigs/kueue#10759 (docs/kueue-notes.md §13): the admission write of a Workload the scheduler
assumed fails with 404 after the Workload, its LocalQueue and its ClusterQueue were deleted; nothing then
reconciles the ClusterQueue again, and it keeps its resource-in-use finalizer (stuck Terminating)."""

import pytest

from harness.checkers.bounds import STEP

LOG = ("Workload not admitted because it was deleted", "Reconcile ClusterQueue", "Workload delete event")
# Fixed Kueue frees the ClusterQueue at the 404; 5 s also outlasts the plan's 2 s delay of wl's DELETED event.
CHECKS = dict(deletion_completes={"kinds": ["ClusterQueue"], "bound": 5})
LATE = dict(rule="wl-deleted-late", after="admission-wl", status=404)  # Kueue hears of the deletion after the 404


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#10759")
@pytest.mark.kueue_log(*LOG)
@pytest.mark.checkers(forced={"rules": ["admission-wl"]}, watch_delayed=LATE, **CHECKS)
def test_stuck_terminating(case):
    case.load_plan("stuck-terminating")
    case.wait_plan(["delete-seen", "admission-wl"], STEP)  # the last step (steps run in turn), the hold
    case.observe()


@pytest.mark.kueue_log(*LOG)
@pytest.mark.checkers(**CHECKS)
def test_stuck_terminating_control(case):
    """The same objects and steps, no fault: wl is admitted; the ClusterQueue goes once wl is deleted."""
    case.load_plan("stuck-terminating-control")
    case.wait_plan(["delete-seen"], STEP)
    case.observe()
