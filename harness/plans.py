"""YAML fault plans: a named list of rules (harness/faults.py) with release triggers, loaded by the pytest
API and the CLI alike. Validation reports `file:line` for unknown keys, bad values, bad globs/regexes,
triggers naming unknown rules and trigger cycles; a plan that fails validation loads nothing.

Format: docs/fault-plans.md. Each bug folder ships its plans in cases/<bug>/plans/*.yaml and its cases load them.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError
from harness import actions
from harness.faults import Match, Release, Rule, RuleError, Trigger, rule_keys, validate_rule_set

CASES_DIR = Path(__file__).resolve().parent.parent / "cases"
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

_TOP_KEYS = {"apiVersion", "kind", "name", "description", "rules"}
_RULE_KEYS = rule_keys()  # the shared keys and every action's extra keys (harness/actions.py)
_MATCH_KEYS = {f.name for f in dataclasses.fields(Match)}
_RELEASE_KEYS = {f.name for f in dataclasses.fields(Release)}
_TRIGGER_KEYS = {f.name for f in dataclasses.fields(Trigger)}


#: Plans are a handful of rules; a larger file is a mistake (or an attack on the loader).
MAX_PLAN_BYTES = 1024 * 1024


class PlanError(HarnessError):
    """A plan file is invalid. `str()` starts with `file:line:` and says what to change."""


@dataclass(frozen=True)
class Plan:
    """A validated plan: `rules` in file order, `source` the file, `lines` rule id -> line number."""

    name: str
    description: str
    rules: tuple[Rule, ...]
    source: str
    lines: dict[str, int]

    def to_wire(self) -> dict[str, Any]:
        """The body of the proxy's `POST /plan`."""
        return {"name": self.name, "rules": [r.to_dict() for r in self.rules]}


def _err(source: str, node: yaml.Node | None, msg: str) -> PlanError:
    line = node.start_mark.line + 1 if node is not None else 1
    return PlanError(f"{source}:{line}: {msg}")


def _keys(node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    return {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _check_mapping(source: str, node: yaml.Node, allowed: set[str], what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise _err(source, node, f"{what}: expected a mapping")
    keys = _keys(node)
    seen: set[str] = set()
    for knode, _ in node.value:
        k = knode.value if isinstance(knode, yaml.ScalarNode) else None
        if k not in allowed:
            raise _err(source, knode, f"{what}: unknown key {k!r}; allowed: {', '.join(sorted(allowed))}")
        if k in seen:
            raise _err(source, knode, f"{what}: key {k!r} given twice")
        seen.add(k)
    return keys


def _check_rule_nodes(source: str, node: yaml.Node, index: int) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    keys = _check_mapping(source, node, _RULE_KEYS, f"rules[{index}]")
    if "match" in keys:
        _check_mapping(source, keys["match"][1], _MATCH_KEYS, f"rules[{index}].match")
    if "release" in keys:
        rel = _check_mapping(source, keys["release"][1], _RELEASE_KEYS, f"rules[{index}].release")
        if "after" in rel:
            after = rel["after"][1]
            if not isinstance(after, yaml.SequenceNode):
                raise _err(source, after, f"rules[{index}].release.after: expected a list of triggers")
            for j, t in enumerate(after.value):
                _check_mapping(source, t, _TRIGGER_KEYS, f"rules[{index}].release.after[{j}]")
    return keys


def _triggers(keys: dict[str, tuple[yaml.Node, yaml.Node]]) -> list[yaml.Node]:
    """A rule's `release.after` trigger nodes (already checked to be a list of mappings)."""
    rel = keys.get("release", (None, None))[1]
    after = _keys(rel).get("after", (None, None))[1] if isinstance(rel, yaml.MappingNode) else None
    return list(after.value) if isinstance(after, yaml.SequenceNode) else []


def _trigger_naming(keys: dict[str, tuple[yaml.Node, yaml.Node]], ref: str) -> yaml.Node | None:
    """The first trigger node of a rule whose `rule` or `delivered` is `ref`."""
    for t in _triggers(keys):
        if isinstance(t, yaml.MappingNode) and any(
                k in ("rule", "delivered") and v.value == ref for k, (_, v) in _keys(t).items()):
            return t
    return None


def _field_node(keys: dict[str, tuple[yaml.Node, yaml.Node]], message: str, rule_node: yaml.Node) -> yaml.Node:
    """The node a RuleError message is about ("match.path_regex: …" -> that value), else the rule."""
    message = re.sub(r"^rule [^:]*: ", "", message)  # the rule's id may contain a key's name
    m = re.search(r"\brelease\.after\[(\d+)\]", message)
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


def parse_plan(text: str, source: str = "<plan>", namespace: str | None = None) -> Plan:
    """Parse and validate plan text. `namespace` (a case's namespace) is set on rules whose match has
    none, so that a plan written for any namespace acts only inside one.

    Raises PlanError ("file:line: …") on any problem; nothing is half-loaded.
    """
    try:
        for ev in yaml.parse(text):
            # Anchors and aliases can expand exponentially ("billion laughs"); a plan never needs them.
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
                raise PlanError(f"{source}:{ev.start_mark.line + 1}: YAML anchors and aliases are not allowed in "
                                "a plan; write each value out")
        root = yaml.compose(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        context = (f" ({e.context} that started on line {e.context_mark.line + 1})"
                   if e.context and e.context_mark and e.problem_mark else "")
        raise PlanError(f"{source}:{line}: not valid YAML: {e.problem or e}{context}") from None
    if root is None:
        raise PlanError(f"{source}:1: empty plan; expected apiVersion, kind, name and rules")
    top = _check_mapping(source, root, _TOP_KEYS, "plan")
    data = yaml.safe_load(text)
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        wrong = "apiVersion" if data.get("apiVersion") != API_VERSION else "kind"
        node = top.get(wrong, (None, root))[1]
        raise _err(source, node, f"expected apiVersion: {API_VERSION} and kind: {KIND}")
    if "rules" not in top or not isinstance(top["rules"][1], yaml.SequenceNode) or not top["rules"][1].value:
        raise _err(source, top.get("rules", (None, root))[1], "`rules` must be a non-empty list")
    rules: list[Rule] = []
    lines: dict[str, int] = {}
    nodes: dict[str, tuple[yaml.Node, dict]] = {}
    for i, (rnode, rdata) in enumerate(zip(top["rules"][1].value, data["rules"])):
        keys = _check_rule_nodes(source, rnode, i)
        if not isinstance(rdata, dict):
            raise _err(source, rnode, f"rules[{i}]: expected a mapping")
        rdata = dict(rdata)
        try:
            signal = actions.get(rdata.get("action", "hold")).consulted == "signal"
        except KeyError:
            signal = False  # Rule.from_dict names the unknown action below
        if signal:
            pass  # a process fault matches no request: no namespace to narrow it to
        elif namespace is not None and isinstance(rdata.get("match"), dict) and not rdata["match"].get("namespace"):
            rdata["match"] = {**rdata["match"], "namespace": namespace}
        elif namespace is not None and rdata.get("match") is None:
            rdata["match"] = {"namespace": namespace}
        try:
            rule = Rule.from_dict(rdata)
        except RuleError as e:
            node = _field_node(keys, str(e), rnode)
            if e.key in keys and e.key not in ("match", "release"):  # the key the message is about
                node = keys[e.key][0]
            raise _err(source, node, str(e)) from None
        except TypeError as e:
            raise _err(source, _field_node(keys, str(e), rnode), str(e)) from None
        rules.append(rule)
        lines[rule.id] = rnode.start_mark.line + 1
        nodes[rule.id] = (rnode, keys)
    try:
        validate_rule_set(rules)
    except RuleError as e:
        msg = str(e)
        # Messages name rules exactly: "rule X: …" or "… form a cycle: A -> B -> A".
        named = re.match(r"rule (.+?): ", msg)
        cycle = re.search(r"form a cycle: (.+)$", msg)
        in_msg = [named.group(1)] if named else cycle.group(1).split(" -> ") if cycle else []
        culprit = next((rid for rid in nodes if rid in in_msg), None)
        node: yaml.Node | None = root
        if culprit:
            rnode, keys = nodes[culprit]
            unknown = re.search(r"names unknown rule '(.+)'$", msg)
            index = re.search(r"\brelease\.after\[(\d+)\]", msg)
            if index and int(index.group(1)) < len(_triggers(keys)):
                node = _triggers(keys)[int(index.group(1))]
            elif "already loaded" in msg and "id" in keys:
                node = keys["id"][1]
            elif unknown:
                node = _trigger_naming(keys, unknown.group(1)) or rnode
            elif cycle:
                node = _trigger_naming(keys, in_msg[in_msg.index(culprit) + 1]) or rnode
            else:
                node = rnode
        raise _err(source, node, msg) from None
    return Plan(str(data.get("name") or Path(source).stem), str(data.get("description") or ""),
                tuple(rules), source, lines)


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
        if p.stat().st_size > MAX_PLAN_BYTES:
            raise PlanError(f"{p}: {p.stat().st_size} bytes is too large for a plan (at most {MAX_PLAN_BYTES})")
        text = p.read_text()
    except OSError as e:
        shipped = ", ".join(sorted(shipped_plans()))
        raise PlanError(f"{p}: cannot read the plan ({e.strerror}). Shipped plans: {shipped}") from None
    except UnicodeDecodeError as e:
        raise PlanError(f"{p}: not a text file (byte {e.start} is not UTF-8); a plan is YAML text") from None
    return parse_plan(text, str(p), namespace)
