"""Unit tests for harness.plan.load: YAML fault plans. Every kind of bad plan gets a PlanError whose message starts
with `<file>:<line>:` at the offending line and names the problem; the shipped plans load; namespace
injection, `hold_response` sugar, shipped-name resolution and the wire format round trip.

Plans are written to real files (tmp_path) and loaded with load_plan, as the CLI and the cases do. The
expected line of an error is marked in the plan text with a `# <-` comment.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from harness.common.errors import HarnessError
from harness.plan.load import PLANS_DIR, Plan, PlanError, load_plan, parse_plan
from harness.plan.rules import Rule

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: p\n"
SHIPPED = sorted(p.stem for p in PLANS_DIR.glob("*.yaml"))

# ---------------------------------------------------------------------------------------------------------
# Builders


def plan_text(body: str, head: str = HEAD) -> str:
    return head + textwrap.dedent(body).lstrip("\n")


def marked_line(text: str) -> int:
    lines = [i for i, line in enumerate(text.splitlines(), 1) if "# <-" in line]
    assert len(lines) == 1, f"mark exactly one line with '# <-' in:\n{text}"
    return lines[0]


def load_error(tmp_path: Path, text: str) -> tuple[str, str]:
    """Write `text` to a plan file, load it, and return (file, error message)."""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    return str(path), str(exc.value)


def assert_error(tmp_path: Path, text: str, words: list[str], line: int | None = None) -> str:
    source, msg = load_error(tmp_path, text)
    line = marked_line(text) if line is None else line
    assert msg.startswith(f"{source}:{line}: "), f"expected line {line}:\n{msg}\n---\n{text}"
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------------------------------------------------
# File-level problems


def test_yaml_syntax_error_names_the_line_and_what_started_there(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            match: {write: admission, name: job-*
    """)
    # PyYAML finds the problem at the end of the stream; the message says where the mapping started.
    msg = assert_error(tmp_path, text, ["not valid YAML", "expected ',' or '}'", "flow mapping",
                                        "started on line 6"], line=7)
    assert "Traceback" not in msg


def test_yaml_indentation_error_points_at_the_bad_line(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
           action: fail    # <-
    """)
    assert_error(tmp_path, text, ["not valid YAML"])


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    assert_error(tmp_path, text, ["empty plan", "apiVersion", "rules"], line=1)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    assert_error(tmp_path, "- id: a\n- id: b\n", ["plan: expected a mapping"], line=1)


def test_wrong_api_version(tmp_path: Path) -> None:
    text = "kind: FaultPlan\napiVersion: v1   # <-\nrules:\n  - id: a\n"
    assert_error(tmp_path, text, ["apiVersion: kueue-harness/v1", "kind: FaultPlan"])


def test_wrong_kind_points_at_kind_not_api_version(tmp_path: Path) -> None:
    text = "apiVersion: kueue-harness/v1\nkind: Plan   # <-\nrules:\n  - id: a\n"
    assert_error(tmp_path, text, ["kind: FaultPlan"])


def test_missing_rules(tmp_path: Path) -> None:
    assert_error(tmp_path, HEAD + "description: nothing\n", ["`rules` must be a non-empty list"], line=1)


@pytest.mark.parametrize("rules", ["rules: []   # <-\n", "rules:   # <-\n", "rules: {id: a}   # <-\n"])
def test_empty_or_non_list_rules(tmp_path: Path, rules: str) -> None:
    assert_error(tmp_path, HEAD + rules, ["`rules` must be a non-empty list"])


def test_rule_that_is_not_a_mapping(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - admission-job1   # <-
    """)
    assert_error(tmp_path, text, ["rules[0]", "expected a mapping"])


# ---------------------------------------------------------------------------------------------------------
# Unknown keys, each at the key's own line


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("""
         description: x
         rulez: []   # <-
         rules:
           - id: a
         """, ["plan: unknown key 'rulez'", "allowed: apiVersion, deletes_as, description, kind, kueue, name, rules"]),
        ("""
         rules:
           - id: a
             match: {write: admission}
             acton: fail   # <-
         """, ["rules[0]: unknown key 'acton'", "allowed:", "action"]),
        ("""
         rules:
           - id: a
             action: observe
           - id: b
             match:
               write: admission
               nmae: job-*   # <-
         """, ["rules[1].match: unknown key 'nmae'", "name", "namespace"]),
        ("""
         rules:
           - id: a
             release:
               timeout: 5
               on_timout: fail   # <-
         """, ["rules[0].release: unknown key 'on_timout'", "on_timeout"]),
        ("""
         rules:
           - id: a
             release:
               after:
                 - rule: b
                   state: held
                 - rule: b
                   stat: answered   # <-
           - id: b
             action: observe
         """, ["rules[0].release.after[1]: unknown key 'stat'", "allowed: at_least, condition, count, deleted, delivered, equals, field, log, namespace, object, rule, state, status, step"]),
    ],
    ids=["top", "rule", "match", "release", "trigger"],
)
def test_unknown_key_at_its_own_line(tmp_path: Path, body: str, words: list[str]) -> None:
    assert_error(tmp_path, plan_text(body), words)


def test_a_key_given_twice_is_an_error_not_silently_the_last(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            action: fail
            action: hold   # <-
    """)
    assert_error(tmp_path, text, ["rules[0]", "'action' given twice"])


# ---------------------------------------------------------------------------------------------------------
# Bad values: match


@pytest.mark.parametrize(
    ("match", "words"),
    [
        ("write: admitted   # <-", ["match.write", "'admitted'", "admission, eviction, quota_release"]),
        ("name: 'job-[abc'   # <-", ["match.name", "unbalanced '['"]),
        ("namespace: 'team-[a'   # <-", ["match.namespace", "unbalanced '['"]),
        ("path_regex: '/workloads/(unclosed'   # <-", ["match.path_regex", "missing )"]),
        ("body_jsonpath: '$.status[['   # <-", ["match.body_jsonpath", "is not a JSONPath"]),
        ("body_equals: 'True'   # <-", ["match.body_equals needs match.body_jsonpath"]),
        ("name: 5   # <-", ["match.name", "expected a string"]),
    ],
    ids=["write", "glob-name", "glob-namespace", "path_regex", "body_jsonpath", "body_equals", "non-string"],
)
def test_bad_match_value_points_at_that_key(tmp_path: Path, match: str, words: list[str]) -> None:
    text = plan_text(f"""
        rules:
          - id: first
            action: observe
          - id: bad
            action: hold
            match:
              kind: Workload
              {match}
              method: PATCH
    """)
    assert_error(tmp_path, text, words)


def test_match_that_is_not_a_mapping(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            match: admission   # <-
    """)
    assert_error(tmp_path, text, ["rules[0].match: expected a mapping"])


# ---------------------------------------------------------------------------------------------------------
# Bad values: rule


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("action: drop   # <-", ["rule bad: action 'drop'", "hold, delay, fail, reset, observe, drop_watch_events"]),
        ("stage: later   # <-", ["rule bad: stage 'later'", "request, response"]),
        ("times: 0   # <-", ["rule bad: times must be >= 1 or null"]),
        ("times: two   # <-", ["rule bad: times must be a whole number", "'two'"]),
        ("status: 700   # <-", ["rule bad: status applies to action fail only, not hold"]),
        ("status: '409'   # <-", ["rule bad: status must be a whole number"]),
        ("delay: -1   # <-", ["rule bad: delay must be >= 0"]),
        ("delay: 1s   # <-", ["rule bad: delay must be a finite number", "'1s'"]),
        ("max_hold: 0   # <-", ["rule bad: max_hold must be a number > 0"]),
    ],
    ids=["action", "stage", "times", "times-str", "status", "status-str", "delay", "delay-str", "max_hold"],
)
def test_bad_rule_value_points_at_that_key(tmp_path: Path, line: str, words: list[str]) -> None:
    # Other keys whose names occur in the messages ("… one of hold, delay, …", "delay must …") come
    # first, so that an error about one key must not point at another.
    key = line.split(":")[0]
    others = [k for k in ("delay: 0", "max_hold: 30", "stage: request", "action: hold") if k.split(":")[0] != key]
    body = "".join(f"    {k}\n" for k in others + [line])
    text = HEAD + "rules:\n  - id: bad\n    match: {write: admission}\n" + body
    assert_error(tmp_path, text, words)


def test_error_line_is_not_misled_by_a_key_word_in_the_rule_id(tmp_path: Path) -> None:
    # The rule is called "stage-two": the message "rule stage-two: times …" is about `times`, not `stage`.
    text = plan_text("""
        rules:
          - id: stage-two
            stage: request
            action: hold
            times: 0   # <-
    """)
    assert_error(tmp_path, text, ["rule stage-two: times"])


def test_missing_id(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - match: {write: admission}   # <-
    """)
    assert_error(tmp_path, text, ["rule: `id` is required"])


def test_non_string_id(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: 5   # <-
    """)
    assert_error(tmp_path, text, ["id must be a string"])


def test_release_on_a_non_hold_action(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            match: {write: admission}
            action: fail
            release:   # <-
              timeout: 5
    """)
    assert_error(tmp_path, text, ["rule a: `release` applies to actions hold, restart_kueue only, not fail"])


def test_hold_response_with_a_request_stage_is_an_error(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            action: hold_response
            stage: request   # <-
    """)
    assert_error(tmp_path, text, ["rule a: stage 'request' conflicts with action hold_response"])


def test_drop_watch_events_matches_by_name_only(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a   # <-
            action: drop_watch_events
            match: {write: admission}
    """)
    assert_error(tmp_path, text, ["drop_watch_events", "name/namespace"])


@pytest.mark.parametrize(
    ("release", "words"),
    [
        ("timeout: 0   # <-", ["rule a: release.timeout: expected seconds > 0"]),
        ("timeout: soon   # <-", ["rule a: release.timeout"]),
        ("on_timeout: explode   # <-", ["rule a: release.on_timeout: 'explode' is not release or fail"]),
    ],
    ids=["timeout-0", "timeout-str", "on_timeout"],
)
def test_bad_release_value(tmp_path: Path, release: str, words: list[str]) -> None:
    text = plan_text(f"""
        rules:
          - id: a
            release:
              {release}
    """)
    assert_error(tmp_path, text, words)


# ---------------------------------------------------------------------------------------------------------
# Triggers


def two_rules(trigger_a: str, second_trigger: str | None = None) -> str:
    after = f"        - {trigger_a}\n"
    if second_trigger is not None:
        # A valid first trigger (b is an observe rule: it can be waited for as answered, never as held).
        after = "        - {rule: b, state: answered}\n" + f"        - {second_trigger}\n"
    return HEAD + (
        "rules:\n"
        "  - id: a\n"
        "    release:\n"
        "      after:\n"
        f"{after}"
        "  - id: b\n"
        "    action: observe\n"
    )


@pytest.mark.parametrize(
    ("trigger", "words"),
    [
        ("{rule: nope, state: answered}   # <-", ["rule a: release trigger names unknown rule 'nope'"]),
        ("{delivered: nope}   # <-", ["rule a: release trigger names unknown rule 'nope'"]),
        ("{rule: b, delivered: b}   # <-", ["release.after", "give exactly one of `rule` (with `state`), `delivered`, `step`, `log`, `object` or `count` (with `at_least`) (got rule, delivered)"]),
        ("{state: held}   # <-", ["release.after", "give exactly one of `rule`"]),
        ("{rule: b, state: done}   # <-", ["release.after", "state 'done' is not one of held, released, answered"]),
        ("{rule: b, state: answered, status: ok}   # <-", ["release.after", "status must be an HTTP status code"]),
        ("{delivered: b, state: held}   # <-", ["`delivered` takes no `state`"]),
        ("b   # <-", ["release.after", "expected a mapping"]),
    ],
    ids=["unknown-rule", "unknown-delivered", "both", "neither", "state", "status", "delivered-state", "scalar"],
)
@pytest.mark.parametrize("position", [0, 1])
def test_bad_trigger_points_at_the_trigger(tmp_path: Path, trigger: str, words: list[str], position: int) -> None:
    text = two_rules(trigger) if position == 0 else two_rules("", second_trigger=trigger)
    msg = assert_error(tmp_path, text, words)
    if "release.after[" in msg:
        assert f"release.after[{position}]" in msg


@pytest.mark.parametrize(
    ("target", "trigger", "words"),
    [
        ("action: observe", "{rule: b, state: held}", ["waits for b held", "(action observe) never holds a flow"]),
        ("action: fail", "{rule: b, state: released}", ["waits for b released", "(action fail) never holds"]),
        ("action: hold", "{rule: b, state: held, status: 200}",
         ["waits for b held with status 200", "stage request", "no status"]),
    ],
    ids=["held-on-observe", "released-on-fail", "held-status-on-request-hold"],
)
def test_trigger_that_can_never_hold_is_an_error(tmp_path: Path, target: str, trigger: str,
                                                  words: list[str]) -> None:
    # Without this check the hold would silently wait for its timeout. The second trigger is the bad one.
    text = plan_text(f"""
        rules:
          - id: a
            release:
              after:
                - {{rule: b, state: answered}}
                - {trigger}   # <-
          - id: b
            {target}
    """)
    assert_error(tmp_path, text, ["rule a: release.after[1]: "] + words)


def test_held_with_status_on_a_response_hold_and_released_on_a_hold_are_fine() -> None:
    plan = parse_plan(plan_text("""
        rules:
          - id: a
            release:
              after:
                - {rule: b, state: held, status: 200}
                - {rule: c, state: released}
          - id: b
            action: hold_response
          - id: c
            action: hold
    """))
    assert [r.id for r in plan.rules] == ["a", "b", "c"]


@pytest.mark.parametrize("action", ["observe", "drop_watch_events"])
def test_stage_response_does_not_apply_to_observe_or_drop(tmp_path: Path, action: str) -> None:
    # The proxy consults these rules at the request stage only: such a rule would never act.
    text = plan_text(f"""
        rules:
          - id: a
            action: {action}
            stage: response   # <-
    """)
    assert_error(tmp_path, text, [f"rule a: stage 'response' does not apply to action {action}"])


def test_after_must_be_a_list(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            release:
              after: {rule: b, state: held}   # <-
          - id: b
            action: observe
    """)
    assert_error(tmp_path, text, ["rules[0].release.after: expected a list of triggers"])


def test_unknown_rule_error_blames_the_right_rule_even_when_ids_overlap(tmp_path: Path) -> None:
    # "job1" is a word inside "admission-job1": the error is about admission-job1's trigger.
    text = plan_text("""
        rules:
          - id: job1
            action: observe
          - id: admission-job1
            release:
              after:
                - {rule: job1, state: answered}
                - {rule: nope, state: answered}   # <-
    """)
    assert_error(tmp_path, text, ["rule admission-job1: release trigger names unknown rule 'nope'"])


def test_deadlock_cycle_is_an_error_naming_the_cycle(tmp_path: Path) -> None:
    # A waits for B's answer, B waits for A's release: neither hold can ever end by its triggers.
    text = plan_text("""
        rules:
          - id: rule-a
            match: {write: admission}
            release:
              after:
                - {rule: rule-b, state: answered}   # <-
          - id: rule-b
            match: {write: eviction}
            release:
              after:
                - {rule: rule-a, state: released}
    """)
    assert_error(tmp_path, text, ["release triggers form a cycle: rule-a -> rule-b -> rule-a"])


def test_longer_cycle_through_delivered(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: x
            action: observe
          - id: a
            release:
              after: [{rule: b, state: answered}]   # <-
          - id: b
            release:
              after: [{rule: c, state: released}]
          - id: c
            release:
              after: [{delivered: a}]
    """)
    assert_error(tmp_path, text, ["cycle: a -> b -> c -> a"])


def test_a_rule_waiting_for_itself_is_a_cycle(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            release:
              after: [{rule: a, state: answered}]   # <-
    """)
    assert_error(tmp_path, text, ["cycle: a -> a"])


def test_held_back_edge_is_not_a_cycle(tmp_path: Path) -> None:
    # A waits for B to be *held* (B's flow arrived; nothing of A needed), B waits for A's answer: fine.
    text = plan_text("""
        rules:
          - id: a
            release:
              after: [{rule: b, state: held}]
          - id: b
            action: hold_response
            release:
              after: [{rule: a, state: answered}]
    """)
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    assert [r.id for r in load_plan(path).rules] == ["a", "b"]


def test_shipped_stuck_preemption_has_a_held_back_edge_and_loads() -> None:
    plan = load_plan("stuck-preemption")
    rules = {r.id: r for r in plan.rules}
    # admission waits for the eviction held; the eviction waits for the admission delivered.
    (adm_trigger,) = rules["admission-job1"].release.after
    (ev_trigger,) = rules["eviction-job1"].release.after
    assert (adm_trigger.rule, adm_trigger.state, adm_trigger.status) == ("eviction-job1", "held", 200)
    assert ev_trigger.delivered == "admission-job1"


def test_duplicate_rule_ids(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            action: observe
          - id: b
            action: observe
          - id: a   # <-
            action: fail
    """)
    assert_error(tmp_path, text, ["rule a: this id is given twice in the plan"])


# ---------------------------------------------------------------------------------------------------------
# Every PlanError is a HarnessError with file:line


def test_plan_error_is_a_harness_error(tmp_path: Path) -> None:
    _, msg = load_error(tmp_path, "")
    assert issubclass(PlanError, HarnessError)
    assert re.match(r"^.+plan\.yaml:\d+: ", msg)


def test_parse_plan_uses_the_given_source_name() -> None:
    with pytest.raises(PlanError, match=r"^<stdin>:1: empty plan"):
        parse_plan("", "<stdin>")


# ---------------------------------------------------------------------------------------------------------
# Good plans


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_plans_load(name: str) -> None:
    plan = load_plan(PLANS_DIR / f"{name}.yaml")
    assert plan.name == name
    assert plan.description
    assert plan.rules
    text = (PLANS_DIR / f"{name}.yaml").read_text().splitlines()
    for r in plan.rules:  # Plan.lines: where each rule starts
        assert text[plan.lines[r.id] - 1].strip() == f"- id: {r.id}"


def test_the_seed_plans_ship() -> None:
    assert {"stuck-preemption", "quota-oversubscription"} <= set(SHIPPED)


def test_load_plan_resolves_a_shipped_name() -> None:
    plan = load_plan("stuck-preemption")
    assert Path(plan.source) == PLANS_DIR / "stuck-preemption.yaml"
    assert [r.id for r in plan.rules] == ["admission-job1", "quota-release-job1", "eviction-job1"]


def test_unreadable_path_lists_the_shipped_plans(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PlanError) as exc:
        load_plan(missing)
    msg = str(exc.value)
    assert msg.startswith(f"{missing}: cannot read the plan")
    assert "No such file" in msg
    for name in SHIPPED:
        assert name in msg
    with pytest.raises(PlanError, match="Shipped plans: .*stuck-preemption"):
        load_plan("stuck-preemptoin")  # a misspelt shipped name
    with pytest.raises(PlanError, match="cannot read the plan"):
        load_plan(tmp_path)  # a directory


def test_namespace_is_injected_where_missing_and_kept_where_given(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: no-ns
            match: {write: admission}
          - id: own-ns
            match: {write: eviction, namespace: kube-system}
          - id: no-match
            action: observe
          - id: empty-match
            match: {}
            action: observe
    """)
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    rules = {r.id: r for r in load_plan(path, namespace="case-ns-1").rules}
    assert rules["no-ns"].match.namespace == "case-ns-1"
    assert rules["no-ns"].match.write == "admission"
    assert rules["own-ns"].match.namespace == "kube-system"
    assert rules["no-match"].match.namespace == "case-ns-1"
    assert rules["empty-match"].match.namespace == "case-ns-1"
    # Without namespace= nothing is injected.
    assert {r.match.namespace for r in load_plan(path).rules} == {None, "kube-system"}


def test_no_namespace_is_injected_into_a_match_of_a_cluster_scoped_kind(tmp_path: Path) -> None:
    """A ClusterQueue write has no namespace: a case namespace in its match would make the rule match
    nothing (kueue_10759's count of ClusterQueue status writes never counted, 2026-12-02)."""
    path = tmp_path / "plan.yaml"
    path.write_text(plan_text("""
        rules:
          - {id: cq-kind, action: observe, match: {kind: ClusterQueue, name: "${namespace}-cq"}}
          - {id: cq-resource, action: observe, match: {resource: clusterqueues, subresource: status}}
          - {id: lq, action: observe, match: {kind: LocalQueue}}
    """))
    rules = {r.id: r for r in load_plan(path, namespace="case-ns-1").rules}
    assert rules["cq-kind"].match.namespace is None and rules["cq-kind"].match.name == "case-ns-1-cq"
    assert rules["cq-resource"].match.namespace is None
    assert rules["lq"].match.namespace == "case-ns-1"


def test_shipped_plan_with_namespace() -> None:
    plan = load_plan("stuck-preemption", namespace="kh-case-7")
    assert {r.match.namespace for r in plan.rules} == {"kh-case-7"}
    assert {r.match.name for r in plan.rules} == {"job-job1-*"}


def test_hold_response_sugar_becomes_hold_at_response_stage() -> None:
    rules = {r.id: r for r in load_plan("stuck-preemption").rules}
    assert (rules["eviction-job1"].action, rules["eviction-job1"].stage) == ("hold", "response")
    assert (rules["admission-job1"].action, rules["admission-job1"].stage) == ("hold", "request")
    assert rules["eviction-job1"].to_dict()["action"] == "hold"  # the wire never carries the sugar


def test_hold_response_with_explicit_response_stage_is_fine() -> None:
    plan = parse_plan(plan_text("""
        rules:
          - id: a
            action: hold_response
            stage: response
    """))
    assert (plan.rules[0].action, plan.rules[0].stage) == ("hold", "response")


def test_defaults_and_name_from_file(tmp_path: Path) -> None:
    path = tmp_path / "my-plan.yaml"
    path.write_text("apiVersion: kueue-harness/v1\nkind: FaultPlan\nrules:\n  - id: a\n")
    plan = load_plan(path)
    assert (plan.name, plan.description) == ("my-plan", "")
    (r,) = plan.rules
    assert (r.action, r.stage, r.times, r.param("max_hold"), r.release) == ("hold", "request", 1, 600.0, None)


@pytest.mark.parametrize("name", SHIPPED)
def test_to_wire_round_trips_through_rule_from_dict(name: str) -> None:
    plan = load_plan(name, namespace="ns-x")
    wire = json.loads(json.dumps(plan.to_wire()))  # what POST /plan carries
    assert wire["name"] == plan.name
    assert tuple(Rule.from_dict(d) for d in wire["rules"]) == plan.rules


def test_to_wire_round_trips_every_field(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: everything
            match:
              write: quota_release
              kind: Workload
              name: job-*
              namespace: ns-?
              field_manager: kueue-admission
              method: PATCH
              path_regex: /status
              resource: workloads
              subresource: status
              body_jsonpath: $.status.conditions[?type == "QuotaReserved"].status
              body_equals: "False"
            action: hold
            stage: response
            times: null
            max_hold: 30
            release:
              after:
                - {rule: other, state: released}
                - {delivered: other}
              timeout: 12.5
              on_timeout: fail
              status: 503
              reason: ServiceUnavailable
              message: late
          - id: other
            action: hold
          - id: paced
            match: {write: eviction}
            action: fail
            delay: 0.5
            status: 409
            reason: Conflict
            message: m
    """)
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    plan = load_plan(path)
    assert isinstance(plan, Plan)
    wire = json.loads(json.dumps(plan.to_wire()))
    assert tuple(Rule.from_dict(d) for d in wire["rules"]) == plan.rules
    r = plan.rules[0]
    assert r.times is None and r.release.timeout == 12.5 and r.release.on_timeout == "fail"
    assert [t.ref for t in r.release.after] == ["other", "other"]
    assert plan.rules[2].delay == 0.5 and (plan.rules[2].param("status"), plan.rules[2].param("reason")) == (409, "Conflict")


def test_the_docs_yaml_examples_load() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fault-plans.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    full = [b for b in blocks if b.startswith("apiVersion:")]
    assert full, "docs/fault-plans.md lost its first example"
    for b in full:
        plan = parse_plan(b, "docs/fault-plans.md")
        assert plan.rules or plan.deletes_as or plan.steps_after
    (match_block,) = [b for b in blocks if b.startswith("match:")]
    parse_plan(HEAD + "rules:\n  - id: a\n" + textwrap.indent(match_block, "    "))


# ---------------------------------------------------------------------------------------------------------
# Every problem at once (issue 16, item 5): a plan with several mistakes names all of them, each at its line


def _lines(text: str) -> dict[int, str]:
    """Line number -> the `# <- WORDS` expectation written on it."""
    return {i: line.split("# <-", 1)[1].strip() for i, line in enumerate(text.splitlines(), 1) if "# <-" in line}


def test_every_problem_of_a_plan_is_reported_at_its_line(tmp_path: Path) -> None:
    text = """\
apiVersion: kueue-harness/v2   # <- expected apiVersion
kind: FaultPlan
name: many
rules:
  - id: a
    match: {write: admision, nmae: x}   # <- 'admision'|unknown key 'nmae'
    times: 0   # <- times must be >= 1
    delay: -1   # <- delay must be >= 0
  - id: b
    match: {write: admission, body_jsonpath: '$[[', body_equals: "x"}   # <- is not a JSONPath
    action: explode   # <- action 'explode'
  - id: c
    match: {write: eviction}
    release:
      after:
        - {rule: a, state: answerd}   # <- state 'answerd'
        - {rule: b, state: held}
        - {rule: zzz}   # <- unknown rule 'zzz'
      timeout: -3   # <- release.timeout: expected seconds > 0
  - id: d
    release:
      after: [{rule: d, state: answered}]   # <- cycle: d -> d
"""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError) as exc:
        load_plan(path)
    err = exc.value
    assert str(err) == "\n".join(err.errors)
    got: dict[int, list[str]] = {}
    for line in err.errors:
        m = re.match(rf"{re.escape(str(path))}:(\d+): (.*)$", line)
        assert m, line
        got.setdefault(int(m.group(1)), []).append(m.group(2))
    want = _lines(text)
    assert sorted(got) == sorted(want), err.errors
    for n, words in want.items():
        for w in words.split("|"):
            assert any(w in msg for msg in got[n]), (n, w, got[n])
    # Consequences of a reported mistake are not reported again: body_equals lost its body_jsonpath only
    # because that one is wrong, and rule c's trigger on the broken rule b is not "unknown".
    assert not any("body_equals needs" in m for m in err.errors)
    assert not any("unknown rule 'b'" in m or "unknown rule 'a'" in m for m in err.errors)
    assert [int(re.search(r":(\d+): ", m).group(1)) for m in err.errors] == sorted(
        int(re.search(r":(\d+): ", m).group(1)) for m in err.errors), "sorted by line"


def test_one_mistake_is_one_line(tmp_path: Path) -> None:
    text = plan_text("""
        rules:
          - id: a
            action: hold
            times: 0   # <-
          - id: b
            release:
              after: [{rule: a, state: held}]
    """)
    _, msg = load_error(tmp_path, text)
    assert len(msg.splitlines()) == 1, msg


def test_every_shipped_scenario_file_is_package_data() -> None:
    """A non-editable install must carry each bug folder's bug.yaml and plans (pyproject package-data)."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    conf = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "cases*" in conf["packages"]["find"]["include"]
    patterns = conf["package-data"]["cases"]
    files = [p.relative_to(root / "cases").as_posix() for p in (root / "cases").rglob("*.yaml")]
    assert files
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f"{f} would be missing from a wheel"
    for d in [p for p in (root / "cases").iterdir() if p.is_dir() and not p.name.startswith("__")]:
        assert (d / "__init__.py").is_file(), f"{d} is not a package: a wheel would leave it out"


def test_plans_that_could_never_act_as_written_are_refused(tmp_path: Path) -> None:
    """Found by a bad-input probe (2026-12-02): a namespace on a cluster-scoped kind, an empty body_jsonpath
    (it turned the filter off) and a trigger status outside 100-599 were accepted; a count trigger's error
    named the rule "None"."""
    cases = {
        "{id: a, action: observe, match: {kind: ClusterQueue, namespace: team-a}}":
            "match.namespace 'team-a' with kind ClusterQueue, which is cluster-scoped",
        "{id: a, action: observe, match: {resource: resourceflavors, namespace: x}}": "resource resourceflavors",
        "{id: a, action: observe, match: {body_jsonpath: ''}}": "match.body_jsonpath is empty",
        "{id: a, match: {write: admission}, release: {after: [{rule: a, status: 999}]}}":
            "status must be an HTTP status code (100-599), not 999",
        "{id: a, match: {write: admission}, release: {after: [{count: a, at_least: 1, status: 42}]}}":
            "not 42",
    }
    for rule, words in cases.items():
        path = tmp_path / "plan.yaml"
        path.write_text(plan_text(f"""
            rules:
              - {rule}
        """))
        with pytest.raises(PlanError) as e:
            load_plan(path)
        assert words in str(e.value), (rule, str(e.value))
    path.write_text(plan_text("""
        rules:
          - {id: g, match: {write: admission}}
          - {id: h, match: {write: eviction}, release: {after: [{count: g, at_least: 1, state: held, status: 200}]}}
    """))
    with pytest.raises(PlanError) as e:
        load_plan(path)
    assert "waits for g held with status 200, but g holds requests" in str(e.value)


def test_control_characters_and_special_files_are_plan_errors(tmp_path: Path) -> None:
    """A NUL or ESC in a plan is `file:line: character #x…` (yaml's ReaderError is not a marked error); a
    device or FIFO is refused before it is read (its size is not its length: /dev/zero never ends)."""
    import os

    bad = tmp_path / "esc.yaml"
    bad.write_text("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nrules:\n  - id: a\x1b\n")
    with pytest.raises(PlanError, match=r"esc.yaml:5: character #x001b is not allowed in YAML"):
        load_plan(bad)
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    with pytest.raises(PlanError, match="not a regular file"):
        load_plan(fifo)  # would block for ever if it were opened


# ---------------------------------------------------------------------------------------------------------
# A field that would do nothing is refused, not silently ignored (the breaker's findings of the sixth wave)


@pytest.mark.parametrize("rule, words", [
    ("action: observe\n    max_hold: 30", "max_hold applies to action hold only"),
    ("action: hold\n    status: 409", "release: `then: fail`"),
    ("action: delay\n    delay: 1\n    reason: Conflict", "reason applies to action fail only"),
    ("action: hold\n    max_hold: 10\n    release: {timeout: 20}", "longer than max_hold"),
    ("action: hold\n    release: {on_timeout: fail}", "needs a `timeout`"),
    ("action: hold\n    release: {timeout: 5, status: 503}", "nothing fails it"),
])
def test_a_field_that_would_do_nothing_is_refused(rule: str, words: str) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(HEAD + "rules:\n  - id: a\n    match: {write: admission}\n    " + rule + "\n")
    assert words in str(e.value)


def test_a_hold_failed_by_its_release_keeps_its_status() -> None:
    plan = parse_plan(HEAD + "rules:\n  - id: a\n    match: {write: admission}\n    action: hold\n"
                      "    release: {timeout: 5, on_timeout: fail, status: 503, reason: ServiceUnavailable}\n")
    assert plan.rules[0].release.status == 503
