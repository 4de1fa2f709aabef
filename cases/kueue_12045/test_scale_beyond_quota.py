"""kubernetes-sigs/kueue PR #12045: elastic Job e scales beyond its ClusterQueue's quota; affected Kueue ungates the
new Pods of the pending slice. Judged in e's Pods once Kueue is quiet: at most 2 ungated (the quota is 2 cpu)."""

import pytest

from harness.checkers.bounds import STEP

UNGATED = dict(kind="Pod", objects=["e-*"], path="$.metadata.name", matches=".", per="owner", at_most=2,
               unless='$.spec.schedulingGates[?(@.name=="kueue.x-k8s.io/elastic-job")]')
pytestmark = [pytest.mark.pods, pytest.mark.checkers(field=UNGATED, running_pods_within_quota={"persist": 2.5})]


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#12045")
def test_scale_beyond_quota(case):
    case.load_plan("scale-beyond-quota")
    case.wait_plan(["pods-made"], 4 * STEP)
    case.observe()


def test_scale_beyond_quota_control(case):  # the same Job scales to 2, which fits
    case.load_plan("scale-beyond-quota-control")
    case.wait_plan(["pods-made"], 4 * STEP)
    case.observe()
