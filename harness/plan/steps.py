"""Plan steps (docs/fault-plans.md, Steps) and the facts plans wait for.

Pure part (the plan loader and the proxy use it): the objects a `create` step names — inline, or built by
a builder of harness/objects/builders.py by name —, `patch` and `delete` specs, object references (`Kind/name`),
and `${namespace}` templating. Harness part (harness/nemesis/runner.py uses it): `KubeRest` does a step against
kube-apiserver directly with the admin identity (never through the fault proxy), and `FactObserver`
watches for what `{log: …}` / `{object: …}` triggers and `wait` steps name: a line of Kueue's log, an
object's condition, deletion or field value.
"""

from __future__ import annotations

import copy
import fnmatch
import inspect
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from harness import objects
from harness.kueue import log as kueue_log
from harness.common.jsonl import JsonlTail


class StepError(ValueError):
    """A step's spec is wrong (offline), or kube-apiserver refused what it asked (at run time). The
    message says what to change or what kube-apiserver answered."""


# ---- templating ----------------------------------------------------------------------------------

#: `${name}` in any string of a plan. The only variable: the namespace the plan is loaded for.
TEMPLATE = re.compile(r"\$\{([^}]*)\}")
TEMPLATE_VARS = ("namespace",)
#: `${namespace}` when the plan is loaded for no namespace (a session's `plan load` without --namespace).
DEFAULT_NAMESPACE = "default"


def template(value: Any, namespace: str) -> Any:
    """`value` with `${namespace}` replaced in every string (deep copy of mappings and lists)."""
    if isinstance(value, str):
        return value.replace("${namespace}", namespace) if "${" in value else value
    if isinstance(value, dict):
        return {k: template(v, namespace) for k, v in value.items()}
    if isinstance(value, list):
        return [template(v, namespace) for v in value]
    return value


def unknown_variables(text: str) -> list[str]:
    """The `${…}` names in `text` that are not TEMPLATE_VARS."""
    return [m for m in TEMPLATE.findall(text) if m not in TEMPLATE_VARS]


# ---- kinds ---------------------------------------------------------------------------------------

_KUEUE = objects.KUEUE_API
#: Kinds resolved without discovery: kind -> (apiVersion, plural, namespaced).
KNOWN_KINDS: dict[str, tuple[str, str, bool]] = {
    "Workload": (_KUEUE, "workloads", True),
    "LocalQueue": (_KUEUE, "localqueues", True),
    "ClusterQueue": (_KUEUE, "clusterqueues", False),
    "ResourceFlavor": (_KUEUE, "resourceflavors", False),
    "Cohort": (_KUEUE, "cohorts", False),
    "WorkloadPriorityClass": (_KUEUE, "workloadpriorityclasses", False),
    "AdmissionCheck": (_KUEUE, "admissionchecks", False),
    "Topology": (_KUEUE, "topologies", False),
    "Job": ("batch/v1", "jobs", True),
    "Pod": ("v1", "pods", True),
    "ConfigMap": ("v1", "configmaps", True),
    "LimitRange": ("v1", "limitranges", True),
    "ResourceQuota": ("v1", "resourcequotas", True),
    "Namespace": ("v1", "namespaces", False),
    "Node": ("v1", "nodes", False),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses", False),
}


def cluster_scoped(kind: str) -> bool:
    """Whether a kind is known to be cluster-scoped (unknown kinds: resolved by discovery at run time)."""
    known = KNOWN_KINDS.get(kind)
    return known is not None and not known[2]


_REF = re.compile(r"([A-Z][A-Za-z0-9]*)(?:\.([a-z0-9][a-z0-9.-]*))?/(.+)")


def parse_ref(ref: Any) -> tuple[str, str | None, str]:
    """"Workload/w1" -> ("Workload", None, "w1"); "Job.batch/j1" -> ("Job", "batch", "j1"). Raises
    StepError."""
    m = _REF.fullmatch(ref) if isinstance(ref, str) else None
    if m is None or "/" in m.group(3):
        raise StepError(f"object {ref!r} is not Kind/name (e.g. Workload/w1, ClusterQueue/${{namespace}}-cq)")
    return m.group(1), m.group(2), m.group(3)


# ---- create: objects, inline or by builder -------------------------------------------------------

#: The builders of harness/objects/builders.py a plan may name (`create: {builder: NAME, args, with}`).
BUILDER_NAMES = ("resource_flavor", "cluster_queue", "cohort", "local_queue", "workload_priority_class", "workload",
                 "job", "node", "barrier")
_NOT_STEPS = ("obj", "build")


def builders() -> dict[str, Callable[..., Any]]:
    """Builder name -> function of harness/objects/builders.py (those of BUILDER_NAMES that exist)."""
    return {n: getattr(objects, n) for n in BUILDER_NAMES if callable(getattr(objects, n, None))}


def step_names(built: Any) -> list[str]:
    """The `with:` steps a built object (or a builder class) takes: its public methods but `obj`/`build`, sorted."""
    return sorted(m for m in dir(built) if not m.startswith("_") and m not in _NOT_STEPS
                  and callable(getattr(built, m, None)))


def _plain_signature(fn: Callable[..., Any]) -> str:
    """"(name, count, **requests)": a signature without annotations (and without `self`)."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values() if p.name != "self"]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def _first_sentence(fn: Any) -> str:
    """The first sentence of `fn`'s docstring, on one line, with `|` escaped for a Markdown table."""
    text = " ".join((inspect.getdoc(fn) or "").split())
    m = re.match(r"(.+?\.)(?:\s+[A-Z(`]|$)", text)
    return (m.group(1) if m else text).replace("|", "\\|")


def builder_class(name: str) -> type | None:
    """The builder class whose `with:` steps builder `name` takes (from its return annotation), or None when it
    returns a list of objects (`barrier`: no `with:` steps)."""
    import typing

    ret = typing.get_type_hints(builders()[name]).get("return")
    return ret if isinstance(ret, type) and issubclass(ret, objects._Builder) else None  # noqa: SLF001


def builder_reference() -> str:
    """The two tables of docs/fault-plans.md "Builders" (Markdown), generated from harness/objects/builders.py so the doc
    cannot drift (tests/unit/test_builder_doc.py compares them): every builder a plan's `create: {builder: …}`
    may name (BUILDER_NAMES) with its `args` (the function's signature), what it makes (its docstring's first
    sentence) and its `with:` steps (step_names of the class it returns); then every `with:` step with its
    arguments, the builders that have it and what it does."""
    rows = ["| builder | `args` | what it makes | `with:` steps |", "|---|---|---|---|"]
    by_step: dict[tuple[str, str, str], list[str]] = {}
    for name, fn in builders().items():
        cls = builder_class(name)
        names = step_names(cls) if cls is not None else []
        rows.append(f"| `{name}` | `{name}{_plain_signature(fn)}` | {_first_sentence(fn)} | "
                    f"{', '.join(f'`{m}`' for m in names) or 'none (it makes a list of objects)'} |")
        for m in names:
            method = getattr(cls, m)
            by_step.setdefault((m, _plain_signature(method), _first_sentence(method)), []).append(name)
    rows += ["", "| `with:` step | builders | what it does |", "|---|---|---|"]
    for (m, sig, what), names in sorted(by_step.items()):
        rows.append(f"| `{m}{sig}` | {', '.join(names)} | {what} |")
    return "\n".join(rows) + "\n"


def _call(fn: Callable[..., Any], args: Any, what: str) -> Any:
    """Call `fn` with plan args: a mapping is keywords, a list positionals, null nothing, else one value."""
    try:
        if args is None:
            return fn()
        if isinstance(args, dict):
            return fn(**args)
        if isinstance(args, list):
            return fn(*args)
        return fn(args)
    except TypeError as e:
        try:
            sig = str(inspect.signature(fn))
        except (TypeError, ValueError):
            sig = "(…)"
        raise StepError(f"{what}: {e}; it takes {sig}") from None
    except (ValueError, KeyError, AttributeError) as e:
        raise StepError(f"{what}: {type(e).__name__}: {e}") from None


def _flatten(built: Any) -> list[Any]:
    return [x for b in built for x in _flatten(b)] if isinstance(built, (list, tuple)) else [built]


def _by_builder(spec: dict[str, Any]) -> list[dict[str, Any]]:
    unknown = sorted(set(spec) - {"builder", "args", "with"})
    if unknown:
        raise StepError(f"unknown key(s) {', '.join(unknown)} next to `builder`; allowed: builder, args, with")
    name = spec["builder"]
    table = builders()
    if name not in table:
        raise StepError(f"builder {name!r} is not one of {', '.join(table)} (harness/objects/builders.py)")
    built = _call(table[name], spec.get("args"), f"builder {name}")
    chain = spec.get("with") or []
    if not isinstance(chain, list):
        raise StepError(f"builder {name}: `with` must be a list of {{method: args}}")
    for i, item in enumerate(chain):
        if not isinstance(item, dict) or len(item) != 1:
            raise StepError(f"builder {name}: with[{i}] must be one {{method: args}} (e.g. {{queue: lq}})")
        ((method, margs),) = item.items()
        fn = getattr(built, method, None) if isinstance(method, str) and not method.startswith("_") else None
        if fn is None or method in _NOT_STEPS or not callable(fn):
            methods = step_names(built)
            raise StepError(f"builder {name}: with[{i}]: {type(built).__name__} has no step {method!r}; it has "
                            f"{', '.join(methods) or 'none'}")
        built = _call(fn, margs, f"builder {name}: with[{i}] {method}")
    out = []
    for b in _flatten(built):
        if isinstance(b, objects._Builder):  # noqa: SLF001 - the builders' own base class
            b = b.obj()
        out.append(b)
    return out


def check_object(obj: Any, where: str) -> dict[str, Any]:
    """An object to create: a mapping with `kind` and `metadata.name`; `apiVersion` filled in for the
    KNOWN_KINDS. Returns a copy. Raises StepError."""
    if not isinstance(obj, dict):
        raise StepError(f"{where}: expected an object (a mapping with kind and metadata.name)")
    obj = json.loads(json.dumps(obj))  # a copy, and it must be JSON
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise StepError(f"{where}: has no `kind`")
    if not obj.get("apiVersion"):
        if kind not in KNOWN_KINDS:
            raise StepError(f"{where}: {kind} needs an `apiVersion` (known without one: {', '.join(KNOWN_KINDS)})")
        obj["apiVersion"] = KNOWN_KINDS[kind][0]
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise StepError(f"{where}: {kind} has no metadata.name (steps and triggers refer to objects by name)")
    return obj


def build_objects(spec: Any) -> list[dict[str, Any]]:
    """The objects a `create` step names, in order: `spec` is an object, `{builder, args, with}`, or a list
    of those. Raises StepError naming the item."""
    items = spec if isinstance(spec, list) else [spec]
    if not items:
        raise StepError("an empty list: give the object(s) to create")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        where = f"item {i}" if isinstance(spec, list) else "the object"
        if isinstance(item, dict) and "builder" in item:
            try:
                built = _by_builder(item)
            except StepError as e:
                raise StepError(f"{where}: {e}" if isinstance(spec, list) else str(e)) from None
            out += [check_object(b, f"{where} (builder {item['builder']})") for b in built]
        else:
            out.append(check_object(item, where))
    return out


def object_label(obj: Mapping[str, Any]) -> str:
    """"Workload team-a/w1" (or "ClusterQueue cq") for report.md and logs."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns and not cluster_scoped(str(obj.get('kind'))) else ''}{meta.get('name')}"


# ---- patch, delete: an object by reference -------------------------------------------------------

PATCH_TYPES = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
               "apply": "application/apply-patch+yaml"}
PROPAGATION = ("Background", "Foreground", "Orphan")


#: An object name of a `patch` or `delete` step with one of these is an fnmatch glob that must match exactly
#: one object of its kind and namespace when the step runs (`Workload/job-b-*`: the Workload Kueue created for
#: Job b, whose name ends in a hash of the Job's UID: pkg/controller/jobframework, GetWorkloadNameForOwnerWithGVK).
GLOB_CHARS = "*?["


def is_glob(name: str) -> bool:
    """Whether an object name is a glob (GLOB_CHARS)."""
    return any(c in name for c in GLOB_CHARS)


def _ref_part(spec: Mapping[str, Any]) -> dict[str, Any]:
    name = parse_ref(spec.get("object"))[2]
    if is_glob(name) and name.count("[") != name.count("]"):
        raise StepError(f"object {spec.get('object')!r}: glob {name!r} has an unbalanced '['")
    ns = spec.get("namespace")
    if ns is not None and not isinstance(ns, str):
        raise StepError("namespace must be a string")
    return {"object": spec["object"], **({"namespace": ns} if ns else {})}


def patch_spec(spec: Any) -> dict[str, Any]:
    """Check a `patch` step: {object: Kind/name, namespace?, one of merge: {…} | json: [ops] | apply: {…},
    subresource?: status, field_manager? (apply; default kueue-harness), force? (apply; default true)}.
    Returns it normalised. Raises StepError."""
    if not isinstance(spec, dict):
        raise StepError("expected {object: Kind/name, merge: {…}} (or json: [ops], apply: {…})")
    allowed = {"object", "namespace", "subresource", "field_manager", "force", *PATCH_TYPES}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise StepError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    out = _ref_part(spec)
    types = [t for t in PATCH_TYPES if spec.get(t) is not None]
    if len(types) != 1:
        raise StepError("give exactly one of merge: {…} (JSON merge patch), json: [ops] (JSON patch) or apply: {…} "
                        "(server-side apply)")
    t = types[0]
    body = spec[t]
    if t == "json" and not (isinstance(body, list) and all(isinstance(op, dict) and "op" in op for op in body)):
        raise StepError("json: expected a list of JSON patch operations ({op: replace, path: /spec/active, value: false})")
    if t in ("merge", "apply") and not isinstance(body, dict):
        raise StepError(f"{t}: expected a mapping")
    out[t] = body
    sub = spec.get("subresource")
    if sub is not None:
        if sub not in ("status",):
            raise StepError(f"subresource {sub!r}: only status")
        out["subresource"] = sub
    if t != "apply" and (spec.get("field_manager") is not None or spec.get("force") is not None):
        raise StepError("field_manager and force go with apply only")
    if t == "apply":
        fm = spec.get("field_manager", "kueue-harness")
        if not isinstance(fm, str) or not fm:
            raise StepError("field_manager must be a name")
        force = spec.get("force", True)
        if not isinstance(force, bool):
            raise StepError("force must be true or false")
        out.update(field_manager=fm, force=force)
    return out


def delete_spec(spec: Any) -> dict[str, Any]:
    """Check a `delete` step: `Kind/name`, or {object: Kind/name, namespace?, propagation?: Background |
    Foreground | Orphan}. Returns it as a mapping. Raises StepError."""
    if isinstance(spec, str):
        spec = {"object": spec}
    if not isinstance(spec, dict):
        raise StepError("expected Kind/name or {object: Kind/name, namespace: …, propagation: Background}")
    unknown = sorted(set(spec) - {"object", "namespace", "propagation"})
    if unknown:
        raise StepError(f"unknown key(s) {', '.join(unknown)}; allowed: namespace, object, propagation")
    out = _ref_part(spec)
    if spec.get("propagation") is not None:
        if spec["propagation"] not in PROPAGATION:
            raise StepError(f"propagation {spec['propagation']!r} is not one of {', '.join(PROPAGATION)}")
        out["propagation"] = spec["propagation"]
    return out


def ref_label(spec: Mapping[str, Any]) -> str:
    """"Workload/w1": the object a patch/delete spec names, for report.md (its namespace is the plan's)."""
    return str(spec.get("object", "?"))


def describe_patch(spec: Mapping[str, Any]) -> str:
    """"patch Workload/w1 status (merge {"spec":{"active":false}})" for report.md."""
    t = next((t for t in PATCH_TYPES if spec.get(t) is not None), "?")
    body = json.dumps(spec.get(t), sort_keys=True, separators=(",", ":"))
    body = body if len(body) <= 70 else body[:67] + "..."
    sub = f" {spec['subresource']}" if spec.get("subresource") else ""
    manager = f" as {spec['field_manager']}" if t == "apply" else ""
    return f"patch {ref_label(spec)}{sub} ({t}{manager} {body})"


def default_namespace(rule: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A plan rule or step (as the loader builds it: `action`, the step's key, `release.after`) with
    `namespace` filled in where it names none: builder args that take a namespace, inline objects of kinds
    that are not known to be cluster-scoped, patch/delete/wait specs and `{object: …}` triggers. Returns a
    copy; values of the wrong type are left for the checks to report."""
    rule = copy.deepcopy(rule)

    def obj_ref(d: Any) -> None:
        if isinstance(d, dict) and isinstance(d.get("object"), str) and d.get("namespace") is None:
            kind = d["object"].split("/", 1)[0].split(".", 1)[0]
            if not cluster_scoped(kind):
                d["namespace"] = namespace

    def create_item(item: Any) -> None:
        if not isinstance(item, dict):
            return
        if "builder" in item:
            fn = builders().get(item.get("builder"))
            if fn is None:
                return
            try:
                takes = "namespace" in inspect.signature(fn).parameters
            except (TypeError, ValueError):
                takes = False
            args = item.get("args")
            if takes and (args is None or isinstance(args, dict)) and "namespace" not in (args or {}):
                item["args"] = {**(args or {}), "namespace": namespace}
        elif isinstance(item.get("metadata"), dict) and not item["metadata"].get("namespace") \
                and not cluster_scoped(str(item.get("kind"))):
            item["metadata"]["namespace"] = namespace

    create = rule.get("create")
    for item in create if isinstance(create, list) else [create]:
        create_item(item)
    if isinstance(rule.get("delete"), str):
        rule["delete"] = {"object": rule["delete"]}
    for key in ("patch", "delete", "wait"):
        obj_ref(rule.get(key))
    rel = rule.get("release")
    after = rel.get("after") if isinstance(rel, dict) else None
    for t in after if isinstance(after, list) else []:
        obj_ref(t)
    return rule


# ---- the harness side: kube-apiserver, directly ---------------------------------------------------


class KubeRest:
    """REST calls to kube-apiserver with a kubernetes ApiClient (the admin identity, direct: never through
    the fault proxy) for any kind: KNOWN_KINDS, else the API's discovery (read once per group)."""

    def __init__(self, api_client: Any) -> None:
        self.api = api_client
        self._discovered: dict[str, tuple[str, str, bool]] = {}
        self._lock = threading.Lock()

    # ---- kinds
    def resolve(self, kind: str, group: str | None = None, api_version: str | None = None) -> tuple[str, str, bool]:
        """(apiVersion, plural, namespaced) of `kind` (in `group`, or of `api_version`). Raises StepError if
        kube-apiserver serves no such kind."""
        known = KNOWN_KINDS.get(kind)
        if known and (group is None or known[0].split("/")[0] == group or (group == "core" and "/" not in known[0])) \
                and (api_version is None or api_version == known[0]):
            return known
        key = f"{kind}|{group or ''}|{api_version or ''}"
        with self._lock:
            if key in self._discovered:
                return self._discovered[key]
        versions = [api_version] if api_version else self._group_versions(group)
        for gv in versions:
            base = f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"
            status, data = self.request("GET", base)
            if status != 200:
                continue
            for r in data.get("resources", []):
                if r.get("kind") == kind and "/" not in r.get("name", ""):
                    found = (gv, r["name"], bool(r.get("namespaced")))
                    with self._lock:
                        self._discovered[key] = found
                    return found
        raise StepError(f"kube-apiserver serves no kind {kind}" + (f" in group {group}" if group else "")
                        + (f" at {api_version}" if api_version else ""))

    def _group_versions(self, group: str | None) -> list[str]:
        out = ["v1"] if group in (None, "core") else []
        status, data = self.request("GET", "/apis")
        for g in data.get("groups", []) if status == 200 else []:
            if group is None or g.get("name") == group:
                pref = (g.get("preferredVersion") or {}).get("groupVersion")
                out += [pref] if pref else []
                out += [v["groupVersion"] for v in g.get("versions", []) if v.get("groupVersion") != pref]
        return out

    def path(self, api_version: str, plural: str, namespaced: bool, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        if namespaced:
            if not namespace:
                raise StepError(f"{plural} are namespaced: the object needs a namespace")
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource:
            base += f"/{subresource}"
        return base

    # ---- requests
    def request(self, method: str, path: str, query: Mapping[str, Any] | None = None, body: Any = None,
                content_type: str = "application/json", timeout: float = 10.0, stream: bool = False) -> tuple[int, Any]:
        """(HTTP status, parsed JSON body) — or, with `stream`, (status, the open urllib3 response). Raises
        StepError when kube-apiserver cannot be reached."""
        from kubernetes.client.exceptions import ApiException

        url_path = path + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            method, url, headers, data, _ = self.api.param_serialize(
                method, url_path, header_params=headers,
                body=body, auth_settings=["BearerToken"])  # the REST client serializes JSON and apply bodies
            resp = self.api.call_api(method, url, header_params=headers, body=data, _request_timeout=timeout)
        except (ApiException, OSError) as e:
            raise StepError(f"{method} {path}: {e}") from None
        except Exception as e:  # noqa: BLE001 - urllib3 errors (timeouts, connection refused)
            raise StepError(f"{method} {path}: {type(e).__name__}: {e}") from None
        if stream:
            return resp.status, resp.response
        raw = resp.read()
        try:
            return resp.status, json.loads(raw) if raw else {}
        except ValueError:
            return resp.status, {"message": raw[:300].decode(errors="replace")}

    @staticmethod
    def _refused(status: int, data: Any, what: str) -> StepError:
        msg = data.get("message") if isinstance(data, dict) else None
        reason = data.get("reason") if isinstance(data, dict) else None
        return StepError(f"{what}: kube-apiserver answered {status}{' ' + reason if reason else ''}: {msg or data}")

    def target(self, spec: Mapping[str, Any], default_ns: str, glob: bool = False) -> tuple[str, str, bool, str | None, str]:
        """(apiVersion, plural, namespaced, namespace, name) of a spec's `object` (and `namespace`). With `glob`,
        a name with GLOB_CHARS is looked up: the one object of that kind and namespace whose name it matches
        (raises StepError naming what matched when none or several do)."""
        kind, group, name = parse_ref(spec.get("object"))
        api_version, plural, namespaced = self.resolve(kind, group)
        ns = (spec.get("namespace") or default_ns) if namespaced else None
        if glob and is_glob(name):
            status, data = self.request("GET", self.path(api_version, plural, namespaced, ns))
            if status != 200:
                raise self._refused(status, data, f"list {kind} to find {name}")
            names = sorted(str((o.get("metadata") or {}).get("name")) for o in data.get("items") or [])
            hits = [n for n in names if fnmatch.fnmatchcase(n, name)]
            if len(hits) != 1:
                where = f" in namespace {ns}" if ns else ""
                raise StepError(f"{spec.get('object')}: the glob must match exactly one {kind}{where}; it matches "
                                f"{len(hits)} ({', '.join(hits[:5]) or 'none'}; there are {len(names)})")
            name = hits[0]
        return api_version, plural, namespaced, ns, name

    def create(self, obj: dict[str, Any], default_ns: str) -> dict[str, Any]:
        """Create `obj` (a namespaced kind without a namespace goes to `default_ns`). Returns the created
        object. Raises StepError with kube-apiserver's answer."""
        kind = obj["kind"]
        api_version, plural, namespaced = self.resolve(kind, api_version=obj.get("apiVersion"))
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        if namespaced:
            meta["namespace"] = meta.get("namespace") or default_ns
        else:
            meta.pop("namespace", None)
        status, data = self.request("POST", self.path(api_version, plural, namespaced, meta.get("namespace")), body=obj)
        if status not in (200, 201):
            raise self._refused(status, data, f"create {object_label(obj)}")
        return data

    def patch(self, spec: Mapping[str, Any], default_ns: str) -> dict[str, Any]:
        """Do a `patch` step's patch (patch_spec's form; its object's name may be a glob, GLOB_CHARS). Returns
        the patched object. Raises StepError."""
        api_version, plural, namespaced, ns, name = self.target(spec, default_ns, glob=True)
        t = next(t for t in PATCH_TYPES if spec.get(t) is not None)
        query: dict[str, Any] = {}
        body = spec[t]
        if t == "apply":
            kind = parse_ref(spec["object"])[0]
            meta = {"name": name, **({"namespace": ns} if ns else {})}
            body = {"apiVersion": api_version, "kind": kind, **body,
                    "metadata": {**(body.get("metadata") or {}), **meta}}
            query = {"fieldManager": spec.get("field_manager", "kueue-harness"),
                     **({"force": "true"} if spec.get("force", True) else {})}
        status, data = self.request("PATCH", self.path(api_version, plural, namespaced, ns, name, spec.get("subresource")),
                                    query=query, body=body, content_type=PATCH_TYPES[t])
        if status != 200:
            raise self._refused(status, data, describe_patch(spec))
        return data

    def delete(self, spec: Mapping[str, Any], default_ns: str) -> dict[str, Any]:
        """Do a `delete` step (its object's name may be a glob, GLOB_CHARS). Returns kube-apiserver's answer
        (the object, or a Status). Raises StepError."""
        api_version, plural, namespaced, ns, name = self.target(spec, default_ns, glob=True)
        body = {"kind": "DeleteOptions", "apiVersion": "v1",
                **({"propagationPolicy": spec["propagation"]} if spec.get("propagation") else {})}
        status, data = self.request("DELETE", self.path(api_version, plural, namespaced, ns, name), body=body)
        if status not in (200, 202):
            raise self._refused(status, data, f"delete {spec.get('object')}")
        return data

    def _selector(self, spec: Mapping[str, Any], default_ns: str) -> tuple[str, dict[str, str]]:
        """(the list path of a spec's kind and namespace, the query naming its object): a field selector for
        an exact name; nothing for a glob (GLOB_CHARS), whose objects the caller picks out with fnmatch."""
        kind, group, name = parse_ref(spec.get("object"))
        api_version, plural, namespaced = self.resolve(kind, group)
        ns = (spec.get("namespace") or default_ns) if namespaced else None
        return (self.path(api_version, plural, namespaced, ns),
                {} if is_glob(name) else {"fieldSelector": f"metadata.name={name}"})

    def list_objects(self, spec: Mapping[str, Any], default_ns: str) -> tuple[list[dict[str, Any]], str]:
        """(the objects, the list's resourceVersion) of a spec's `object`: the one object of an exact name (or
        none), or every object of its kind and namespace when the name is a glob (the caller matches them), so
        a watch can go on from there. Raises StepError."""
        path, query = self._selector(spec, default_ns)
        status, data = self.request("GET", path, query=query)
        if status != 200:
            raise self._refused(status, data, f"list {spec.get('object')}")
        return list(data.get("items") or []), str((data.get("metadata") or {}).get("resourceVersion") or "")

    def watch_objects(self, spec: Mapping[str, Any], default_ns: str, resource_version: str,
                      seconds: int = 10) -> Any:
        """The open watch response, from `resource_version`, for the objects `list_objects` lists (kube-apiserver
        ends it after `seconds`); iterate it with `watch_events`. Raises StepError."""
        path, query = self._selector(spec, default_ns)
        status, resp = self.request("GET", path,
                                    query={**query, "watch": "true", "resourceVersion": resource_version,
                                           "allowWatchBookmarks": "true", "timeoutSeconds": str(seconds)},
                                    timeout=seconds + 5, stream=True)
        if status != 200:
            try:
                data = json.loads(resp.read() or b"{}")
            except ValueError:
                data = {}
            raise self._refused(status, data, f"watch {spec.get('object')}")
        return resp


def watch_events(resp: Any) -> Any:
    """(type, object) for each line of an open watch response."""
    from kubernetes.watch.watch import iter_resp_lines

    try:
        for line in iter_resp_lines(resp):
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            yield ev.get("type"), ev.get("object") or {}
    finally:
        resp.release_conn()


# ---- facts: what triggers and wait steps wait for --------------------------------------------------


def object_fact_match(fact: Mapping[str, Any], obj: Mapping[str, Any] | None) -> str | None:
    """What of `obj` (a version of the object; None: absent) satisfies an `{object: …}` fact's condition or
    field, in words — "QuotaReserved=True(QuotaReserved)", "$.spec.suspend = false" — or None when it does not
    hold. Deletion is judged by `FactObserver`, which sees the object go."""
    if obj is None:
        return None
    if fact.get("condition"):
        c = objects.condition(dict(obj), str(fact["condition"]))
        if c is None or c.get("status") != fact.get("status", "True"):
            return None
        return f"{c.get('type')}={c.get('status')}({c.get('reason', '')})"
    if fact.get("field"):
        from harness.plan.rules import _jsonpath, fact_value

        found = [m.value for m in _jsonpath(str(fact["field"])).find(dict(obj))]
        if fact.get("equals") is not None:
            found = [v for v in found if fact_value(v) == fact_value(fact["equals"])]
        return f"{fact['field']} = {fact_value(found[0])}" if found else None
    return None


def object_fact_holds(fact: Mapping[str, Any], obj: Mapping[str, Any] | None) -> bool:
    """Whether an `{object: …}` fact's condition or field holds on `obj` (see `object_fact_match`)."""
    return object_fact_match(fact, obj) is not None


def _rv(obj: Mapping[str, Any] | None) -> Any:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _state_line(fact: Mapping[str, Any], obj: Mapping[str, Any] | None) -> str:
    """What a fact's object looks like now, for "last observed": the field's values for a field fact
    ("$.spec.suspend = true at rv 129", "$.status.admission: not set at rv 129"), else its conditions."""
    if obj is None:
        return "absent"
    if fact.get("field"):
        from harness.plan.rules import _jsonpath, fact_value

        found = [fact_value(m.value) for m in _jsonpath(str(fact["field"])).find(dict(obj))]
        return f"{fact['field']} {'= ' + ', '.join(found) if found else 'not set'} at rv {_rv(obj)}"
    return f"rv {_rv(obj)}: {objects.conditions_summary(dict(obj))}"


class _Fact:
    def __init__(self, key: str, spec: dict[str, Any], since: float, private: bool = False) -> None:
        self.key, self.spec, self.since, self.private = key, spec, since, private
        self.owners: set[str] = set()
        self.detail: dict[str, Any] | None = None
        #: Why the fact can never hold (a glob that matched several objects when it mattered): a wait fails.
        self.error: str | None = None
        self.regex = re.compile(spec["log"]) if spec.get("log") else None
        self.last = "not observed yet"


class FactObserver:
    """Watches for the facts of the loaded plans (module docstring) and reports each once it happened:
    `report(key, detail)` (the Nemesis tells the proxy, which logs `fact` and re-evaluates triggers).

    `rest`: a KubeRest for `{object: …}` facts (None: they are never seen); `kueue_log`: Kueue's JSON log
    for `{log: …}` facts (None: never seen); `namespace`: for object specs without one. A fact counts from
    `since` (epoch seconds: when its plan was loaded): log lines with an earlier `ts` don't count; an
    object is read and then watched from then on (one thread per object). Log lines are read by `poll()`,
    which the Nemesis calls in its loop; the last LOOKBACK seconds of lines are kept so that a fact
    registered a moment after its plan loaded still sees the lines in between.

    An object's name may be a glob (GLOB_CHARS; `Workload/job-a-*`, the Workload Kueue made for Job a): every
    object of the kind and namespace is watched and those the glob matches are judged. It must match exactly
    one object *when it matters*: when a matching object satisfies the condition or field, or is deleted,
    no other matching object may exist then. If one does, the fact can never hold: `report_problem(key,
    problem)` tells the proxy (it logs `fact_problem`) and a `wait` on it fails with StepError at once.
    """

    LOOKBACK = 10.0

    def __init__(self, rest: KubeRest | None, kueue_log_path: Path | None, report: Callable[[str, dict[str, Any]], None],
                 namespace: str = DEFAULT_NAMESPACE, say: Callable[[str], None] = lambda s: None,
                 report_problem: Callable[[str, str], None] | None = None) -> None:
        self.rest, self.report, self.namespace, self.say = rest, report, namespace, say
        self.report_problem = report_problem
        self._tail = JsonlTail(kueue_log_path, from_end=True) if kueue_log_path is not None else None
        self._recent: deque[tuple[float, str]] = deque()
        self._facts: dict[str, _Fact] = {}
        self._watchers: dict[str, threading.Thread] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.lines_read = 0

    # ---- registration
    def register(self, spec: Mapping[str, Any], since: float, owner: str, private: bool = False) -> str:
        """Observe fact `spec` (a trigger's mapping: {log} or {object, namespace, …}) for rule `owner`,
        counting from `since`. Returns its key (harness.plan.rules.Trigger.fact_key). Registering a key again
        keeps what was seen (it happened already). `private`: a fact of `owner` alone with its own `since`
        (a wait step's `since: STEP`), keyed apart from the shared one and not reported to the proxy. Log
        lines older than LOOKBACK seconds before the call are not searched."""
        from harness.plan.rules import Trigger

        t = Trigger(**{k: v for k, v in spec.items() if k in Trigger.__dataclass_fields__})
        key = t.fact_key()
        spec_of_key = {k: v for k, v in json.loads(key).items()}
        if private:
            key = f"{key} since {since:.6f} for {owner}"
        with self._cond:
            f = self._facts.get(key)
            if f is None:
                f = self._facts[key] = _Fact(key, spec_of_key, since, private)
                new = True
            else:
                f.since = min(f.since, since)
                new = False
            f.owners.add(owner)
        if new and f.regex is not None:
            for ts, text in list(self._recent):
                if ts >= f.since and f.regex.search(text):
                    self._seen(f, {"line": text[:300], "log_ts": ts})
                    break
        if new and f.spec.get("object"):
            self._watch(f)
        return key

    def unregister(self, owner: str) -> None:
        """Forget the facts only rule `owner` observed (its rule was removed)."""
        with self._cond:
            for key, f in list(self._facts.items()):
                f.owners.discard(owner)
                if not f.owners:
                    del self._facts[key]

    def seen(self, key: str) -> dict[str, Any] | None:
        """What was seen of fact `key` (None: not yet)."""
        with self._cond:
            f = self._facts.get(key)
            return f.detail if f is not None else None

    def wait(self, key: str, timeout: float, cancel: threading.Event) -> dict[str, Any]:
        """Block until fact `key` was seen (returns what was seen), at most `timeout` seconds. Raises
        TimeoutError (saying what was last observed), StepError when the fact can never hold (its glob
        matched several objects when it mattered), or InterruptedError when `cancel` is set."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                f = self._facts.get(key)
                if f is not None and f.detail is not None:
                    return f.detail
                if f is not None and f.error is not None:
                    raise StepError(f.error)
                if cancel.is_set():
                    raise InterruptedError("cancelled: the case ended first")
                left = deadline - time.monotonic()
                if left <= 0:
                    last = f.last if f is not None else "not observed"
                    raise TimeoutError(f"not seen within {timeout:g} s (last observed: {last})")
                self._cond.wait(min(left, 0.1))

    def stop(self) -> None:
        """Stop every object watch (they end within their watch timeout; threads are daemons)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    # ---- log lines
    def poll(self) -> None:
        """Read Kueue's new log lines and match them against the unseen log facts."""
        if self._tail is None:
            return
        lines = self._tail.read()
        if not lines:
            return
        now = time.time()
        with self._cond:
            pending = [f for f in self._facts.values() if f.regex is not None and f.detail is None]
        for line in lines:
            ts = kueue_log.parse_ts(line.get("ts")) or now
            text = kueue_log.normalized(line)
            self.lines_read += 1
            self._recent.append((ts, text))
            for f in pending:
                if f.detail is None and ts >= f.since and f.regex.search(text):
                    self._seen(f, {"line": text[:300], "log_ts": ts})
        while self._recent and self._recent[0][0] < now - self.LOOKBACK:
            self._recent.popleft()
        with self._cond:
            for f in pending:
                if f.detail is None:
                    f.last = f"{self.lines_read} log lines read, none matched"

    # ---- objects
    def _watch(self, f: _Fact) -> None:
        if self.rest is None:
            f.last = "no API client to watch objects"
            return
        w = threading.Thread(target=self._watch_loop, args=(f,), name=f"kueue-harness-fact-{f.spec.get('object')}",
                             daemon=True)
        self._watchers[f.key] = w
        w.start()

    def _watch_loop(self, f: _Fact) -> None:
        spec = f.spec
        kind, _, pattern = parse_ref(spec["object"])
        glob = is_glob(pattern)
        current: dict[str, dict[str, Any]] = {}  # name -> the latest version of each object the name matches
        existed: set[str] = set()  # the names seen to exist (a deletion counts only for those)
        while not self._stop.is_set() and f.detail is None and f.error is None and f.key in self._facts:
            try:
                items, rv = self.rest.list_objects(spec, self.namespace)
                listed = {n: o for o in items if fnmatch.fnmatchcase(n := str((o.get("metadata") or {}).get("name")),
                                                                      pattern)}
                gone = [n for n in current if n not in listed]
                current = listed
                for n in gone:  # deleted while no watch was open (between two watches)
                    self._judge(f, kind, glob, n, None, current, existed, "read")
                for n in sorted(listed):
                    self._judge(f, kind, glob, n, listed[n], current, existed, "read")
                if not listed:
                    f.last = f"no {kind} matches {pattern} (read)" if glob else "absent"
                if f.detail is not None or f.error is not None:
                    return
                resp = self.rest.watch_objects(spec, self.namespace, rv)
                for etype, o in watch_events(resp):
                    if self._stop.is_set() or f.detail is not None or f.error is not None:
                        return
                    if etype == "ERROR":
                        break  # e.g. 410 Gone: list again
                    if etype == "BOOKMARK":
                        continue
                    n = str((o.get("metadata") or {}).get("name"))
                    if not fnmatch.fnmatchcase(n, pattern):
                        continue  # another object of the kind (a glob watches them all)
                    if etype == "DELETED":
                        current.pop(n, None)
                        self._judge(f, kind, glob, n, None, current, existed, etype)
                    else:
                        current[n] = o
                        self._judge(f, kind, glob, n, o, current, existed, etype)
            except Exception as e:  # noqa: BLE001 - a watch that broke (StepError, urllib3): read and watch again
                f.last = f"{type(e).__name__}: {e}"
                self._stop.wait(0.2)

    def _judge(self, f: _Fact, kind: str, glob: bool, name: str, obj: Mapping[str, Any] | None,
               current: Mapping[str, Any], existed: set[str], how: str) -> None:
        """Record object `name`'s state (`obj`; None: deleted) for `f`; report the fact once it holds, or its
        problem when the glob matches another object too at that moment (`current`: the matching objects
        that exist now). `existed` collects the names seen to exist."""
        ns = f.spec.get("namespace")  # set for a namespaced kind (default_namespace), absent for a cluster-scoped one
        label = f"{kind} {ns + '/' if ns else ''}{name}"
        state = _state_line(f.spec, obj)
        f.last = f"{label}: {state}" if glob else state
        if obj is not None:
            existed.add(name)
        if f.spec.get("deleted"):
            if obj is None and name in existed:
                if current:
                    self._problem(f, kind, f"{name} was deleted ({how})", current)
                else:
                    self._seen(f, {"observed": f"{label + ' ' if glob else ''}deleted ({how})", "object": label})
            return
        matched = object_fact_match(f.spec, obj)
        if matched is None:
            return
        if len(current) > 1:
            self._problem(f, kind, f"{name} had {matched} at rv {_rv(obj)}", current)
            return
        self._seen(f, {"observed": f"{label + ': ' if glob else ''}{matched} at rv {_rv(obj)}",
                       "resource_version": _rv(obj), "object": label})

    def _problem(self, f: _Fact, kind: str, what: str, current: Mapping[str, Any]) -> None:
        """The glob of `f` matched several objects when `what` happened: the fact can never hold."""
        where = f" in namespace {f.spec['namespace']}" if f.spec.get("namespace") else ""
        names = sorted({*current, what.split(" ", 1)[0]})  # the object it is about, and the others that match
        problem = (f"{f.spec['object']} matched {len(names)} {kind}s{where} when {what} ({', '.join(names[:5])}"
                   f"{', …' if len(names) > 5 else ''}): a name glob in a wait or an {{object: …}} trigger must match "
                   "exactly one object then, so this never holds; make the glob narrower (job-a-????? is Job a's "
                   "Workload, job-a-* also takes Job a-b's)")
        with self._cond:
            if f.detail is not None or f.error is not None:
                return
            f.error = f.last = problem
            self._cond.notify_all()
        if f.private or self.report_problem is None:
            return
        try:
            self.report_problem(f.key, problem)
        except Exception as e:  # noqa: BLE001 - the rule may be gone; a wait step still fails with it
            self.say(f"[kueue-harness] {problem} (could not tell the proxy: {e})")

    def _seen(self, f: _Fact, detail: dict[str, Any]) -> None:
        with self._cond:
            if f.detail is not None:
                return
            f.detail = {**detail, "seen_ts": time.time()}
            self._cond.notify_all()
        if f.private:
            return
        try:
            self.report(f.key, f.detail)
        except Exception as e:  # noqa: BLE001 - the rule may be gone; a wait step still sees it locally
            self.say(f"[kueue-harness] could not report fact {f.key}: {e}")


if __name__ == "__main__":  # `python -m harness.plan.steps builders`: the tables of docs/fault-plans.md "Builders"
    import sys

    if sys.argv[1:] != ["builders"]:
        sys.exit("usage: python -m harness.plan.steps builders  (prints docs/fault-plans.md's builder tables)")
    print(builder_reference(), end="")
