"""Unit tests for harness.objects builders (kueue.x-k8s.io/v1beta2 shapes, batch/v1 Job) and condition helpers.

Field names follow Kueue v0.17 apis/kueue/v1beta2 (ClusterQueueSpec.cohortName, resourceGroups[].
coveredResources/flavors[].resources[].nominalQuota, preemption.withinClusterQueue) and
pkg/controller/constants (queue-name / priority-class labels).
"""

from __future__ import annotations

import pytest

from harness import objects
from harness.objects import conditions_summary, is_true


def test_resource_flavor_shape() -> None:
    rf = objects.resource_flavor("default")
    assert rf.name == "default"
    assert rf.obj() == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                        "metadata": {"name": "default"}, "spec": {}}


def test_cluster_queue_full_shape() -> None:
    cq = (
        objects.cluster_queue("cq")
        .flavor_quota("on-demand", cpu="2", memory="1Gi")
        .flavor_quota("spot", borrowing_limit={"cpu": "1"}, lending_limit={"memory": "512Mi"},
                      cpu="1", memory="2Gi")
        .preemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")
        .cohort("team")
    )
    assert cq.obj() == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {"name": "on-demand", "resources": [
                        {"name": "cpu", "nominalQuota": "2"},
                        {"name": "memory", "nominalQuota": "1Gi"},
                    ]},
                    {"name": "spot", "resources": [
                        {"name": "cpu", "nominalQuota": "1", "borrowingLimit": "1"},
                        {"name": "memory", "nominalQuota": "2Gi", "lendingLimit": "512Mi"},
                    ]},
                ],
            }],
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "cohortName": "team",
        },
    }


def test_cluster_queue_v1beta1_field_names_absent() -> None:
    spec = objects.cluster_queue("cq").flavor_quota("f", cpu="1").cohort("c").obj()["spec"]
    assert "cohort" not in spec  # v1beta1 name; v1beta2 is cohortName
    assert spec["cohortName"] == "c"


def test_cluster_queue_preemption_only_sets_given_policies() -> None:
    spec = objects.cluster_queue("cq").preemption(within_cluster_queue="LowerPriority").obj()["spec"]
    assert spec["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert "resourceGroups" not in spec and "cohortName" not in spec


def test_covered_resources_not_duplicated() -> None:
    cq = objects.cluster_queue("cq").flavor_quota("a", cpu="1").flavor_quota("b", cpu="2").obj()
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu"]
    assert [f["name"] for f in group["flavors"]] == ["a", "b"]


def test_local_queue_shape() -> None:
    lq = objects.local_queue("lq", "team-a", "cq")
    assert lq.name == "lq"
    assert lq.obj() == {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                        "metadata": {"name": "lq", "namespace": "team-a"}, "spec": {"clusterQueue": "cq"}}


def test_workload_priority_class_shape() -> None:
    o = objects.workload_priority_class("high", 1000).obj()
    assert o["apiVersion"] == "kueue.x-k8s.io/v1beta2" and o["kind"] == "WorkloadPriorityClass"
    assert o["metadata"] == {"name": "high"}
    assert o["value"] == 1000  # top-level, like scheduling.k8s.io PriorityClass
    assert "spec" not in o


def test_job_shape() -> None:
    j = objects.job("j1", "team-a").queue("lq").priority_class("high").requests(cpu="500m", memory="64Mi")
    o = j.obj()
    assert o["apiVersion"] == "batch/v1" and o["kind"] == "Job"
    assert o["metadata"]["name"] == "j1" and o["metadata"]["namespace"] == "team-a"
    assert o["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "lq",
                                       "kueue.x-k8s.io/priority-class": "high"}
    assert o["spec"]["suspend"] is True
    assert o["spec"]["parallelism"] == 1 and o["spec"]["completions"] == 1
    pod = o["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    assert c["resources"]["requests"] == {"cpu": "500m", "memory": "64Mi"}
    assert c["image"]


def test_job_requests_accumulate_and_parallelism_sets_completions() -> None:
    o = objects.job("j", "ns").requests(cpu="1").requests(memory="1Gi").parallelism(3).obj()
    assert o["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert o["spec"]["parallelism"] == 3 and o["spec"]["completions"] == 3


def test_job_without_queue_has_no_kueue_labels() -> None:
    assert objects.job("j", "ns").obj()["metadata"]["labels"] == {}


def test_obj_is_a_deep_copy() -> None:
    b = objects.job("j", "ns").requests(cpu="1")
    first = b.obj()
    first["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "99"
    first["metadata"]["labels"]["x"] = "y"
    again = b.obj()
    assert again["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert again["metadata"]["labels"] == {}


def test_builders_do_not_share_state() -> None:
    a = objects.job("a", "ns").queue("lq-a")
    b = objects.job("b", "ns")
    assert b.obj()["metadata"]["labels"] == {}
    assert a.obj()["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "lq-a"}
    objects.cluster_queue("x").flavor_quota("f", cpu="1")
    assert "resourceGroups" not in objects.cluster_queue("y").obj()["spec"]


WL = {
    "status": {"conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
        {"type": "Evicted", "status": "True", "reason": "Preempted"},
        {"type": "Admitted", "status": "False"},
        {"type": "Requeued", "status": "Unknown", "reason": "Pending"},
    ]},
}


def test_condition_lookup() -> None:
    assert objects.condition(WL, "Evicted") == {"type": "Evicted", "status": "True", "reason": "Preempted"}
    assert objects.condition(WL, "Finished") is None
    assert objects.condition({}, "Evicted") is None
    assert objects.condition({"status": None}, "Evicted") is None
    assert objects.condition({"status": {"conditions": None}}, "Evicted") is None


@pytest.mark.parametrize(
    ("ctype", "expected"),
    [("QuotaReserved", True), ("Evicted", True), ("Admitted", False), ("Requeued", False), ("Finished", False)],
)
def test_is_true(ctype: str, expected: bool) -> None:
    assert is_true(WL, ctype) is expected


def test_is_true_on_absent_objects() -> None:
    assert is_true(None, "Admitted") is False
    assert is_true({}, "Admitted") is False
    assert is_true({"status": {}}, "Admitted") is False
    assert is_true({"status": {"conditions": [{"type": "Admitted", "status": "true"}]}}, "Admitted") is False


def test_conditions_summary() -> None:
    assert conditions_summary(WL) == (
        "QuotaReserved=True(QuotaReserved) Evicted=True(Preempted) Admitted=False() Requeued=Unknown(Pending)"
    )
    assert conditions_summary(None) == "(absent)"
    assert conditions_summary({"metadata": {"name": "w"}}) == "(no conditions)"
    assert conditions_summary({"metadata": {"name": "w"}, "status": {"conditions": []}}) == "(no conditions)"


def test_builders_for_cohorts_fair_sharing_policies_workloads_and_finalizers() -> None:
    from harness.objects import cluster_queue, cohort, quota, workload

    c = (cluster_queue("cq").flavor("rf", cpu=quota("2", borrow="1", lend="0")).cohort("team").fair_sharing("2")
         .preemption_policy(borrowWithinCohort={"policy": "LowerPriority"}).finalizer("example.com/hold").obj())
    assert c["spec"]["resourceGroups"] == [{"coveredResources": ["cpu"], "flavors": [
        {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "2", "borrowingLimit": "1", "lendingLimit": "0"}]}]}]
    assert c["spec"]["cohortName"] == "team" and c["spec"]["fairSharing"] == {"weight": "2"}
    assert c["spec"]["preemption"] == {"borrowWithinCohort": {"policy": "LowerPriority"}}
    assert c["metadata"]["finalizers"] == ["example.com/hold"]
    team = cohort("team").parent("root").flavor("rf", cpu="1").obj()
    assert team["kind"] == "Cohort" and team["spec"]["parentName"] == "root"
    w = workload("w", "ns").queue("lq").priority_class("high").pod_set("main", 2, cpu="1").inactive().obj()
    assert w["spec"]["queueName"] == "lq" and w["spec"]["active"] is False
    assert w["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
    assert w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_several_cluster_queues_in_one_cohort_with_fair_sharing_weights() -> None:
    a, b = objects.cluster_queues("cq-a", "cq-b", flavor="rf", cohort="team", weights={"cq-a": "2"},
                                  cpu=objects.quota("2", borrow="1"))
    a, b = a.borrow_within_cohort("LowerPriority", max_priority_threshold=100).obj(), b.obj()
    for cq in (a, b):
        assert cq["spec"]["cohortName"] == "team"
        assert cq["spec"]["resourceGroups"] == [{"coveredResources": ["cpu"], "flavors": [
            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "2", "borrowingLimit": "1"}]}]}]
    assert a["spec"]["fairSharing"] == {"weight": "2"} and "fairSharing" not in b["spec"]
    assert a["spec"]["preemption"] == {"borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}
    with pytest.raises(ValueError, match="cq-c"):
        objects.cluster_queues("cq-a", flavor="rf", weights={"cq-c": "1"}, cpu="1")


def test_stop_policies_local_queue_weight_and_workload_priority_and_active() -> None:
    assert objects.cluster_queue("c").stop_policy("HoldAndDrain").obj()["spec"]["stopPolicy"] == "HoldAndDrain"
    lq = objects.local_queue("lq", "ns", "c").fair_sharing("3").stop_policy().obj()
    assert lq["spec"] == {"clusterQueue": "c", "fairSharing": {"weight": "3"}, "stopPolicy": "Hold"}
    w = objects.workload("w", "ns").priority(500).inactive().active().finalizer("example.com/keep").obj()
    assert w["spec"]["priority"] == 500 and w["spec"]["active"] is True
    assert w["metadata"]["finalizers"] == ["example.com/keep"]
    assert objects.workload("w").active(False).obj()["spec"]["active"] is False


def test_set_reaches_any_field_a_named_step_does_not() -> None:
    """kueue#14811 needed a Job's backoffLimit, which no named step sets: `set` sets any field by its path."""
    import pytest as _pytest

    from harness import objects as o

    j = o.job("j1", "ns").requests(cpu="1").set(**{"spec.backoffLimit": 0,
                                                    "spec.template.spec.containers[0].resources.limits.cpu": "1"}).obj()
    assert j["spec"]["backoffLimit"] == 0
    assert j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}
    with _pytest.raises(ValueError, match=r"no item \[3\]"):
        o.job("j2", "ns").set(**{"spec.template.spec.containers[3].name": "x"})
    with _pytest.raises(ValueError, match="not a list index"):
        o.job("j3", "ns").set(**{"spec.x[a]": 1})
