"""kubernetes-sigs/kueue#11480 scenario 2: job1's admission PATCH is held until job1 was evicted, its quota
released and job2 admitted; then it lands as a loose, forced server-side apply and re-admits job1 with
no quota check. Two 1-cpu Workloads then hold quota in a 1-cpu ClusterQueue.

Invariant (safety): no ClusterQueue holds more than its nominal quota (harness/checks.py), checked
continuously by a watch during the run and on the final state.
"""

from __future__ import annotations

import pytest

from harness import objects as o
from harness import seed
from harness.checks import check_quota
from harness.monitor import InvariantMonitor
from harness.pytest_plugin import InvariantViolation
from harness.seed import FaultNotApplied
from harness.waiting import WaitTimeout, wait_for

STEP = 30.0
#: After the late admission is answered, how long the monitor keeps watching for a violation (seconds).
#: Kueue reacts to the re-admission (cache update, unsuspend) within about a second.
SETTLE = 5.0
#: Seconds the oversubscription must last, with both Jobs unsuspended, to count as lasting.
PERSIST = 3.0


def _quota_findings(case, queues):
    wls = case.cluster.list("Workload", case.ns)
    return check_quota(wls, [case.cluster.get("ClusterQueue", queues.cluster_queue)])


@pytest.mark.kueue_bug("kubernetes-sigs/kueue#11480-oversubscription")
def test_quota_oversubscription(case):
    q = seed.setup_queues(case)
    proxy, ns = case.proxy, case.ns
    with InvariantMonitor(case.cluster.api, case.history.record, q.cluster_queue) as monitor:
        # cases/plans/quota-oversubscription.yaml: hold job1's admission until job1's quota release and
        # job2's admission were both answered 200, then let it through.
        rules = seed.load_seed_plan(case, "quota-oversubscription")
        wl1 = seed.submit_job(case, q, "job1", q.low)
        held = rules["admission-job1"].wait_held(STEP)
        wl2 = seed.submit_job(case, q, "job2", q.high)
        # Raises FaultNotApplied if job1's quota release or job2's admission never answered 200.
        rel = seed.wait_plan_steps(case, ["admission-job1"], 4 * STEP)["admission-job1"]
        answer = proxy.wait_answered(held.flow, STEP)
        case.record("admission_answered", status=answer["status"], resource_version=answer.get("resource_version"))
        if answer["status"] != 200:
            raise FaultNotApplied(f"job1's late admission was answered {answer['status']}, not applied")
        try:
            wait_for(lambda: _quota_findings(case, q), timeout=SETTLE,
                     what="a quota violation (the late admission re-admitting job1)")
        except WaitTimeout:
            pass
        persisted = None
        if monitor.ever_violated:
            # Let Kueue act on the re-admission (its job reconciler unsuspends job1), then watch whether the
            # oversubscription lasts: it is a finding either way, but a lasting one means both Jobs run.
            try:
                wait_for(lambda: not _quota_findings(case, q) or
                         all(seed.job_state(case, j).startswith("unsuspended") for j in ("job1", "job2")),
                         timeout=STEP, what="both Jobs to be unsuspended (or the violation to clear)")
                wait_for(lambda: not _quota_findings(case, q), timeout=PERSIST,
                         what=f"the violation to clear within {PERSIST:g}s")
                persisted = False
            except WaitTimeout:
                persisted = True
    findings = _quota_findings(case, q)
    transient = monitor.ever_violated
    if not findings and not transient:
        case.record("verdict", invariant="quota", held=True)
        return
    w1, w2 = seed.workload(case, wl1), seed.workload(case, wl2)
    case.record("verdict", invariant="quota", held=False, persisted=persisted,
                findings=[f.describe() for f in findings or transient])
    lasting = (f"still present {PERSIST:g}s after both Jobs were unsuspended" if persisted
               else "transient: it cleared before the case ended (see history.jsonl for what cleared it)")
    raise InvariantViolation(
        "quota oversubscription: " + "; ".join(f.describe() for f in (findings or transient)) + "\n"
        f"  job1 {ns}/{wl1['metadata']['name']}: {o.conditions_summary(w1)}; Job {seed.job_state(case, 'job1')}\n"
        f"  job2 {ns}/{wl2['metadata']['name']}: {o.conditions_summary(w2)}; Job {seed.job_state(case, 'job2')}\n"
        f"  the violation was {lasting}; first seen by the monitor at "
        f"{monitor.first_violation_at - case.history.started:.3f}s: {transient[0].describe() if transient else '-'}\n"
        f"  proxy (plan quota-oversubscription): held {held.label} from "
        f"{held.since - case.history.started:.3f}s until {rel['ts'] - case.history.started:.3f}s ({rel.get('why')})"
    )


def test_quota_oversubscription_control(case):
    """No fault: job2 preempts job1 and the ClusterQueue never holds more than 1 cpu."""
    q = seed.setup_queues(case)
    with InvariantMonitor(case.cluster.api, case.history.record, q.cluster_queue) as monitor:
        wl1 = seed.submit_job(case, q, "job1", q.low)
        seed.wait_workload(case, wl1, lambda w: o.is_true(w, "QuotaReserved"), STEP, "job1 admitted")
        wl2 = seed.submit_job(case, q, "job2", q.high)
        seed.wait_workload(case, wl2, lambda w: o.is_true(w, "QuotaReserved"), STEP, "job2 admitted")
        seed.wait_workload(case, wl1, lambda w: not o.is_true(w, "QuotaReserved"), STEP, "job1 released quota")
    findings = _quota_findings(case, q) or monitor.ever_violated
    # A failing control is not a reproduction: the setup, not the fault, broke (verdict "error").
    assert not findings, "control: " + "; ".join(f.describe() for f in findings)
