"""The new trigger kinds and hold outcome (docs/fault-plans.md, Triggers and "then: fail"): Trigger.from_dict's
checks, `trigger_satisfied` for `step` and facts, fact keys, and the proxy addon evaluating them over
synthetic flows — a hold released by a step done, by a fact the harness posts (`POST /facts`), a hold
failed by `then: fail` at the request and the response stage, steps fired in file order, facts forgotten
when their rules go.

Each addon test is a plain sync test running one `asyncio.run(...)` (tests/unit/addon_flows.py)."""

from __future__ import annotations

import asyncio
import json

import pytest
from mitmproxy.test import taddons

from harness.plan.load import parse_plan
from harness.plan.rules import FlowRecord, Rule, RuleError, Trigger, fact_value, trigger_satisfied
from harness.proxy.addons import KueueFaults
from tests.unit.addon_flows import (
    ADMISSION,
    EVICTION,
    NS,
    WL1,
    WL2,
    add_rule,
    events,
    held,
    run,
    server_response,
    status_patch,
    until,
    workload_json,
)

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\n"


def trig(**d) -> Trigger:
    return Trigger.from_dict(d, "t")


# ---------------------------------------------------------------------------------------------------------
# Trigger.from_dict


@pytest.mark.parametrize("d, words", [
    ({}, "give exactly one of"),
    ({"step": "a", "log": "x"}, "(got step, log)"),
    ({"step": "a", "state": "held"}, "`step` takes no `state`"),
    ({"log": "x", "status": 200}, "`log` takes no `status`"),
    ({"log": "(a+)+"}, "nests an unbounded repeat"),
    ({"log": "a["}, "is not a regular expression"),
    ({"log": 3}, "`log` must be a string"),
    ({"object": "w1", "deleted": True}, "is not Kind/name"),
    ({"object": "Workload/w1"}, "exactly one of `deleted: true`, `condition`"),
    ({"object": "Workload/w1", "deleted": False}, "deleted must be true"),
    ({"object": "Workload/w1", "condition": "Admitted", "field": "$.a"}, "exactly one of"),
    ({"object": "Workload/w1", "condition": "Admitted", "status": "maybe"}, "is not one of True, False, Unknown"),
    ({"object": "Workload/w1", "deleted": True, "status": "True"}, "status goes with `condition` only"),
    ({"object": "Workload/w1", "condition": "A", "equals": 1}, "equals goes with `field` only"),
    ({"object": "Workload/w1", "field": "$[["}, "field:"),
    ({"object": "Workload/w1", "field": "$.a", "equals": {"x": 1}}, "equals must be a scalar"),
    ({"object": "Workload/w1", "deleted": True, "state": "held"}, "`object` takes no `state`"),
    ({"delivered": "a", "status": 200}, "`delivered` takes no `state` or `status`"),
])
def test_bad_triggers_say_what_to_change(d, words) -> None:
    with pytest.raises(RuleError, match=None) as exc:
        trig(**d)
    assert words in str(exc.value), str(exc.value)
    assert str(exc.value).startswith("t: ")


def test_condition_status_defaults_to_true_and_takes_yaml_booleans() -> None:
    assert trig(object="Workload/w1", condition="Admitted").status == "True"
    assert trig(object="Workload/w1", condition="Admitted", status=False).status == "False"
    assert trig(object="Workload/w1", condition="Admitted", status="Unknown").status == "Unknown"


def test_kinds_refs_and_descriptions() -> None:
    cases = [
        (trig(rule="a", state="held"), "rule", "a", False, "a held"),
        (trig(delivered="a"), "delivered", "a", False, "Kueue's watch delivered a's object"),
        (trig(step="s1"), "step", "s1", False, "step s1 done"),
        (trig(log="Preempted"), "log", "", True, "Kueue logged /Preempted/"),
        (trig(object="Workload/w1", deleted=True), "object", "", True, "Workload/w1 deleted"),
        (trig(object="Workload/w1", condition="Evicted"), "object", "", True, "Workload/w1 Evicted=True"),
        (trig(object="Job/j", field="$.spec.suspend", equals=False), "object", "", True,
         "Job/j $.spec.suspend = false"),
        (trig(object="Job/j", field="$.status.active"), "object", "", True, "Job/j $.status.active set"),
    ]
    for t, kind, ref, fact, words in cases:
        assert (t.kind, t.ref, t.is_fact, t.describe()) == (kind, ref, fact, words)


def test_fact_keys_are_canonical_and_name_the_namespace() -> None:
    a = trig(object="Workload/w1", namespace="ns", condition="Admitted")
    b = Trigger.from_dict({"condition": "Admitted", "namespace": "ns", "object": "Workload/w1", "status": "True"}, "t")
    assert a.fact_key() == b.fact_key()
    assert json.loads(a.fact_key()) == {"object": "Workload/w1", "namespace": "ns", "condition": "Admitted",
                                        "status": "True"}
    assert trig(object="Workload/w1", namespace="other", condition="Admitted").fact_key() != a.fact_key()
    assert json.loads(trig(log="x").fact_key()) == {"log": "x"}


def test_fact_values_compare_json_false_with_yaml_false() -> None:
    assert fact_value(False) == fact_value("false") == "false"
    assert fact_value(3) == "3" and fact_value("x") == "x" and fact_value(None) == "null"


# ---------------------------------------------------------------------------------------------------------
# trigger_satisfied


def test_step_trigger_needs_the_step_done_with_success() -> None:
    t = Trigger(step="s")
    assert not trigger_satisfied(t, {"s": [FlowRecord(0, None, None, held=True)]}, {})
    assert not trigger_satisfied(t, {"s": [FlowRecord(0, None, None, held=True, released=True, ok=False)]}, {})
    assert trigger_satisfied(t, {"s": [FlowRecord(0, None, None, held=True, released=True, ok=True)]}, {})
    # A rule trigger on the same step counts it released whatever the outcome (restart_kueue's meaning).
    assert trigger_satisfied(Trigger(rule="s", state="released"),
                             {"s": [FlowRecord(0, None, None, held=True, released=True, ok=False)]}, {})


def test_fact_trigger_holds_once_its_key_was_reported() -> None:
    t = trig(log="Preempted")
    assert not trigger_satisfied(t, {}, {})
    assert not trigger_satisfied(t, {}, {}, {trig(log="Preempted .*").fact_key()})
    assert trigger_satisfied(t, {}, {}, {t.fact_key(): {}})


def test_then_fail_needs_triggers_and_a_status() -> None:
    with pytest.raises(RuleError, match="`then: fail` needs `after` triggers"):
        Rule.from_dict({"id": "h", "release": {"then": "fail", "timeout": 3}})
    with pytest.raises(RuleError, match="release.then: 'explode' is not release or fail"):
        Rule.from_dict({"id": "h", "release": {"after": [{"rule": "h", "state": "held"}], "then": "explode"}})
    with pytest.raises(RuleError, match="release.status: 99 is not an HTTP status"):
        Rule.from_dict({"id": "h", "release": {"after": [{"log": "x"}], "then": "fail", "status": 99}})
    with pytest.raises(RuleError, match="has no flow to fail"):
        Rule.from_dict({"id": "r", "action": "restart_kueue", "release": {"after": [{"log": "x"}], "then": "fail"}})


# ---------------------------------------------------------------------------------------------------------
# The addon


def test_a_hold_released_by_a_fact_the_harness_posts() -> None:
    plan = parse_plan(HEAD + """rules:
  - id: adm
    match: {write: admission, name: "job-job1-*"}
    release:
      after:
        - {log: 'Workload create event .*job-job2'}
        - {object: Workload/job-job2-9c8b7, condition: QuotaReserved}
""", namespace=NS)
    (rule,) = plan.rules
    log_key, obj_key = (t.fact_key() for t in rule.release.after)
    assert json.loads(obj_key)["namespace"] == NS  # the plan's namespace, filled in by the loader

    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/plan", plan.to_wire())[0] == 201
            assert addon._handle("POST", "/facts", {"fact": '{"log": "nobody waits"}'})[0] == 404
            assert addon._handle("POST", "/facts", {"fact": 3})[0] == 400
            task, hold_id = await held(addon, addon.request(status_patch(WL1, ADMISSION)))
            code, ev = addon._handle("POST", "/facts", {"fact": log_key, "detail": {"line": "Workload create event"}})
            assert code == 200 and ev["event"] == "fact" and ev["rules"] == ["adm"]
            assert ev["what"] == "Kueue logged /Workload create event .*job-job2/"
            await asyncio.sleep(0)
            assert hold_id in addon.holds  # one of two triggers
            # Reported twice: logged once.
            assert addon._handle("POST", "/facts", {"fact": log_key})[1].get("known") is True
            addon._handle("POST", "/facts", {"fact": obj_key, "detail": {"resource_version": "12"}})
            await asyncio.wait_for(task, 1)
            (rel,) = events(addon, "released")
            assert rel["why"] == ("triggers: Kueue logged /Workload create event .*job-job2/, "
                                  "Workload/job-job2-9c8b7 QuotaReserved=True")
            assert len(events(addon, "fact")) == 2
            assert sorted(addon._handle("GET", "/state", {})[1]["facts"]) == sorted([log_key, obj_key])
            # Removing the rule forgets its facts: a plan loaded again must see them happen again.
            addon._handle("DELETE", "/rules/adm", {})
            assert addon.state.facts == {}

    run(scenario())


@pytest.mark.parametrize("stage", ["request", "response"])
def test_then_fail_answers_with_the_status_when_the_triggers_hold(stage: str) -> None:
    """kubernetes-sigs/kueue preemption of two victims: fail victim 2's eviction once victim 1's was
    answered."""

    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="evict-v1", match={"write": "eviction", "name": WL1}, action="observe")
            add_rule(addon, id="evict-v2", match={"write": "eviction", "name": WL2}, action="hold", stage=stage,
                     release={"after": [{"rule": "evict-v1", "state": "answered", "status": 200}], "then": "fail",
                              "status": 409, "reason": "Conflict"})
            f2 = status_patch(WL2, EVICTION)
            if stage == "response":
                await addon.request(f2)
                f2.response = server_response(workload_json(WL2, "31"))
                task, _ = await held(addon, addon.response(f2))
            else:
                task, _ = await held(addon, addon.request(f2))
            f1 = status_patch(WL1, EVICTION)
            await addon.request(f1)
            f1.response = server_response(workload_json(WL1, "30"))
            await addon.response(f1)
            await asyncio.wait_for(task, 1)
            assert f2.response.status_code == 409
            body = json.loads(f2.response.content)
            assert (body["reason"], body["code"]) == ("Conflict", 409)
            assert body["message"] == "injected by kueue-harness (plan: its release triggers held)"
            (failed,) = events(addon, "failed")
            assert (failed["rule"], failed["status"], failed["stage"]) == ("evict-v2", 409, stage)
            assert failed["why"] == "triggers: evict-v1 answered"
            assert events(addon, "released") == []

    run(scenario())


def test_steps_fire_in_file_order_each_after_the_one_before() -> None:
    plan = parse_plan(HEAD + """steps:
  - id: a
    create: {builder: workload, args: {name: w1}}
  - id: b
    delete: Workload/w1
  - id: c
    after: [{rule: adm, state: held}]
    patch: {object: Workload/w1, merge: {spec: {active: false}}}
rules:
  - id: adm
    match: {write: admission}
    release:
      after: [{step: c}]
""", namespace=NS)
    assert [r.id for r in plan.rules] == ["adm", "a", "b", "c"] and plan.steps == ("a", "b", "c")

    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/plan", plan.to_wire())[0] == 201
            fired = lambda: [e["rule"] for e in events(addon, "signalled")]  # noqa: E731
            assert fired() == ["a"] and events(addon, "signalled")[0]["why"] == "loaded"
            assert events(addon, "signalled")[0]["create"][0]["metadata"] == {"name": "w1", "namespace": NS}
            # A failed step does not satisfy {step: …}: b waits.
            addon._handle("POST", "/signals/a/done", {"ok": False, "error": "boom"})
            assert fired() == ["a"]
            addon.state.rule_flows["a"][0].ok = True  # as if it had succeeded
            addon.state.check_triggers()
            assert fired() == ["a", "b"]
            assert events(addon, "signalled")[1]["why"] == "triggers: step a done"
            task, _ = await held(addon, addon.request(status_patch(WL1, ADMISSION)))
            assert fired() == ["a", "b", "c"]
            code, done = addon._handle("POST", "/signals/c/done", {"ok": True, "seconds": 0.01,
                                                                    "objects": ["Workload team-a/w1 rv 7"]})
            assert code == 200 and done["objects"] == ["Workload team-a/w1 rv 7"]
            await asyncio.wait_for(task, 1)
            (rel,) = events(addon, "released")
            assert rel["why"] == "triggers: step c done"

    run(scenario())


def test_the_proxy_refuses_a_plan_whose_step_trigger_names_a_non_step() -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/plan", {"name": "p", "rules": [
        {"id": "adm", "match": {"write": "admission"}},
        {"id": "s", "action": "delete", "delete": "Workload/w1", "release": {"after": [{"step": "adm"}]}},
    ]})
    assert code == 400 and "waits for step adm, but adm (action hold) is not a step" in payload["error"]
    assert addon.rules.rules == {}


def test_a_wait_steps_fact_is_accepted_and_a_reloaded_rule_forgets_it() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="w", action="wait", wait={"log": "Preempted"}, timeout=5)
            key = Trigger(log="Preempted").fact_key()
            assert addon._handle("POST", "/facts", {"fact": key, "detail": {}})[0] == 200
            assert key in addon.state.facts
            addon._handle("DELETE", "/rules/w", {})
            assert addon._handle("POST", "/facts", {"fact": key})[0] == 404
            await until(lambda: True)

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# The verdict: steps_done (a default assumption), forced with then: fail, and the diagram


def _step_history(*done: tuple[str, bool, str]) -> list[dict]:
    from tests.unit.test_report import base, ev

    h = base(20.0)
    for i, (rid, ok, error) in enumerate(done):
        h.append(ev(1 + i, "proxy", "rule_added", rule={"id": rid, "action": "create",
                                                         "create": [{"kind": "Workload", "metadata": {"name": rid}}],
                                                         "release": {"after": [{"rule": "adm", "state": "held"}]}}))
        if error != "never":
            h.append(ev(1.1 + i, "proxy", "signalled", rule=rid, action="create", why="triggers: adm held"))
            h.append(ev(1.2 + i, "proxy", "signal_done", rule=rid, action="create", ok=ok, since_signalled=0.01,
                        seconds=0.01, **({"error": error} if error else {"objects": [f"Workload team-a/{rid} rv 1"]})))
    return sorted(h, key=lambda e: e["ts"])


def test_steps_done_is_a_default_assumption_that_voids_the_verdict() -> None:
    from harness.checkers import DEFAULT_ASSUMPTIONS, Selection, compose, selection_with_defaults
    from harness.checkers.assumptions import StepsDone
    from harness.history.names import Names

    assert "steps_done" in DEFAULT_ASSUMPTIONS
    good = _step_history(("s1", True, ""), ("s2", True, ""))
    [f] = StepsDone().check(good, {}, Names(good))
    assert f.result == "held" and "s1 (create, 0.01 s), s2 (create, 0.01 s)" in f.evidence
    bad = _step_history(("s1", True, ""), ("s2", False, "StepError: create Workload s2: 409"), ("s3", True, "never"))
    [f] = StepsDone().check(bad, {}, Names(bad))
    assert f.result == "violated" and f.summary == "2 plan step(s) did not run to success"
    assert "step s2 (create) failed: StepError: create Workload s2: 409" in f.evidence
    assert "step s3 never ran (its triggers never all held: adm held)" in f.evidence
    assert compose(Selection(selection_with_defaults({})), bad, {}).verdict == "error"
    assert StepsDone().check(_step_history(), {}, Names([])) == []  # no steps: nothing to judge


def test_forced_accepts_a_hold_failed_by_its_triggers() -> None:
    from harness.checkers.assumptions import Forced
    from harness.history.names import Names
    from tests.unit.test_report import base, ev

    h = sorted(base(20.0) + [ev(1, "proxy", "failed", flow=2, hold="h1", rule="evict-v2", stage="request",
                                status=409, label="eviction v2", why="triggers: evict-v1 answered"),
                             ev(2, "proxy", "failed", flow=3, hold="h2", rule="cmd", stage="request", status=409,
                                label="eviction v3", why="control")], key=lambda e: e["ts"])
    assert Forced(["evict-v2"]).check(h, {}, Names(h))[0].result == "held"
    [f] = Forced(["cmd"]).check(h, {}, Names(h))
    assert f.result == "violated" and "cmd ended by failed (control)" in f.evidence


def test_the_diagram_draws_steps_facts_and_failures() -> None:
    from harness.report.diagram import diagram_lines, validate_sequence_diagram
    from tests.unit.test_report import ev

    h = _step_history(("s1", True, ""), ("s2", False, "StepError: create Workload s2: 409 AlreadyExists"))
    h.append(ev(3.0, "proxy", "rule_added", rule={"id": "w", "action": "wait", "wait": {"log": "Preempted"},
                                                  "timeout": 5}))
    h.append(ev(3.1, "proxy", "signalled", rule="w", action="wait", why="loaded"))
    h.append(ev(3.2, "proxy", "fact", fact='{"log": "Preempted"}', what="Kueue logged /Preempted/", rules=["w"],
                detail={}))
    h.append(ev(3.3, "proxy", "signal_done", rule="w", action="wait", ok=True, since_signalled=0.2, seconds=0.2))
    h.append(ev(3.4, "proxy", "fact", fact='{"log": "x"}', what="Kueue logged /x/", rules=["adm"], detail={}))
    h.sort(key=lambda e: e["ts"])
    body = diagram_lines(h)
    text = "\n".join(body)
    assert validate_sequence_diagram(text) == [], text
    assert any(ln.strip().startswith("Test->>API:") and "step s1: create Workload s1 (after adm held) → done in 0.01s"
               in ln for ln in body), text
    assert any(ln.strip().startswith("Test-xAPI:") and "step s2" in ln and "FAILED: StepError" in ln for ln in body)
    assert any("Note over Test:" in ln and "step w: wait until Kueue logged" in ln for ln in body)
    assert any("Note over Kueue:" in ln and "seen: Kueue logged /x/" in ln for ln in body)  # a trigger's fact
    assert not any("seen: Kueue logged /Preempted/" in ln for ln in body)  # only a wait step's: said by the wait


def test_the_schema_knows_the_fact_event() -> None:
    from harness.history.schema import HISTORY_FIELDS, history_problems

    assert HISTORY_FIELDS[("proxy", "fact")] == ("fact", "what", "rules", "detail")
    good = _step_history(("s1", True, ""))
    assert not [p for p in history_problems(good) if "signal" in p or "fact" in p]


def test_steps_done_lets_a_perturbation_pace_the_control_s_waits() -> None:
    """A perturbed run (harness/explore/plugin.py: waits_pace): a wait step that timed out, and a step waiting
    only for it, are said, not failures; a create that never ran for another reason still is."""
    from harness.checkers.assumptions import StepsDone
    from harness.history.names import Names
    from tests.unit.test_report import base, ev

    h = base(20.0) + [
        ev(1, "proxy", "rule_added", rule={"id": "e", "action": "create", "create": [{"kind": "Job"}],
                                           "release": {"after": []}}),
        ev(1.01, "proxy", "rule_added", rule={"id": "scaled", "action": "wait", "wait": {"log": "x"},
                                              "release": {"after": [{"step": "e"}]}}),
        ev(1.02, "proxy", "rule_added", rule={"id": "after-scaled", "action": "delete", "delete": "Job/e",
                                              "release": {"after": [{"step": "scaled"}]}}),
        ev(1.1, "proxy", "signalled", rule="e", action="create", why="triggers: none"),
        ev(1.2, "proxy", "signal_done", rule="e", action="create", ok=True, since_signalled=0.01, seconds=0.01),
        ev(1.3, "proxy", "signalled", rule="scaled", action="wait", why="triggers: step e"),
        ev(9.3, "proxy", "signal_done", rule="scaled", action="wait", ok=False, since_signalled=8,
           error="timed out after 8s"),
    ]
    h = sorted(h, key=lambda e: e["ts"])
    assert StepsDone().check(h, {}, Names(h))[0].result == "violated"
    [f] = StepsDone(waits_pace=True).check(h, {}, Names(h))
    assert f.result == "held" and "Paced by the perturbation" in f.evidence and "scaled, after-scaled" in f.evidence
    other = h + [ev(1.03, "proxy", "rule_added", rule={"id": "s", "action": "create", "create": [{"kind": "Job"}],
                                                      "release": {"after": [{"rule": "adm", "state": "held"}]}})]
    [f] = StepsDone(waits_pace=True).check(sorted(other, key=lambda e: e["ts"]), {}, Names(other))
    assert f.result == "violated" and "step s never ran" in f.evidence


def test_forced_guards_that_caught_nothing_guarded_nothing() -> None:
    """kubernetes-sigs/kueue#11480 scenario 1 on kind under load: Kueue never sent job1's strict quota release
    (its watch delivered the overwrite 17 ms after the eviction), so the guard holding it caught no flow."""
    from harness.checkers.assumptions import Forced
    from harness.history.names import Names
    from tests.unit.test_report import base, ev

    h = sorted(base(20.0) + [ev(1, "proxy", "held", flow=2, hold="h1", rule="adm", stage="request", label="a"),
                             ev(2, "proxy", "released", flow=2, hold="h1", rule="adm", why="triggers: ev held")],
               key=lambda e: e["ts"])
    [f] = Forced(["adm"], guards=["qr"]).check(h, {}, Names(h))
    assert f.result == "held" and "Guard qr caught no flow" in f.evidence
    assert Forced(["adm", "qr"]).check(h, {}, Names(h))[0].result == "violated"  # a rule, not a guard: must act
    timed_out = sorted(h + [ev(3, "proxy", "held", flow=4, hold="h2", rule="qr", stage="request", label="q"),
                            ev(9, "proxy", "hold_timeout", flow=4, hold="h2", rule="qr", why="timeout 6s")],
                       key=lambda e: e["ts"])
    [f] = Forced(["adm"], guards=["qr"]).check(timed_out, {}, Names(timed_out))
    assert f.result == "violated" and "qr ended by hold_timeout" in f.evidence


def test_delivered_on_a_step_waits_until_kueue_saw_every_object_it_wrote() -> None:
    """`{delivered: STEP}`: kueue PR #11327's plan touches every slice of an elastic Job (a patch with `each`) and
    goes on only once Kueue's Workload watch delivered each of them at the patched resourceVersion or later."""
    plan = parse_plan(HEAD + """
steps:
  - {id: touch, patch: {object: Workload/job-j-*, each: true, merge: {metadata: {labels: {x: "1"}}}}}
  - {id: after, after: [{delivered: touch}], delete: Workload/w9}
""", namespace=NS)
    addon = KueueFaults()
    assert addon._handle("POST", "/plan", plan.to_wire())[0] == 201
    assert addon.rules.delivered_resources() == {"*"}  # a step may write any kind: every watch is read
    t = trig(delivered="touch")
    addon._handle("POST", "/signals/touch/done", {"ok": True, "seconds": 0.01, "objects": [
        f"Workload {NS}/job-j-a rv 10", f"Workload {NS}/job-j-b rv 11"]})
    assert not trigger_satisfied(t, addon.state.rule_flows, addon.delivered_rv)
    addon.state.delivered_event({"namespace": NS, "name": "job-j-a", "resource_version": "10"})
    assert not trigger_satisfied(t, addon.state.rule_flows, addon.delivered_rv)  # job-j-b not yet
    addon.state.delivered_event({"namespace": NS, "name": "job-j-b", "resource_version": "12"})
    assert trigger_satisfied(t, addon.state.rule_flows, addon.delivered_rv)
    addon.state.check_triggers()  # as the watch tap does after each chunk
    assert [e["rule"] for e in events(addon, "signalled")] == ["touch", "after"]


def test_delivered_names_a_create_or_patch_step_only() -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/plan", {"name": "p", "rules": [
        {"id": "w", "action": "wait", "wait": {"object": "Workload/w1", "condition": "Admitted"}},
        {"id": "s", "action": "delete", "delete": "Workload/w1", "release": {"after": [{"delivered": "w"}]}},
    ]})
    assert code == 400 and "has no answered write" in payload["error"]
