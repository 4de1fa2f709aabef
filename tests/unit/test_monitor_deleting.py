"""The invariant monitor's reads of objects whose deletion is pending (harness/checkers/monitor.py check_deleting):
`object_still_deleting` while a read still finds the object Terminating, `object_deleted` (read: true) when
it finds it gone — not recorded twice when the watch's DELETED follows — and deletion_completes deciding
a quiet stuck deletion from those reads alone (kubernetes-sigs/kueue#10759). Synthetic objects; the read
is replaced, no API server."""

from __future__ import annotations

from harness.checkers.deletion import DeletionCompletes
from harness.checkers.monitor import InvariantMonitor
from harness.history.names import Names
from tests.unit.test_report import NS, ev

FIN = "kueue.x-k8s.io/resource-in-use"


def cq(deleting: bool, rv: str = "10") -> dict:
    meta = {"name": "p-cq", "resourceVersion": rv, "finalizers": [FIN]}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T14:43:17Z"
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": meta, "spec": {}}


def monitor(reads: list) -> tuple[InvariantMonitor, list[tuple[str, dict]]]:
    """A monitor whose reads return `reads` in turn, recording into the returned list."""
    got: list[tuple[str, dict]] = []
    m = InvariantMonitor(None, lambda event, source, **f: got.append((event, f)), "p-", namespace=NS, lifecycle=True)
    m._read = lambda kind, ns, name: reads.pop(0)  # type: ignore[method-assign]
    return m, got


def test_a_pending_deletion_is_read_until_it_is_gone_and_recorded_gone_once():
    m, got = monitor([cq(True, "11"), None])
    m._record_lifecycle("ClusterQueue", "ADDED", cq(False), None)
    m.check_deleting()
    assert got == [], "nothing is being deleted: nothing is read"
    m._record_lifecycle("ClusterQueue", "MODIFIED", cq(True), cq(False))
    assert [e for e, _ in got] == ["object_deleting"] and ("ClusterQueue", "p-cq") in m.deleting
    m.check_deleting()
    event, f = got[-1]
    assert event == "object_still_deleting" and f["key"] == "p-cq" and f["finalizers"] == [FIN]
    assert f["resource_version"] == "11" and f["seconds"] >= 0
    m.check_deleting()
    assert got[-1] == ("object_deleted", {"kind": "ClusterQueue", "key": "p-cq", "finalizers": [],
                                          "resource_version": None, "read": True})
    m._record_lifecycle("ClusterQueue", "DELETED", cq(True), cq(True))  # the watch says so too, later
    assert [e for e, _ in got].count("object_deleted") == 1 and not m.deleting


def test_a_deletion_the_watch_reports_first_is_not_read_again():
    m, got = monitor([])  # a read would fail: pop from an empty list
    m._record_lifecycle("ClusterQueue", "MODIFIED", cq(True), cq(False))
    m._record_lifecycle("ClusterQueue", "DELETED", cq(True), cq(True))
    m.check_deleting()
    assert [e for e, _ in got] == ["object_deleting", "object_deleted"] and not m.errors


def test_a_failed_read_is_a_monitor_error():
    def boom(kind, ns, name):
        raise OSError("connection refused")

    m, got = monitor([])
    m._read = boom  # type: ignore[method-assign]
    m._record_lifecycle("ClusterQueue", "MODIFIED", cq(True), cq(False))
    m.check_deleting()
    assert got[-1][0] == "watch_error" and "connection refused" in got[-1][1]["error"]


def test_deletion_completes_decides_a_quiet_stuck_deletion_from_the_reads():
    """No watch event after the deletion started; only the monitor's reads say it is still there."""
    h = [ev(0, "harness", "case_started", case="cases/t.py::t", namespace=NS),
         ev(1, "monitor", "object_deleting", kind="ClusterQueue", key="p-cq", finalizers=[FIN], deletion_timestamp="x")]
    h += [ev(1 + s, "monitor", "object_still_deleting", kind="ClusterQueue", key="p-cq", finalizers=[FIN],
             seconds=float(s)) for s in range(1, 7)]
    checker = DeletionCompletes(bound=5)
    assert not checker.decided(h[:-1], {}, Names(h[:-1])), "5 s of reads, nothing else moved: not yet"
    (f,) = checker.check(h, {}, Names(h))
    assert f.result == "violated" and "stuck Terminating" in f.summary and FIN in f.evidence
    assert checker.decided(h, {}, Names(h))
