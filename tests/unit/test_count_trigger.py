"""The counting trigger `{count: RULE, at_least: N, state: …, status: …}` (harness/plan/triggers.py,
"Counting triggers"): parsing, its errors, evaluation over synthetic FlowRecords, its words, and a plan that
uses it (cases/kueue_13662's thrashing plan) loading and round-tripping through Rule.to_dict."""

from __future__ import annotations

import pytest

import yaml

from harness.plan.load import PlanError, load_plan, parse_plan
from harness.plan.rules import FlowRecord, RuleError, Trigger, trigger_satisfied


def flows(n: int, status: int = 200, **kw) -> list[FlowRecord]:
    return [FlowRecord(i + 1, "ns", f"job-a-{i}", answered_status=status, **kw) for i in range(n)]


def test_count_holds_from_the_nth_flow_in_the_state() -> None:
    t = Trigger.from_dict({"count": "qr-a", "at_least": 4}, "w")
    assert t.kind == "count" and t.state == "answered" and t.ref == "qr-a"
    assert not trigger_satisfied(t, {"qr-a": flows(3)}, {})
    assert trigger_satisfied(t, {"qr-a": flows(4)}, {})
    assert not trigger_satisfied(t, {"other": flows(9)}, {})
    with_status = Trigger.from_dict({"count": "qr-a", "at_least": 2, "status": 200}, "w")
    assert not trigger_satisfied(with_status, {"qr-a": flows(1) + flows(5, status=409)}, {})
    assert trigger_satisfied(with_status, {"qr-a": flows(2) + flows(5, status=409)}, {})
    held = Trigger.from_dict({"count": "h", "at_least": 2, "state": "held"}, "w")
    assert trigger_satisfied(held, {"h": [FlowRecord(1, "ns", "a", held=True), FlowRecord(2, "ns", "b", held=True)]}, {})
    assert not trigger_satisfied(held, {"h": [FlowRecord(1, "ns", "a", held=True), FlowRecord(2, "ns", "b")]}, {})


@pytest.mark.parametrize("d, words", [
    ({"count": "x"}, "needs `at_least: N`"),
    ({"count": "x", "at_least": 0}, "needs `at_least: N`"),
    ({"count": "x", "at_least": True}, "needs `at_least: N`"),
    ({"count": "x", "at_least": 2, "state": "gone"}, "is not one of"),
    ({"count": "x", "at_least": 2, "status": "200"}, "HTTP status"),
    ({"count": "x", "at_least": 2, "log": "y"}, "exactly one of"),
    ({"count": "x", "at_least": 2, "condition": "Evicted"}, "takes no `condition`"),
])
def test_count_errors_say_what_to_change(d, words) -> None:
    with pytest.raises(RuleError, match=words.replace("`", ".").replace("(", ".").replace(")", ".")):
        Trigger.from_dict(d, "rule r: release.after[0]")


def test_count_words() -> None:
    assert Trigger(count="qr-a", at_least=4).describe() == "the 4th flow of qr-a answered"
    assert Trigger(count="qr-a", at_least=21, state="held", status=200).describe() == "the 21st flow of qr-a held with 200"


def test_count_in_a_plan_round_trips_and_names_known_rules_only() -> None:
    plan = parse_plan(yaml.safe_dump({"apiVersion": "kueue-harness/v1", "kind": "FaultPlan", "name": "p", "rules": [
        {"id": "hold-b", "match": {"write": "quota_release", "name": "job-job-b-*"}, "action": "hold",
         "release": {"after": [{"count": "qr-a", "at_least": 4, "status": 200}], "timeout": 60}},
        {"id": "qr-a", "match": {"write": "quota_release", "name": "job-job-a-*"}, "action": "observe"}]}))
    d = plan.rules[0].to_dict()
    assert d["release"]["after"] == [{"count": "qr-a", "at_least": 4, "state": "answered", "status": 200}]
    assert Trigger.from_dict(d["release"]["after"][0], "again") == plan.rules[0].release.after[0]
    assert plan.rules[0].refs() == {"qr-a"}
    with pytest.raises(PlanError, match="counts qr-a's flows held, but qr-a .action observe. can only be waited"):
        parse_plan(yaml.safe_dump({"apiVersion": "kueue-harness/v1", "kind": "FaultPlan", "name": "p", "rules": [
            {"id": "hold-b", "match": {"write": "quota_release"}, "action": "hold",
             "release": {"after": [{"count": "qr-a", "at_least": 4, "state": "held"}], "timeout": 60}},
            {"id": "qr-a", "match": {"write": "quota_release"}, "action": "observe"}]}))


def test_the_thrashing_plan_holds_job_b_until_job_a_was_evicted_more_than_bounded_evictions_allows() -> None:
    from pathlib import Path

    from harness.checkers.bounds import MAX_EVICTIONS

    plan = load_plan("thrashing", namespace="ns", near=Path(__file__).parents[2] / "cases" / "kueue_13662")
    hold = next(r for r in plan.rules if r.id == "quota-release-job-b")
    [t] = hold.release.after
    assert t.kind == "count" and t.count == "quota-release-job-a" and t.at_least == MAX_EVICTIONS + 1


def test_plan_happened_accepts_a_window_hold_ending_by_its_timeout_only_when_named() -> None:
    from harness.checkers.plan_happened import PlanHappened
    from harness.history.names import Names

    rule = {"id": "hold-b", "action": "hold", "release": {"after": [{"count": "qr-a", "at_least": 4}], "timeout": 40}}
    h = [{"ts": 0.0, "source": "harness", "event": "case_started", "namespace": "ns"},
         {"ts": 0.1, "source": "proxy", "event": "rule_added", "rule": rule},
         {"ts": 1.0, "source": "proxy", "event": "held", "rule": "hold-b", "flow": 1, "hold": "h1"},
         {"ts": 41.0, "source": "proxy", "event": "hold_timeout", "rule": "hold-b", "flow": 1, "hold": "h1"}]
    [f] = PlanHappened().check(h, {}, Names(h))
    assert f.result == "violated" and "not by its triggers" in f.evidence
    [f] = PlanHappened(windows=["hold-b"]).check(h, {}, Names(h))
    assert f.result == "held"
    expired = h[:-1] + [{"ts": 41.0, "source": "proxy", "event": "hold_expired", "rule": "hold-b", "flow": 1, "hold": "h1"}]
    assert PlanHappened(windows=["hold-b"]).check(expired, {}, Names(expired))[0].result == "violated"
