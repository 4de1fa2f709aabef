"""Unit tests for harness.checkers.model.quota: quota arithmetic over synthetic Workload, ClusterQueue and Cohort objects.

The builders are harness/objects/builders.py's (the same the cases use); they produce the camelCase dicts the
Kubernetes API returns for kueue.x-k8s.io/v1beta2 objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from harness.checkers.model.quota import (
    QuotaFinding,
    StatusMismatch,
    check_flavors_reservation,
    check_quota,
    holds_quota,
    kueue_milli,
    usage_by_cluster_queue,
)
from harness.objects import (
    ClusterQueueBuilder,
    CohortBuilder,
    Quota,
    WorkloadBuilder,
    cluster_queue,
    cohort,
    quota,
    workload,
)

GI = 2**30

# ---------------------------------------------------------------------------------------------------------
# Builders


def cq(name: str) -> ClusterQueueBuilder:
    return cluster_queue(name)


def wl(name: str, namespace: str = "ns") -> WorkloadBuilder:
    return workload(name, namespace)


def admitted(name: str, cluster_queue: str, flavor: str = "default", **usage: str) -> dict[str, Any]:
    """A Workload holding quota in `cluster_queue` with one pod set using `usage` of `flavor`."""
    return wl(name).reserved_in(cluster_queue).assignment(flavor, **usage).build()


def check(
    workloads: list[dict[str, Any]], cqs: Sequence[ClusterQueueBuilder], cohorts: Sequence[CohortBuilder] = ()
) -> list[QuotaFinding]:
    return check_quota(workloads, [c.build() for c in cqs], [c.build() for c in cohorts])


def brief(findings: list[QuotaFinding]) -> list[tuple[str, str, str, str, int, int]]:
    return [(f.scope, f.name, f.flavor, f.resource, f.allowed_milli, f.used_milli) for f in findings]


# ---------------------------------------------------------------------------------------------------------
# Which Workloads hold quota


def test_no_violation_when_usage_fits() -> None:
    findings = check(
        [admitted("wl-a", "cq", cpu="1"), admitted("wl-b", "cq", cpu="500m", memory="1Gi")],
        [cq("cq").flavor("default", cpu="2", memory="2Gi")],
    )
    assert findings == []


def test_nominal_quota_exceeded_without_cohort() -> None:
    findings = check(
        [admitted("wl-b", "cq", cpu="1"), admitted("wl-a", "cq", cpu="1")],
        [cq("cq").flavor("default", cpu="1")],
    )
    assert brief(findings) == [("ClusterQueue", "cq", "default", "cpu", 1000, 2000)]
    assert findings[0].workloads == ("ns/wl-a", "ns/wl-b")
    assert findings[0].describe() == (
        "ClusterQueue cq flavor default cpu: 2 used of 1 allowed by nominal quota, held by ns/wl-a, ns/wl-b"
    )


def test_usage_exactly_at_nominal_quota_is_allowed() -> None:
    findings = check(
        [admitted("wl-a", "cq", cpu="600m"), admitted("wl-b", "cq", cpu="400m")],
        [cq("cq").flavor("default", cpu="1")],
    )
    assert findings == []


def test_milli_cpu_and_binary_memory_quantities() -> None:
    findings = check(
        [
            admitted("wl-a", "cq", cpu="500m", memory="1Gi"),
            admitted("wl-b", "cq", cpu="0.6", memory="512Mi"),
            admitted("wl-c", "cq", flavor="big", memory="2Gi"),
        ],
        [cq("cq").flavor("default", cpu="1", memory="1536Mi").flavor("big", cpu="1", memory="1Gi")],
    )
    assert brief(findings) == [
        ("ClusterQueue", "cq", "big", "memory", GI * 1000, 2 * GI * 1000),
        ("ClusterQueue", "cq", "default", "cpu", 1000, 1100),
    ]
    assert "2Gi used of 1Gi allowed by nominal quota, held by ns/wl-c" in findings[0].describe()
    assert "1100m used of 1 allowed" in findings[1].describe()


def test_non_cpu_quantities_use_kueues_whole_unit_grid() -> None:
    # Kueue rounds every resource but cpu up to whole units (pkg/resources ResourceValue).
    assert kueue_milli("memory", "1.5") == 2000
    assert kueue_milli("cpu", "1.5") == 1500
    findings = check([admitted("wl-a", "cq", memory="1500m")], [cq("cq").flavor("default", memory="1")])
    assert brief(findings) == [("ClusterQueue", "cq", "default", "memory", 1000, 2000)]


def test_finished_workloads_do_not_hold_quota() -> None:
    done = wl("done").reserved_in("cq").assignment("default", cpu="1").finished().build()
    assert not holds_quota(done)
    assert check([done, admitted("running", "cq", cpu="1")], [cq("cq").flavor("default", cpu="1")]) == []


def test_a_workload_slice_replaced_by_an_admitted_slice_is_not_counted_twice() -> None:
    """kubernetes-sigs/kueue#9015 fixed (v0.17.4): Kueue admits the scaled-up slice (annotated with the slice it
    replaces) and finishes the old one 25 ms later; meanwhile both are admitted in the API, the same Pods."""
    old = admitted("job-e-old", "cq", cpu="1")
    new = (wl("job-e-new").reserved_in("cq").assignment("default", cpu="2")
           .annotation("kueue.x-k8s.io/workload-slice-replacement-for", "ns/job-e-old").build())
    assert check([old, new], [cq("cq").flavor("default", cpu="2")]) == []
    other = admitted("other", "cq", cpu="1")  # a third Workload still counts
    assert brief(check([old, new, other], [cq("cq").flavor("default", cpu="2")])) == [
        ("ClusterQueue", "cq", "default", "cpu", 2000, 3000)]
    plain = admitted("job-e-new", "cq", cpu="2")  # without the annotation: two Workloads, 3 of 2
    assert brief(check([old, plain], [cq("cq").flavor("default", cpu="2")])) == [
        ("ClusterQueue", "cq", "default", "cpu", 2000, 3000)]


def test_quota_reserved_false_does_not_hold_quota() -> None:
    released = (
        wl("released")
        .reserved_in("cq")
        .assignment("default", cpu="1")
        .condition("QuotaReserved", "False", "Pending")
    ).build()
    assert not holds_quota(released)
    assert check([released, admitted("running", "cq", cpu="1")], [cq("cq").flavor("default", cpu="1")]) == []


def test_deactivated_and_unadmitted_workloads_do_not_hold_quota() -> None:
    inactive = wl("inactive").reserved_in("cq").assignment("default", cpu="1").inactive().build()
    no_admission = wl("pending").condition("QuotaReserved", "True").build()
    assert not holds_quota(inactive)
    assert not holds_quota(no_admission)
    assert check([inactive, no_admission], [cq("cq").flavor("default", cpu="0")]) == []


def test_same_workloads_without_the_excluding_condition_are_flagged() -> None:
    # Control for the three tests above: the same usage, held, does exceed the quota.
    findings = check(
        [admitted("extra", "cq", cpu="1"), admitted("running", "cq", cpu="1")],
        [cq("cq").flavor("default", cpu="1")],
    )
    assert brief(findings) == [("ClusterQueue", "cq", "default", "cpu", 1000, 2000)]


def test_flavor_or_resource_not_in_cluster_queue_is_allowed_zero() -> None:
    findings = check(
        [admitted("wl-a", "cq", flavor="spot", cpu="1"), admitted("wl-b", "cq", **{"nvidia.com/gpu": "1"})],
        [
            cq("cq").cohort("team").flavor("default", cpu="4"),
            cq("other").cohort("team").flavor("spot", cpu="4"),
        ],
    )
    assert brief(findings) == [
        ("ClusterQueue", "cq", "default", "nvidia.com/gpu", 0, 1000),
        ("ClusterQueue", "cq", "spot", "cpu", 0, 1000),
    ]
    assert "not in the ClusterQueue's resourceGroups" in findings[0].limit


def test_workload_in_unknown_cluster_queue_is_flagged() -> None:
    findings = check([admitted("wl-a", "gone", cpu="1")], [cq("cq").flavor("default", cpu="1")])
    assert brief(findings) == [("ClusterQueue", "gone", "default", "cpu", 0, 1000)]
    assert "ClusterQueue not found" in findings[0].describe()


# ---------------------------------------------------------------------------------------------------------
# Usage arithmetic


def test_usage_sums_pod_sets_and_workloads() -> None:
    multi = (
        wl("multi")
        .reserved_in("cq")
        .assignment("default", pod_set="driver", cpu="500m", memory="1Gi")
        .assignment("default", pod_set="workers", count=4, cpu="4", memory="4Gi")
        .build()
    )
    usage = usage_by_cluster_queue(
        [multi, admitted("single", "cq", cpu="1"), admitted("elsewhere", "cq2", cpu="1")]
    )
    assert usage == {
        ("cq", "default", "cpu"): (5500, ["ns/multi", "ns/single"]),
        ("cq", "default", "memory"): (5 * GI * 1000, ["ns/multi"]),
        ("cq2", "default", "cpu"): (1000, ["ns/elsewhere"]),
    }


def test_reclaimable_pods_scale_usage_down() -> None:
    # Kueue: totalRequestsFromAdmission divides by the admitted count and multiplies by what is left.
    workload = (
        wl("wl")
        .reserved_in("cq")
        .assignment("default", pod_set="workers", count=4, cpu="4", memory="4Gi")
        .reclaimable("workers", 3)
        .build()
    )
    usage = usage_by_cluster_queue([workload])
    assert usage[("cq", "default", "cpu")] == (1000, ["ns/wl"])
    assert usage[("cq", "default", "memory")] == (GI * 1000, ["ns/wl"])


def test_assignment_count_defaults_to_pod_set_count() -> None:
    workload = wl("wl").pod_set("main", 2).reserved_in("cq").assignment("default", count=None, cpu="2")
    workload.reclaimable("main", 1)
    assert usage_by_cluster_queue([workload.build()])[("cq", "default", "cpu")] == (1000, ["ns/wl"])


def test_tolerates_missing_fields() -> None:
    bare = {
        "metadata": {"name": "x", "namespace": "ns"},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main"}, {}]},
        },
    }
    assert usage_by_cluster_queue([bare, {}, {"status": None}]) == {}
    assert check_quota([bare], [{"metadata": {"name": "cq"}}, {"spec": None}]) == []


# ---------------------------------------------------------------------------------------------------------
# Cohorts


def test_borrowing_within_cohort_total_is_allowed() -> None:
    findings = check(
        [admitted("wl-a", "cq-a", cpu="3"), admitted("wl-b", "cq-b", cpu="1")],
        [
            cq("cq-a").cohort("team").flavor("default", cpu="1"),
            cq("cq-b").cohort("team").flavor("default", cpu="3"),
        ],
    )
    assert findings == []


def test_borrowing_over_cohort_total_is_flagged_at_the_cohort() -> None:
    findings = check(
        [admitted("wl-a", "cq-a", cpu="3"), admitted("wl-b", "cq-b", cpu="2")],
        [
            cq("cq-a").cohort("team").flavor("default", cpu="1"),
            cq("cq-b").cohort("team").flavor("default", cpu="3"),
        ],
    )
    assert brief(findings) == [("Cohort", "team", "default", "cpu", 4000, 5000)]
    assert findings[0].workloads == ("ns/wl-a", "ns/wl-b")
    assert (
        findings[0]
        .describe()
        .startswith("Cohort team flavor default cpu: 5 used of 4 allowed by cohort subtree quota")
    )


def test_v1beta1_cohort_field_is_accepted() -> None:
    findings = check(
        [admitted("wl-a", "cq-a", cpu="2")],
        [
            cq("cq-a").cohort("team", field="cohort").flavor("default", cpu="1"),
            cq("cq-b").cohort("team", field="cohort").flavor("default", cpu="1"),
        ],
    )
    assert findings == []


def test_borrowing_limit_is_enforced() -> None:
    cqs = [
        cq("cq-a").cohort("team").flavor("default", cpu=quota("1", borrow="1")),
        cq("cq-b").cohort("team").flavor("default", cpu="10"),
    ]
    assert check([admitted("wl-a", "cq-a", cpu="2")], cqs) == []
    findings = check([admitted("wl-a", "cq-a", cpu="3")], cqs)
    assert brief(findings) == [("ClusterQueue", "cq-a", "default", "cpu", 2000, 3000)]
    assert "allowed by nominal quota + borrowingLimit" in findings[0].describe()


def test_lending_limit_reduces_what_the_cohort_can_lend() -> None:
    lender_unlimited = cq("cq-b").cohort("team").flavor("default", cpu="4")
    lender_limited = cq("cq-b").cohort("team").flavor("default", cpu=quota("4", lend="1"))
    borrower = cq("cq-a").cohort("team").flavor("default", cpu="1")
    workloads = [admitted("wl-a", "cq-a", cpu="3")]

    assert check(workloads, [borrower, lender_unlimited]) == []
    # cq-b keeps 3 of its 4 cpus for itself: the cohort has 1 + 1 to share.
    findings = check(workloads, [borrower, lender_limited])
    assert brief(findings) == [("Cohort", "team", "default", "cpu", 2000, 3000)]
    assert findings[0].workloads == ("ns/wl-a",)


def test_usage_within_guaranteed_quota_does_not_use_the_shared_pool() -> None:
    cqs = [
        cq("cq-a").cohort("team").flavor("default", cpu="1"),
        cq("cq-b").cohort("team").flavor("default", cpu=quota("4", lend="1")),
    ]
    # cq-b's 3 cpus are guaranteed (4 - lendingLimit 1); cq-a borrows the 1 lendable cpu.
    assert check([admitted("wl-a", "cq-a", cpu="2"), admitted("wl-b", "cq-b", cpu="3")], cqs) == []
    # One more cpu in cq-b spills into the shared pool, which is then over by 1.
    findings = check([admitted("wl-a", "cq-a", cpu="2"), admitted("wl-b", "cq-b", cpu="4")], cqs)
    assert brief(findings) == [("Cohort", "team", "default", "cpu", 2000, 3000)]


def test_cohort_excess_explained_by_a_cluster_queue_is_reported_once() -> None:
    cqs = [
        cq("cq-a").cohort("team").flavor("default", cpu=quota("1", borrow="1")),
        cq("cq-b").cohort("team").flavor("default", cpu="1"),
    ]
    # cq-a is 2 over its own limit; the cohort (2 cpus) is over by the same 2.
    findings = check([admitted("wl-a", "cq-a", cpu="4")], cqs)
    assert brief(findings) == [("ClusterQueue", "cq-a", "default", "cpu", 2000, 4000)]
    # With cq-b also using its cpu, the cohort is over by 3: more than cq-a explains.
    findings = check([admitted("wl-a", "cq-a", cpu="4"), admitted("wl-b", "cq-b", cpu="1")], cqs)
    assert brief(findings) == [
        ("ClusterQueue", "cq-a", "default", "cpu", 2000, 4000),
        ("Cohort", "team", "default", "cpu", 2000, 5000),
    ]


# ---------------------------------------------------------------------------------------------------------
# Hierarchical cohorts


def _hierarchy(team_cpu: str | Quota) -> tuple[list[ClusterQueueBuilder], list[CohortBuilder]]:
    """root (own quota 2 cpu) <- team (own quota per `team_cpu`) <- cq-a (1 cpu); root <- cq-b (2 cpu)."""
    cqs = [
        cq("cq-a").cohort("team").flavor("default", cpu="1"),
        cq("cq-b").cohort("root").flavor("default", cpu="2"),
    ]
    cohorts = [
        cohort("root").flavor("default", cpu="2"),
        cohort("team").parent("root").flavor("default", cpu=team_cpu),
    ]
    return cqs, cohorts


def test_child_cohort_borrows_from_parent_within_its_borrowing_limit() -> None:
    cqs, cohorts = _hierarchy(quota("0", borrow="1"))
    assert check([admitted("wl-a", "cq-a", cpu="2")], cqs, cohorts) == []


def test_child_cohort_borrowing_limit_is_enforced() -> None:
    cqs, cohorts = _hierarchy(quota("0", borrow="1"))
    findings = check([admitted("wl-a", "cq-a", cpu="3")], cqs, cohorts)
    # team: subtree quota 1 (cq-a) + borrowingLimit 1; root still has room (5 cpus), so only team is flagged.
    assert brief(findings) == [("Cohort", "team", "default", "cpu", 2000, 3000)]
    assert "cohort subtree quota + borrowingLimit" in findings[0].describe()


def test_root_cohort_total_includes_its_own_quota_and_children() -> None:
    cqs, cohorts = _hierarchy("0")
    # root: own 2 + cq-b 2 + team (cq-a 1) = 5 cpus.
    assert check([admitted("wl-a", "cq-a", cpu="3"), admitted("wl-b", "cq-b", cpu="2")], cqs, cohorts) == []
    findings = check([admitted("wl-a", "cq-a", cpu="4"), admitted("wl-b", "cq-b", cpu="2")], cqs, cohorts)
    assert brief(findings) == [("Cohort", "root", "default", "cpu", 5000, 6000)]
    assert findings[0].workloads == ("ns/wl-a", "ns/wl-b")


def test_child_cohort_lending_limit_keeps_quota_out_of_the_parent() -> None:
    cqs, cohorts = _hierarchy(quota("0", lend="0"))
    # team lends nothing: root has own 2 + cq-b 2 = 4 cpus for cq-b.
    findings = check([admitted("wl-b", "cq-b", cpu="5")], cqs, cohorts)
    assert brief(findings) == [("Cohort", "root", "default", "cpu", 4000, 5000)]


def test_parent_cohort_that_is_not_an_object_is_an_implicit_root() -> None:
    cqs = [
        cq("cq-a").cohort("team").flavor("default", cpu="1"),
        cq("cq-b").cohort("root").flavor("default", cpu="2"),
    ]
    findings = check([admitted("wl-a", "cq-a", cpu="4")], cqs, [cohort("team").parent("root")])
    assert brief(findings) == [("Cohort", "root", "default", "cpu", 3000, 4000)]


def test_cohort_cycle_does_not_hang() -> None:
    cqs = [cq("cq-a").cohort("x").flavor("default", cpu="1")]
    findings = check(
        [admitted("wl-a", "cq-a", cpu="2")], cqs, [cohort("x").parent("y"), cohort("y").parent("x")]
    )
    assert [f.scope for f in findings] == ["Cohort"]


# ---------------------------------------------------------------------------------------------------------
# Findings


def test_findings_are_frozen() -> None:
    finding = check([admitted("wl-a", "cq", cpu="2")], [cq("cq").flavor("default", cpu="1")])[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.used_milli = 0  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------------------
# status.flavorsReservation


def test_flavors_reservation_matching_workloads_is_not_reported() -> None:
    cluster_queue = (
        cq("cq").flavor("default", cpu="4", memory="4Gi").reservation("default", cpu="1500m", memory="1Gi")
    )
    workloads = [admitted("wl-a", "cq", cpu="1", memory="1Gi"), admitted("wl-b", "cq", cpu="500m")]
    assert check_flavors_reservation([cluster_queue.build()], workloads) == []


def test_flavors_reservation_mismatch_is_detected() -> None:
    cluster_queue = (
        cq("cq").flavor("default", cpu="4", memory="4Gi").reservation("default", cpu="1", memory="0")
    )
    workloads = [admitted("wl-a", "cq", cpu="1", memory="1Gi"), admitted("wl-b", "cq", cpu="1")]
    mismatches = check_flavors_reservation([cluster_queue.build()], workloads)
    assert mismatches == [
        StatusMismatch("cq", "default", "cpu", 1000, 2000, ("ns/wl-a", "ns/wl-b")),
        StatusMismatch("cq", "default", "memory", 0, GI * 1000, ("ns/wl-a",)),
    ]
    assert mismatches[0].describe() == (
        "ClusterQueue cq flavor default cpu: status.flavorsReservation reports 1 but "
        "Workloads holding quota add up to 2 (ns/wl-a, ns/wl-b)"
    )


def test_flavors_reservation_missing_entry_counts_as_zero() -> None:
    cluster_queue = cq("cq").flavor("default", cpu="4")
    mismatches = check_flavors_reservation([cluster_queue.build()], [admitted("wl-a", "cq", cpu="1")])
    assert mismatches == [StatusMismatch("cq", "default", "cpu", 0, 1000, ("ns/wl-a",))]


def test_flavors_reservation_stale_total_without_workloads_is_reported() -> None:
    cluster_queue = cq("cq").flavor("default", cpu="4").reservation("default", cpu="2")
    finished = wl("done").reserved_in("cq").assignment("default", cpu="2").finished().build()
    mismatches = check_flavors_reservation([cluster_queue.build()], [finished])
    assert mismatches == [StatusMismatch("cq", "default", "cpu", 2000, 0, ())]
    assert "(no Workload)" in mismatches[0].describe()
