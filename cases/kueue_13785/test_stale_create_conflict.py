"""kubernetes-sigs/kueue PR #13785: Kueue never sees the ProvisioningRequest it created, creates it again, gets 409
and (affected) keeps "…already exists" as w1's admission check message. Judged in w1 itself, whatever Kueue logs."""

import pytest

from harness.checkers.bounds import STEP

MESSAGE = dict(kind="Workload", objects=["w1"], path="$.status.admissionChecks[*].message", matches="already exists",
               never=True)


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#13785")
@pytest.mark.checkers("plan_happened", field=MESSAGE)
def test_stale_create_conflict(case):
    case.load_plan("stale-create-conflict")
    case.wait_plan(["reveal"], 4 * STEP)
    case.observe()


@pytest.mark.checkers(field=MESSAGE)
def test_stale_create_conflict_control(case):  # the same objects and steps, no event lost
    case.load_plan("stale-create-conflict-control")
    case.wait_plan(["reveal"], 4 * STEP)
    case.observe()
