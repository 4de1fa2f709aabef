"""Unit tests for harness.kueue.api: path parsing, watch detection, and the classification of Kueue v0.17
Workload status writes built the way Kueue builds them (docs/kueue-notes.md §6-7).

Every Workload status write in v0.17 is a server-side apply: `PATCH .../workloads/<name>/status
?fieldManager=kueue-admission&force=true`, `Content-Type: application/apply-patch+yaml`, a JSON body made of
`BaseSSAWorkload` (metadata name/namespace/uid/generation/labels, `resourceVersion` only when strict) plus
the status fields `PatchAdmissionStatus` copies.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.kueue.api import (
    KueueWrite,
    ResourceRef,
    WatchEvent,
    classify_request,
    is_watch,
    parse_path,
    parse_watch_line,
    patch_type,
    rv_at_least,
)

# ---------------------------------------------------------------------------------------------------------
# Builders: Kueue v0.17 request shapes

NS = "team-a"
WL = "job-job1-3f2a1"
CQ = "cq"
KUEUE_UA = "kueue/v0.17.0 (linux/amd64) 5c1a2b3"
TS = "2025-06-01T10:00:00Z"


def status_path(name: str = WL, ns: str = NS, manager: str = "kueue-admission") -> str:
    return f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{name}/status?fieldManager={manager}&force=true"


def ssa_headers() -> dict[str, str]:
    return {
        "Content-Type": "application/apply-patch+yaml",
        "Accept": "application/json, */*",
        "User-Agent": KUEUE_UA,
    }


def cond(type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    """A metav1.Condition as Kueue serializes it."""
    return {
        "type": type_,
        "status": status,
        "observedGeneration": 1,
        "lastTransitionTime": TS,
        "reason": reason,
        "message": message,
    }


def admission(cq: str = CQ) -> dict[str, Any]:
    return {
        "clusterQueue": cq,
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}
        ],
    }


def ssa_body(status: dict[str, Any], *, strict: bool, rv: str = "1234", name: str = WL, ns: str = NS) -> bytes:
    """BaseSSAWorkload + status: resourceVersion only when strict (workload.go:814-836)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "uid": "0b8a4c1e-6a51-4f0e-9d8a-0f6e1b2c3d4e",
        "generation": 1,
        "creationTimestamp": None,
        "labels": {"kueue.x-k8s.io/job-uid": "7d3c1f70-2f0a-4d7b-8d5e-1a2b3c4d5e6f"},
    }
    if strict:
        meta["resourceVersion"] = rv
    return json.dumps(
        {"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": meta, "spec": {}, "status": status}
    ).encode()


def classify_ssa(status: dict[str, Any], *, strict: bool, rv: str = "1234") -> KueueWrite | None:
    return classify_request("PATCH", status_path(), ssa_headers(), ssa_body(status, strict=strict, rv=rv))


# The five writes of docs/kueue-notes.md §7.

ADMISSION_STATUS = {  # scheduler.go admission goroutine (loose)
    "admission": admission(),
    "conditions": [
        cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CQ}"),
        cond("Admitted", "True", "Admitted", "The workload is admitted"),
    ],
}

EVICTION_STATUS = {  # preemption.go Evict (loose), built from the assumed (admitted) state
    "admission": admission(),
    "conditions": [
        cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CQ}"),
        cond("Admitted", "True", "Admitted", "The workload is admitted"),
        cond(
            "Evicted", "True", "Preempted",
            "Preempted to accommodate a workload (UID: 1111, JobUID: 2222) due to prioritization in the "
            "ClusterQueue; preemptor path: /cq; preemptee path: /cq",
        ),
        cond("Preempted", "True", "InClusterQueue", "Preempted to accommodate a workload (UID: 1111)"),
    ],
}

QUOTA_RELEASE_STATUS = {  # jobframework/reconciler.go after the job stopped (strict, no admission)
    "requeueState": {"count": 1},
    "conditions": [
        cond("QuotaReserved", "False", "Pending", "Preempted to accommodate a workload (UID: 1111)"),
        cond("Admitted", "False", "NoReservation", "The workload has no reservation"),
        cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: 1111)"),
        cond("Preempted", "True", "InClusterQueue", "Preempted to accommodate a workload (UID: 1111)"),
        cond("Requeued", "True", "Preempted", "Preempted to accommodate a workload (UID: 1111)"),
    ],
}

PENDING_STATUS = {  # scheduler.go requeue (loose)
    "conditions": [
        cond("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused "
             "quota for cpu in flavor default, 1 more needed. Pending the preemption of 1 workload(s)"),
    ],
}

FINISH_STATUS = {  # workload.go Finish (strict); the admission is still there
    "admission": admission(),
    "conditions": [
        cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CQ}"),
        cond("Admitted", "True", "Admitted", "The workload is admitted"),
        cond("Finished", "True", "Succeeded", "Job finished successfully"),
    ],
}


# ---------------------------------------------------------------------------------------------------------
# parse_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # core API, namespaced
        ("/api/v1/namespaces/ns1/pods", ResourceRef("", "v1", "pods", "ns1", None, None)),
        ("/api/v1/namespaces/ns1/pods/p1", ResourceRef("", "v1", "pods", "ns1", "p1", None)),
        ("/api/v1/namespaces/ns1/pods/p1/status", ResourceRef("", "v1", "pods", "ns1", "p1", "status")),
        ("/api/v1/namespaces/ns1/events?fieldManager=x", ResourceRef("", "v1", "events", "ns1", None, None)),
        # core API, cluster-scoped (the namespace object itself and its subresources included)
        ("/api/v1/nodes/n1", ResourceRef("", "v1", "nodes", None, "n1", None)),
        ("/api/v1/namespaces", ResourceRef("", "v1", "namespaces", None, None, None)),
        ("/api/v1/namespaces/ns1", ResourceRef("", "v1", "namespaces", None, "ns1", None)),
        ("/api/v1/namespaces/ns1/status", ResourceRef("", "v1", "namespaces", None, "ns1", "status")),
        ("/api/v1/namespaces/ns1/finalize", ResourceRef("", "v1", "namespaces", None, "ns1", "finalize")),
        # named groups, namespaced
        (
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns1/workloads/wl1/status",
            ResourceRef("kueue.x-k8s.io", "v1beta2", "workloads", "ns1", "wl1", "status"),
        ),
        (
            "/apis/batch/v1/namespaces/ns1/jobs/job1?fieldManager=kueue",
            ResourceRef("batch", "v1", "jobs", "ns1", "job1", None),
        ),
        (
            "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns1/localqueues",
            ResourceRef("kueue.x-k8s.io", "v1beta2", "localqueues", "ns1", None, None),
        ),
        # named groups, cluster-scoped
        (
            "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq/status",
            ResourceRef("kueue.x-k8s.io", "v1beta2", "clusterqueues", None, "cq", "status"),
        ),
        (
            "/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true&resourceVersion=10",
            ResourceRef("kueue.x-k8s.io", "v1beta2", "workloads", None, None, None),
        ),
        ("/apis/kueue.x-k8s.io/v1beta2/resourceflavors/", ResourceRef("kueue.x-k8s.io", "v1beta2", "resourceflavors")),
    ],
)
def test_parse_path_resource_paths(path: str, expected: ResourceRef) -> None:
    assert parse_path(path) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/healthz",
        "/readyz?verbose",
        "/version",
        "/metrics",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/kueue.x-k8s.io",
        "/apis/kueue.x-k8s.io/v1beta2",
        "/openapi/v2",
        "/openapi/v3/apis/kueue.x-k8s.io/v1beta2",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns1/workloads/wl1/status/extra",
        "",
    ],
)
def test_parse_path_non_resource_paths(path: str) -> None:
    assert parse_path(path) is None


# ---------------------------------------------------------------------------------------------------------
# is_watch / patch_type


@pytest.mark.parametrize(
    ("path", "watch"),
    [
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true", True),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?watch=1", True),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?watch=True", True),
        # client-go 0.35 watch-list: the initial list arrives as a watch
        (
            "/apis/kueue.x-k8s.io/v1beta2/workloads?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
            "&sendInitialEvents=true&timeoutSeconds=300&watch=true",
            True,
        ),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?watch=false", False),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?watch=", False),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?limit=500&resourceVersion=0", False),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads", False),
        ("/apis/kueue.x-k8s.io/v1beta2/workloads?allowWatchBookmarks=true", False),
    ],
)
def test_is_watch(path: str, watch: bool) -> None:
    assert is_watch(path) is watch


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/apply-patch+yaml", "apply"),
        ("application/apply-patch+cbor", "apply"),
        ("Application/Apply-Patch+YAML; charset=utf-8", "apply"),
        ("application/merge-patch+json", "merge"),
        ("application/json-patch+json", "json"),
        ("application/strategic-merge-patch+json", "strategic"),
        ("application/json", None),
        ("", None),
        (None, None),
    ],
)
def test_patch_type(content_type: str | None, expected: str | None) -> None:
    assert patch_type(content_type) == expected


# ---------------------------------------------------------------------------------------------------------
# classify_request: the five Workload status writes


def test_admission_goroutine_write_is_admission() -> None:
    w = classify_ssa(ADMISSION_STATUS, strict=False)
    assert w is not None
    assert w.write == "admission"
    assert (w.kind, w.namespace, w.name, w.subresource) == ("Workload", NS, WL, "status")
    assert (w.method, w.patch_type, w.field_manager) == ("PATCH", "apply", "kueue-admission")
    assert w.strict is False and w.resource_version is None
    assert w.admission_cluster_queue == CQ
    assert w.conditions == {"QuotaReserved": ("True", "QuotaReserved"), "Admitted": ("True", "Admitted")}


def test_admission_with_conditions_flipped_to_false_is_still_admission() -> None:
    # A re-admission sends the earlier Evicted/Preempted as False with reason QuotaReserved
    # (docs/kueue-notes.md §7).
    status = {
        "admission": admission(),
        "conditions": ADMISSION_STATUS["conditions"]
        + [cond("Evicted", "False", "QuotaReserved", ""), cond("Preempted", "False", "QuotaReserved", "")],
    }
    w = classify_ssa(status, strict=False)
    assert w is not None and w.write == "admission"
    assert w.conditions["Evicted"] == ("False", "QuotaReserved")


def test_preemption_eviction_is_eviction_not_admission() -> None:
    w = classify_ssa(EVICTION_STATUS, strict=False)
    assert w is not None
    assert w.write == "eviction"
    assert w.strict is False
    assert w.conditions["Evicted"] == ("True", "Preempted")
    assert w.conditions["Preempted"] == ("True", "InClusterQueue")
    assert w.conditions["QuotaReserved"] == ("True", "QuotaReserved")
    assert w.admission_cluster_queue == CQ


def test_quota_release_from_job_reconciler_is_quota_release() -> None:
    w = classify_ssa(QUOTA_RELEASE_STATUS, strict=True, rv="4711")
    assert w is not None
    assert w.write == "quota_release"
    assert w.strict is True and w.resource_version == "4711"
    assert w.admission_cluster_queue is None
    assert w.conditions["QuotaReserved"] == ("False", "Pending")
    assert w.conditions["Requeued"] == ("True", "Preempted")
    assert w.conditions["Admitted"] == ("False", "NoReservation")


def test_scheduler_requeue_pending_is_pending() -> None:
    w = classify_ssa(PENDING_STATUS, strict=False)
    assert w is not None
    assert w.write == "pending"
    assert w.strict is False
    assert w.conditions == {"QuotaReserved": ("False", "Pending")}


def test_strictness_separates_quota_release_from_pending() -> None:
    # Same status content; only metadata.resourceVersion differs.
    assert classify_ssa(PENDING_STATUS, strict=True).write == "quota_release"
    assert classify_ssa(QUOTA_RELEASE_STATUS, strict=False).write == "pending"


def test_finish_is_finish_even_with_admission() -> None:
    w = classify_ssa(FINISH_STATUS, strict=True, rv="99")
    assert w is not None
    assert w.write == "finish"
    assert w.conditions["Finished"] == ("True", "Succeeded")


def test_status_write_matching_no_class_is_other() -> None:
    # reclaimablePods update (kueue-reclaimable-pods): no conditions at all.
    body = ssa_body({"reclaimablePods": [{"name": "main", "count": 1}]}, strict=True)
    w = classify_request("PATCH", status_path(manager="kueue-reclaimable-pods"), ssa_headers(), body)
    assert w is not None
    assert w.write == "other"
    assert w.field_manager == "kueue-reclaimable-pods"


def test_merge_patch_strict_quota_release() -> None:
    # WorkloadRequestUseMergePatch: a merge-patch diff, no fieldManager, strict via metadata.resourceVersion.
    body = json.dumps({"metadata": {"resourceVersion": "77"}, "status": {
        "admission": None,
        "conditions": [cond("QuotaReserved", "False", "Pending", "evicted")],
    }}).encode()
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{WL}/status"
    w = classify_request("PATCH", path, {"content-type": "application/merge-patch+json"}, body)
    assert w is not None
    assert (w.write, w.patch_type, w.field_manager, w.strict) == ("quota_release", "merge", None, True)
    assert w.name == WL and w.kind == "Workload"


def test_headers_are_matched_case_insensitively() -> None:
    headers = {"CONTENT-TYPE": "application/apply-patch+yaml"}
    w = classify_request("patch", status_path(), headers, ssa_body(ADMISSION_STATUS, strict=False))
    assert w is not None and w.patch_type == "apply" and w.method == "PATCH"


def test_summary_and_to_dict() -> None:
    w = classify_ssa(ADMISSION_STATUS, strict=False)
    assert w.summary() == f"admission {NS}/{WL} (kueue-admission, loose)"
    d = w.to_dict()
    json.dumps(d)  # the addon logs it as JSON
    assert d["write"] == "admission"
    assert d["conditions"]["QuotaReserved"] == ["True", "QuotaReserved"]
    q = classify_ssa(QUOTA_RELEASE_STATUS, strict=True)
    assert q.summary() == f"quota_release {NS}/{WL} (kueue-admission, strict)"


# ---------------------------------------------------------------------------------------------------------
# classify_request: reads and other objects


@pytest.mark.parametrize(
    "path",
    [
        f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{WL}",
        "/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true",
        "/apis/kueue.x-k8s.io/v1beta2/workloads?limit=500",
    ],
)
def test_get_is_not_a_write(path: str) -> None:
    assert classify_request("GET", path, {"User-Agent": KUEUE_UA}, b"") is None


def test_write_to_non_resource_path_is_none() -> None:
    assert classify_request("POST", "/apis", {}, b"{}") is None


def test_job_patch_is_patch_with_kind_job() -> None:
    # Kueue suspending a Job (Stop): a merge patch on the Job itself.
    body = json.dumps({"spec": {"suspend": True},
                       "metadata": {"annotations": {"kueue.x-k8s.io/stopping": "true"}}}).encode()
    w = classify_request(
        "PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job1", {"Content-Type": "application/merge-patch+json"}, body
    )
    assert w is not None
    assert (w.write, w.kind, w.name, w.namespace) == ("patch", "Job", "job1", NS)
    assert w.subresource is None
    assert w.conditions == {} and w.admission_cluster_queue is None
    assert w.strict is False


def test_workload_create_takes_name_from_body_and_kind() -> None:
    body = json.dumps({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
                       "metadata": {"name": WL, "namespace": NS}, "spec": {"queueName": "lq"}}).encode()
    w = classify_request("POST", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads",
                         {"Content-Type": "application/json"}, body)
    assert w is not None
    assert (w.write, w.kind, w.name, w.patch_type) == ("post", "Workload", WL, None)


def test_delete_ignores_body() -> None:
    w = classify_request("DELETE", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{WL}", {},
                         b'{"kind":"DeleteOptions","propagationPolicy":"Background"}')
    assert w is not None
    assert (w.write, w.kind, w.name) == ("delete", "Workload", WL)


def test_unparseable_body_still_classifies_by_path() -> None:
    w = classify_request("PATCH", status_path(), ssa_headers(), b"\xff\xfe not json")
    assert w is not None
    assert (w.write, w.name, w.strict) == ("other", WL, False)


# ---------------------------------------------------------------------------------------------------------
# parse_watch_line


def watch_line(type_: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": type_, "object": obj}).encode()


def workload_obj(name: str = WL, rv: str = "120", status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": rv, "uid": "u1"},
        "spec": {"queueName": "lq"},
        "status": status or {},
    }


def test_parse_watch_line_added() -> None:
    ev = parse_watch_line(watch_line("ADDED", workload_obj(rv="100", status=PENDING_STATUS)))
    assert ev == WatchEvent(
        type="ADDED", kind="Workload", namespace=NS, name=WL, resource_version="100",
        conditions={"QuotaReserved": "False"}, has_admission=False,
    )


def test_parse_watch_line_modified_with_admission_and_str_input() -> None:
    line = watch_line("MODIFIED", workload_obj(rv="130", status=EVICTION_STATUS)).decode()
    ev = parse_watch_line(line)
    assert ev is not None
    assert (ev.type, ev.name, ev.resource_version, ev.has_admission) == ("MODIFIED", WL, "130", True)
    assert ev.conditions == {"QuotaReserved": "True", "Admitted": "True", "Evicted": "True", "Preempted": "True"}


def test_parse_watch_line_bookmark_has_rv_but_no_name() -> None:
    line = watch_line("BOOKMARK", {"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
                                   "metadata": {"resourceVersion": "555",
                                                "annotations": {"k8s.io/initial-events-end": "true"}}})
    ev = parse_watch_line(line)
    assert ev is not None
    assert (ev.type, ev.name, ev.namespace, ev.resource_version) == ("BOOKMARK", None, None, "555")
    assert ev.conditions == {} and ev.has_admission is False


def test_parse_watch_line_error_event() -> None:
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "too old resource version: 1 (200)", "reason": "Expired", "code": 410}
    ev = parse_watch_line(watch_line("ERROR", status))
    assert ev is not None
    assert (ev.type, ev.kind, ev.name) == ("ERROR", "Status", None)
    assert ev.conditions == {}  # the Status object's "status" is a string, not a Workload status


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b'{"type": "ADDED", "object": {',  # a line cut in half
        b"[1, 2]",
        b'"ADDED"',
        b'{"object": {"metadata": {"name": "x"}}}',  # no type
        b'{"type": "ADDED", "object": "x"}',
        b'{"type": "ADDED", "object": {"metadata": "x", "status": []}}',
        b"\xff\xfe",
    ],
)
def test_parse_watch_line_garbage_is_none(line: bytes) -> None:
    assert parse_watch_line(line) is None


# ---------------------------------------------------------------------------------------------------------
# rv_at_least


@pytest.mark.parametrize(
    ("rv", "minimum", "expected"),
    [
        ("10", 10, True),
        ("11", "10", True),
        ("9", "10", False),  # numeric, not lexical ("9" > "10" as strings)
        ("100", 99, True),
        (None, 1, False),
        ("", 1, False),
        ("abc", 1, False),
        ("10", "abc", False),
    ],
)
def test_rv_at_least(rv: str | None, minimum: str | int, expected: bool) -> None:
    assert rv_at_least(rv, minimum) is expected
