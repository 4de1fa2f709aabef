"""Deleting otherwise (`deletes_as`, docs/fault-plans.md "Moving a case's steps"; `keep_terminating` of a delete
step): the plan language's part, applied to the plan it changes, plan_happened when no delete step was
changed, and explore's "deleted otherwise" family (harness/explore/generate.py delete_moves), on synthetic
data."""

from __future__ import annotations

import json

import pytest
import yaml

from harness.common.errors import HarnessError
from harness.explore import generate
from harness.explore.model import (
    Move,
    Target,
    delete_as_move,
    move_from_dict,
    move_to_dict,
    plan_document,
    plan_words,
    step_move,
    validate,
)
from harness.explore.salvage import as_happened
from harness.plan.load import PlanError, parse_plan
from harness.plan.moved import apply_deletes_as, refuse_outside_a_case
from harness.plan.steps import KEEP_FINALIZER, StepError, delete_spec
from tests.unit.test_explore_steps import _judge  # the plan_happened verdict of a synthetic history

# The shape of cases/kueue_1789/plans/orphan-delete-control.yaml plus a plain `Kind/name` delete.
CONTROL = """apiVersion: kueue-harness/v1
kind: FaultPlan
name: control
steps:
  - {id: delete-j1, delete: {object: Job/j1, propagation: Background}}
  - {id: j1-gone, wait: {object: Job/j1, deleted: true}}
  - {id: delete-lq, delete: LocalQueue/lq}
"""
STEPS = {
    "delete-j1": {"after": [], "action": "delete", "previous": None,
                  "delete": {"object": "Job/j1", "propagation": "Background"}},
    "j1-gone": {"after": [{"step": "delete-j1"}], "action": "wait", "previous": "delete-j1"},
    "delete-lq": {"after": [{"step": "j1-gone"}], "action": "delete", "previous": "j1-gone",
                  "delete": "LocalQueue/lq"},
}
HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\n"


def test_keep_terminating_is_seconds_in_a_bound() -> None:
    assert delete_spec({"object": "Job/j1", "keep_terminating": 5}) == {"object": "Job/j1", "keep_terminating": 5.0}
    for bad in (0, -1, 601, True, "5", None.__class__):
        with pytest.raises(StepError, match="keep_terminating: expected seconds"):
            delete_spec({"object": "Job/j1", "keep_terminating": bad})
    with pytest.raises(StepError, match="allowed: keep_terminating, namespace, object, propagation"):
        delete_spec({"object": "Job/j1", "keep": 5})
    assert KEEP_FINALIZER == "kueue-harness.test/keep"


def test_a_plan_changes_how_delete_steps_of_a_plan_loaded_later_delete() -> None:
    plan = parse_plan(HEAD + "deletes_as:\n  delete-j1: {propagation: Orphan}\n  delete-lq: {keep_terminating: 5}\n",
                      "x.yaml", "ns-a")
    assert plan.rules == () and plan.deletes_as == {"delete-j1": {"propagation": "Orphan"},
                                                    "delete-lq": {"keep_terminating": 5}}
    control = parse_plan(CONTROL, "control.yaml", "ns-a").data
    data, ids = apply_deletes_as(control, plan.deletes_as)
    assert ids == ["delete-j1", "delete-lq"]
    loaded = parse_plan(yaml.safe_dump(data), "changed.yaml", "ns-a")
    specs = {r.id: r.param("delete") for r in loaded.rules if r.id.startswith("delete-")}
    assert specs["delete-j1"] == {"object": "Job/j1", "propagation": "Orphan", "namespace": "ns-a"}
    assert specs["delete-lq"] == {"object": "LocalQueue/lq", "keep_terminating": 5.0, "namespace": "ns-a"}
    # A step that is no delete step, or no step of the plan: left alone, not listed.
    assert apply_deletes_as(control, {"j1-gone": {"propagation": "Orphan"}, "nope": {}}) == (control, [])
    with pytest.raises(HarnessError, match="deletes_as"):
        refuse_outside_a_case(plan, "plan load")


@pytest.mark.parametrize("value, words", [
    ("[a]", "expected a mapping of delete step ids"),
    ("{d: Orphan}", "deletes_as.d: expected a mapping of propagation and/or keep_terminating"),
    ("{d: {grace: 1}}", "deletes_as.d: expected a mapping of propagation"),
    ("{d: {propagation: Sideways}}", "deletes_as.d: propagation 'Sideways' is not one of"),
    ("{d: {keep_terminating: 0}}", "deletes_as.d: keep_terminating: expected seconds"),
    ("{1: {propagation: Orphan}}", "reads as a int, not a step id; quote it"),
    ("\n  d: {propagation: Orphan}\n  d: {propagation: Foreground}", "step d given twice"),
])
def test_deletes_as_in_another_shape_is_refused(value: str, words: str) -> None:
    with pytest.raises(PlanError, match=words):
        parse_plan(HEAD + f"rules: []\ndeletes_as: {value}\n", "x.yaml")


def test_a_plan_may_not_change_its_own_delete_step() -> None:
    with pytest.raises(PlanError, match="this plan's own"):
        parse_plan(CONTROL + "deletes_as: {delete-j1: {propagation: Orphan}}\n", "x.yaml")


def test_plan_happened_says_error_when_no_delete_step_was_changed() -> None:
    asked = {"ts": 2, "source": "harness", "event": "deletes_as_asked", "steps": ["delete-j1"]}
    loaded = {"ts": 3, "source": "harness", "event": "plan_loaded", "plan": "control", "rules": ["delete-j1"]}
    verdict, why = _judge([asked, loaded])
    assert verdict == "error" and "deletes_as changes step delete-j1, which is no delete step" in why
    ok = {**loaded, "steps_changed": {"delete-j1": {"propagation": "Orphan"}}}
    assert _judge([asked, ok])[0] == "passed"


def test_the_deleted_otherwise_family() -> None:
    moves = generate.delete_moves(STEPS)
    assert [(m.target.role, json.loads(m.how)) for m in moves] == [
        ("delete-j1", {"propagation": "Orphan"}), ("delete-j1", {"propagation": "Foreground"}),
        ("delete-j1", {"keep_terminating": generate.KEEP_TERMINATING}),
        ("delete-lq", {"propagation": "Orphan"}), ("delete-lq", {"propagation": "Foreground"}),
        ("delete-lq", {"keep_terminating": generate.KEEP_TERMINATING})]
    assert generate.delete_moves({"d": {"action": "delete", "delete": {"object": "Job/j", "propagation": "Orphan",
                                                                      "keep_terminating": 3}}}) == [
        delete_as_move("d", propagation="Foreground")]  # the ways it deletes already are left out
    assert plan_words((moves[0],)) == "step delete-j1 deletes with propagation Orphan"
    assert plan_words((moves[2],)) == "step delete-j1 deletes kept Terminating 5s by a finalizer"
    # A step may be moved and changed in one plan: two moves, two keys of the plan.
    moved = step_move("delete-j1", [])
    doc = parse_plan(plan_document((moves[0], moved), "c"), "c.yaml")
    assert doc.deletes_as == {"delete-j1": {"propagation": "Orphan"}} and doc.steps_after == {"delete-j1": []}
    assert validate((moves[0], moved)) is None and validate((moves[0], moves[1])) is not None  # one way per step
    assert move_from_dict(move_to_dict(moves[2])) == moves[2]
    assert as_happened((moves[0],), []) is None  # no proxy rule to account for: kept as it is
    with pytest.raises(ValueError):
        Move("delete_as", Target("admission", "j1", "job-j1-*"))


def test_the_family_is_among_the_roots_of_a_control_with_delete_steps() -> None:
    from harness.explore.trace import Trace

    got = [(st, fam, m) for st, fam, m in generate.root_moves(Trace.from_events([], "ns-a"), STEPS) if fam == "deleted"]
    # They open stage 0: the first roots of all, each way of each delete step.
    assert len(got) == 6 and {st for st, _, _ in got} == {0}
    assert generate.root_moves(Trace.from_events([], "ns-a"), STEPS)[:6] == got


def test_bad_input_a_breaker_found_gets_words_not_a_traceback() -> None:
    # A plan whose own step id is a list, with deletes_as: the loader's own words, not "unhashable type".
    with pytest.raises(PlanError) as e:
        parse_plan(HEAD + "steps:\n  - {id: [a], delete: Job/j1}\ndeletes_as:\n  d: {propagation: Orphan}\n", "x.yaml")
    assert "unhashable" not in str(e.value)
    # null would silently undo the case step's own propagation (a Job's default is Orphan): refused.
    for value in ("{d: {propagation: null}}", "{d: {keep_terminating: null}}"):
        with pytest.raises(PlanError, match="each with a value"):
            parse_plan(HEAD + f"rules: []\ndeletes_as: {value}\n", "x.yaml")
    # A malformed `how` is refused where the move is made, with what is wrong.
    for how in ("null", "5", "[1, 2]", '"Orphan"', "", '{"propagation": null}', '{"keep_terminating": "x"}'):
        with pytest.raises(ValueError, match="delete_as move"):
            Move("delete_as", Target("step", "d", ""), how=how)
    with pytest.raises(ValueError, match="keep_terminating"):
        delete_as_move("d", keep_terminating=10 ** 400)
    with pytest.raises(ValueError, match="JSON text"):
        move_from_dict({**move_to_dict(delete_as_move("d", propagation="Orphan")), "how": {"propagation": "Orphan"}})
    from harness.explore.findings import cluster_key

    for how in ("null", "5", '[1, "a"]', "not json"):  # a stored finding, read back: no traceback
        assert cluster_key("quota:cq", [{"kind": "delete_as", "how": how, "target": {"cls": "step", "role": "d"}}]) \
            == "quota | delete_as step (other)"


def test_the_report_says_how_a_step_deletes_and_the_rerun_keeps_the_plan() -> None:
    from harness.plan import actions
    from harness.report.write import rerun_command

    d = actions.get("delete")
    assert d.describe({"delete": {"object": "Job/j1", "propagation": "Foreground", "keep_terminating": 5.0}}) == \
        "delete Job/j1 (propagation Foreground, kept Terminating 5s)"
    assert d.describe({"delete": {"object": "Job/j1"}}) == "delete Job/j1"
    # A --plan run's evidence re-runs it with the plan; an explore run's item id is the case's.
    for nodeid in ("c.py::test_x_control[slot00012]", "c.py::test_x_control[p0042]", "c.py::test_x_control[m01-02-r3]",
                   "c.py::test_x_control[r2]", "c.py::test_x_control"):
        cmd = rerun_command(nodeid, ["--kueue-version", "v0.17.0", "--plan", "/p/f.yaml"])
        assert "c.py::test_x_control --kueue-version v0.17.0 --plan /p/f.yaml" in cmd, cmd
