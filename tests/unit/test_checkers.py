"""harness/checkers on synthetic histories: composition (assumptions first, then invariants), the
registry, the conclusive stuck-preemption decision, named-Workload liveness, and each assumption."""

from __future__ import annotations

import pytest

from harness.checkers import REGISTRY, Finding, Selection, compose, selection_with_defaults
from harness.checkers.assumptions import Forced, KueueNotRestartedUnasked, MonitorHealthy, NoHoldExpired, WriteLanded
from harness.checkers.bounds import STUCK_LINES
from harness.checkers.liveness import Liveness
from harness.history.names import Names
from tests.unit.test_report import CQ, NS, WL1, WL2, base, ev, kobj, log, stuck_history, workload


def names(h):
    return Names(h)


# ---- composition -------------------------------------------------------------------------------------

def test_every_checker_is_registered_with_a_kind() -> None:
    assert {"liveness", "quota", "log_flood", "reservation", "forced", "write_landed", "no_hold_expired",
            "no_unexplained_proxy_failure", "kueue_not_restarted_unasked", "monitor_healthy"} <= set(REGISTRY)
    assert {c.kind for c in REGISTRY.values()} == {"assumption", "invariant", "info"}


def test_unknown_checker_is_named() -> None:
    with pytest.raises(KeyError, match="no checker named 'nope'"):
        Selection({"nope": {}}).build()


def test_assumptions_run_first_and_void_a_reproduction() -> None:
    h = base(20.0) + [ev(5.0, "proxy", "hold_expired", flow=1, hold="h1", rule="r", label="admission job1")]
    h.sort(key=lambda e: e["ts"])
    objs = {"workloads": [workload(WL1, True), workload(WL2, False)], "clusterqueues": [CQ]}
    v = compose(Selection(selection_with_defaults({"liveness": {}})), h, objs)
    assert v.verdict == "error" and "max_hold" in v.reason
    assert v.findings[0].assumption and v.findings[-1].check == "liveness"
    # Without the expired hold the same history reproduces.
    clean = [e for e in h if e["event"] != "hold_expired"]
    assert compose(Selection(selection_with_defaults({"liveness": {}})), clean, objs).verdict == "reproduced"


def test_a_checker_that_raises_is_inconclusive_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self, history, objects, names):
        raise ValueError("broken")

    monkeypatch.setattr(Liveness, "check", boom)
    v = compose(Selection({"liveness": {}}), base(20.0), {})
    assert v.verdict == "inconclusive"
    assert v.findings == [Finding("liveness", "inconclusive", "checker liveness failed",
                                  "the checker raised ValueError: broken")]


def test_info_checkers_never_decide() -> None:
    h = base(20.0) + [ev(1.0, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=WL2,
                         resource_version="9", conditions={"QuotaReserved": "True"}, admission=True)]
    h.sort(key=lambda e: e["ts"])
    v = compose(Selection({"liveness": {}, "log_flood": {}}), h, {})
    assert v.verdict == "passed" and not v.findings[-1].bearing


# ---- liveness: conclusive before the bound ----------------------------------------------------------

def _stuck_until(t_end: float) -> list[dict]:
    h = stuck_history()
    return [e for e in h if e["ts"] - h[0]["ts"] <= t_end]


def test_stuck_preemption_is_conclusive_long_before_the_bound() -> None:
    h = _stuck_until(1.2)  # the last fault was lifted at 0.41 s; ~70 'already issued' lines since
    [f] = Liveness(bound=15).check(h, {}, names(h))
    assert f.result == "violated" and "Conclusive" in f.evidence and "no Evicted condition" in f.evidence
    assert Liveness(bound=15).decided(h, {}, names(h))


def test_too_few_waiting_lines_are_not_conclusive() -> None:
    lift = 0.42
    full = _stuck_until(1.2)
    t0 = full[0]["ts"]
    h = [e for e in full if not (e.get("msg") == "Preemption already issued, waiting for observation"
                                 and e["ts"] - t0 > lift + (STUCK_LINES - 2) * 0.01)]
    [f] = Liveness(bound=15).check(h, {}, names(h))
    assert f.result == "inconclusive"
    assert not Liveness(bound=15).decided(h, {}, names(h))


def test_a_later_eviction_write_is_not_stuck() -> None:
    """A fixed Kueue evicts the target again: that write means the preemption is moving."""
    h = _stuck_until(1.2)
    t = h[-1]["ts"]
    h.append({"ts": t + 0.001, "source": "proxy", "event": "request", "flow": 20, "method": "PATCH", "path": "/x",
              "write": {"kind": "Workload", "namespace": NS, "name": WL1, "write": "eviction"}})
    [f] = Liveness(bound=15).check(h, {}, names(h))
    assert f.result == "inconclusive"


def test_a_target_still_held_is_not_stuck() -> None:
    h = [e for e in _stuck_until(1.2) if not (e["event"] == "released" and e.get("hold") == "h2")]
    for e in h:
        if e["event"] == "held" and e.get("hold") == "h2":
            e["label"] = f"eviction {WL1}"
    [f] = Liveness(bound=15).check(h, {}, names(h))
    assert f.result != "violated" or "Conclusive" not in f.evidence


# ---- liveness of a named Workload -------------------------------------------------------------------

def _named(quota_at: float | None, end: float) -> list[dict]:
    h = [e for e in base(end) if e["source"] != "kueue"]
    h.append(ev(0.31, "proxy", "request", flow=3, method="POST", path="/x",
                write={"kind": "Workload", "namespace": NS, "name": WL2, "write": "other"}))
    if quota_at is not None:
        h.append(ev(quota_at, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=WL2,
                    resource_version="9", conditions={"QuotaReserved": "True"}, admission=True))
    return sorted(h, key=lambda e: e["ts"])


def test_named_workload_that_gets_quota_held_and_decided() -> None:
    h = _named(1.5, 2.0)
    [f] = Liveness(bound=15, jobs=["job2"]).check(h, {}, names(h))
    assert f.result == "held" and "job2" in f.evidence and "its Job was created" in f.evidence
    assert Liveness(bound=15, jobs=["job2"]).decided(h, {}, names(h))


def test_named_workload_waiting_is_undecided_then_violated() -> None:
    assert not Liveness(bound=15, jobs=["job2"]).decided(_named(None, 5.0), {}, names(_named(None, 5.0)))
    h = _named(None, 20.0)
    [f] = Liveness(bound=15, jobs=["job2"]).check(h, {}, names(h))
    assert f.result == "violated"


def test_nothing_to_wait_for_is_not_decided_early() -> None:
    """A control whose job2 has no Workload yet must keep observing, not pass vacuously."""
    h = [e for e in base(1.0) if e["source"] != "kueue"]
    assert not Liveness(jobs=["job2"]).decided(h, {}, names(h))


# ---- a Workload that fits while a preemptor's eviction keeps failing (kubernetes-sigs/kueue#14863) ------

def _sticky(quota_at: float | None, end: float, fail_times: int | None = None) -> list[dict]:
    """job2 preempts job1 (Kueue logs it) and the plan fails every later eviction of job1 (`fail_times`
    None: a rule with times: null); Workload "s" is first seen at 3 s and gets quota at `quota_at`."""
    h = base(end) + [ev(0.05, "proxy", "rule_added", rule={"id": "evict-again", "action": "fail", "times": fail_times}),
                     ev(3.0, "monitor", "workload_seen", key=f"{NS}/s", queue="lq", active=True, priority=1000)]
    h += [ev(3.0 + i * 0.5, "proxy", "failed", flow=10 + i, rule="evict-again", stage="request", status=500,
             label=f"eviction {WL1}") for i in range(int((end - 3.0) / 0.5))]
    if quota_at is not None:
        h.append(ev(quota_at, "monitor", "workload_quota_reserved", key=f"{NS}/s"))
    return sorted(h, key=lambda e: e["ts"])


def test_failures_of_a_times_null_fail_rule_are_not_fault_lifts() -> None:
    from harness.checkers.base import fault_lifts

    assert fault_lifts(_sticky(None, 10.0)) == []
    assert len(fault_lifts(_sticky(None, 10.0, fail_times=3))) == 14  # counted faults end: each failure lifts
    held = ev(2.0, "proxy", "failed", flow=5, hold="h1", rule="evict-again", why="triggers: x answered")
    assert fault_lifts(sorted(_sticky(None, 10.0) + [held], key=lambda e: e["ts"])) == [held["ts"]]


def test_liveness_of_a_named_workload_alone_while_a_preemption_keeps_failing() -> None:
    h = _sticky(None, 10.0)
    only_s = Liveness(bound=5, workloads=["s"], preemptors=False)
    [f] = only_s.check(h, {}, names(h))
    assert f.result == "violated" and "s got no quota in 7.00s" in f.summary and "first seen" in f.evidence
    assert only_s.decided(h, {}, names(h))
    # By default the preemptor job2 is judged too (and never got quota either).
    assert {f.summary.split()[0] for f in Liveness(bound=5, workloads=["s"]).check(h, {}, names(h))} == {"job2", "s"}
    h = _sticky(3.4, 10.0)
    [f] = only_s.check(h, {}, names(h))
    assert f.result == "held" and "0.40s after it was first seen" in f.evidence
    # Not seen yet (a plan step created it a moment ago): from its creationTimestamp, not the case's start.
    h = [e for e in _sticky(None, 6.0) if e["event"] != "workload_seen"]
    s_obj = {"metadata": {"name": "s", "namespace": NS, "creationTimestamp": "1970-01-12T13:46:43Z"}, "spec": {}}
    # Never seen at all: `error`, never "waited for quota from the case's start".
    [f] = only_s.check(h, {}, names(h))
    assert f.result == "error" and "named but never seen" in f.summary
    [f] = only_s.check(h, {"workloads": [s_obj]}, names(h))  # T0 + 3 s: 3 s observed
    assert f.result == "inconclusive", f


# ---- assumptions ------------------------------------------------------------------------------------

def test_forced_rules_must_end_by_their_triggers() -> None:
    h = base(20.0) + [
        ev(1, "proxy", "released", flow=1, hold="h1", rule="a", stage="request", label="x", why="triggers: b answered"),
        ev(2, "proxy", "hold_timeout", flow=2, hold="h2", rule="b", label="y", then="release"),
    ]
    h.sort(key=lambda e: e["ts"])
    assert Forced(["a"]).check(h, {}, names(h))[0].result == "held"
    [f] = Forced(["a", "b", "c"]).check(h, {}, names(h))
    assert f.result == "violated" and "b ended by hold_timeout" in f.evidence and "c never let a flow go" in f.evidence


def test_write_landed_and_overwrote() -> None:
    h = stuck_history()
    [f] = WriteLanded("admission-job1", overwrote="Evicted").check(h, {}, names(h))
    assert f.result == "held" and "264" in f.evidence
    [f] = WriteLanded("eviction-job1", overwrote="Evicted").check(h, {}, names(h))
    assert f.result == "violated" and "still with Evicted=True" in f.evidence
    [f] = WriteLanded("no-such-rule").check(h, {}, names(h))
    assert f.result == "violated"


def test_kueue_restarts_must_be_asked_for() -> None:
    def hist(starts_end: int, alive: bool = True, asked: int = 0) -> list[dict]:
        h = [ev(0, "harness", "case_started", case="c", namespace=NS, kueue={"starts": 1, "alive": True})]
        h += [ev(1, "harness", "kueue_restart", kill=True)] * asked
        h += [ev(2, "harness", "verdict", invariant="none", held=True, kueue={"starts": starts_end, "alive": alive})]
        return h

    assert NoHoldExpired().check(hist(1), {}, names(hist(1)))[0].result == "held"
    assert KueueNotRestartedUnasked().check(hist(1), {}, names(hist(1)))[0].result == "held"
    assert KueueNotRestartedUnasked().check(hist(2, asked=1), {}, names(hist(2)))[0].result == "held"
    [f] = KueueNotRestartedUnasked().check(hist(2), {}, names(hist(2)))
    assert f.result == "violated" and "without the case asking" in f.summary
    [f] = KueueNotRestartedUnasked().check(hist(1, alive=False), {}, names(hist(1)))
    assert f.summary == "Kueue exited during the case"


def test_a_broken_monitor_watch_voids_the_run() -> None:
    h = base(5.0) + [ev(1, "monitor", "watch_error", error="workloads: ApiException: 500")]
    h.sort(key=lambda e: e["ts"])
    [f] = MonitorHealthy().check(h, {}, names(h))
    assert f.result == "violated" and "500" in f.evidence
    objs = {"workloads": [], "clusterqueues": [CQ]}
    assert compose(Selection(selection_with_defaults({"quota": {}})), h, objs).verdict == "error"
    assert log  # (imported helpers stay in use)
    assert kobj(WL1)["name"] == WL1


def test_forced_process_faults_must_fire_by_their_triggers_and_succeed() -> None:
    def hist(why: str, ok: bool) -> list[dict]:
        h = base(20.0) + [ev(1, "proxy", "signalled", rule="restart", action="restart_kueue", why=why),
                          ev(2, "proxy", "signal_done", rule="restart", action="restart_kueue", ok=ok, since_signalled=1.0)]
        return sorted(h, key=lambda e: e["ts"])

    assert Forced(["restart"]).check(hist("triggers: a held", True), {}, names(base()))[0].result == "held"
    assert Forced(["restart"]).check(hist("triggers: a held", False), {}, names(base()))[0].result == "violated"
    assert Forced(["restart"]).check(hist("release.timeout 5s", True), {}, names(base()))[0].result == "violated"
    never = base(20.0)
    assert "never happened" in Forced(["restart"]).check(never, {}, names(never))[0].evidence


# ---- no vacuous verdict (issue 20) --------------------------------------------------------------------

def test_a_case_with_no_invariant_or_none_that_applied_is_error() -> None:
    h = [e for e in base(20.0) if e["source"] != "kueue"]
    v = compose(Selection(selection_with_defaults({})), h, {})
    assert v.verdict == "error" and v.reason == "no invariant applied: the case declared no invariant"
    v = compose(Selection(selection_with_defaults({"liveness": {}})), h, {})  # no preemption, nothing named
    assert v.verdict == "error" and "no invariant applied: liveness: no preemption" in v.reason
    # A body that raised its own InvariantViolation judges only assumptions: no invariant needed there.
    assert compose(Selection(selection_with_defaults({})), h, {}, require_invariant=False).verdict == "passed"


def test_liveness_of_a_job_a_plan_step_created_is_judged() -> None:
    """Job p created by a plan step (the proxy's signal_done of a create step), its Workload seen by Kueue's
    watch: judged from the step's end, not "not applicable"."""
    wl = "job-p-abcde"
    h = [e for e in base(20.0) if e["source"] != "kueue"]
    h += [ev(1.0, "proxy", "signal_done", rule="mk-p", action="create", ok=True, objects=[f"Job {NS}/p rv 42"]),
          ev(1.2, "proxy", "watch_event", flow=9, type="ADDED", namespace=NS, name=wl, resource_version="43",
             conditions={})]
    h.sort(key=lambda e: e["ts"])
    [f] = Liveness(bound=15, jobs=["p"]).check(h, {}, names(h))
    assert f.result == "violated" and "after its Job was created" in f.evidence
    got = sorted(h + [ev(2.0, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=wl,
                         resource_version="44", conditions={"QuotaReserved": "True"})], key=lambda e: e["ts"])
    [f] = Liveness(bound=15, jobs=["p"]).check(got, {}, names(got))
    assert f.result == "held" and "1.00s after its Job was created" in f.evidence


def test_liveness_of_a_named_job_never_created_or_without_workload_is_error() -> None:
    h = [e for e in base(20.0) if e["source"] != "kueue"]
    [f] = Liveness(jobs=["p"]).check(h, {}, names(h))
    assert f.result == "error" and f.summary == "Job p was named but never created"
    job = {"metadata": {"name": "p", "namespace": NS, "creationTimestamp": "1970-01-12T13:46:41Z"}}
    [f] = Liveness(jobs=["p"]).check(h, {"jobs": [job]}, names(h))
    assert f.result == "error" and f.summary == "Job p was named but no Workload of it was seen"
    v = compose(Selection({"liveness": {"jobs": ["p"]}}), h, {"jobs": [job]})
    assert v.verdict == "error" and v.reason == "liveness: Job p was named but no Workload of it was seen"


def test_quota_of_a_case_that_deleted_its_cluster_queue_is_judged_by_the_monitor() -> None:
    """cases/kueue_10759's control deletes its ClusterQueue: no ClusterQueue is left to read at the end,
    but the monitor watched it until its deletion. Without the monitor's record (or with a watch error)
    quota still cannot judge: error, never a vacuous pass."""
    quota = REGISTRY["quota"]()
    gone = ev(5, "monitor", "object_deleted", kind="ClusterQueue", key=f"{NS}-cq", finalizers=[])
    h = [*base()[:-1], gone, ev(20, "harness", "case_finished")]
    (f,) = quota.check(h, {"workloads": [], "clusterqueues": []}, names(h))
    assert f.result == "held" and "deleted during the case" in f.evidence
    h2 = [*h[:-1], ev(6, "monitor", "watch_error", error="boom"), h[-1]]
    assert quota.check(h2, {"workloads": [], "clusterqueues": []}, names(h2))[0].result == "error"
    h3 = base()
    assert quota.check(h3, {"workloads": [], "clusterqueues": []}, names(h3))[0].result == "error"


def test_a_deactivated_preemptor_is_not_expected_to_get_quota() -> None:
    """explore's 'run step deactivate-b on step b only' on kueue_10901's control: b preempted v, then the case
    deactivated it; liveness judged 'b never got quota' — Kueue admits no inactive Workload."""
    h = _stuck_until(1.2)
    wl2 = workload(WL2, False)
    wl2.setdefault("spec", {})["active"] = False
    [f] = Liveness(bound=15).check(h, {"workloads": [workload(WL1, True), wl2]}, names(h))
    assert f.result == "not applicable" and "spec.active false" in f.evidence
    [f] = Liveness(bound=15).check(h, {"workloads": [workload(WL1, True), workload(WL2, False)]}, names(h))
    assert f.result == "violated"
