"""harness/scenarios/plugin.py `_delete_case_objects` with a fake cluster: a 404 is success and one failure never
skips the rest (issue "The kind target holds on a busy CI runner": on a kept kind cluster 4 of 8 cases left their
namespaces, LocalQueues, ClusterQueues, ResourceFlavors and priority classes behind, because the first 404 stopped
the clean-up)."""

from __future__ import annotations

from types import SimpleNamespace

from kubernetes.client.exceptions import ApiException

from harness.scenarios.plugin import CASE_CLUSTER_KINDS, _delete_case_objects


class FakeCluster:
    def __init__(self, fail: dict[str, int]) -> None:
        self.fail, self.deleted = fail, []
        obj = lambda n: {"metadata": {"name": n}}  # noqa: E731
        self.objects = {"ClusterQueue": [obj("p-cq"), obj("other-cq")], "ResourceFlavor": [obj("p-rf")],
                        "WorkloadPriorityClass": [obj("p-low"), obj("p-high")], "Workload": [obj("w1"), obj("w2")]}
        self.batch = SimpleNamespace(list_namespaced_job=lambda ns: SimpleNamespace(items=[]),
                                     delete_namespaced_job=lambda *a, **k: None)
        self.core = SimpleNamespace(delete_namespace=lambda ns: self._delete(f"Namespace/{ns}"))
        self.custom = SimpleNamespace(
            delete_namespaced_custom_object=lambda g, v, ns, plural, name: self._delete(f"{plural}/{name}"),
            delete_cluster_custom_object=lambda g, v, plural, name: self._delete(f"{plural}/{name}"),
            patch_cluster_custom_object=lambda *a: None)

    def list(self, kind, ns=None):
        if kind not in self.objects and kind not in dict(CASE_CLUSTER_KINDS):
            raise ApiException(status=404)
        return self.objects.get(kind, [])

    def _delete(self, what):
        if what in self.fail:
            raise ApiException(status=self.fail[what], reason="nope")
        self.deleted.append(what)


def _ctx(cluster):
    recorded = []
    ctx = SimpleNamespace(cluster=cluster, ns="p-ns", prefix="p-", record=lambda e, **f: recorded.append((e, f)))
    return ctx, recorded


def test_a_404_is_success_and_a_failure_skips_nothing() -> None:
    c = FakeCluster({"workloads/w1": 404, "clusterqueues/p-cq": 500})
    ctx, recorded = _ctx(c)
    failed = _delete_case_objects(ctx)
    assert failed == ["ClusterQueue/p-cq: 500 nope"]
    # Everything after the failures was still deleted; another run's ClusterQueue was not touched.
    assert c.deleted == ["workloads/w2", "Namespace/p-ns", "resourceflavors/p-rf",
                         "workloadpriorityclasses/p-low", "workloadpriorityclasses/p-high"]
    assert recorded == [("case_objects_not_deleted", {"error": "ClusterQueue/p-cq: 500 nope",
                                                      "not_deleted": ["ClusterQueue/p-cq: 500 nope"]})]


def test_all_deleted_is_recorded_as_such() -> None:
    c = FakeCluster({"workloads/w1": 404})
    ctx, recorded = _ctx(c)
    assert _delete_case_objects(ctx) == []
    assert recorded == [("case_objects_deleted", {"namespace": "p-ns"})]


def test_forget_secrets_keeps_only_the_process_record(tmp_path) -> None:
    """A kind run's state (admin.kubeconfig: the cluster's admin key) never outlives the run, started or not."""
    from harness.env.runs import forget_secrets

    (tmp_path / "admin.kubeconfig").write_text("key")
    (tmp_path / "processes.json").write_text("[]")
    (tmp_path / "mitmproxy").mkdir()
    (tmp_path / "mitmproxy" / "ca.pem").write_text("key")
    forget_secrets(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["processes.json"]
    forget_secrets(tmp_path / "gone")  # nothing there: nothing to do
