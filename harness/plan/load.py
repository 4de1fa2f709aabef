"""YAML fault plans: a named list of rules (harness/plan/rules.py) with release triggers, loaded by the pytest
API and the CLI alike. Validation reports `file:line` for unknown keys, bad values, bad globs/regexes,
triggers naming unknown rules and trigger cycles; a plan that fails validation loads nothing.

Format: docs/fault-plans.md. Each bug folder ships its plans in cases/<bug>/plans/*.yaml and its cases load them.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.common import paths
from harness.common.errors import HarnessError
from harness.plan import actions, moved, steps, yamlsafe
from harness.plan.rules import Match, Release, Rule, RuleError, Trigger, rule_keys, rule_set_errors

CASES_DIR = paths.CASES_DIR
#: The plans of the seed scenarios (kubernetes-sigs/kueue#11480); every bug folder keeps its plans in
#: cases/<bug>/plans/, and a bare plan name is looked up in all of them (shipped_plans()).
PLANS_DIR = CASES_DIR / "kueue_11480" / "plans"


def shipped_plans() -> dict[str, Path]:
    """Every shipped plan by name: cases/*/plans/<name>.yaml (the first folder wins on a clash)."""
    out: dict[str, Path] = {}
    for f in sorted(CASES_DIR.glob("*/plans/*.yaml")):
        out.setdefault(f.stem, f)
    return out
API_VERSION = "kueue-harness/v1"
KIND = "FaultPlan"

_TOP_KEYS = {"apiVersion", "kind", "name", "description", "rules", "steps", "kueue", "steps_after", "deletes_as"}
_RULE_KEYS = rule_keys()  # the shared keys and every action's extra keys (harness/plan/actions.py)
_MATCH_KEYS = {f.name for f in dataclasses.fields(Match)}
_RELEASE_KEYS = {f.name for f in dataclasses.fields(Release)}
_TRIGGER_KEYS = {f.name for f in dataclasses.fields(Trigger)}
#: The step kinds (harness/plan/actions.py): a step has exactly one of these keys.
_STEP_KINDS = actions.step_names()
_STEP_KEYS = {"id", "after", "timeout", "since", *_STEP_KINDS}


#: Plans are a handful of rules; a larger file is a mistake (or an attack on the loader).
MAX_DEPTH = yamlsafe.MAX_DEPTH  # re-exported: tests and docs name it here
MAX_PLAN_BYTES = 1024 * 1024


class PlanError(HarnessError):
    """A plan file is invalid. `str()` is one `file:line: …` line per problem, sorted by line, each saying
    what to change; `errors` holds those lines."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.errors = errors if errors is not None else [message]


@dataclass(frozen=True)
class Plan:
    """A validated plan: `rules` in file order, `source` the file, `lines` rule id -> line number."""

    name: str
    description: str
    rules: tuple[Rule, ...]
    source: str
    lines: dict[str, int]
    #: The plan's `kueue:` section (harness/kueue/config.py KueueConfig), or None: the Kueue configuration
    #: the plan needs; a case that loads the plan gives it to Kueue first (docs/kueue-config.md).
    kueue: Any = None
    #: The ids of the plan's steps (`steps:`), in file order; their rules are in `rules` after the others.
    steps: tuple[str, ...] = ()
    #: The namespace it was loaded for (`load_plan(namespace=…)`, `plan load --namespace`), or None.
    namespace: str | None = None
    #: `steps_after:` {step id: triggers} for steps of a plan the case loads later (harness/plan/moved.py).
    steps_after: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: `deletes_as:` {step id: {propagation?, keep_terminating?}} for delete steps of a plan the case loads later.
    deletes_as: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The plan as its file says it, parsed once and not templated (`${namespace}` kept): what a perturbation's
    #: `steps_after` and `deletes_as` edit (harness/plan/moved.py), and what explore reads of the steps.
    data: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The body of the proxy's `POST /plan`: name, rules, and `source` ({"file": the plan file's
        absolute path, "namespace"}), which the proxy records with each `rule_added` (`plan_source`) so a
        session's bundle can say how to load the plan again (harness/cli/bundle.py)."""
        src = Path(self.source)
        return {"name": self.name, "rules": [r.to_dict() for r in self.rules],
                "source": {"file": str(src.resolve()) if src.is_file() else None, "namespace": self.namespace}}


def _err(source: str, node: yaml.Node | None, msg: str) -> PlanError:
    line = node.start_mark.line + 1 if node is not None else 1
    return PlanError(f"{source}:{line}: {msg}")


class _Problems:
    """The problems found in one plan file so far: (line, "file:line: message")."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[tuple[int, str]] = []

    def add(self, node: yaml.Node | None, msg: str) -> None:
        line = node.start_mark.line + 1 if node is not None else 1
        self.items.append((line, f"{self.source}:{line}: {msg}"))

    def error(self) -> PlanError | None:
        """All problems as one PlanError (sorted by line, each once), or None when there are none."""
        if not self.items:
            return None
        lines = list(dict.fromkeys(m for _, m in sorted(self.items, key=lambda i: i[0])))
        return PlanError("\n".join(lines), lines)


def _keys(node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    return {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _check_mapping(problems: _Problems, node: yaml.Node, allowed: set[str],
                   what: str) -> tuple[dict[str, tuple[yaml.Node, yaml.Node]] | None, set[str]]:
    """(keys by name, unknown key names) of a mapping node, every unknown or repeated key added to
    `problems`; (None, set()) when the node is not a mapping (added too)."""
    if not isinstance(node, yaml.MappingNode):
        problems.add(node, f"{what}: expected a mapping")
        return None, set()
    keys = _keys(node)
    seen: set[str] = set()
    unknown: set[str] = set()
    for knode, _ in node.value:
        k = knode.value if isinstance(knode, yaml.ScalarNode) else None
        if k not in allowed:
            problems.add(knode, f"{what}: unknown key {k!r}; allowed: {', '.join(sorted(allowed))}")
            unknown.add(k)
        elif k in seen:
            problems.add(knode, f"{what}: key {k!r} given twice")
        seen.add(k)
    return keys, unknown


def _check_rule_nodes(problems: _Problems, node: yaml.Node, index: int, rdata: Any
                      ) -> dict[str, tuple[yaml.Node, yaml.Node]] | None:
    """Check a rule's keys (its match, release and triggers too), adding every unknown or repeated key to
    `problems` and removing unknown ones from `rdata` (a copy the caller owns), so that the rule's values
    can still be checked. Returns the rule's keys, None when it is not a mapping."""
    keys, unknown = _check_mapping(problems, node, _RULE_KEYS, f"rules[{index}]")
    if keys is None or not isinstance(rdata, dict):
        return keys
    for k in unknown:
        rdata.pop(k, None)
    if "match" in keys:
        _, bad = _check_mapping(problems, keys["match"][1], _MATCH_KEYS, f"rules[{index}].match")
        if bad and isinstance(rdata.get("match"), dict):
            rdata["match"] = {k: v for k, v in rdata["match"].items() if k not in bad}
    if "release" in keys:
        rel, bad = _check_mapping(problems, keys["release"][1], _RELEASE_KEYS, f"rules[{index}].release")
        if isinstance(rdata.get("release"), dict):
            rdata["release"] = {k: v for k, v in rdata["release"].items() if k not in bad}
        if rel is not None and "after" in rel:
            after = rel["after"][1]
            if not isinstance(after, yaml.SequenceNode):
                problems.add(after, f"rules[{index}].release.after: expected a list of triggers")
                if isinstance(rdata.get("release"), dict):
                    rdata["release"].pop("after", None)
                return keys
            triggers = rdata["release"].get("after") if isinstance(rdata.get("release"), dict) else None
            for j, t in enumerate(after.value):
                tkeys, bad = _check_mapping(problems, t, _TRIGGER_KEYS, f"rules[{index}].release.after[{j}]")
                if isinstance(triggers, list) and j < len(triggers):
                    if tkeys is None:
                        triggers[j] = dict(_PLACEHOLDER_TRIGGER)
                    elif bad and isinstance(triggers[j], dict):
                        triggers[j] = {k: v for k, v in triggers[j].items() if k not in bad}
    return keys


#: Stands in for a trigger already reported, so that the others keep their index (release.after[N]).
_PLACEHOLDER_TRIGGER = {"rule": "-", "state": "answered"}


def _triggers(keys: dict[str, tuple[yaml.Node, yaml.Node]]) -> list[yaml.Node]:
    """A rule's `release.after` (a step's `after`) trigger nodes (already checked to be a list of mappings)."""
    if "after" in keys:  # a step
        after = keys["after"][1]
    else:
        rel = keys.get("release", (None, None))[1]
        after = _keys(rel).get("after", (None, None))[1] if isinstance(rel, yaml.MappingNode) else None
    return list(after.value) if isinstance(after, yaml.SequenceNode) else []


def _trigger_naming(keys: dict[str, tuple[yaml.Node, yaml.Node]], ref: str) -> yaml.Node | None:
    """The first trigger node of a rule whose `rule`, `delivered` or `step` is `ref`."""
    for t in _triggers(keys):
        if isinstance(t, yaml.MappingNode) and any(
                k in ("rule", "delivered", "step") and v.value == ref for k, (_, v) in _keys(t).items()):
            return t
    return None


def _step_words(msg: str) -> str:
    """A Rule's error message in the words of the `steps:` section: "step X: after[0]: …"."""
    msg = re.sub(r"^rule\b", "step", msg)
    return msg.replace("release.after[", "after[").replace("release trigger names", "trigger names")


def _check_step_nodes(problems: _Problems, node: yaml.Node, index: int, sdata: Any
                      ) -> dict[str, tuple[yaml.Node, yaml.Node]] | None:
    """Check a step's keys and its `after` triggers' keys like `_check_rule_nodes` does a rule's (unknown
    keys are reported and taken out of `sdata`, a copy). Returns the step's keys, None when not a mapping."""
    keys, unknown = _check_mapping(problems, node, _STEP_KEYS, f"steps[{index}]")
    if keys is None or not isinstance(sdata, dict):
        return keys
    for k in unknown:
        sdata.pop(k, None)
    if "after" in keys:
        after = keys["after"][1]
        if not isinstance(after, yaml.SequenceNode):
            problems.add(after, f"steps[{index}].after: expected a list of triggers")
            sdata.pop("after", None)
            return keys
        triggers = sdata.get("after") if isinstance(sdata.get("after"), list) else None
        for j, t in enumerate(after.value):
            tkeys, bad = _check_mapping(problems, t, _TRIGGER_KEYS, f"steps[{index}].after[{j}]")
            if triggers is not None and j < len(triggers):
                if tkeys is None:
                    triggers[j] = dict(_PLACEHOLDER_TRIGGER)
                elif bad and isinstance(triggers[j], dict):
                    triggers[j] = {k: v for k, v in triggers[j].items() if k not in bad}
    return keys


def _field_node(keys: dict[str, tuple[yaml.Node, yaml.Node]], message: str, rule_node: yaml.Node) -> yaml.Node:
    """The node a RuleError message is about ("match.path_regex: …" -> that value), else the rule."""
    message = re.sub(r"^(?:rule|step) [^:]*: ", "", message)  # the rule's id may contain a key's name
    m = re.search(r"\b(?:release\.)?after\[(\d+)\]", message)
    if m and int(m.group(1)) < len(_triggers(keys)):
        return _triggers(keys)[int(m.group(1))]
    m = re.search(r"\b(match|release)\.([a-z_]+)", message)
    if m and m.group(1) in keys:
        sub = keys[m.group(1)][1]
        if isinstance(sub, yaml.MappingNode):
            inner = _keys(sub)
            if m.group(2) in inner:
                return inner[m.group(2)][1]
        return sub
    lead = re.match(r"`?([a-z_]+)`?\b", message)  # "times must be …", "`release` applies to …"
    if lead and lead.group(1) in keys:
        return keys[lead.group(1)][0]
    for k in keys:
        if re.search(rf"\b{k}\b", message):
            return keys[k][0]
    return rule_node


def _rule_problem_target(e: RuleError, msg: str, rdata: dict[str, Any]) -> str | None:
    """After `Rule.from_dict` refused `rdata` with `e`, take the value it is about out of `rdata` (so the
    next attempt can find the rule's next problem) and return the key's name; None when the rule cannot
    be checked further (its id or action is wrong, or the key is unclear)."""
    msg = re.sub(r"^rule [^:]*: ", "", msg)
    m = re.match(r"release\.after\[(\d+)\]", msg)
    rel = rdata.get("release")
    if m and isinstance(rel, dict) and isinstance(rel.get("after"), list) and int(m.group(1)) < len(rel["after"]):
        rel["after"][int(m.group(1))] = dict(_PLACEHOLDER_TRIGGER)
        return f"release.after[{m.group(1)}]"
    m = re.match(r"(match|release)\.([a-z_]+)", msg)
    if m and isinstance(rdata.get(m.group(1)), dict) and m.group(2) in rdata[m.group(1)]:
        del rdata[m.group(1)][m.group(2)]
        return m.group(2)
    key = e.key
    if key is None:
        lead = re.match(r"`?([a-z_]+)`?\b", msg)  # "times must be …", "`release` applies to …"
        key = lead.group(1) if lead and lead.group(1) in rdata else None
    if key is None or key in ("id", "action") or key not in rdata:
        return None
    del rdata[key]
    return key


def _check_rule(problems: _Problems, rdata: dict[str, Any], keys: dict[str, tuple[yaml.Node, yaml.Node]],
                rnode: yaml.Node, step: bool = False) -> tuple[Rule | None, bool]:
    """Build the rule, adding each of its value problems to `problems`: after a problem its value is taken
    out and the rule checked again (at most 10 times), until it builds or cannot be checked further. A
    problem that names a value already taken out is a consequence of that: not reported (its value is
    taken out as well). Returns
    (the Rule as built, None if it never built; whether it built with no problem)."""
    removed: list[str] = []
    for _ in range(10):
        try:
            rule = Rule.from_dict(rdata)
        except RuleError as e:
            msg = str(e)
            bare = re.sub(r"^rule [^:]*: ", "", msg)
            if not any(re.search(rf"(?<!\w){re.escape(k)}(?!\w)", bare) for k in removed):
                node = _field_node(keys, msg, rnode)
                if e.key in keys and e.key not in ("match", "release"):  # the key the message is about
                    node = keys[e.key][0]
                problems.add(node, _step_words(msg) if step else msg)
            # else: a consequence of a value taken out before: not reported, but taken out too
            what = _rule_problem_target(e, msg, rdata)
            if what is None:
                return None, False
            removed.append(what)
            continue
        except TypeError as e:
            problems.add(_field_node(keys, str(e), rnode), _step_words(str(e)) if step else str(e))
            return None, False
        return rule, not removed
    return None, False


def _set_problem_node(msg: str, nodes: dict[str, tuple[yaml.Node, dict]], root: yaml.Node) -> yaml.Node:
    """The node a rule-set problem is about: the trigger it names, the duplicate id, the rule."""
    # Messages name rules exactly: "rule X: …" or "… form a cycle: A -> B -> A".
    named = re.match(r"(?:rule|step) (.+?): ", msg)
    cycle = re.search(r"form a cycle: (.+)$", msg)
    in_msg = [named.group(1)] if named else cycle.group(1).split(" -> ") if cycle else []
    culprit = next((rid for rid in nodes if rid in in_msg), None)
    if not culprit:
        return root
    rnode, keys = nodes[culprit]
    unknown = re.search(r"names unknown (?:rule|step) '(.+)'$", msg)
    index = re.search(r"\b(?:release\.)?after\[(\d+)\]", msg)
    if index and int(index.group(1)) < len(_triggers(keys)):
        return _triggers(keys)[int(index.group(1))]
    if ("already loaded" in msg or "given twice" in msg) and "id" in keys:
        return keys["id"][1]
    if unknown:
        return _trigger_naming(keys, unknown.group(1)) or rnode
    if cycle:
        return _trigger_naming(keys, in_msg[in_msg.index(culprit) + 1]) or rnode
    return rnode


#: A Kubernetes namespace name: an RFC 1123 label (k8s.io/apimachinery pkg/util/validation IsDNS1123Label,
#: which kube-apiserver's namespace validation uses).
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def check_namespace(namespace: str) -> str:
    """`namespace` if it can name a Kubernetes namespace (an RFC 1123 label: at most 63 characters, lower-case
    letters, digits and '-', starting and ending with a letter or digit; k8s.io/apimachinery
    pkg/util/validation IsDNS1123Label), else PlanError saying what a usable one looks like."""
    if len(namespace) <= 63 and _DNS1123_LABEL.fullmatch(namespace):
        return namespace
    why = "is longer than 63 characters" if len(namespace) > 63 else (
        "is empty" if not namespace else "is not an RFC 1123 label")
    raise PlanError(f"namespace {namespace!r} {why}: a Kubernetes namespace name has at most 63 lower-case letters, "
                    "digits and '-', and starts and ends with a letter or digit (e.g. --namespace team-a)")


def _cluster_scoped_match(match: dict[str, Any]) -> bool:
    """Whether a rule's `match` names a cluster-scoped kind or resource (`kind: ClusterQueue`, `resource:
    clusterqueues`; harness/plan/steps.py KNOWN_KINDS): such writes carry no namespace, so the namespace a
    plan is loaded for is not added to it (it would never match)."""
    kind, resource = match.get("kind"), match.get("resource")
    if isinstance(kind, str) and steps.cluster_scoped(kind):
        return True
    return isinstance(resource, str) and any(plural == resource and not namespaced
                                             for _, plural, namespaced in steps.KNOWN_KINDS.values())


def parse_plan(text: str, source: str = "<plan>", namespace: str | None = None) -> Plan:
    """Parse and validate plan text. `namespace` (a case's namespace) is set on rules whose match has
    none, so that a plan written for any namespace acts only inside one; it is also the value of
    `${namespace}` in the plan's strings (without one: harness.plan.steps.DEFAULT_NAMESPACE) and the namespace
    of the objects, object triggers and steps that name none. Steps (`steps:`) become signal rules
    (harness/plan/actions.py step kinds) after the plan's other rules; a step without `after` waits for the
    step before it (`{step: previous}`; the first runs when the plan is loaded).

    Raises PlanError with every problem found ("file:line: …", one line each, sorted by line; the YAML
    itself must parse for anything past its syntax error to be checked); nothing is half-loaded. A
    `namespace` that cannot name a Kubernetes namespace is a PlanError too (check_namespace).
    """
    if namespace is not None:
        check_namespace(namespace)
    try:
        try:
            yamlsafe.guard(text, source)
        except yamlsafe.Refused as e:
            raise PlanError(str(e)) from None
        loader = yamlsafe.LOADER(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        except ValueError as e:  # an integer past Python's 4,300-digit limit (int's own ValueError)
            raise PlanError(f"{source}:1: a value YAML cannot read as data ({e}); write a smaller number") from None
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as e:  # a character YAML never allows (NUL, BEL, ESC, …): not "marked"
        line = text.count("\n", 0, max(0, int(e.position or 0))) + 1
        raise PlanError(f"{source}:{line}: character #x{e.character if isinstance(e.character, int) else ord(e.character):04x} "
                        "is not allowed in YAML (a control character); remove it") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        if "maximum nesting depth" in str(e.problem):  # LibYAML's own limit (1,000), met while scanning ahead
            line = e.context_mark.line + 1 if e.context_mark else line
            raise PlanError(f"{source}:{line}: {yamlsafe.TOO_DEEP}") from None
        context = (f" ({e.context} that started on line {e.context_mark.line + 1})"
                   if e.context and e.context_mark and e.problem_mark else "")
        lines = text.splitlines()
        hint = ("; a string with ${namespace} inside {…} or […] must be quoted ('${namespace}-cq')"
                if 0 < line <= len(lines) and "${" in lines[line - 1] else "")
        raise PlanError(f"{source}:{line}: not valid YAML: {e.problem or e}{context}{hint}") from None
    if root is None:
        raise PlanError(f"{source}:1: empty plan; expected apiVersion, kind, name and rules")
    problems = _Problems(source)
    top, _ = _check_mapping(problems, root, _TOP_KEYS, "plan")
    if top is None:
        raise problems.error()  # type: ignore[misc]
    steps.check_variables(problems, root)
    raw = copy.deepcopy(data) if isinstance(data, dict) else {}
    data = steps.template(data, namespace or steps.DEFAULT_NAMESPACE)
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        wrong = "apiVersion" if data.get("apiVersion") != API_VERSION else "kind"
        problems.add(top.get(wrong, (None, root))[1], f"expected apiVersion: {API_VERSION} and kind: {KIND}")
    has_steps = "steps" in top
    if has_steps and (not isinstance(top["steps"][1], yaml.SequenceNode) or not top["steps"][1].value):
        problems.add(top["steps"][1], "`steps` must be a non-empty list")
        raise problems.error()  # type: ignore[misc]
    steps_after, deletes_as = moved.read(problems, top, data), moved.read_deletes_as(problems, top, data)
    more = has_steps or "steps_after" in top or "deletes_as" in top
    if ("rules" not in top and not more) or ("rules" in top and (
            not isinstance(top["rules"][1], yaml.SequenceNode) or (not top["rules"][1].value and not more))):
        problems.add(top.get("rules", (None, root))[1], "`rules` must be a non-empty list"
                     + ("" if "rules" in top else " (or give `steps`)"))
        raise problems.error()  # type: ignore[misc]
    rule_nodes = list(zip(top["rules"][1].value, data["rules"])) if "rules" in top else []
    rules: list[Rule] = []
    failed: set[str] = set()  # ids of rules with a problem of their own: known, but not checked as a set
    partial: list[tuple[Rule, yaml.Node, dict]] = []  # those that built once their bad values were taken out
    lines: dict[str, int] = {}
    nodes: dict[str, tuple[yaml.Node, dict]] = {}
    for i, (rnode, rdata) in enumerate(rule_nodes):
        before = len(problems.items)
        rdata = copy.deepcopy(rdata)
        keys = _check_rule_nodes(problems, rnode, i, rdata)
        if keys is None:
            continue
        if not isinstance(rdata, dict):
            problems.add(rnode, f"rules[{i}]: expected a mapping")
            continue
        try:
            kind = actions.get(rdata.get("action", "hold"))
            signal = kind.consulted == "signal"
        except (KeyError, TypeError):
            kind, signal = None, False  # Rule.from_dict names the unknown action below
        if kind is not None and kind.is_step:
            problems.add(keys.get("action", (rnode,))[0], f"rule {rdata.get('id')}: action {kind.name} is a step: "
                                                          "write it under `steps:` (docs/fault-plans.md, Steps)")
            if isinstance(rdata.get("id"), str):
                failed.add(rdata["id"])
            continue
        rdata = steps.default_namespace(rdata, namespace or steps.DEFAULT_NAMESPACE)  # its object triggers
        if signal:
            pass  # a process fault matches no request: no namespace to narrow it to
        elif isinstance(rdata.get("match"), dict) and _cluster_scoped_match(rdata["match"]):
            # A write to a cluster-scoped object has no namespace to match: the plan narrows it by name.
            m = rdata["match"]
            if m.get("namespace"):
                what = f"kind {m['kind']}" if m.get("kind") else f"resource {m.get('resource')}"
                problems.add(keys.get("match", (rnode,))[0],
                             f"rule {rdata.get('id')}: match.namespace {m['namespace']!r} with {what}, which is "
                             "cluster-scoped: its writes have no namespace, so this never matches; narrow it by "
                             "name instead (name: \"${namespace}-cq\")")
                if isinstance(rdata.get("id"), str):
                    failed.add(rdata["id"])
                continue
        elif namespace is not None and isinstance(rdata.get("match"), dict) and not rdata["match"].get("namespace"):
            rdata["match"] = {**rdata["match"], "namespace": namespace}
        elif namespace is not None and rdata.get("match") is None:
            rdata["match"] = {"namespace": namespace}
        rule, clean = _check_rule(problems, rdata, keys, rnode)
        if rule is None or not clean or len(problems.items) > before:
            if isinstance(rdata.get("id"), str):
                failed.add(rdata["id"])
            if rule is not None:
                partial.append((rule, rnode, keys))
            continue
        rules.append(rule)
        lines[rule.id] = rnode.start_mark.line + 1
        nodes[rule.id] = (rnode, keys)
    step_ids: list[str] = []
    previous: str | None = None
    for i, (snode, sdata) in enumerate(zip(top["steps"][1].value, data["steps"]) if has_steps else ()):
        before = len(problems.items)
        sdata = copy.deepcopy(sdata)
        keys = _check_step_nodes(problems, snode, i, sdata)
        if keys is None or not isinstance(sdata, dict):
            continue
        sid = sdata.get("id")
        given = [k for k in _STEP_KINDS if k in sdata]
        if len(given) != 1:
            problems.add(snode if not given else keys[given[1]][0],
                         f"step {sid if sid is not None else f'steps[{i}]'}: give exactly one of "
                         f"{', '.join(_STEP_KINDS)}" + (f" (got {', '.join(given)})" if given else ""))
            failed.add(sid) if isinstance(sid, str) else None
            previous = sid if isinstance(sid, str) else previous
            continue
        rdata: dict[str, Any] = {"id": sid, "action": given[0], given[0]: sdata[given[0]]}
        if "timeout" in sdata and given != ["wait"]:
            problems.add(keys["timeout"][0], f"step {sid}: timeout goes with wait only (the seconds a wait step "
                                             "waits); a step runs when its `after` triggers hold")
        elif "timeout" in sdata:
            rdata["timeout"] = sdata["timeout"]
        if "since" in sdata and given != ["wait"]:
            problems.add(keys["since"][0], f"step {sid}: since goes with wait only (the step whose start the wait "
                                           "counts from)")
        elif "since" in sdata:
            rdata["since"] = sdata["since"]
        after = sdata.get("after") if "after" in sdata else ([{"step": previous}] if previous else [])
        rdata["release"] = {"after": after}
        if isinstance(rdata.get("since"), dict) and isinstance(sid, str) and isinstance(after, list):
            # `since: TRIGGER`: a do-nothing step (sleep 0) runs once TRIGGER holds; the wait counts from
            # when it began and starts once it is done (docs/fault-plans.md, Steps).
            anchor = f"{sid}-since"
            adata = steps.default_namespace({"id": anchor, "action": "sleep", "sleep": 0,
                                             "release": {"after": [rdata["since"]]}}, namespace or steps.DEFAULT_NAMESPACE)
            arule, aclean = _check_rule(problems, adata, {**keys, "release": keys.get("since", (snode,))}, snode,
                                        step=True)
            if arule is not None and aclean:
                rules.append(arule)
                step_ids.append(arule.id)
                lines[arule.id] = snode.start_mark.line + 1
                nodes[arule.id] = (snode, keys)
            rdata["since"] = anchor
            rdata["release"] = {"after": [*after, {"step": anchor}]}
        rdata = steps.default_namespace(rdata, namespace or steps.DEFAULT_NAMESPACE)
        rule, clean = _check_rule(problems, rdata, keys, snode, step=True)
        if isinstance(sid, str):
            previous = sid
        if rule is None or not clean or len(problems.items) > before:
            if isinstance(sid, str):
                failed.add(sid)
            if rule is not None:
                partial.append((rule, snode, keys))
            continue
        rules.append(rule)
        step_ids.append(rule.id)
        lines[rule.id] = snode.start_mark.line + 1
        nodes[rule.id] = (snode, keys)
    for e in rule_set_errors(rules, elsewhere=failed - {r.id for r in rules}):
        named = re.match(r"rule (.+?): ", str(e))
        problems.add(_set_problem_node(str(e), nodes, root),
                     _step_words(str(e)) if named and named.group(1) in step_ids else str(e))
    known = {r.id for r in rules} | failed | {_PLACEHOLDER_TRIGGER["rule"]}
    for rule, rnode, keys in partial:  # their triggers may still name a rule that does not exist
        for ref in sorted(rule.refs() - known):
            what = "step" if any(t.step == ref for t in rule.release.after) else "rule"
            msg = f"rule {rule.id}: release trigger names unknown {what} {ref!r}"
            problems.add(_trigger_naming(keys, ref) or rnode, _step_words(msg) if rule.kind.is_step else msg)
    kueue = None
    if "kueue" in top:
        from harness.kueue import config as kueue_config

        try:
            kueue = kueue_config.parse(data.get("kueue"), "kueue")
        except kueue_config.KueueConfigError as e:
            for p in e.problems:
                problems.add(top["kueue"][1], p)
    err = problems.error()
    if err is not None:
        raise err
    return Plan(str(data.get("name") or Path(source).stem), str(data.get("description") or ""),
                tuple(rules), source, lines, kueue, tuple(step_ids), namespace, steps_after,
                deletes_as, raw)


def load_plan(path: str | Path, namespace: str | None = None, near: Path | None = None) -> Plan:
    """Read and validate a plan file. A bare name ("stuck-preemption") means `near`/plans/<name>.yaml
    (the calling case's folder) when that exists, else a shipped plan (cases/*/plans/<name>.yaml).

    Raises PlanError (with file:line) on invalid content, and when the file cannot be read.
    """
    p = Path(path)
    if not p.exists() and not p.suffix:
        local = near / "plans" / f"{p}.yaml" if near is not None else None
        if local is not None and local.exists():
            p = local
        elif str(p) in shipped_plans():
            p = shipped_plans()[str(p)]
    try:
        if p.exists() and not p.is_dir() and not stat.S_ISREG(p.stat().st_mode):
            raise PlanError(f"{p}: not a regular file (a device, a FIFO or a socket); a plan is a YAML file")
        if p.stat().st_size > MAX_PLAN_BYTES:
            raise PlanError(f"{p}: {p.stat().st_size} bytes is too large for a plan (at most {MAX_PLAN_BYTES})")
        text = p.read_text()
    except OSError as e:
        shipped = ", ".join(sorted(shipped_plans()))
        raise PlanError(f"{p}: cannot read the plan ({e.strerror}). Shipped plans: {shipped}") from None
    except UnicodeDecodeError as e:
        raise PlanError(f"{p}: not a text file (byte {e.start} is not UTF-8); a plan is YAML text") from None
    return parse_plan(text, str(p), namespace)
