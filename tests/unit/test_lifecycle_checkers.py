"""The checkers beyond #11480 on synthetic histories (shapes as tests/unit/test_checkers.py): liveness of a
named plain Workload, bounded evictions, deletion completes, running Pods within quota, inactive Workloads
never scheduled; and the monitor's lifecycle facts they read (harness/checkers/model/lifecycle.py)."""

from __future__ import annotations

import pytest

from harness import objects as o
from harness.checkers import REGISTRY, Selection, compose, selection_with_defaults
from harness.checkers.deletion import DeletionCompletes
from harness.checkers.evictions import BoundedEvictions
from harness.checkers.inactive import InactiveNeverScheduled
from harness.checkers.liveness import Liveness
from harness.checkers.model import lifecycle
from harness.checkers.pods_quota import RunningPodsWithinQuota
from harness.history.names import Names
from tests.unit.test_report import NS, T0, ev

KEY = f"{NS}/small"


def start(end: float = 30.0) -> list[dict]:
    """A case that started at 0 and reached its verdict at `end` (seen up to then)."""
    return [ev(0, "harness", "case_started", case="cases/t.py::t", namespace=NS),
            ev(end, "harness", "verdict", invariant="x", held=True, verdict="passed", reason="",
               seen={"harness": 1e6 + end, "monitor": 1e6 + end, "proxy": 1e6 + end})]


def judge(checker, h, objs=None):
    h = sorted(h, key=lambda e: e["ts"])
    return checker.check(h, objs or {}, Names(h))


def results(found):
    return [f.result for f in found]


def test_the_new_checkers_are_registered_and_need_the_monitor():
    for name in ("bounded_evictions", "deletion_completes", "running_pods_within_quota", "inactive_never_scheduled"):
        assert REGISTRY[name].kind == "invariant" and REGISTRY[name]().needs_monitor
    assert Liveness(workloads=["small"]).needs_monitor and not Liveness(jobs=["job2"]).needs_monitor


# ---- lifecycle facts ---------------------------------------------------------------------------------

def wl(rv: str, *, active=True, reserved=False, evicted=False, deleting=False, stats=None) -> dict:
    b = o.workload("small", NS)
    if not active:
        b.inactive()
    if reserved:
        b.reserved_in("cq")
    if evicted:
        b.condition("Evicted", "True", "Preempted")
    obj = b.obj()
    obj["metadata"]["resourceVersion"] = rv
    if deleting:
        obj["metadata"].update(deletionTimestamp="2026-11-30T00:00:00Z", finalizers=["kueue.x-k8s.io/resource-in-use"])
    if stats is not None:
        obj["status"]["schedulingStats"] = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": stats}]}
    return obj


def test_lifecycle_events_of_a_workload():
    first = lifecycle.lifecycle_events("Workload", "ADDED", wl("1", active=False), None)
    assert [e for e, _ in first] == ["workload_seen", "workload_active_changed"]
    assert first[1][1] == {"key": KEY, "active": False, "resource_version": "1"}
    got = lifecycle.lifecycle_events("Workload", "MODIFIED", wl("2", reserved=True), wl("1", active=False))
    assert [e for e, _ in got] == ["workload_active_changed", "workload_quota_reserved"]
    assert got[1][1]["cluster_queue"] == "cq" and got[1][1]["active"] is True
    ev_ = lifecycle.lifecycle_events("Workload", "MODIFIED", wl("3", evicted=True, stats=2), wl("2", reserved=True), 1)
    assert [e for e, _ in ev_] == ["workload_quota_released", "workload_evicted"]
    assert ev_[1][1]["count"] == 2 and ev_[1][1]["evictions_total"] == 2 and ev_[1][1]["reason"] == "Preempted"
    # The same Evicted=True again is no new eviction.
    assert lifecycle.lifecycle_events("Workload", "MODIFIED", wl("4", evicted=True), wl("3", evicted=True)) == []


def test_lifecycle_events_of_a_deletion():
    cq = o.cluster_queue("p-cq").obj()
    cq["metadata"].update(deletionTimestamp="2026-11-30T00:00:00Z", finalizers=["kueue.x-k8s.io/resource-in-use"],
                          resourceVersion="7")
    (deleting,) = lifecycle.lifecycle_events("ClusterQueue", "MODIFIED", cq, o.cluster_queue("p-cq").obj())
    assert deleting == ("object_deleting", {"kind": "ClusterQueue", "key": "p-cq",
                                            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
                                            "deletion_timestamp": "2026-11-30T00:00:00Z", "resource_version": "7"})
    assert lifecycle.lifecycle_events("ClusterQueue", "MODIFIED", cq, cq) == []
    assert lifecycle.lifecycle_events("ClusterQueue", "DELETED", cq, cq)[0][0] == "object_deleted"


# ---- liveness of a named plain Workload -------------------------------------------------------------

def test_named_workload_gets_quota_within_the_bound():
    h = start() + [ev(1, "monitor", "workload_seen", key=KEY, queue="lq", active=True),
                   ev(2.5, "monitor", "workload_quota_reserved", key=KEY, cluster_queue="cq", active=True)]
    (f,) = judge(Liveness(workloads=["small"], bound=5), h)
    assert f.result == "held" and "1.50s after it was first seen" in f.evidence


def test_named_workload_never_admitted_is_violated_after_the_bound_and_inconclusive_before():
    h = [ev(1, "monitor", "workload_seen", key=KEY, queue="lq", active=True)]
    assert results(judge(Liveness(workloads=[KEY], bound=5), start(30) + h)) == ["violated"]
    assert results(judge(Liveness(workloads=[KEY], bound=50), start(30) + h)) == ["inconclusive"]


# ---- bounded evictions ------------------------------------------------------------------------------

def evictions(n: int, key: str = KEY) -> list[dict]:
    return [ev(1 + i, "monitor", "workload_evicted", key=key, reason="Preempted", count=i + 1) for i in range(n)]


def test_thrashing_is_violated_above_max_and_held_at_it():
    (f,) = judge(BoundedEvictions(max=3), start() + evictions(4))
    assert f.result == "violated" and "4 times" in f.evidence and "Preempted ×4" in f.evidence
    assert results(judge(BoundedEvictions(max=3), start() + evictions(3))) == ["held"]
    assert BoundedEvictions(max=3).decided(sorted(start() + evictions(4), key=lambda e: e["ts"]), {}, Names([]))


def test_evictions_from_watch_deliveries_when_the_monitor_did_not_see_the_workload():
    h = start()
    for i, evicted in enumerate([False, True, False, True, True, False, True]):
        h.append(ev(1 + i, "proxy", "watch_event", namespace=NS, name="job-x", type="MODIFIED",
                    conditions={"Evicted": "True" if evicted else "False"}))
    (f,) = judge(BoundedEvictions(max=2), h)
    assert f.result == "violated" and "3 times" in f.evidence


def test_no_eviction_is_held_when_workloads_were_seen_and_error_when_none_was():
    seen = [ev(1, "monitor", "workload_seen", key=KEY, queue="lq", active=True, priority=0)]
    assert results(judge(BoundedEvictions(), start())) == ["error"]  # nothing to count: never "passed"
    assert results(judge(BoundedEvictions(), start() + seen)) == ["held"]
    assert results(judge(BoundedEvictions(workloads=["small"]), start() + seen)) == ["held"]
    (f,) = judge(BoundedEvictions(workloads=["small"]), start())
    assert f.result == "error" and "named but never seen" in f.summary
    (f,) = judge(BoundedEvictions(until_quota="p"), start() + seen)
    assert f.result == "error" and "Job p was named but never created" in f.summary
    with pytest.raises(ValueError):
        BoundedEvictions(max=-1)


def preemption_race(quota_at: float | None) -> list[dict]:
    """kubernetes-sigs/kueue#13662's shape: job-a evicted at 1, 2, 3, 4 s; the preemptor gets quota at
    `quota_at` (the monitor's fact, and Kueue's watch delivering it a little later)."""
    wl_a, wl_p = "job-job-a-a1b2c", "job-preemptor-d3e4f"
    h = start() + [ev(0.1, "harness", "job_created", job=f"{NS}/job-a"),
                   ev(0.2, "harness", "job_created", job=f"{NS}/preemptor"),
                   ev(0.3, "proxy", "watch_event", namespace=NS, name=wl_p, conditions={"QuotaReserved": "False"})]
    h += evictions(4, f"{NS}/{wl_a}")
    if quota_at is not None:
        h += [ev(quota_at, "monitor", "workload_quota_reserved", key=f"{NS}/{wl_p}", cluster_queue="cq1", active=True),
              ev(quota_at + 0.01, "proxy", "watch_event", namespace=NS, name=wl_p, conditions={"QuotaReserved": "True"})]
    return sorted(h, key=lambda e: e["ts"])


def test_until_quota_counts_only_evictions_before_the_preemptor_got_quota_and_decides_then():
    h = preemption_race(quota_at=2.5)
    names = Names(h)
    (f,) = BoundedEvictions(until_quota="preemptor").check(h, {}, names)
    assert f.result == "held" and "2 time(s)" in f.evidence and "before preemptor got quota" in f.evidence
    assert BoundedEvictions(until_quota="preemptor").decided(h, {}, names)
    assert results(judge(BoundedEvictions(), h)) == ["violated"]  # every eviction counts without it
    early = [e for e in h if e["ts"] < T0 + 1.5]  # live: job-a evicted once, the preemptor waits
    assert not BoundedEvictions(until_quota="preemptor").decided(early, {}, Names(early))


def test_until_quota_never_reached_counts_every_eviction():
    h = preemption_race(quota_at=None)
    (f,) = BoundedEvictions(until_quota="preemptor").check(h, {}, Names(h))
    assert f.result == "violated" and "4 times" in f.evidence
    assert BoundedEvictions(until_quota="preemptor").decided(h, {}, Names(h))
    with pytest.raises(ValueError, match="until_quota must be the name"):
        BoundedEvictions(until_quota="")


def _write(t: float, flow: int, write: str, name: str, status: int = 200, answer_after: float = 0.01) -> list[dict]:
    w = {"kind": "Workload", "write": write, "namespace": NS, "name": name}
    return [ev(t, "proxy", "request", flow=flow, method="PATCH", write=w),
            ev(t + answer_after, "proxy", "response", flow=flow, status=status)]


def test_kueue_s_eviction_writes_count_when_the_monitor_lags_behind_them():
    """The stress run of 2026-12-02 (load 15-27): Kueue sent job-a 5 eviction writes, each after a re-admission,
    before the preemptor's admission; the monitor reported 3 evictions, the last after the preemptor's quota."""
    wl_a, wl_p = "job-job-a-a1b2c", "job-preemptor-d3e4f"
    h = start() + [ev(0.1, "harness", "job_created", job=f"{NS}/job-a"),
                   ev(0.2, "harness", "job_created", job=f"{NS}/preemptor")]
    flow = 100
    for i, t in enumerate([1.0, 2.0, 3.0, 4.0, 5.0]):
        h += _write(t, flow := flow + 1, "eviction", wl_a) + _write(t + 0.5, flow := flow + 1, "admission", wl_a)
    h += _write(5.2, flow := flow + 1, "eviction", wl_a)  # a repeated eviction write (kueue#9428): not another
    h += _write(6.0, flow := flow + 1, "admission", wl_p, answer_after=0.2)  # the preemptor's quota, answered 6.2
    h += _write(7.0, flow := flow + 1, "eviction", wl_a)  # after the preemptor's quota: not counted
    h += _write(7.5, flow := flow + 1, "eviction", "job-job-b-9z8y7", status=409)  # refused: not an eviction
    h += [ev(1.5 + 3 * i, "monitor", "workload_evicted", key=f"{NS}/{wl_a}", reason="Preempted", count=i + 1)
          for i in range(3)]  # 1.5, 4.5, 7.5: lagging
    h += [ev(8.0, "monitor", "workload_quota_reserved", key=f"{NS}/{wl_p}", cluster_queue="cq1", active=True)]
    h = sorted(h, key=lambda e: e["ts"])
    found = BoundedEvictions(until_quota="preemptor").check(h, {}, Names(h))
    (f,) = [x for x in found if "job-a" in x.summary]
    assert f.result == "violated" and "5 times" in f.evidence and "eviction write ×5" in f.evidence
    assert BoundedEvictions(until_quota="preemptor").decided(h, {}, Names(h))
    early = [e for e in h if e["ts"] < T0 + 6.1]  # the preemptor's admission not answered yet
    assert not BoundedEvictions(until_quota="preemptor", max=5).decided(early, {}, Names(early))
    # the monitor's count stands where it is the larger one
    h2 = sorted(start() + evictions(4) + _write(1.2, 1, "eviction", "small"), key=lambda e: e["ts"])
    (f,) = judge(BoundedEvictions(max=3), h2)
    assert f.result == "violated" and "Preempted ×4" in f.evidence


# ---- deletion completes -----------------------------------------------------------------------------

def deleting(t: float, kind="ClusterQueue", key="p-cq") -> dict:
    return ev(t, "monitor", "object_deleting", kind=kind, key=key, finalizers=["kueue.x-k8s.io/resource-in-use"],
              deletion_timestamp="x")


def test_stuck_terminating_is_violated_with_its_finalizers():
    (f,) = judge(DeletionCompletes(bound=10), start(30) + [deleting(5)])
    assert f.result == "violated" and "stuck Terminating" in f.summary and "resource-in-use" in f.evidence


def test_deleted_in_time_held_late_violated_short_history_inconclusive():
    gone = ev(6, "monitor", "object_deleted", kind="ClusterQueue", key="p-cq", finalizers=[])
    assert results(judge(DeletionCompletes(bound=10), start(30) + [deleting(5), gone])) == ["held"]
    late = dict(gone, ts=gone["ts"] + 20)
    assert results(judge(DeletionCompletes(bound=10), start(30) + [deleting(5), late])) == ["violated"]
    assert results(judge(DeletionCompletes(bound=10), start(8) + [deleting(5)])) == ["inconclusive"]
    assert results(judge(DeletionCompletes(kinds=["Workload"]), start(30) + [deleting(5)])) == ["error"]
    with pytest.raises(ValueError, match="unknown kind"):
        DeletionCompletes(kinds=["Node"])


def test_teardown_deletions_after_the_verdict_are_not_judged():
    assert results(judge(DeletionCompletes(), start(30) + [deleting(31)])) == ["error"]  # nothing deleted in the case


# ---- running Pods within quota ----------------------------------------------------------------------

def pod(name: str, owner_uid: str, cpu: str, phase: str = "Running") -> dict:
    return {"metadata": {"name": name, "namespace": NS, "uid": f"pod-{name}",
                         "ownerReferences": [{"kind": "Job", "name": "j", "uid": owner_uid}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase}}


def job_workload(name: str, owner_uid: str, cpu: str | None, queue: str = "lq") -> dict:
    b = o.workload(name, NS).queue(queue)
    if cpu is not None:
        b.reserved_in("cq").assignment("rf", cpu=cpu)
    else:
        b.pod_set("main", 1, cpu="1")
    w = b.obj()
    w["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner_uid}]
    return w


LQ = o.local_queue("lq", NS, "cq").obj()


def test_pods_of_an_evicted_workload_still_running_are_over_quota():
    wls = [job_workload("a", "u-a", "1"), job_workload("b", "u-b", None)]  # b holds no quota
    pods = [pod("a-0", "u-a", "1"), pod("b-0", "u-b", "1")]
    (f,) = lifecycle.pods_over_quota(pods, wls, [LQ])
    assert (f.cluster_queue, f.resource, f.running_milli, f.held_milli) == ("cq", "cpu", 2000, 1000)
    assert f.pods == (f"{NS}/a-0", f"{NS}/b-0")
    # Pending Pods, and Pods of an unknown Workload, do not count.
    assert lifecycle.pods_over_quota([pod("a-0", "u-a", "1"), pod("b-0", "u-b", "1", phase="Pending"),
                                      pod("x-0", "u-x", "5")], wls, [LQ]) == []
    checker = RunningPodsWithinQuota()
    (v,) = checker.check(start(), {"pods": pods, "workloads": wls, "localqueues": [LQ]}, Names([]))
    assert v.result == "violated" and "2000m cpu" in v.evidence


def test_a_pod_orphaned_by_its_jobs_deletion_is_out_of_kueues_hands():
    # kubectl delete --cascade=orphan: the garbage collector removed the Pod's and the Workload's owner
    # references; Kueue finished the Workload (kueue#1789's fix) and b took the quota. The Pod still names its
    # Workload in kueue.x-k8s.io/workload (v0.19), but the user took it out of Kueue's hands: not counted.
    a = job_workload("a", "u-a", None)
    a["metadata"]["ownerReferences"] = []
    orphan = pod("a-0", "u-a", "1")
    orphan["metadata"]["ownerReferences"] = []
    orphan["metadata"]["annotations"] = {"kueue.x-k8s.io/workload": "a"}
    wls = [a, job_workload("b", "u-b", "1")]
    assert lifecycle.pods_over_quota([orphan, pod("b-0", "u-b", "1")], wls, [LQ]) == []
    # Still owned (its Job Terminating, kept by a finalizer: kueue#12820): counted.
    owned = pod("a-0", "u-a", "1")
    owned["metadata"]["annotations"] = {"kueue.x-k8s.io/workload": "a"}
    (f,) = lifecycle.pods_over_quota([owned, pod("b-0", "u-b", "1")], wls, [LQ])
    assert (f.running_milli, f.held_milli) == (2000, 1000)


def test_pods_over_quota_from_the_monitor_and_not_applicable_without_pods():
    h = start() + [ev(3, "monitor", "pods_over_quota_started", finding="ClusterQueue cq: …", cluster_queue="cq",
                      resource="cpu", running_milli=2000, held_milli=1000, pods=["a", "b"]),
                   ev(4, "monitor", "pods_over_quota_cleared", finding="…", cluster_queue="cq", resource="cpu")]
    (f,) = judge(RunningPodsWithinQuota(), h)
    assert f.result == "violated" and "for 1.00s" in f.evidence
    assert results(judge(RunningPodsWithinQuota(), start())) == ["error"]
    ok = {"pods": [pod("a-0", "u-a", "1")], "workloads": [job_workload("a", "u-a", "1")], "localqueues": [LQ]}
    assert results(judge(RunningPodsWithinQuota(), start(), ok)) == ["held"]


# ---- inactive workloads never scheduled -------------------------------------------------------------

def deactivated(t: float) -> dict:
    return ev(t, "monitor", "workload_active_changed", key=KEY, active=False, resource_version="5")


def reserved(t: float, rv: str = "9", active: bool = False) -> dict:
    return ev(t, "monitor", "workload_quota_reserved", key=KEY, cluster_queue="cq", active=active, resource_version=rv)


def admission_write(sent: float, answered: float, rv: str = "9") -> list[dict]:
    return [ev(sent, "proxy", "request", flow=7, method="PATCH", write={"kind": "Workload", "name": "small"}),
            ev(answered, "proxy", "response", flow=7, status=200, resource_version=rv, write="admission",
               namespace=NS, name="small")]


def test_reservation_after_the_deactivation_was_seen_is_violated():
    h = start() + [deactivated(2)] + admission_write(2.2, 2.3) + [reserved(2.35)]
    (f,) = judge(InactiveNeverScheduled(), h)
    assert f.result == "violated" and "after the deactivation was seen" in f.evidence


def test_reservation_in_flight_is_not_a_violation():
    h = start() + admission_write(1.9, 2.1) + [deactivated(2), reserved(2.15)]
    (f,) = judge(InactiveNeverScheduled(), h)
    assert f.result == "held" and "in flight" in f.summary


def test_without_the_write_grace_decides():
    assert results(judge(InactiveNeverScheduled(grace=1), start() + [deactivated(2), reserved(2.5)])) == ["inconclusive"]
    assert results(judge(InactiveNeverScheduled(grace=1), start() + [deactivated(2), reserved(4)])) == ["violated"]


def test_reactivated_workload_may_be_scheduled_and_untouched_is_held():
    react = ev(3, "monitor", "workload_active_changed", key=KEY, active=True, resource_version="6")
    assert results(judge(InactiveNeverScheduled(), start() + [deactivated(2), react, reserved(5, active=True)])) == ["held"]
    assert results(judge(InactiveNeverScheduled(), start() + [deactivated(2)])) == ["held"]
    assert results(judge(InactiveNeverScheduled(), start())) == ["error"]


def test_composed_by_name_like_a_case_declares_them():
    h = sorted(start() + evictions(5) + [deleting(2)], key=lambda e: e["ts"])
    sel = Selection(selection_with_defaults({"bounded_evictions": {"max": 2}, "deletion_completes": {"bound": 5}}))
    v = compose(sel, h, {})
    assert v.verdict == "reproduced"
    assert {f.check for f in v.findings if f.result == "violated"} == {"bounded_evictions", "deletion_completes"}
    # Declared checkers whose subject never occurred (no deactivation, no Pods) make a run that held `error`,
    # never `passed`.
    gone = ev(3, "monitor", "object_deleted", kind="ClusterQueue", key="p-cq", finalizers=[])
    h = sorted(start() + evictions(1) + [deleting(2), gone], key=lambda e: e["ts"])
    sel = Selection(selection_with_defaults({"bounded_evictions": {"max": 2}, "deletion_completes": {"bound": 5},
                                             "inactive_never_scheduled": {}, "running_pods_within_quota": {}}))
    v = compose(sel, h, {})
    assert v.verdict == "error" and "inactive_never_scheduled: no Workload was deactivated" in v.reason
    sel = Selection(selection_with_defaults({"bounded_evictions": {"max": 2}, "deletion_completes": {"bound": 5}}))
    assert compose(sel, h, {}).verdict == "passed"


# ---- the monitor records them (its watch threads call these per event) ------------------------------

def test_monitor_records_lifecycle_facts_of_objects_in_scope_only():
    from harness.checkers.monitor import InvariantMonitor

    got = []
    m = InvariantMonitor(None, lambda event, source, **f: got.append((event, f)), "p-", namespace=NS, lifecycle=True)
    assert m._in_scope("Workload", {"namespace": NS}) and not m._in_scope("Workload", {"namespace": "other"})
    assert m._in_scope("ClusterQueue", {"name": "p-cq"}) and not m._in_scope("ClusterQueue", {"name": "q-cq"})
    m._record_lifecycle("Workload", "ADDED", wl("1", reserved=True), None)
    m._record_lifecycle("Workload", "MODIFIED", wl("2", evicted=True), wl("1", reserved=True))
    m._record_lifecycle("Workload", "MODIFIED", wl("3", reserved=True), wl("2", evicted=True))
    m._record_lifecycle("Workload", "MODIFIED", wl("4", evicted=True), wl("3", reserved=True))
    assert [f["count"] for e, f in got if e == "workload_evicted"] == [1, 2]
    # Running Pods over quota open and clear once each.
    m.workloads = {"a": job_workload("a", "u-a", "1"), "b": job_workload("b", "u-b", None)}
    m.localqueues = {"lq": LQ}
    m.pods = {"a": pod("a-0", "u-a", "1"), "b": pod("b-0", "u-b", "1")}
    m._evaluate_pods()
    m._evaluate_pods()
    m.pods.pop("b")
    m._evaluate_pods()
    assert [e for e, _ in got if e.startswith("pods_over_quota")] == ["pods_over_quota_started", "pods_over_quota_cleared"]


# ---- every pending Workload that fits is admitted ---------------------------------------------------

def fits_objects(used_cpu: str, small_cpu: str = "1", cohort_other_used: str | None = None) -> dict:
    from harness.checkers.pending_fits import PendingFitsAdmitted  # noqa: F401 - registered

    cqs = [o.cluster_queue("cq").flavor("rf", cpu="3").obj()]
    if cohort_other_used is not None:
        cqs = [b.obj() for b in o.cluster_queues("cq", "cq2", flavor="rf", cohort="team", cpu="3")]
    big = o.workload("big", NS).queue("lq").reserved_in("cq").assignment("rf", cpu=used_cpu).obj()
    small = o.workload("small", NS).queue("lq").pod_set("main", 1, cpu=small_cpu).obj()
    wls = [big, small]
    if cohort_other_used is not None:
        wls.append(o.workload("other", NS).queue("lq2").reserved_in("cq2").assignment("rf", cpu=cohort_other_used).obj())
    return {"clusterqueues": cqs, "workloads": wls,
            "localqueues": [o.local_queue("lq", NS, "cq").obj(), o.local_queue("lq2", NS, "cq2").obj()]}


def test_fitting_pending_workload_never_admitted_is_violated():
    from harness.checkers.pending_fits import PendingFitsAdmitted, fitting_pending

    objs = fits_objects("2")
    assert fitting_pending(objs) == [(KEY, "cq", "rf")]
    h = start(30) + [ev(1, "monitor", "workload_seen", key=KEY, queue="lq", active=True)]
    (f,) = judge(PendingFitsAdmitted(bound=10), h, objs)
    assert f.result == "violated" and "nothing moved for 29.00s" in f.evidence
    assert results(judge(PendingFitsAdmitted(bound=10), start(30) + [ev(25, "monitor", "workload_seen", key=KEY,
                                                                        queue="lq", active=True)], objs)) == ["inconclusive"]


def test_a_workload_that_does_not_fit_or_a_full_cohort_is_not_judged():
    from harness.checkers.pending_fits import PendingFitsAdmitted, fitting_pending

    assert fitting_pending(fits_objects("2", small_cpu="2")) == []         # 1 cpu free, asks 2
    assert fitting_pending(fits_objects("2", cohort_other_used="3")) == [(KEY, "cq", "rf")]  # cohort: 6 - 5 = 1 free
    assert fitting_pending(fits_objects("2", cohort_other_used="4")) == []  # cq2 borrowed cq's last cpu
    stopped = fits_objects("2")
    stopped["clusterqueues"][0]["spec"]["stopPolicy"] = "Hold"
    assert fitting_pending(stopped) == []
    assert results(judge(PendingFitsAdmitted(), start(30), fits_objects("3"))) == ["held"]


def test_pending_fits_decides_once_no_fitting_workload_is_within_the_bound():
    """case.observe() stops on `decided`: at once when nothing fits, when the bound passed (violated), but not
    while a fitting Workload waits within the bound (kubernetes-sigs/kueue#10901: the victim fits again)."""
    from harness.checkers.pending_fits import PendingFitsAdmitted

    def decided(seen_at: float, objs: dict) -> bool:
        h = sorted(start(30) + [ev(seen_at, "monitor", "workload_seen", key=KEY, queue="lq", active=True)],
                   key=lambda e: e["ts"])
        return PendingFitsAdmitted(bound=10).decided(h, objs, Names(h))

    assert decided(1, fits_objects("3"))            # nothing fits: held
    assert decided(1, fits_objects("2"))            # fits, 29 s quiet: violated
    assert not decided(25, fits_objects("2"))       # fits, 5 s quiet: still inconclusive


def test_inactive_never_scheduled_decides_either_way():
    """Decided on a violation, and on a held judgement once conclusive: reactivated, or watched inactive
    without a reservation for `settle` seconds; not while nothing was deactivated or too recently."""
    def decided(checker, h):
        h = sorted(h, key=lambda e: e["ts"])
        return checker.decided(h, {}, Names(h))

    c = InactiveNeverScheduled(grace=1, settle=3)
    assert decided(c, start() + [deactivated(2), reserved(4)])  # violated
    assert decided(c, start(30) + [deactivated(2)])  # 28 s inactive, no reservation: held for good
    assert not decided(c, start(4) + [deactivated(2)])  # only 2 s so far
    assert not decided(c, start())  # nothing deactivated yet
    react = ev(3, "monitor", "workload_active_changed", key=KEY, active=True, resource_version="6")
    assert decided(c, start(4) + [deactivated(2), react])  # active again: its inactive spell is judged
    assert not decided(c, start() + [deactivated(2), reserved(2.5)])  # inconclusive within the grace


def test_an_object_gone_at_once_is_a_completed_deletion():
    # No finalizer: the monitor sees the Workload gone without ever seeing it deleting (a case that deletes a
    # plain Workload); that is a deletion that completed, not "nothing was deleted".
    gone = ev(6, "monitor", "object_deleted", kind="Workload", key=KEY, finalizers=[])
    (f,) = judge(DeletionCompletes(), start(30) + [gone])
    assert f.result == "held" and "no finalizer held it" in f.evidence
    after = ev(31, "monitor", "object_deleted", kind="Workload", key=KEY, finalizers=[])  # the teardown's deletion, after the verdict: still nothing in the case
    assert results(judge(DeletionCompletes(), start(30) + [after])) == ["error"]


def test_the_larger_count_is_taken_after_both_are_cut_at_the_preemptor_s_quota():
    """kind, 8 busy loops, 2026-12-07: Kueue wrote 5 evictions of job-a before the preemptor's admission; the
    monitor reported all 5 too, 2 of them after that admission. Comparing the counts before the cut kept the
    monitor's (5 = 5), which the cut made 3: a thrashing bug judged `passed`."""
    wl_a, wl_p = "job-job-a-a1b2c", "job-preemptor-d3e4f"
    h = start() + [ev(0.1, "harness", "job_created", job=f"{NS}/job-a"),
                   ev(0.2, "harness", "job_created", job=f"{NS}/preemptor")]
    flow = 100
    for t in (1.0, 2.0, 3.0, 4.0, 5.0):
        h += _write(t, flow := flow + 1, "eviction", wl_a) + _write(t + 0.5, flow := flow + 1, "admission", wl_a)
    h += _write(6.0, flow := flow + 1, "admission", wl_p)
    h += [ev(t, "monitor", "workload_evicted", key=f"{NS}/{wl_a}", reason="Preempted")
          for t in (1.2, 3.5, 3.6, 7.0, 7.5)]  # 5, lagging: 2 after the preemptor's quota
    h = sorted(h, key=lambda e: e["ts"])
    found = BoundedEvictions(until_quota="preemptor").check(h, {}, Names(h))
    (f,) = [x for x in found if "job-a" in x.summary]
    assert f.result == "violated" and "5 times" in f.evidence and "eviction write ×5" in f.evidence
