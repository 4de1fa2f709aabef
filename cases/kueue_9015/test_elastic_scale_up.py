"""kubernetes-sigs/kueue#9015 (docs/corpus.md): elastic Job e scales up from 1 Pod to 2 while every admission of
its new Workload slice fails. Affected Kueue finished the old slice before that admission, so e's running Pod
holds no quota for as long as the admission fails; fixed Kueue finishes it only once the new one is admitted."""

import pytest

from harness.checkers.bounds import STEP

# Kueue's own window between finishing the old slice and admitting the new one (the control, no fault) is
# 0.1-0.3 s; the fault keeps the case's open until the verdict.
CHECKS = dict(running_pods_within_quota={"persist": 2.5})


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#9015")
@pytest.mark.pods
@pytest.mark.checkers(**CHECKS)
def test_elastic_scale_up(case):
    case.load_plan("scale-up")
    case.wait_plan(["failed-twice"], 2 * STEP)
    case.observe()


@pytest.mark.pods
@pytest.mark.checkers(**CHECKS)
def test_elastic_scale_up_control(case):  # the same scale-up without the fault: the new slice is admitted
    case.load_plan("scale-up-control")
    case.wait_plan(["e-scaled"], 2 * STEP)
    case.observe()
