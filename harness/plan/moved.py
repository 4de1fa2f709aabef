"""`steps_after` and `deletes_as`: a plan that moves or changes steps of a plan the case loads later
(docs/fault-plans.md "Moving a case's steps"): reading the keys (the plan loader calls `read`, `read_deletes_as`)
and applying them to the parsed plan they change (`apply_steps_after`, `apply_deletes_as`, called by
harness/scenarios/case.py load_plan) — to its data, never to its text."""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml

from harness.common.errors import HarnessError


#: A step id as `steps_after` names it (the rule id syntax of harness/plan/rules.py).
STEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def read(problems: Any, top: dict[str, tuple[yaml.Node, yaml.Node]], data: dict[str, Any]
         ) -> dict[str, list[dict[str, Any]]]:
    """The plan's `steps_after:` ({step id: list of trigger mappings}), problems added for any other shape.
    The triggers themselves are checked where they are used: in the plan whose steps they move
    (apply_steps_after), whose rules they may name."""
    if "steps_after" not in top:
        return {}
    node = top["steps_after"][1]
    raw = data.get("steps_after")
    if not isinstance(node, yaml.MappingNode) or not isinstance(raw, dict) or not raw:
        problems.add(node, "steps_after: expected a mapping of step ids to trigger lists, e.g. "
                           "{s: [{rule: release-v1, state: answered}]}")
        return {}
    from harness.plan.rules import RuleError
    from harness.plan.triggers import Trigger

    out: dict[str, list[dict[str, Any]]] = {}
    for sid, vnode, val in _entries(problems, node, raw, data, "steps_after",
                                    "steps_after moves the steps of the plan a case loads later (give this one `after` instead)"):
        if not isinstance(val, list) or not all(isinstance(t, dict) and t for t in val):
            problems.add(vnode, f"steps_after.{sid}: expected a list of triggers (mappings such as "
                                "{rule: ID, state: answered}); [] runs the step as soon as its plan is loaded")
            continue
        for j, t in enumerate(val):
            try:
                Trigger.from_dict(dict(t), f"steps_after.{sid}[{j}]")
            except (RuleError, TypeError, ValueError) as e:
                problems.add(vnode, str(e))
        out[sid] = [dict(t) for t in val]
    return out


def _entries(problems: Any, node: yaml.MappingNode, raw: dict[str, Any], data: dict[str, Any], key: str,
             own_hint: str) -> Any:
    """(step id, value node, value) of each entry of the plan's `key:` mapping whose key is a step id, given
    once, and no step of this plan itself (`own_hint` says what to do instead); problems added for the rest."""
    own = {st["id"] for st in data.get("steps") or [] if isinstance(st, dict) and isinstance(st.get("id"), str)}
    seen: set[str] = set()
    for knode, vnode in node.value:
        sid = knode.value if isinstance(knode, yaml.ScalarNode) else None
        if isinstance(knode, yaml.ScalarNode) and knode.tag != "tag:yaml.org,2002:str":
            problems.add(knode, f"{key}: {sid!r} reads as a {knode.tag.rsplit(':', 1)[-1]}, not a step id; "
                                f"quote it (\"{sid}\":)")
        elif not isinstance(sid, str) or not STEP_ID.fullmatch(sid):
            problems.add(knode, f"{key}: {sid!r} is not a step id")
        elif sid in seen:
            problems.add(knode, f"{key}: step {sid} given twice")
        elif sid in own:
            problems.add(knode, f"{key}: step {sid} is this plan's own; {own_hint}")
        else:
            seen.add(sid)
            yield sid, vnode, raw.get(sid)


def refuse_outside_a_case(plan: Any, how: str) -> None:
    """Raise HarnessError when `plan` has `steps_after` or `deletes_as` and is loaded by `how` ("plan load",
    "up --plan"), where no case loads a plan of its own for it to change (it would silently do nothing)."""
    changed = [*(getattr(plan, "steps_after", None) or {}), *(getattr(plan, "deletes_as", None) or {})]
    if changed:
        raise HarnessError(f"{how}: plan {plan.name} changes steps ({', '.join(dict.fromkeys(changed))}) of the plan a "
                           "case loads (steps_after, deletes_as), and a session loads no case's plan; replay it on the "
                           "case instead: .venv/bin/python -m pytest CASE --plan FILE (docs/fault-plans.md, Moving a case's steps)")


def apply_steps_after(data: dict[str, Any], edits: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], list[str]]:
    """A copy of the parsed plan `data` (load.Plan.data: as its file says it) with the `after` of each step named in
    `edits` replaced by its triggers (a step without `after` ran after the step before it; it now runs on these
    triggers instead), and the ids it changed, in file order; `data` itself and [] when the plan has none of those
    steps (it is not the plan they move). The result must still pass the plan's checks: a trigger naming a rule
    that plan lacks is refused when it is loaded (harness/scenarios/case.py)."""
    def move(st: dict[str, Any]) -> bool:
        st["after"] = [dict(t) for t in edits[st["id"]]]
        return True

    return _edit_steps(data, edits, move)


def _edit_steps(data: dict[str, Any], edits: dict[str, Any], edit: Any) -> tuple[dict[str, Any], list[str]]:
    """A deep copy of `data` with `edit(step)` applied to each step (a mapping) whose id is in `edits`, and the ids
    it changed (edit returned True), in file order; `data` itself and [] when none. Never the plan's text."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return data, []
    out = copy.deepcopy(data)
    changed = [st["id"] for st in out["steps"] if isinstance(st, dict) and st.get("id") in edits and edit(st)]
    return (out, changed) if changed else (data, [])


#: What `deletes_as` may change of a delete step: how kube-apiserver deletes the object (harness/plan/steps.py
#: delete_spec: `propagation`, `keep_terminating`).
DELETE_CHANGES = ("propagation", "keep_terminating")


def read_deletes_as(problems: Any, top: dict[str, tuple[yaml.Node, yaml.Node]], data: dict[str, Any]
                    ) -> dict[str, dict[str, Any]]:
    """The plan's `deletes_as:` ({step id: {propagation?, keep_terminating?}}: how delete steps of the plan a
    case loads later delete their object), problems added for any other shape. Whether the named step is a
    delete step is known only when that plan loads (apply_deletes_as; plan_happened says `error` when no
    loaded plan had it)."""
    if "deletes_as" not in top:
        return {}
    from harness.plan.steps import StepError, delete_spec

    node, raw = top["deletes_as"][1], data.get("deletes_as")
    if not isinstance(node, yaml.MappingNode) or not isinstance(raw, dict) or not raw:
        problems.add(node, "deletes_as: expected a mapping of delete step ids to how they delete, e.g. "
                           "{delete-j1: {propagation: Orphan}} or {delete-j1: {keep_terminating: 5}}")
        return {}
    out: dict[str, dict[str, Any]] = {}
    for sid, vnode, val in _entries(problems, node, raw, data, "deletes_as", "write how it deletes in the step itself"):
        if not isinstance(val, dict) or not val or set(val) - set(DELETE_CHANGES) or None in val.values():
            problems.add(vnode, f"deletes_as.{sid}: expected a mapping of {' and/or '.join(DELETE_CHANGES)}, each with "
                                "a value, e.g. {propagation: Orphan}")
            continue
        try:
            delete_spec({"object": "Job/x", **val})
        except StepError as e:
            problems.add(vnode, f"deletes_as.{sid}: {e}")
            continue
        out[sid] = dict(val)
    return out


def apply_deletes_as(data: dict[str, Any], edits: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """A copy of the parsed plan `data` with each delete step named in `edits` deleting as they say (its `delete`
    spec updated: a `Kind/name` spec becomes {object: Kind/name, …}), and the ids changed, in file order; a named
    step that is not a delete step is left alone (and not listed). `data` itself and [] when nothing changed."""
    def change(st: dict[str, Any]) -> bool:
        if st.get("delete") is None:
            return False
        spec = st["delete"] if isinstance(st["delete"], dict) else {"object": st["delete"]}
        st["delete"] = {**spec, **edits[st["id"]]}
        return True

    return _edit_steps(data, edits, change)
