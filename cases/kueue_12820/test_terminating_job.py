"""kubernetes-sigs/kueue#12820 (docs/corpus.md, docs/findings/): j1 is deleted while a finalizer keeps it
Terminating with its Pod running; affected Kueue finishes j1's Workload at once and admits j2 into the quota j1's
running Pod still uses. No fault of the proxy: the plan only sets the scene (Kueue's own behaviour is the bug)."""

import pytest

from harness.checkers.bounds import STEP

# A window of 2 s or more: the garbage collector's deletion of a gone Job's Pods takes 1-2 s (the control).
CHECKS = dict(running_pods_within_quota={"persist": 2.5})


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#12820")
@pytest.mark.pods
@pytest.mark.checkers(**CHECKS)
def test_terminating_job(case):
    case.load_plan("terminating-job")
    case.wait_plan(["j2-admitted"], 2 * STEP)
    case.observe()


@pytest.mark.pods
@pytest.mark.checkers(**CHECKS)
def test_terminating_job_control(case):  # j1 without the finalizer: deleted at once
    case.load_plan("terminating-job-control")
    case.wait_plan(["j2-admitted"], 2 * STEP)
    case.observe()
