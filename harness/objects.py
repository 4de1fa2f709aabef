"""Fluent builders for the objects a case creates (ResourceFlavor, ClusterQueue, LocalQueue,
WorkloadPriorityClass, batch/v1 Job), and a small client that creates and reads them directly from
kube-apiserver (never through the fault proxy). API shapes: Kueue v0.17 apis/kueue/v1beta2.
"""

from __future__ import annotations

import copy
from typing import Any

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # pkg/controller/constants/constants.go
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"  # pkg/controller/constants/constants.go


class _Builder:
    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    def obj(self) -> dict[str, Any]:
        """A deep copy of the object as a dict, ready to send."""
        return copy.deepcopy(self._obj)

    @property
    def name(self) -> str:
        return self._obj["metadata"]["name"]


class ResourceFlavorBuilder(_Builder):
    pass


def resource_flavor(name: str) -> ResourceFlavorBuilder:
    return ResourceFlavorBuilder({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}})


class ClusterQueueBuilder(_Builder):
    def flavor_quota(self, flavor: str, borrowing_limit: dict[str, str] | None = None,
                     lending_limit: dict[str, str] | None = None, **nominal: str) -> "ClusterQueueBuilder":
        """Add `flavor` with nominal quotas (`cpu="1"`, `memory="1Gi"`) to the first resource group."""
        groups = self._obj["spec"].setdefault("resourceGroups", [])
        if not groups:
            groups.append({"coveredResources": [], "flavors": []})
        g = groups[0]
        resources = []
        for res, q in nominal.items():
            r: dict[str, Any] = {"name": res, "nominalQuota": q}
            if borrowing_limit and res in borrowing_limit:
                r["borrowingLimit"] = borrowing_limit[res]
            if lending_limit and res in lending_limit:
                r["lendingLimit"] = lending_limit[res]
            resources.append(r)
            if res not in g["coveredResources"]:
                g["coveredResources"].append(res)
        g["flavors"].append({"name": flavor, "resources": resources})
        return self

    def preemption(self, within_cluster_queue: str | None = None,
                   reclaim_within_cohort: str | None = None) -> "ClusterQueueBuilder":
        p = self._obj["spec"].setdefault("preemption", {})
        if within_cluster_queue:
            p["withinClusterQueue"] = within_cluster_queue
        if reclaim_within_cohort:
            p["reclaimWithinCohort"] = reclaim_within_cohort
        return self

    def cohort(self, name: str) -> "ClusterQueueBuilder":
        self._obj["spec"]["cohortName"] = name
        return self


def cluster_queue(name: str) -> ClusterQueueBuilder:
    return ClusterQueueBuilder({
        "apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {}},
    })


class LocalQueueBuilder(_Builder):
    pass


def local_queue(name: str, namespace: str, cluster_queue: str) -> LocalQueueBuilder:
    return LocalQueueBuilder({
        "apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    })


def workload_priority_class(name: str, value: int) -> _Builder:
    return _Builder({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                     "value": value, "description": f"kueue-harness priority {value}"})


class JobBuilder(_Builder):
    def queue(self, local_queue: str) -> "JobBuilder":
        self._obj["metadata"]["labels"][QUEUE_LABEL] = local_queue
        return self

    def priority_class(self, name: str) -> "JobBuilder":
        self._obj["metadata"]["labels"][PRIORITY_CLASS_LABEL] = name
        return self

    def requests(self, **res: str) -> "JobBuilder":
        self._obj["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"].update(res)
        return self

    def parallelism(self, n: int) -> "JobBuilder":
        self._obj["spec"]["parallelism"] = n
        self._obj["spec"]["completions"] = n
        return self


def job(name: str, namespace: str) -> JobBuilder:
    """A batch/v1 Job created suspended; no kubelet runs here, so its Pods stay Pending."""
    return JobBuilder({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {}},
        "spec": {
            "suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {}}}],
            }},
        },
    })


_PLURAL = {
    "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses", "Workload": "workloads", "Cohort": "cohorts",
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
