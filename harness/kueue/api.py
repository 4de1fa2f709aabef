"""What a Kueue request means: pure functions from (method, path, query, headers, body) to a KueueWrite,
and from a watch-stream line to a WatchEvent. Shared by the proxy addon and the harness.

Kueue's request shapes per version live here and nowhere else. Source for v0.17: pkg/workload/workload.go
(BaseSSAWorkload, PatchAdmissionStatus, PrepareWorkloadPatch), pkg/scheduler/scheduler.go (admission
goroutine, requeue), pkg/scheduler/preemption/preemption.go (Evict), pkg/controller/jobframework/
reconciler.go (quota release); summarised in docs/kueue-notes.md §6-7.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit

KUEUE_GROUP = "kueue.x-k8s.io"

#: Classes of Workload status writes (docs/kueue-notes.md §7). "other" is a Workload write that fits
#: none of them.
WRITE_CLASSES = ("admission", "eviction", "quota_release", "pending", "finish", "other")

_PATH = re.compile(
    r"^/(?:apis/(?P<group>[^/]+)/(?P<gversion>[^/]+)|api/(?P<coreversion>v1))"
    r"(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<subresource>[^/]+))?/?$"
)


@dataclass(frozen=True)
class ResourceRef:
    """A parsed API path. `group` is "" for the core API; `name`/`subresource` may be None."""

    group: str
    version: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_path(path: str) -> ResourceRef | None:
    """Parse an API path ("/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl/status").

    Returns None for paths that are not resource paths (discovery, /healthz, /openapi).
    A namespaced list path ("/api/v1/namespaces/ns/pods") parses with resource "pods", name None.
    """
    p = urlsplit(path).path
    m = _PATH.match(p)
    if not m:
        return None
    group = m.group("group") or ""
    version = m.group("gversion") or m.group("coreversion")
    resource, name, sub = m.group("resource"), m.group("name"), m.group("subresource")
    namespace = m.group("namespace")
    # "/api/v1/namespaces/ns" matches as resource "namespaces", name "ns". Its subresources
    # ("/api/v1/namespaces/ns/status|finalize") are special-cased as kube-apiserver's RequestInfoFactory does.
    if namespace and name is None and resource in ("status", "finalize"):
        return ResourceRef(group, version, "namespaces", None, namespace, resource)
    return ResourceRef(group, version, resource, namespace, name, sub)


def query_params(path: str) -> dict[str, str]:
    """The query of `path` as a dict of first values."""
    return {k: v[0] for k, v in parse_qs(urlsplit(path).query, keep_blank_values=True).items()}


def is_watch(path: str) -> bool:
    """True for a watch request (`watch=true` or `watch=1`), including watch-list requests."""
    return query_params(path).get("watch", "").lower() in ("true", "1")


def patch_type(content_type: str | None) -> str | None:
    """"apply" | "merge" | "json" | "strategic" from a PATCH Content-Type; None if unknown."""
    ct = (content_type or "").split(";")[0].strip().lower()
    return {
        "application/apply-patch+yaml": "apply",
        "application/apply-patch+cbor": "apply",
        "application/merge-patch+json": "merge",
        "application/json-patch+json": "json",
        "application/strategic-merge-patch+json": "strategic",
    }.get(ct)


def _conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Workload conditions keyed by type (conditions are listType=map keyed by type)."""
    out: dict[str, dict[str, Any]] = {}
    for c in status.get("conditions") or []:
        if isinstance(c, dict) and "type" in c:
            out[c["type"]] = c
    return out


@dataclass(frozen=True)
class KueueWrite:
    """A classified write to a Workload (kind "Workload") or another Kueue/batch object.

    `write`: one of WRITE_CLASSES for Workload status writes, else the HTTP verb in lower case.
    `strict`: the body carries metadata.resourceVersion (optimistic concurrency); loose otherwise.
    `conditions`: condition type -> (status, reason) as sent in the body.
    `admission_cluster_queue`: status.admission.clusterQueue when the body sets it.
    `suspend`: for a write to a Job (not a subresource), spec.suspend as the body sets it (Kueue's job
    reconciler suspends and unsuspends Jobs with a merge patch of it); None when the body does not set it.
    """

    kind: str
    namespace: str | None
    name: str | None
    write: str
    method: str
    subresource: str | None
    field_manager: str | None
    patch_type: str | None
    strict: bool
    resource_version: str | None
    conditions: dict[str, tuple[str, str]] = field(default_factory=dict)
    admission_cluster_queue: str | None = None
    suspend: bool | None = None

    def summary(self) -> str:
        """"admission ns/name (kueue-admission, loose)" — a label for logs and diagrams."""
        mode = "strict" if self.strict else "loose"
        who = self.field_manager or self.patch_type or self.method
        obj = f"{self.namespace}/{self.name}" if self.namespace else str(self.name)
        return f"{self.write} {obj} ({who}, {mode})"

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["conditions"] = {k: list(v) for k, v in self.conditions.items()}
        return d


def classify_workload_status(status: Mapping[str, Any], strict: bool) -> str:
    """Class of a Workload status write from the status it sends and its strictness.

    The writes and their shapes: docs/kueue-notes.md §6-7. Order matters: a preemption sends
    Evicted=True together with QuotaReserved=True and the admission (it is built from the assumed
    state), so eviction is tested before admission.
      finish:        Finished=True (workload.go, Finish; strict)
      eviction:      Evicted=True while status.admission is still sent (preemption.go Evict, loose;
                     workload_controller.go evictions, strict)
      quota_release: QuotaReserved=False, no status.admission, strict — jobframework/reconciler.go
                     "Handling a job with evicted condition" (PatchAdmissionStatus after the job stopped)
      pending:       QuotaReserved=False, no status.admission, loose — scheduler.go requeue
                     (reason Pending or Waiting)
      admission:     status.admission set and QuotaReserved=True (scheduler.go admission goroutine)
    """
    conds = _conditions(status)

    def is_true(t: str) -> bool:
        return str(conds.get(t, {}).get("status")) == "True"

    admission = status.get("admission")
    if is_true("Finished"):
        return "finish"
    if is_true("Evicted") and admission:
        return "eviction"
    qr = conds.get("QuotaReserved")
    if qr is not None and str(qr.get("status")) == "False" and not admission:
        return "quota_release" if strict else "pending"
    if admission and is_true("QuotaReserved"):
        return "admission"
    return "other"


def _json_body(body: bytes | str | None) -> Any:
    if not body:
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        # Apply patches may be YAML; Kueue sends JSON, which is YAML too. Fall back to YAML.
        try:
            import yaml

            return yaml.safe_load(body)
        except Exception:
            return None


def classify_request(
    method: str, path: str, headers: Mapping[str, str], body: bytes | str | None
) -> KueueWrite | None:
    """Classify a write request. Returns None for reads (GET/LIST/WATCH) and non-resource paths.

    `headers` keys are matched case-insensitively. Workload writes to `.../workloads/<name>/status`
    get a class from `classify_workload_status`; other writes get `write` = method in lower case.
    """
    method = method.upper()
    if method not in ("POST", "PUT", "PATCH", "DELETE"):
        return None
    ref = parse_path(path)
    if ref is None:
        return None
    h = {k.lower(): v for k, v in headers.items()}
    q = query_params(path)
    ptype = patch_type(h.get("content-type")) if method == "PATCH" else None
    obj = _json_body(body) if method != "DELETE" else None
    obj = obj if isinstance(obj, dict) else {}
    meta = obj.get("metadata") or {}
    rv = meta.get("resourceVersion") or None
    name = ref.name or meta.get("name")
    kind = obj.get("kind") or _kind_for(ref)
    write = method.lower()
    conds: dict[str, tuple[str, str]] = {}
    cq = None
    if ref.group == KUEUE_GROUP and ref.resource == "workloads" and ref.subresource == "status":
        status = obj.get("status") or {}
        write = classify_workload_status(status, bool(rv))
        conds = {t: (str(c.get("status")), str(c.get("reason", ""))) for t, c in _conditions(status).items()}
        cq = (status.get("admission") or {}).get("clusterQueue")
    suspend = None
    if ref.group == "batch" and ref.resource == "jobs" and ref.subresource is None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("suspend"), bool):
            suspend = spec["suspend"]
    return KueueWrite(
        kind=kind,
        namespace=ref.namespace,
        name=name,
        write=write,
        method=method,
        subresource=ref.subresource,
        field_manager=q.get("fieldManager"),
        patch_type=ptype,
        strict=bool(rv),
        resource_version=rv,
        conditions=conds,
        admission_cluster_queue=cq,
        suspend=suspend,
    )


_KINDS = {
    "workloads": "Workload",
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "resourceflavors": "ResourceFlavor",
    "cohorts": "Cohort",
    "jobs": "Job",
    "pods": "Pod",
    "events": "Event",
}


KNOWN_KINDS = {v: k for k, v in _KINDS.items()}  # "Workload" -> "workloads": the Kinds a plan's match may name


def _kind_for(ref: ResourceRef) -> str:
    return _KINDS.get(ref.resource, ref.resource)


@dataclass(frozen=True)
class WatchEvent:
    """One event of a watch stream: type (ADDED|MODIFIED|DELETED|BOOKMARK|ERROR), object identity,
    resourceVersion, and for Workloads the condition statuses (type -> "True"/"False")."""

    type: str
    kind: str | None
    namespace: str | None
    name: str | None
    resource_version: str | None
    conditions: dict[str, str] = field(default_factory=dict)
    has_admission: bool = False


def parse_watch_line(line: bytes | str) -> WatchEvent | None:
    """Parse one JSON line of a watch response (`{"type": ..., "object": {...}}`); None if not one."""
    try:
        ev = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(ev, dict) or "type" not in ev:
        return None
    obj = ev.get("object") or {}
    meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return None
    status = obj.get("status") or {}
    conds = {t: str(c.get("status")) for t, c in _conditions(status).items()} if isinstance(status, dict) else {}
    return WatchEvent(
        type=str(ev["type"]),
        kind=obj.get("kind"),
        namespace=meta.get("namespace"),
        name=meta.get("name"),
        resource_version=meta.get("resourceVersion"),
        conditions=conds,
        has_admission=bool(isinstance(status, dict) and status.get("admission")),
    )


def rv_at_least(rv: str | None, minimum: str | int) -> bool:
    """resourceVersion comparison. RVs are opaque in the API, but on etcd3-backed kube-apiserver they are
    the etcd revision (a decimal integer); the harness runs only against such servers."""
    if rv is None:
        return False
    try:
        return int(rv) >= int(minimum)
    except ValueError:
        return False
