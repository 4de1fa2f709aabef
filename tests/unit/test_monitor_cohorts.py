"""The invariant monitor judges quota over the real Cohort tree (harness/checkers/monitor.py): a legitimate
borrow through a parent Cohort is no violation, a new finding is recorded only when a direct read of the
ClusterQueues and Cohorts confirms it (a lagging Cohort watch must not make a false oversubscription), and a
deleted child Cohort leaves the tree (kubernetes-sigs/kueue#10417's shape). Synthetic objects; the direct read
is replaced by a fake CustomObjectsApi, no API server."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checkers.monitor import InvariantMonitor
from harness.objects import cluster_queue, cohort, workload


def _wl(name: str, cpu: str) -> dict[str, Any]:
    return workload(name, "ns").reserved_in("p-cq").assignment("p-rf", cpu=cpu).build()


CQ = cluster_queue("p-cq").cohort("p-child").flavor("p-rf", cpu="5").build()
ROOT = cohort("p-root").flavor("p-rf", cpu="10").build()
CHILD = cohort("p-child").parent("p-root").build()


class FakeApi:
    """What a direct read returns: {plural: [objects]}."""

    objects: dict[str, list[dict[str, Any]]] = {}

    def __init__(self, api: Any = None) -> None:
        pass

    def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
        return {"items": list(self.objects.get(plural, []))}


@pytest.fixture
def mon(monkeypatch: pytest.MonkeyPatch):
    import kubernetes.client

    monkeypatch.setattr(kubernetes.client, "CustomObjectsApi", FakeApi)
    got: list[tuple[str, dict]] = []
    m = InvariantMonitor(None, lambda event, source, **f: got.append((event, f)), "p-")
    return m, got


def test_borrowing_through_the_root_is_no_violation(mon) -> None:
    m, got = mon
    FakeApi.objects = {"clusterqueues": [CQ], "cohorts": [ROOT, CHILD]}
    m.cluster_queues["/p-cq"] = CQ
    m.cohorts.update({"/p-root": ROOT, "/p-child": CHILD})
    m.workloads.update({"ns/a": _wl("a", "10"), "ns/b": _wl("b", "5")})
    m._evaluate()
    assert [e for e, _ in got if e.startswith("quota")] == []


def test_a_lagging_cohort_watch_is_not_a_violation_once_a_read_shows_the_tree(mon) -> None:
    m, got = mon
    FakeApi.objects = {"clusterqueues": [CQ], "cohorts": [ROOT, CHILD]}
    m.cluster_queues["/p-cq"] = CQ  # the Cohort watch has delivered nothing yet
    m.workloads.update({"ns/a": _wl("a", "10"), "ns/b": _wl("b", "5")})
    m._evaluate()
    assert [e for e, _ in got if e.startswith("quota")] == []
    # A real oversubscription (18 cpu; the read tree allows the root's 10 + cq's 5) is recorded, as the read names it.
    m.workloads["ns/c"] = _wl("c", "3")
    m._evaluate()
    [(event, f)] = [(e, f) for e, f in got if e.startswith("quota")]
    assert event == "quota_violation_started" and "Cohort p-root" in f["finding"] and f["used_milli"] == 18000


def test_a_deleted_child_cohort_leaves_the_tree(mon) -> None:
    m, got = mon
    m.cluster_queues["/p-cq"] = CQ
    m.cohorts.update({"/p-root": ROOT, "/p-child": CHILD})
    m.workloads.update({"ns/a": _wl("a", "10")})
    FakeApi.objects = {"clusterqueues": [CQ], "cohorts": [ROOT, CHILD]}
    m._evaluate()
    assert [e for e, _ in got if e.startswith("quota")] == []
    del m.cohorts["/p-child"]  # its DELETED came: cq names an implicit Cohort with no quota and no parent
    FakeApi.objects = {"clusterqueues": [CQ], "cohorts": [ROOT]}
    m._evaluate()
    [(event, f)] = [(e, f) for e, f in got if e.startswith("quota")]
    assert "Cohort p-child" in f["finding"] and f["allowed_milli"] == 5000
