"""Direct (unproxied) access to kube-apiserver with the admin identity, for the objects the builders make
(harness/objects/builders.py), and the condition helpers waits and checks share. Objects are plain dicts.
"""

from __future__ import annotations

from typing import Any

from harness.objects.builders import KUEUE_API, _Builder

_PLURAL = {
    "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses", "Workload": "workloads", "Cohort": "cohorts",
    "AdmissionCheck": "admissionchecks", "ProvisioningRequestConfig": "provisioningrequestconfigs",
    "Topology": "topologies",
}


class Cluster:
    """Direct (unproxied) access to kube-apiserver with the admin identity. Objects are plain dicts."""

    def __init__(self, api_client) -> None:
        from kubernetes import client

        self.api = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)

    def create(self, obj: dict[str, Any] | _Builder) -> dict[str, Any]:
        """Create a Kueue object, a Job or a Namespace; returns the created object as a dict."""
        if isinstance(obj, _Builder):
            obj = obj.obj()
        kind = obj["kind"]
        ns = obj["metadata"].get("namespace")
        if kind == "Job":
            created = self.batch.create_namespaced_job(ns, obj)
            return self.api.sanitize_for_serialization(created)
        if kind == "Namespace":
            return self.api.sanitize_for_serialization(self.core.create_namespace(obj))
        if kind == "Node":
            return self.api.sanitize_for_serialization(self.core.create_node(obj))
        group, version = obj["apiVersion"].split("/")
        plural = _PLURAL[kind]
        if ns:
            return self.custom.create_namespaced_custom_object(group, version, ns, plural, obj)
        return self.custom.create_cluster_custom_object(group, version, plural, obj)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Kueue objects of `kind` ("Workload", "ClusterQueue", ...) as dicts."""
        plural = _PLURAL[kind]
        if namespace:
            res = self.custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, plural)
        else:
            res = self.custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural)
        return res["items"]

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        plural = _PLURAL[kind]
        if namespace:
            return self.custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, plural, name)
        return self.custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name)

    def workload_for_job(self, namespace: str, job_name: str) -> dict[str, Any] | None:
        """The Workload Kueue created for batch/v1 Job `job_name` (owner reference), or None yet."""
        for wl in self.list("Workload", namespace):
            for ref in wl["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Job" and ref.get("name") == job_name:
                    return wl
        return None

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.batch.read_namespaced_job(name, namespace))

    def pods_of_job(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        """The Pods of batch/v1 Job `job_name`, by the label its controller sets (batch.kubernetes.io/job-name,
        k8s pkg/controller/job), as dicts."""
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}")
        return [self.api.sanitize_for_serialization(p) for p in pods.items]

    def node(self, name: str) -> dict[str, Any]:
        return self.api.sanitize_for_serialization(self.core.read_node(name))


def webhooks_answer(api_client) -> bool:
    """True once Kueue's webhooks answer: a dry-run ResourceFlavor create goes through the
    mresourceflavor/vresourceflavor hooks (failurePolicy Fail), so it raises until Kueue serves them."""
    from kubernetes import client

    client.CustomObjectsApi(api_client).create_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "resourceflavors",
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "kueue-harness-probe"}},
        dry_run="All",
    )
    return True


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    """The condition of type `ctype` in obj.status.conditions, or None."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def is_true(obj: dict[str, Any] | None, ctype: str) -> bool:
    c = condition(obj or {}, ctype)
    return bool(c and c.get("status") == "True")


def conditions_summary(obj: dict[str, Any] | None) -> str:
    """"QuotaReserved=True(QuotaReserved) Evicted=True(Preempted) ..." for failure messages."""
    if not obj:
        return "(absent)"
    parts = [f"{c['type']}={c['status']}({c.get('reason', '')})" for c in (obj.get("status") or {}).get("conditions") or []]
    return " ".join(parts) or "(no conditions)"
