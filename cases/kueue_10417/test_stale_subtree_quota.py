"""kubernetes-sigs/kueue#10417 (docs/corpus.md): a child Cohort deleted while a ClusterQueue still names it; affected
Kueue keeps its quota in the parent's subtree quota, so another ClusterQueue of the tree borrows quota that is gone."""

import pytest

from harness.checkers.bounds import STEP

# Over the real tree (Cohort objects, parents, own quotas): root's subtree is 10 cpu once right is gone.
CHECKS = dict(quota={})


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#10417")
@pytest.mark.checkers(**CHECKS)
def test_stale_subtree_quota(case):
    with case.monitor(case.prefix):
        case.load_plan("stale-subtree-quota")
        case.wait_plan(["w2-decided"], 2 * STEP)
        case.observe()


@pytest.mark.checkers(**CHECKS)
def test_stale_subtree_quota_control(case):  # right not deleted: root's 22 cpu lets a borrow 8 for w2
    with case.monitor(case.prefix):
        case.load_plan("stale-subtree-quota-control")
        case.wait_plan(["w2-decided"], 2 * STEP)
        case.observe()
