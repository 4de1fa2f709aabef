"""The fault-action registry (harness/plan/actions.py): every kind's name, stages, validate (errors name the
rule and the key, and plans point at that key's line) and describe (the words of report.md's fault
table); how Rule.from_dict, validate_rule_set and RuleBook dispatch through it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.kueue.api import WatchEvent
from harness.plan import actions
from harness.plan.load import PlanError, parse_plan
from harness.plan.rules import Match, Rule, RuleBook, RuleError, rule_keys, validate_rule_set

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\nrules:\n"


def rule(**d: Any) -> Rule:
    return Rule.from_dict({"id": "r", **d})


# ---------------------------------------------------------------------------------------------------------
# The registry


def test_registry_names_in_order_and_aliases() -> None:
    assert actions.names() == ("hold", "delay", "fail", "reset", "observe", "drop_watch_events",
                               "delay_watch_events", "restart_kueue", "create", "patch", "delete", "wait", "sleep")
    assert actions.step_names() == ("create", "patch", "delete", "wait", "sleep")
    assert actions.get("hold_response") is actions.get("hold")
    with pytest.raises(KeyError):
        actions.get("explode")
    with pytest.raises(KeyError):
        actions.get(["hold"])


def test_a_name_cannot_be_registered_twice() -> None:
    class Again(actions.Action):
        name = "hold"

    with pytest.raises(ValueError, match="taken"):
        actions.register(Again)


def test_every_kind_says_what_it_is() -> None:
    for name in actions.names():
        a = actions.get(name)
        assert a.one_line, name
        assert a.consulted in ("flow", "observe", "watch", "signal"), name
        assert set(a.stages) <= {"request", "response"} and a.stages, name
        assert set(a.trigger_states) <= {"held", "released", "answered"}, name


def test_extra_keys_come_from_the_actions() -> None:
    assert actions.all_params() == {"kill": ("restart_kueue", False), "create": ("create", None),
                                    "patch": ("patch", None), "delete": ("delete", None), "wait": ("wait", None),
                                    "timeout": ("wait", 60.0), "since": ("wait", None), "sleep": ("sleep", None),
                                    "max_hold": ("hold", 600.0), "status": ("fail", 500), "reason": ("fail", "InternalError"),
                                    "message": ("fail", "injected by kueue-harness")}
    assert "kill" in rule_keys() and "params" not in rule_keys()


# ---------------------------------------------------------------------------------------------------------
# describe: the fault table's words (from the rule's dict, as history.jsonl has it)


@pytest.mark.parametrize(
    ("d", "text"),
    [
        ({"action": "hold"}, "hold the request"),
        ({"action": "hold_response"}, "hold the answer"),
        ({"action": "delay", "delay": 2}, "delay 2s"),
        ({"action": "delay", "delay": 0.25, "stage": "response"}, "delay 0.25s"),
        ({"action": "fail", "status": 409, "reason": "Conflict"}, "fail 409 Conflict"),
        ({"action": "fail", "stage": "response"}, "fail 500 InternalError (after kube-apiserver applied it)"),
        ({"action": "fail", "delay": 0.25, "times": None}, "fail 500 InternalError after 0.25s"),
        ({"action": "reset"}, "reset the stream"),
        ({"action": "observe"}, "observe (for triggers)"),
        ({"action": "drop_watch_events", "match": {"name": "w"}}, "drop watch events"),
        ({"action": "drop_watch_events", "match": {"name": "w"}, "times": None}, "drop watch events (every event)"),
        ({"action": "delay_watch_events", "delay": 3, "times": 2}, "delay watch events 3s (the first 2 events)"),
        ({"action": "restart_kueue"}, "restart Kueue (SIGTERM, graceful)"),
        ({"action": "restart_kueue", "kill": True}, "restart Kueue (SIGKILL)"),
    ],
)
def test_describe(d: dict[str, Any], text: str) -> None:
    r = rule(**d)
    assert actions.describe(r.to_dict()) == text
    assert r.kind.describe(r.to_dict()) == text


def test_describe_an_unknown_action_names_it() -> None:
    assert actions.describe({"action": "from-the-future"}) == "from-the-future"
    assert actions.describe({}) == "hold the request"


# ---------------------------------------------------------------------------------------------------------
# validate


@pytest.mark.parametrize(
    ("d", "words", "key"),
    [
        ({"action": "hold_response", "stage": "request"}, ["conflicts with action hold_response"], "stage"),
        ({"action": "observe", "stage": "response"}, ["stage 'response' does not apply to action observe"], "stage"),
        ({"action": "drop_watch_events", "match": {"write": "admission"}},
         ["drop_watch_events matches watch events by resource/name/namespace/event_type only"], "match"),
        ({"action": "drop_watch_events", "match": {"resource": "ProvisioningRequest"}},
         ["match.resource 'ProvisioningRequest' is the resource Kueue watches, plural and lower-case"], "match"),
        ({"action": "delay_watch_events", "match": {"method": "GET"}, "delay": 1}, ["name/namespace/event_type"], "match"),
        ({"action": "delay_watch_events"}, ["delay must be > 0 seconds for delay_watch_events"], "delay"),
        ({"action": "delay_watch_events", "delay": 1, "stage": "response"}, ["does not apply"], "stage"),
        ({"action": "delay_watch_events", "delay": 1, "match": {"event_type": "BOOKMARK"}},
         ["match.event_type: 'BOOKMARK' is not one of ADDED, MODIFIED, DELETED"], "match"),
        ({"action": "hold", "match": {"event_type": "ADDED"}}, ["match.event_type applies to watch actions only"],
         "match"),
        ({"action": "restart_kueue", "kill": "yes"}, ["kill must be true or false"], "kill"),
        ({"action": "restart_kueue", "match": {"write": "admission"}}, ["restart_kueue takes no `match`"], "match"),
        ({"action": "restart_kueue", "times": 2}, ["restart_kueue fires once"], "times"),
        ({"action": "restart_kueue", "release": {"timeout": 3, "on_timeout": "fail"}}, ["cannot fail"], "release"),
        ({"action": "hold", "kill": True}, ["kill applies to action restart_kueue only, not hold"], "kill"),
        ({"action": "hold", "delay": 2}, ["delay applies to actions delay, fail, delay_watch_events only, not hold",
                                          "release.timeout"], "delay"),
        ({"action": "observe", "delay": 0.5}, ["delay applies to actions", "not observe"], "delay"),
        ({"action": "reset", "delay": 1}, ["not reset"], "delay"),
        ({"action": "fail", "status": 200}, ["a fail answers an error: status must be 400-599, got 200"], "status"),
        ({"action": "fail", "status": 302}, ["status must be 400-599"], "status"),
        ({"action": "fail", "release": {"timeout": 1}}, ["`release` applies to actions hold, restart_kueue only"],
         "release"),
        ({"action": "explode"}, ["action 'explode' is not one of hold, delay, fail, reset, observe, "
                                 "drop_watch_events, delay_watch_events, restart_kueue"], "action"),
    ],
)
def test_validate_names_the_rule_and_the_key(d: dict[str, Any], words: list[str], key: str) -> None:
    with pytest.raises(RuleError) as ei:
        rule(**d)
    for w in words:
        assert w in str(ei.value)
    assert str(ei.value).startswith("rule r: ")
    assert ei.value.key == key


def test_a_plan_error_from_an_action_points_at_its_key(tmp_path: Path) -> None:
    text = HEAD + ("  - id: restart\n"
                   "    action: restart_kueue\n"
                   "    release:\n"
                   "      timeout: 5\n"
                   "    kill: maybe\n")
    with pytest.raises(PlanError) as ei:
        parse_plan(text, "p.yaml")
    assert str(ei.value).startswith("p.yaml:9: rule restart: kill must be true or false")


def test_a_valid_process_fault_and_watch_delay_round_trip() -> None:
    r = rule(action="restart_kueue", kill=True, release={"after": [{"rule": "x", "state": "held"}], "timeout": 30})
    assert r.param("kill") is True and r.params == (("kill", True),)
    d = r.to_dict()
    assert d["kill"] is True and "params" not in d
    assert Rule.from_dict(d) == r
    assert rule(action="restart_kueue").param("kill") is False
    assert rule(action="restart_kueue").to_dict()["kill"] is False  # defaults are written out
    assert "kill" not in rule(action="hold").to_dict()
    w = rule(action="delay_watch_events", delay=2.5, match={"name": "job-*", "event_type": "ADDED|MODIFIED"},
             times=None)
    assert Rule.from_dict(w.to_dict()) == w


def test_plan_namespace_is_not_put_on_a_process_fault() -> None:
    plan = parse_plan(HEAD + "  - id: restart\n    action: restart_kueue\n  - id: d\n    action: delay_watch_events\n"
                             "    delay: 1\n", namespace="case-ns")
    restart, delay = plan.rules
    assert restart.match == Match()
    assert delay.match.namespace == "case-ns"


# ---------------------------------------------------------------------------------------------------------
# triggers on the new kinds


def test_triggers_on_a_process_fault_wait_for_held_or_released() -> None:
    restart = rule(action="restart_kueue", release={"after": [{"rule": "adm", "state": "answered"}]})
    adm = Rule.from_dict({"id": "adm", "match": {"write": "admission"}, "action": "observe"})
    after_restart = Rule.from_dict({"id": "h", "match": {"write": "eviction"},
                                    "release": {"after": [{"rule": "r", "state": "released"}]}})
    validate_rule_set([restart, adm, after_restart])
    bad = Rule.from_dict({"id": "h", "match": {"write": "eviction"},
                          "release": {"after": [{"rule": "r", "state": "answered"}]}})
    with pytest.raises(RuleError, match=r"can only be waited for as held or released"):
        validate_rule_set([restart, adm, bad])
    bad_status = Rule.from_dict({"id": "h", "release": {"after": [{"rule": "r", "state": "held", "status": 200}]}})
    with pytest.raises(RuleError, match="has no HTTP status"):
        validate_rule_set([restart, adm, bad_status])


def test_a_process_fault_waiting_for_a_hold_that_waits_for_it_is_a_cycle() -> None:
    restart = rule(action="restart_kueue", release={"after": [{"rule": "h", "state": "released"}]})
    h = Rule.from_dict({"id": "h", "release": {"after": [{"rule": "r", "state": "released"}]}})
    with pytest.raises(RuleError, match="cycle"):
        validate_rule_set([restart, h])


def test_nothing_can_wait_for_a_watch_rule() -> None:
    drop = Rule.from_dict({"id": "drop", "action": "drop_watch_events", "match": {"name": "w"}})
    for trig in ({"rule": "drop", "state": "answered"}, {"delivered": "drop"}):
        h = Rule.from_dict({"id": "h", "release": {"after": [trig]}})
        with pytest.raises(RuleError, match="drop"):
            validate_rule_set([drop, h])


# ---------------------------------------------------------------------------------------------------------
# RuleBook dispatch


def ev(type_: str, name: str, ns: str = "team-a") -> WatchEvent:
    return WatchEvent(type_, "Workload", ns, name, "10")


def test_only_flow_kinds_take_requests() -> None:
    book = RuleBook()
    for d in ({"id": "obs", "action": "observe"}, {"id": "drop", "action": "drop_watch_events"},
              {"id": "delay-w", "action": "delay_watch_events", "delay": 1}, {"id": "restart", "action": "restart_kueue"},
              {"id": "slow", "action": "delay", "delay": 1}):
        book.add(Rule.from_dict(d))
    got = book.first(None, "GET", "/api/v1/pods", "request")
    assert got is not None and got.id == "slow"
    assert [r.id for r in book.observers(None, "GET", "/api/v1/pods")] == ["obs"]
    assert book.has("signal") and book.has("watch")


def test_watch_rule_matches_by_name_namespace_and_event_type_and_counts_times() -> None:
    book = RuleBook()
    book.add(Rule.from_dict({"id": "d", "action": "delay_watch_events", "delay": 1, "times": 2,
                             "match": {"name": "job-job1-*", "namespace": "team-a", "event_type": "ADDED|DELETED"}}))
    assert book.watch_rule(ev("MODIFIED", "job-job1-x")) is None
    assert book.watch_rule(ev("ADDED", "job-job2-x")) is None
    assert book.watch_rule(ev("ADDED", "job-job1-x", ns="team-b")) is None
    assert book.watch_rule(ev("BOOKMARK", "job-job1-x")) is None
    assert book.watch_rule(ev("ADDED", "job-job1-x")).id == "d"
    assert book.watch_rule(ev("DELETED", "job-job1-y")).id == "d"
    assert book.watch_rule(ev("ADDED", "job-job1-z")) is None  # times: 2 used up
    assert book.rules["d"].hits == 2


def test_docs_have_a_row_for_every_action() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fault-plans.md").read_text()
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", doc, re.M))
    missing = [n for n in actions.names() if n not in rows]
    assert not missing, f"docs/fault-plans.md has no actions-table row for {missing}"
