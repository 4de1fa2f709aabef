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
import inspect
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from harness import objects


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


def check_variables(problems: Any, node: Any) -> None:
    """Add to `problems` (the plan loader's: `.add(node, message)`) every `${name}` in the YAML `node`'s strings
    that is not a template variable."""
    if isinstance(node, yaml.ScalarNode):
        if isinstance(node.value, str) and "${" in node.value:
            for name in unknown_variables(node.value):
                problems.add(node, f"unknown template variable ${{{name}}}; the only one is ${{namespace}} (the "
                                   "namespace the plan is loaded for)")
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            check_variables(problems, v)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            check_variables(problems, v)


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
    subresource?: status, field_manager? (apply; default kueue-harness), force? (apply; default true),
    each?: true (a glob: patch every object it matches, at least one — an object whose name the plan cannot know,
    such as an elastic Job's second Workload slice, among others; without it a glob must match exactly one)}.
    Returns it normalised. Raises StepError."""
    if not isinstance(spec, dict):
        raise StepError("expected {object: Kind/name, merge: {…}} (or json: [ops], apply: {…})")
    allowed = {"object", "namespace", "subresource", "field_manager", "force", "each", *PATCH_TYPES}
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
    each = spec.get("each")
    if each is not None:
        if not isinstance(each, bool):
            raise StepError("each must be true or false")
        if each and not is_glob(parse_ref(out["object"])[2]):
            raise StepError(f"each: true goes with a glob (Workload/job-j-*), not the one name {out['object']}")
        if each:
            out["each"] = True
    if t == "apply":
        fm = spec.get("field_manager", "kueue-harness")
        if not isinstance(fm, str) or not fm:
            raise StepError("field_manager must be a name")
        force = spec.get("force", True)
        if not isinstance(force, bool):
            raise StepError("force must be true or false")
        out.update(field_manager=fm, force=force)
    return out


#: The finalizer a `keep_terminating` delete adds (and removes): the one the `finalizer` builder option of
#: cases/kueue_12820 names.
KEEP_FINALIZER = "kueue-harness.test/keep"
#: At most this many seconds kept Terminating (a scene, not a wait: a case's steps are bounded by minutes).
MAX_KEEP = 600.0


def delete_spec(spec: Any) -> dict[str, Any]:
    """Check a `delete` step: `Kind/name`, or {object: Kind/name, namespace?, propagation?: Background |
    Foreground | Orphan, keep_terminating?: seconds (0 < s <= MAX_KEEP: the object gets finalizer
    KEEP_FINALIZER before it is deleted, and loses it after that many seconds Terminating — a slow finalizer,
    the scene of kubernetes-sigs/kueue#12820)}. Returns it as a mapping. Raises StepError."""
    if isinstance(spec, str):
        spec = {"object": spec}
    if not isinstance(spec, dict):
        raise StepError("expected Kind/name or {object: Kind/name, namespace: …, propagation: Background}")
    unknown = sorted(set(spec) - {"object", "namespace", "propagation", "keep_terminating"})
    if unknown:
        raise StepError(f"unknown key(s) {', '.join(unknown)}; allowed: keep_terminating, namespace, object, propagation")
    out = _ref_part(spec)
    if spec.get("propagation") is not None:
        if spec["propagation"] not in PROPAGATION:
            raise StepError(f"propagation {spec['propagation']!r} is not one of {', '.join(PROPAGATION)}")
        out["propagation"] = spec["propagation"]
    if spec.get("keep_terminating") is not None:
        keep = spec["keep_terminating"]
        if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0 < keep <= MAX_KEEP:
            raise StepError(f"keep_terminating: expected seconds, a number above 0 and at most {MAX_KEEP:g}, "
                            f"not {str(keep)[:40]!r}")
        out["keep_terminating"] = float(keep)
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
    each = "each of " if spec.get("each") else ""
    return f"patch {each}{ref_label(spec)}{sub} ({t}{manager} {body})"


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


if __name__ == "__main__":  # `python -m harness.plan.steps builders`: the tables of docs/fault-plans.md "Builders"
    import sys

    if sys.argv[1:] != ["builders"]:
        sys.exit("usage: python -m harness.plan.steps builders  (prints docs/fault-plans.md's builder tables)")
    print(builder_reference(), end="")
