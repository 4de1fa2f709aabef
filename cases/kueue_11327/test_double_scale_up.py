"""kubernetes-sigs/kueue PR #11327: elastic Job j scales 1 → 2 → 3 before Kueue saw its slice 2, so slices 2 and 3
both replace slice 1. Affected Kueue keeps two active slices of j and admits both; fixed Kueue finishes one."""

import pytest

from harness.checkers.bounds import STEP

ACTIVE = dict(kind="Workload", path='$.status.conditions[?(@.type=="QuotaReserved")].status', equals="True",
              per="owner", at_most=1, unless='$.status.conditions[?(@.type=="Finished" && @.status=="True")]')
pytestmark = [pytest.mark.kueue_config(feature_gates={"ElasticJobsViaWorkloadSlices": True}),
              pytest.mark.pods, pytest.mark.checkers(field=ACTIVE)]


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#11327")
def test_double_scale_up(case):
    case.load_plan("elastic-job")
    case.wait_plan(["j-runs"], 4 * STEP)
    case.load_plan("double-scale-up")
    case.wait_plan(["reveal"], 4 * STEP)
    case.observe()


def test_double_scale_up_control(case):  # the same scale-ups, each once Kueue saw the slice before
    case.load_plan("elastic-job")
    case.wait_plan(["j-runs"], 4 * STEP)
    case.load_plan("double-scale-up-control")
    case.wait_plan(["reveal"], 4 * STEP)
    case.observe()
