"""kubernetes-sigs/kueue#9889 (docs/corpus.md): a limits-only TAS Workload behind a ProvisioningRequest check."""

import pytest

from harness import objects as o
from harness.checkers.bounds import STEP

NODES = [o.node(f"x{i}", cpu="1").topology(block="b1", rack="r1").labels({"kueue-9889": "tas"}) for i in (1, 2)]
REQUEUED = "Workload re-queued for second pass"  # after "Workload no longer fits after processing another workload"
CHECKS = dict(log_count={"msg": f"^{REQUEUED}$", "objects": ["w1"], "max": 2, "until_admitted": True})


def _run(case, plan):  # the plan: queues, check, w1, Provisioned=True; then a 3rd re-queue or w1 admitted
    case.load_plan(plan)
    case.wait_plan(["provisioned"], 4 * STEP)
    case.observe(timeout=STEP)

@pytest.mark.kueue_bug("kubernetes-sigs/kueue#9889")
@pytest.mark.kueue_log(REQUEUED)
@pytest.mark.pods(nodes=NODES)
@pytest.mark.checkers(**CHECKS)
def test_limits_only(case):
    _run(case, "limits-only-second-pass")

@pytest.mark.kueue_log(REQUEUED)
@pytest.mark.pods(nodes=NODES)
@pytest.mark.checkers(**CHECKS)
def test_limits_only_control(case):  # w1 requests what it limits
    _run(case, "limits-only-second-pass-control")
