"""running_pods_within_quota's persistence bound and pending_accounting on synthetic histories and objects
(shapes as tests/unit/test_lifecycle_checkers.py)."""

from __future__ import annotations

import pytest

from harness.checkers.pods_quota import RunningPodsWithinQuota
from tests.unit.test_lifecycle_checkers import judge, results, start
from tests.unit.test_report import ev


def over(t0, t1=None, cq="cq"):
    out = [ev(t0, "monitor", "pods_over_quota_started", finding=f"ClusterQueue {cq}: …", cluster_queue=cq,
              resource="cpu", running_milli=2000, held_milli=1000, pods=["a", "b"])]
    if t1 is not None:
        out.append(ev(t1, "monitor", "pods_over_quota_cleared", finding="…", cluster_queue=cq, resource="cpu"))
    return out


def test_persist_counts_only_a_lasting_or_final_violation():
    short, long_ = start() + over(3, 4.5), start() + over(3, 8)
    assert results(judge(RunningPodsWithinQuota(), short)) == ["violated"]  # no bound: any window counts
    found = judge(RunningPodsWithinQuota(persist=2), short)
    assert [(f.result, f.bearing) for f in found] == [("held", False), ("held", True)]
    assert "for 1.50s (< 2s × the run's pace factor 1.0, not counted)" in found[0].evidence
    assert results(judge(RunningPodsWithinQuota(persist=2), long_)) == ["violated"]
    # Never cleared: it reaches the end of the case, whatever its length.
    assert results(judge(RunningPodsWithinQuota(persist=2), start(end=3.5) + over(3))) == ["violated"]


def test_an_uncleared_window_the_objects_at_the_verdict_contradict_ends_there():
    # The monitor saw it start 0.1 s before the verdict and no end; the objects read at the verdict have a
    # running Pod within quota (the other Pod's Job was orphan-deleted: no Workload of its own any more).
    pod = {"metadata": {"name": "a", "namespace": "ns", "uid": "p1", "ownerReferences": [{"uid": "j1"}]},
           "status": {"phase": "Running"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}
    wl = {"metadata": {"name": "w", "namespace": "ns", "ownerReferences": [{"uid": "j1"}]},
          "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1}]},
          "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
              {"name": "main", "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
              "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]}}
    objs = {"pods": [pod], "workloads": [wl], "localqueues": []}
    h = start(end=3.1) + over(3)
    found = judge(RunningPodsWithinQuota(persist=2), h, objs)
    assert [f.result for f in found if f.bearing] == ["held"], [f.evidence for f in found]
    assert "within quota in the objects read at the verdict" in found[0].evidence
    # Without `persist`, any window counts, this one too.
    assert "violated" in results(judge(RunningPodsWithinQuota(), h, objs))


def test_a_young_open_window_is_not_decided_yet(monkeypatch):
    import harness.checkers.pods_quota as pq

    h = start(end=3.1) + over(3)  # epoch-like times: "now" is read from the clock
    monkeypatch.setattr(pq.time, "time", lambda: h[0]["ts"] + 3.5)
    assert RunningPodsWithinQuota(persist=2).decided(sorted(h, key=lambda e: e["ts"]), {}, None) is False
    monkeypatch.setattr(pq.time, "time", lambda: h[0]["ts"] + 5.5)
    assert RunningPodsWithinQuota(persist=2).decided(sorted(h, key=lambda e: e["ts"]), {}, None) is True
    assert RunningPodsWithinQuota().decided(h, {}, None) is True  # no bound: any window counts at once
    closed = start(end=3.1) + over(3, 3.05)
    monkeypatch.setattr(pq.time, "time", lambda: h[0]["ts"] + 3.5)
    assert RunningPodsWithinQuota(persist=2).decided(sorted(closed, key=lambda e: e["ts"]), {}, None) is True


@pytest.mark.parametrize("bad", [0, -1, True, "2s"])
def test_persist_refuses_bad_values(bad):
    with pytest.raises(ValueError, match="persist must be seconds"):
        RunningPodsWithinQuota(persist=bad)


# ---- pending_accounting ---------------------------------------------------------------------------------

from harness import objects as o  # noqa: E402
from harness.checkers.model import accounting  # noqa: E402
from harness.checkers.pending_accounting import PendingAccounting  # noqa: E402
from tests.unit.test_report import NS  # noqa: E402


def cq(pending=0, reserving=0, admitted=0):
    c = o.cluster_queue("cq").obj()
    c["status"] = {"pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": admitted}
    return c


def lq(pending=0, reserving=0, admitted=0):
    q = o.local_queue("lq", NS, "cq").obj()
    q["status"] = {"pendingWorkloads": pending, "reservingWorkloads": reserving, "admittedWorkloads": admitted}
    return q


def wl(name, reserved=False, admitted=False, active=True, finished=False):
    b = o.workload(name, NS).queue("lq").pod_set("main", 1, cpu="1")
    if reserved:
        b.reserved_in("cq")
    if admitted:
        b.condition("Admitted", "True", "Admitted")
    if not active:
        b.inactive()
    if finished:
        b.condition("Finished", "True", "Succeeded")
    return b.obj()


def test_accounting_counts_pending_reserving_and_admitted():
    wls = [wl("p1"), wl("p2"), wl("r", reserved=True), wl("a", reserved=True, admitted=True), wl("off", active=False),
           wl("done", reserved=True, finished=True)]
    assert accounting.mismatches([cq(2, 2, 1)], [lq(2, 2, 1)], wls) == []
    (m,) = accounting.mismatches([cq(3, 2, 1)], [lq(2, 2, 1)], wls)
    assert (m.kind, m.name, m.field, m.status, m.counted) == ("ClusterQueue", "cq", "pendingWorkloads", 3, 2)
    assert m.describe() == f"ClusterQueue cq: status.pendingWorkloads is 3 but 2 Workloads are pending ({NS}/p1, {NS}/p2)"
    # A status without the field reports 0 (Kueue omits zero counts); a Workload of a missing LocalQueue is not pending.
    bare = o.cluster_queue("cq").obj()
    assert [x.field for x in accounting.mismatches([bare], [], [wl("p1")])] == []
    assert [x.field for x in accounting.mismatches([bare], [lq()], [wl("p1")])] == ["pendingWorkloads", "pendingWorkloads"]


def mismatch(t0, t1=None, field="pendingWorkloads"):
    out = [ev(t0, "monitor", "accounting_mismatch_started", kind="ClusterQueue", name="cq", field=field, status=2,
              counted=1, workloads=[f"{NS}/w"], finding="ClusterQueue cq: status.pendingWorkloads is 2 but 1 Workload is pending")]
    if t1 is not None:
        out.append(ev(t1, "monitor", "accounting_mismatch_cleared", kind="ClusterQueue", name="cq", field=field, finding="…"))
    return out


def test_pending_accounting_counts_only_lasting_mismatches():
    objs = {"clusterqueues": [cq()]}
    c = PendingAccounting()
    assert results(judge(c, start() + mismatch(2, 3), objs)) == ["held"]  # 1 s: Kueue's update lag
    assert "1 shorter mismatch" in judge(c, start() + mismatch(2, 3), objs)[0].evidence
    found = judge(c, start() + mismatch(2, 6), objs)
    assert results(found) == ["violated"] and "for 4.00s" in found[0].evidence
    assert results(judge(c, start(end=10) + mismatch(2), objs)) == ["violated"]  # open at the verdict, 8 s old
    assert results(judge(c, start(end=3) + mismatch(2), objs)) == ["held"]  # open, but only 1 s old
    assert results(judge(PendingAccounting(fields=["admittedWorkloads"]), start() + mismatch(2, 9), objs)) == ["held"]
    assert results(judge(c, start(), {})) == ["inconclusive"]
    h = sorted(start() + mismatch(2, 6), key=lambda e: e["ts"])
    assert c.decided(h, objs, None) and not c.decided(sorted(start() + mismatch(2, 3), key=lambda e: e["ts"]), objs, None)


@pytest.mark.parametrize("kw, text", [(dict(fields=["pending"]), "fields must be"), (dict(settle=0), "settle must be")])
def test_pending_accounting_refuses_bad_parameters(kw, text):
    with pytest.raises(ValueError, match=text):
        PendingAccounting(**kw)


def test_the_monitor_records_when_a_count_starts_and_stops_disagreeing():
    from harness.checkers.monitor import InvariantMonitor

    got = []
    m = InvariantMonitor(None, lambda event, **f: got.append((event, f)), "cq", namespace=NS, lifecycle=True)
    m.cluster_queues, m.localqueues = {"/cq": cq(pending=2)}, {f"{NS}/lq": lq(pending=1)}
    m.workloads = {f"{NS}/w": wl("w")}
    m._evaluate()
    assert [(e, f["kind"], f["status"], f["counted"]) for e, f in got] == [
        ("accounting_mismatch_started", "ClusterQueue", 2, 1)]
    m.cluster_queues = {"/cq": cq(pending=1)}
    m._evaluate()
    assert got[-1][0] == "accounting_mismatch_cleared" and len(got) == 2
