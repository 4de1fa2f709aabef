"""Unit tests for Kueue's hierarchical-cohort quota semantics in harness.checkers.model.quota.

The shapes and numbers follow Kueue's own tables at v0.17.0 (pkg/cache/scheduler/resource_test.go,
TestAvailable: flat ClusterQueues, a cohort with its own quota, borrowing and lending limits, a two-level
tree `root -> left/right -> ClusterQueues`), rewritten here as synthetic objects with the project's
builders (harness/objects/builders.py). Each table gives, per ClusterQueue, what Kueue's scheduler says is
still `available` with the usage given and with no usage (`potentialAvailable`); `check_quota` must find
nothing where every limit holds, and name the Cohort whose subtree quota is exceeded where one is not.
Plus the stale-subtree scenario of kubernetes-sigs/kueue#10417 (a child Cohort deleted: its ClusterQueue
names an implicit Cohort of that name, outside the old parent's tree).
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.checkers.model.quota import available, check_quota
from harness.objects import cluster_queue, cohort, quota, workload

RED_CPU = ("red", "cpu")
BLUE_CPU = ("blue", "cpu")


def _admitted(name: str, cq: str, flavor: str, cpu: str) -> dict[str, Any]:
    return workload(name, "ns").reserved_in(cq).assignment(flavor, cpu=cpu).build()


def _cq(name: str, cohort_name: str | None = None, **flavors: Any):
    b = cluster_queue(name)
    if cohort_name:
        b.cohort(cohort_name)
    for flavor, cpu in flavors.items():
        b.flavor(flavor, cpu=cpu)
    return b.build()


def _cohort(name: str, parent: str | None = None, red: Any = None):
    b = cohort(name)
    if parent:
        b.parent(parent)
    if red is not None:
        b.flavor("red", cpu=red)
    return b.build()


# (cluster queues, cohorts, usage {cq: {fr: milli}}, want available, want potentially available)
TABLES: dict[str, tuple[list, list, dict, dict, dict]] = {
    "flat ClusterQueues": (
        [_cq("cq1", red="0"), _cq("cq2", red="5", blue="10")],
        [],
        {"cq1": {RED_CPU: 1000}, "cq2": {RED_CPU: 2500, BLUE_CPU: 1000}},
        {"cq1": {RED_CPU: 0}, "cq2": {RED_CPU: 2500, BLUE_CPU: 9000}},
        {"cq1": {RED_CPU: 0}, "cq2": {RED_CPU: 5000, BLUE_CPU: 10000}},
    ),
    "cohort with its own quota": (
        [_cq("cq1", "co", red="10"), _cq("cq2", "co", red=quota("10", lend="9"))],
        [_cohort("co", red="10")],
        {"cq1": {RED_CPU: 1000}, "cq2": {RED_CPU: 500}},
        {"cq1": {RED_CPU: 28000}, "cq2": {RED_CPU: 28500}},
        {"cq1": {RED_CPU: 29000}, "cq2": {RED_CPU: 30000}},
    ),
    "ClusterQueue borrows from its cohort's quota": (
        [_cq("cq1", "co", red="10")],
        [_cohort("co", red="10")],
        {"cq1": {RED_CPU: 11000}},
        {"cq1": {RED_CPU: 9000}},
        {"cq1": {RED_CPU: 20000}},
    ),
    "an over-admitted ClusterQueue spills into its cohort": (
        [_cq("cq1", "co", red="10"), _cq("cq2", "co", red=quota("10", borrow="0", lend="0"))],
        [_cohort("co", red="10")],
        {"cq1": {RED_CPU: 31000}},
        {"cq1": {RED_CPU: 0}, "cq2": {RED_CPU: 0}},
        {"cq1": {RED_CPU: 20000}, "cq2": {RED_CPU: 10000}},
    ),
    "lending and borrowing limits": (
        [_cq("cq1", "co", red="10"), _cq("cq2", "co", red=quota("10", borrow="2")),
         _cq("cq3", "co", red=quota("10", lend="5"))],
        [_cohort("co", red="10")],
        {"cq1": {RED_CPU: 20000}, "cq2": {RED_CPU: 10000}, "cq3": {RED_CPU: 6000}},
        {"cq1": {RED_CPU: 4000}, "cq2": {RED_CPU: 2000}, "cq3": {RED_CPU: 4000}},
        {"cq1": {RED_CPU: 35000}, "cq2": {RED_CPU: 12000}, "cq3": {RED_CPU: 40000}},
    ),
    "two-level tree": (
        [_cq("cq1", "left", red="10"), _cq("cq2", "right", red=quota("10", lend="0"))],
        [_cohort("root"), _cohort("left", "root", red="10"), _cohort("right", "root", red="10")],
        {"cq1": {RED_CPU: 10000}, "cq2": {RED_CPU: 5000}},
        {"cq1": {RED_CPU: 20000}, "cq2": {RED_CPU: 25000}},
        {"cq1": {RED_CPU: 30000}, "cq2": {RED_CPU: 40000}},
    ),
    "two-level tree, child Cohort with a borrowingLimit": (
        [_cq("left-cq1", "left", red="10"), _cq("left-cq2", "left", red=quota("10", borrow="5")),
         _cq("right-cq", "right", red="10")],
        [_cohort("root"), _cohort("left", "root", red=quota("10", borrow="5")), _cohort("right", "root", red="10")],
        {},
        {"left-cq1": {RED_CPU: 35000}, "left-cq2": {RED_CPU: 15000}, "right-cq": {RED_CPU: 50000}},
        {"left-cq1": {RED_CPU: 35000}, "left-cq2": {RED_CPU: 15000}, "right-cq": {RED_CPU: 50000}},
    ),
    "two-level tree, lending limits": (
        [_cq("left-cq1", "left", red=quota("10", lend="5")), _cq("left-cq2", "left", red="10"),
         _cq("right-cq", "right", red="0"), _cq("root-cq", "root", red="0")],
        [_cohort("root"), _cohort("left", "root", red=quota("0", lend="5")), _cohort("right", "root", red="0")],
        {},
        {"left-cq1": {RED_CPU: 20000}, "left-cq2": {RED_CPU: 15000}, "right-cq": {RED_CPU: 5000},
         "root-cq": {RED_CPU: 5000}},
        {"left-cq1": {RED_CPU: 20000}, "left-cq2": {RED_CPU: 15000}, "right-cq": {RED_CPU: 5000},
         "root-cq": {RED_CPU: 5000}},
    ),
}


@pytest.mark.parametrize("name", list(TABLES))
def test_available_as_kueue_computes_it(name: str) -> None:
    cqs, cohorts, usage, want, want_potential = TABLES[name]
    assert available(cqs, cohorts, usage) == want
    assert available(cqs, cohorts, usage, potential=True) == want_potential
    # With no usage, what is available is the potential (Kueue's test asserts the same).
    assert available(cqs, cohorts, {}) == want_potential


def _workloads(usage: dict[str, dict[tuple[str, str], int]]) -> list[dict[str, Any]]:
    return [_admitted(f"wl-{cq}-{flavor}", cq, flavor, f"{milli}m")
            for cq, frs in usage.items() for (flavor, _res), milli in frs.items()]


OVER = ("flat ClusterQueues", "an over-admitted ClusterQueue spills into its cohort")


@pytest.mark.parametrize("name", [n for n in TABLES if n not in OVER])
def test_tables_within_every_limit_have_no_finding(name: str) -> None:
    cqs, cohorts, usage, *_ = TABLES[name]
    assert check_quota(_workloads(usage), cqs, cohorts) == []


def test_flat_cluster_queue_over_nominal_is_found() -> None:
    cqs, cohorts, usage, *_ = TABLES["flat ClusterQueues"]
    findings = check_quota(_workloads(usage), cqs, cohorts)
    assert [(f.scope, f.name, f.used_milli, f.allowed_milli) for f in findings] == [("ClusterQueue", "cq1", 1000, 0)]


def test_over_admitted_cohort_is_found() -> None:
    cqs, cohorts, usage, *_ = TABLES["an over-admitted ClusterQueue spills into its cohort"]
    findings = check_quota(_workloads(usage), cqs, cohorts)
    # co: own 10 + cq1 10 + cq2 nothing (it lends 0) = 20 cpu for 31 used.
    assert [(f.scope, f.name, f.used_milli, f.allowed_milli) for f in findings] == [("Cohort", "co", 31000, 20000)]


def test_no_finding_means_nothing_is_over_admitted() -> None:
    """Wherever check_quota finds nothing, every ClusterQueue's `available` is >= 0 (Kueue never sees over-admission)."""
    cqs, cohorts, *_ = TABLES["two-level tree, lending limits"]
    for used in range(0, 40001, 2500):
        usage = {"left-cq1": {RED_CPU: used}, "right-cq": {RED_CPU: max(0, 5000 - used)}}
        if not check_quota(_workloads(usage), cqs, cohorts):
            assert all(v >= 0 for frs in available(cqs, cohorts, usage).values() for v in frs.values()), used


def test_borrowing_through_the_root_is_legitimate() -> None:
    """root (own quota 10) <- child (no quota) <- cq (nominal 5): cq may use 15 by borrowing from the root.
    Without the Cohort objects (every Cohort implicit) the same usage looks like 15 of 5."""
    cqs = [_cq("cq", "child", red="5")]
    cohorts = [_cohort("root", red="10"), _cohort("child", "root")]
    wls = [_admitted("a", "cq", "red", "10"), _admitted("b", "cq", "red", "5")]
    assert check_quota(wls, cqs, cohorts) == []
    implicit = check_quota(wls, cqs, [])
    assert [(f.scope, f.name, f.used_milli, f.allowed_milli) for f in implicit] == [("Cohort", "child", 15000, 5000)]
    over = check_quota([*wls, _admitted("c", "cq", "red", "1")], cqs, cohorts)
    assert [(f.scope, f.name, f.used_milli, f.allowed_milli) for f in over] == [("Cohort", "root", 16000, 15000)]


def test_child_cohort_quota_counts_in_the_parent_subtree() -> None:
    """The child Cohort's own resourceGroups add to the subtree: root <- child (own 4) <- cq (1) allows 5."""
    cqs = [_cq("cq", "child", red="1")]
    cohorts = [_cohort("root"), _cohort("child", "root", red="4")]
    assert check_quota([_admitted("a", "cq", "red", "5")], cqs, cohorts) == []
    found = check_quota([_admitted("a", "cq", "red", "6")], cqs, cohorts)
    assert [(f.name, f.used_milli, f.allowed_milli) for f in found] == [("root", 6000, 5000)]


def test_deleted_child_cohort_leaves_its_cluster_queue_in_an_implicit_cohort() -> None:
    """kubernetes-sigs/kueue#10417: root (own 0) <- child (own 6) <- cq-a (2); root <- cq-b (2). Once the child
    Cohort object is deleted, cq-a names an implicit Cohort `child` with no quota and no parent (Kueue's
    pkg/cache/hierarchy/manager.go DeleteCohort: the children move to an implicit Cohort), so root's subtree is
    cq-b's 2 alone. An affected Kueue keeps root's stale subtree quota (10) and admits cq-b 6 cpu: over."""
    cqs = [_cq("cq-a", "child", red="2"), _cq("cq-b", "root", red="2")]
    before = [_cohort("root", red="0"), _cohort("child", "root", red="6")]
    after = [_cohort("root", red="0")]
    wls = [_admitted("b", "cq-b", "red", "6")]
    assert check_quota(wls, cqs, before) == []
    found = check_quota(wls, cqs, after)
    assert [(f.scope, f.name, f.used_milli, f.allowed_milli) for f in found] == [("Cohort", "root", 6000, 2000)]
    # cq-a's implicit Cohort is a root of its own: cq-a may still use its own 2.
    assert check_quota([_admitted("a", "cq-a", "red", "2")], cqs, after) == []
