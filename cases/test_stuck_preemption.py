"""kubernetes-sigs/kueue#11480 scenario 1: a late admission PATCH overwrites the eviction of its own
Workload, and the preemptor waits forever ("Preemption already issued, waiting for observation").

The ordering forced through the proxy is notes/kueue-v0.17.md §11 steps 1-5, written as the fault plan
cases/plans/stuck-preemption.yaml. Invariant (liveness): once
the faults are lifted, job2 (high priority, fits after preempting job1) gets quota within LIVENESS_BOUND.
"""

from __future__ import annotations

import time

import pytest

from harness import kueue_log
from harness import objects as o
from harness import seed
from harness.pytest_plugin import InvariantViolation
from harness.seed import FaultNotApplied
from harness.waiting import WaitTimeout, wait_for

#: Seconds job2 may take to get quota after every fault is released. Without faults Kueue admits the
#: preemptor within about a second of the victim's quota release (see README, measured figures).
LIVENESS_BOUND = 15.0
STEP = 30.0  # bound for each forced step (Kueue reacting to a create or a release)


def _admitted_within(case, wl, bound: float) -> bool:
    try:
        seed.wait_workload(case, wl, lambda w: o.is_true(w, "QuotaReserved"), bound, "QuotaReserved=True")
        return True
    except WaitTimeout:
        return False


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#11480")
def test_stuck_preemption(case):
    q = seed.setup_queues(case)
    proxy, ns = case.proxy, case.ns
    # The ordering lives in cases/plans/stuck-preemption.yaml (the same file `kueue-harness up --plan`
    # loads): hold job1's admission; hold the answer to job1's eviction; release the admission once the
    # eviction is applied; hold job1's quota release until the admission was answered; release the
    # eviction's answer once Kueue's watch delivered the overwritten job1.
    rules = seed.load_seed_plan(case, "stuck-preemption")
    wl1 = seed.submit_job(case, q, "job1", q.low)
    held_adm = rules["admission-job1"].wait_held(STEP)
    wl2 = seed.submit_job(case, q, "job2", q.high)
    steps = seed.wait_plan_steps(case, ["admission-job1", "quota-release-job1", "eviction-job1"], 3 * STEP)
    released_at = steps["eviction-job1"]["ts"]
    # Did the late admission really remove Evicted? Kueue's watch shows job1 as the admission left it.
    answer = proxy.wait_answered(held_adm.flow, STEP)
    name1 = wl1["metadata"]["name"]
    seen = [e for e in proxy.case_events() if e["event"] == "watch_event" and e.get("name") == name1
            and e.get("namespace") == ns and e.get("resource_version") == answer.get("resource_version")]
    if answer["status"] != 200 or not seen or seen[0]["conditions"].get("Evicted") == "True":
        raise FaultNotApplied(
            f"the late admission did not overwrite the eviction (answer {answer['status']}, watch saw "
            f"{seen[0]['conditions'] if seen else 'nothing'} at resourceVersion {answer.get('resource_version')})"
        )

    # Verdict: does the preemptor get quota once every fault is lifted?
    if _admitted_within(case, wl2, LIVENESS_BOUND):
        case.record("verdict", invariant="liveness", held=True)
        return
    key1 = f"{ns}/{name1}"
    t0 = case.history.started
    waiting = kueue_log.count(case.env.kueue_log, kueue_log.PREEMPTION_WAITING, targetWorkload=key1)
    w1, w2 = seed.workload(case, wl1), seed.workload(case, wl2)
    case.record("verdict", invariant="liveness", held=False, preemption_waiting_lines=waiting)
    raise InvariantViolation(
        f"stuck preemption: job2's Workload got no quota within {LIVENESS_BOUND:g}s after every fault was "
        f"released ({time.time() - released_at:.1f}s ago).\n"
        f"  job1 {key1}: {o.conditions_summary(w1)}\n"
        f"  job2 {ns}/{wl2['metadata']['name']}: {o.conditions_summary(w2)}\n"
        f"  Kueue logged 'Preemption already issued, waiting for observation' for job1 {waiting} times\n"
        f"  proxy (plan stuck-preemption), seconds since the case started: held {held_adm.label} at "
        f"{held_adm.since - t0:.3f}s; "
        + "; ".join(f"{rid} released at {ev['ts'] - t0:.3f}s ({ev.get('why')})" for rid, ev in steps.items())
    )


def test_stuck_preemption_control(case):
    """The same objects and order with no fault: job1 is admitted, job2 preempts it and gets quota."""
    q = seed.setup_queues(case)
    wl1 = seed.submit_job(case, q, "job1", q.low)
    seed.wait_workload(case, wl1, lambda w: o.is_true(w, "QuotaReserved"), STEP, "job1 admitted")
    wl2 = seed.submit_job(case, q, "job2", q.high)
    start = time.time()
    # A failing control is not a reproduction: the setup, not the fault, broke (verdict "error").
    if not _admitted_within(case, wl2, LIVENESS_BOUND):
        raise AssertionError(
            f"control: without faults job2 got no quota within {LIVENESS_BOUND:g}s: "
            f"job1 {o.conditions_summary(seed.workload(case, wl1))}; job2 {o.conditions_summary(seed.workload(case, wl2))}"
        )
    case.record("verdict", invariant="liveness", held=True, seconds=round(time.time() - start, 2))
    wait_for(lambda: o.is_true(seed.workload(case, wl1), "Evicted"), timeout=STEP, what="job1 evicted")
