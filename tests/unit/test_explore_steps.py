"""Moving a case's own plan steps (`steps_after`, docs/fault-plans.md "Moving a case's steps"): the plan
language's part (parsed, refused in other shapes, applied to the plan it moves), plan_happened when a move
found no step, and explore's "moved" family and unblocking (harness/explore/generate.py), on synthetic data."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from harness.checkers import Selection, compose
from harness.explore import driver, generate
from harness.explore.model import Candidate, Move, Target, plan_document, plan_words, step_move, validate
from harness.explore.trace import Trace
from harness.plan.load import PlanError, parse_plan
from harness.plan.moved import apply_steps_after

# The shape of cases/kueue_14863/plans/sticky-preemptor-control.yaml: s waits for v1's quota release and
# for Kueue to have seen p admitted.
CONTROL = """apiVersion: kueue-harness/v1
kind: FaultPlan
name: control
rules:
  - {id: release-v1, match: {write: quota_release, name: "job-v1-*"}, action: observe}
  - {id: admit-p, match: {write: admission, name: "job-p-*"}, action: observe}
steps:
  - {id: p, create: {builder: job, args: {name: p}, with: [{queue: cq}]}}
  - id: s
    after: [{rule: release-v1, state: answered, status: 200}, {delivered: admit-p}]
    create: {builder: workload, args: {name: s}, with: [{queue: cq}]}
  - {id: s-seen, wait: {log: 'Workload .*${namespace}/s\\b'}}
  - {id: delete-p, delete: Job/p}
"""
STEPS = {
    "p": {"after": [], "action": "create", "previous": None},
    "s": {"after": [{"rule": "release-v1", "state": "answered", "status": 200}, {"delivered": "admit-p"}],
          "action": "create", "previous": "p"},
    "s-seen": {"after": [{"step": "s"}], "action": "wait", "previous": "s"},
    "delete-p": {"after": [{"step": "s-seen"}], "action": "delete", "previous": "s-seen"},
}
FAIL_V2 = Move("fail", Target("eviction", "v2", "job-v2-*"), status=500, times=None)


def test_a_plan_moves_steps_of_a_plan_loaded_later() -> None:
    text = ("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nrules: []\n"
            "steps_after:\n  s: [{rule: release-v1, state: answered}]\n")
    plan = parse_plan(text, "x.yaml", "ns-a")
    assert plan.rules == () and plan.steps_after == {"s": [{"rule": "release-v1", "state": "answered"}]}
    control = parse_plan(CONTROL, "control.yaml", "ns-a").data  # the parsed plan: moves edit it, never its text
    before = copy.deepcopy(control)
    moved, ids = apply_steps_after(control, plan.steps_after)
    assert ids == ["s"] and moved is not control and control == before  # the loaded plan is left as it was
    loaded = parse_plan(yaml.safe_dump(moved), "moved.yaml", "ns-a")
    s = next(r for r in loaded.rules if r.id == "s")
    assert [t.rule for t in s.release.after] == ["release-v1"] and s.release.after[0].delivered is None
    # A step without `after` ran after the step before it; moved, it runs on the given triggers only.
    moved, ids = apply_steps_after(control, {"delete-p": [{"step": "s"}]})
    d = next(r for r in parse_plan(yaml.safe_dump(moved), "m.yaml", "ns-a").rules if r.id == "delete-p")
    assert ids == ["delete-p"] and [t.step for t in d.release.after] == ["s"]
    # A plan without the step is not the plan the move is for: left as it is.
    assert apply_steps_after(control, {"nope": []}) == (control, [])


@pytest.mark.parametrize("value, words", [
    ("[a, b]", "expected a mapping of step ids"),
    ("{s: {rule: x}}", "steps_after.s: expected a list of triggers"),
    ("{s: [x]}", "steps_after.s: expected a list of triggers"),
    ("{'bad id!': []}", "is not a step id"),
    ("{1: []}", "reads as a int, not a step id; quote it"),
    ("\n  s: [{rule: r1}]\n  s: []", "step s given twice"),
    ("{s: [{bogus: 1}]}", "steps_after.s\\[0\\]: unknown key\\(s\\) bogus"),
    ("{s: [{rule: r1, state: flying}]}", "steps_after.s\\[0\\]"),
    ("{s: [{rule: r1, log: x}]}", "give exactly one of"),
])
def test_steps_after_in_another_shape_is_refused(value: str, words: str) -> None:
    text = f"apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nrules: []\nsteps_after: {value}\n"
    with pytest.raises(PlanError, match=words):
        parse_plan(text, "x.yaml")


def test_a_moved_step_whose_trigger_names_a_rule_its_plan_lacks_is_refused_there() -> None:
    moved, _ = apply_steps_after(parse_plan(CONTROL, "c.yaml", "ns-a").data, {"s": [{"rule": "no-such-rule"}]})
    with pytest.raises(PlanError, match="no-such-rule"):
        parse_plan(yaml.safe_dump(moved), "moved.yaml", "ns-a")


def _judge(events: list[dict]) -> tuple[str, str]:
    h = [{"ts": 1.0, "source": "harness", "event": "case_started", "namespace": "ns-a"}, *events,
         {"ts": 50.0, "source": "harness", "event": "verdict"}]
    v = compose(Selection({"plan_happened": {}}), h, {}, require_invariant=False)
    return v.verdict, v.findings[0].evidence


def test_plan_happened_says_error_when_a_moved_step_was_in_no_plan() -> None:
    asked = {"ts": 2, "source": "harness", "event": "steps_after_asked", "steps": ["s"]}
    loaded = {"ts": 3, "source": "harness", "event": "plan_loaded", "plan": "control", "rules": ["s"]}
    verdict, why = _judge([asked, loaded])
    assert verdict == "error" and "steps_after moves step s, which no plan the case loaded has" in why
    assert _judge([asked, {**loaded, "steps_moved": {"s": []}}])[0] == "passed"


def test_the_moved_family_runs_user_steps_earlier() -> None:
    assert generate.earlier(STEPS, "s") == [[{"delivered": "admit-p"}],
                                            [{"rule": "release-v1", "state": "answered", "status": 200}]]
    assert generate.earlier(STEPS, "delete-p") == [[{"step": "s"}]]  # when the wait it follows began
    assert generate.earlier(STEPS, "p") == []  # nothing earlier than the plan's load
    moves = generate.step_moves(STEPS)
    assert [m.target.role for m in moves] == ["s", "s", "delete-p"]  # user steps only: never the wait
    assert plan_words((FAIL_V2, moves[1])) == ("fail the eviction of v2 with 500 every time; run step s on rule "
                                               "release-v1 answered 200 only")
    doc = parse_plan(plan_document((FAIL_V2, moves[1]), "c"), "c.yaml")
    assert doc.steps_after == {"s": [{"rule": "release-v1", "state": "answered", "status": 200}]}
    assert [r.id for r in doc.rules] == ["x-eviction-v2"] and validate((moves[1],)) is None


def test_a_run_that_blocked_a_step_is_tried_again_with_the_step_unblocked(tmp_path: Path) -> None:
    # Right after the step before it first (the fault may block every trigger of s), then one trigger fewer.
    got = generate.unblocked((FAIL_V2,), STEPS, ["s", "s-seen", "delete-p"])
    assert [m.trigger_list() for m in got] == [[{"step": "p"}], [{"delivered": "admit-p"}],
                                               [{"rule": "release-v1", "state": "answered", "status": 200}]]
    moved = step_move("s", [{"delivered": "admit-p"}])
    assert generate.unblocked((FAIL_V2, moved), STEPS, ["s"]) == []  # already moved: not again

    class Spec:
        def cli_args(self):
            return []

    ex = driver.Explorer(["c.py::test_x_control"], Spec(), tmp_path, batch=1, noop_every=99, max_runs=9,
                         say=lambda s: None)
    ex.steps["c.py::test_x_control"] = STEPS
    parent = Candidate((FAIL_V2,), "c.py::test_x_control", "failing", stage=2, id="p0001")
    ex.push(Candidate((Move("hold", Target("admission", "v1", "job-v1-*")),), "c.py::test_x_control", "stale"))
    ex.unblock(parent, ["s", "s-seen", "delete-p"])
    first = ex.pop()
    assert first.family == "unblocked" and first.parent == "p0001" and first.moves[0] == FAIL_V2
    assert first.moves[1].kind == "step" and first.moves[1].target.role == "s"
    ex.unblock(parent, ["s"])  # the same plans again: not queued twice
    assert sum(1 for e in ex.queue if e[-1].family == "unblocked") == 2


def test_a_step_move_roundtrips_through_json_and_trace_is_untouched() -> None:
    from harness.explore.model import move_from_dict, move_to_dict

    m = step_move("s", [{"rule": "release-v1", "state": "answered"}])
    assert move_from_dict(move_to_dict(m)) == m
    with pytest.raises(ValueError):
        Move("step", Target("admission", "v1", "job-v1-*"))
    assert Trace.from_events([], "ns-a").first_writes() == []


# ---- a write that starts failing: the rule's `skip` ------------------------------------------------------

def test_skip_lets_the_first_matching_requests_through_then_acts() -> None:
    import json

    from harness.kueue.api import classify_request
    from harness.plan.rules import Rule, RuleBook, RuleError

    book = RuleBook()
    book.add(Rule.from_dict({"id": "f", "match": {"write": "admission", "name": "job-e-*"}, "action": "fail",
                             "times": None, "skip": 1}))
    body = {"status": {"admission": {"clusterQueue": "cq"}, "conditions": [{"type": "QuotaReserved", "status": "True"}]}}
    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns-a/workloads/job-e-abcde/status"
    w = classify_request("PATCH", path, {"Content-Type": "application/apply-patch+yaml"}, json.dumps(body))
    assert w is not None and w.write == "admission"
    got = [book.first(w, "PATCH", path, "request", body) for _ in range(3)]
    assert [r.id if r else None for r in got] == [None, "f", "f"]
    with pytest.raises(RuleError, match="skip applies to actions"):
        Rule.from_dict({"id": "o", "action": "observe", "skip": 1})
    with pytest.raises(RuleError, match="skip must be >= 0"):
        Rule.from_dict({"id": "o", "action": "fail", "skip": -1})


def test_a_write_made_twice_in_the_reference_also_starts_failing_after_the_first() -> None:
    adm = {"kind": "Workload", "namespace": "ns-a", "name": "job-e-abcde", "write": "admission",
           "subresource": "status", "method": "PATCH"}
    events = []
    for i, name in enumerate(("job-e-abcde", "job-e-fghij")):
        events += [{"ts": 1.0 + i, "event": "request", "flow": i + 1, "write": {**adm, "name": name}},
                   {"ts": 1.1 + i, "event": "response", "flow": i + 1, "status": 200, "namespace": "ns-a"}]
    trace = Trace.from_events(events, "ns-a", ["e"])
    later = [m for _, _, m in generate.root_moves(trace) if m.kind == "fail" and m.skip]
    assert [(m.target.role, m.skip, m.times) for m in later] == [("e", 1, None)]
    assert later[0].words() == "fail the admission of e with 500 every time after the first"
    rule = parse_plan(plan_document((later[0],), "c"), "c.yaml").rules[0]
    assert rule.skip == 1 and rule.times is None and validate((later[0],)) is None


def test_a_plan_may_not_move_its_own_steps_nor_be_loaded_where_no_case_plan_is() -> None:
    from harness.common.errors import HarnessError
    from harness.plan.moved import refuse_outside_a_case

    text = ("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nsteps: [{id: s, sleep: 0}]\n"
            "steps_after: {s: []}\n")
    with pytest.raises(PlanError, match="step s is this plan's own"):
        parse_plan(text, "x.yaml")
    plan = parse_plan("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nsteps_after: {s: []}\n", "x.yaml")
    with pytest.raises(HarnessError, match="pytest CASE --plan FILE"):
        refuse_outside_a_case(plan, "plan load")
    refuse_outside_a_case(parse_plan(CONTROL, "c.yaml"), "plan load")  # no steps_after: nothing to refuse


@pytest.mark.parametrize("value, words", [("1" + "0" * 400, "beyond any run"), ("1.5", "must be a whole number"),
                                          ("1" + "0" * 5000, "a value YAML cannot read")])
def test_a_skip_no_run_reaches_is_refused_with_words(value: str, words: str) -> None:
    text = ("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nrules:\n"
            f"  - {{id: f, action: fail, match: {{write: admission}}, skip: {value}}}\n")
    with pytest.raises(PlanError, match=words):
        parse_plan(text, "x.yaml")


def test_a_loose_write_made_twice_is_also_held_at_its_second() -> None:
    """kubernetes-sigs/kueue#9591's shape: b's Pending write after its quota grew, held until a's update."""
    pend = {"kind": "Workload", "namespace": "ns-a", "write": "pending", "subresource": "status", "method": "PATCH"}
    events = [{"ts": 1.0, "event": "request", "flow": 1, "write": {**pend, "name": "job-b-abcde"}},
              {"ts": 1.1, "event": "response", "flow": 1, "status": 200, "namespace": "ns-a"},
              {"ts": 2.0, "event": "request", "flow": 2, "write": {**pend, "name": "job-a-fghij"}},
              {"ts": 2.1, "event": "response", "flow": 2, "status": 200, "namespace": "ns-a"},
              {"ts": 3.0, "event": "request", "flow": 3, "write": {**pend, "name": "job-b-abcde"}},
              {"ts": 3.1, "event": "response", "flow": 3, "status": 200, "namespace": "ns-a"},
              {"ts": 4.0, "event": "request", "flow": 4, "write": {**pend, "name": "job-a-fghij"}},
              {"ts": 4.1, "event": "response", "flow": 4, "status": 200, "namespace": "ns-a"}]
    trace = Trace.from_events(events, "ns-a", ["a", "b"])
    second = [m for st, _, m in generate.root_moves(trace) if st == 0 and m.skip == 1 and m.target.role == "b"]
    assert second and all(m.after[0].target.role == "a" for m in second)
    hold = next(m for m in second if m.kind == "hold")
    assert hold.words().startswith("hold the 2nd pending of b until")
    rule = parse_plan(plan_document((hold,), "c"), "c.yaml").rules[0]
    assert rule.skip == 1 and rule.action == "hold" and validate((hold,)) is None
