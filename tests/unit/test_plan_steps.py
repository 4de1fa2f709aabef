"""Plan steps in the loader (harness/plan/load.py, docs/fault-plans.md "Steps"): the `steps:` section becomes
signal rules after the plan's rules; a step without `after` waits for the step before it; `${namespace}`
and namespace defaults; objects built by name from harness/objects/builders.py; every problem at its line; and
`kueue-harness plan validate` on a plan with steps."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from harness.cli import commands as cli
from harness.plan.load import PlanError, load_plan, parse_plan
from harness.plan.rules import Rule

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\n"


def plan(body: str, namespace: str | None = "team-a"):
    return parse_plan(HEAD + textwrap.dedent(body), "plan.yaml", namespace=namespace)


def errors(body: str) -> list[str]:
    with pytest.raises(PlanError) as exc:
        plan(body)
    return exc.value.errors


def test_steps_become_signal_rules_after_the_rules_chained_in_file_order() -> None:
    p = plan("""
        rules:
          - id: adm
            match: {write: admission}
            release:
              after: [{step: b}]
        steps:
          - id: a
            create: {builder: workload, args: {name: w1}, with: [{queue: lq}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
          - id: b
            wait: {log: 'Workload create event .*${namespace}/w1'}
            timeout: 5
          - id: c
            after: [{rule: adm, state: held}]
            patch: {object: Workload/w1, merge: {spec: {active: false}}}
          - id: d
            delete: Workload/w1
          - id: e
            after: []
            delete: {object: 'ClusterQueue/${namespace}-cq', propagation: Foreground}
    """)
    assert [r.id for r in p.rules] == ["adm", "a", "b", "c", "d", "e"]
    assert p.steps == ("a", "b", "c", "d", "e")
    by = {r.id: r for r in p.rules}
    assert [r.action for r in p.rules[1:]] == ["create", "wait", "patch", "delete", "delete"]
    assert by["a"].release.after == ()  # the first step: when the plan loads
    assert [t.step for t in by["b"].release.after] == ["a"]  # the one before
    assert [(t.rule, t.state) for t in by["c"].release.after] == [("adm", "held")]  # its own triggers only
    assert [t.step for t in by["d"].release.after] == ["c"]  # the one before, even a triggered one
    assert by["e"].release.after == ()  # after: [] — when the plan loads
    # ${namespace} and namespace defaults
    assert by["b"].param("wait") == {"log": "Workload create event .*team-a/w1"}
    assert by["b"].param("timeout") == 5
    (wl,) = by["a"].param("create")
    assert wl["metadata"] == {"name": "w1", "namespace": "team-a"} and wl["spec"]["queueName"] == "lq"
    assert by["c"].param("patch") == {"object": "Workload/w1", "namespace": "team-a", "merge": {"spec": {"active": False}}}
    assert by["e"].param("delete") == {"object": "ClusterQueue/team-a-cq", "propagation": "Foreground"}  # cluster-scoped
    assert p.lines["c"] == 16


def test_to_wire_round_trips_steps_through_rule_from_dict() -> None:
    p = plan("""
        steps:
          - id: a
            create:
              - {builder: barrier}
              - {kind: Workload, metadata: {name: w}, spec: {queueName: lq, podSets: []}}
          - id: b
            wait: {object: Job/j, field: $.spec.suspend, equals: false}
          - id: c
            patch: {object: Workload/w, subresource: status, apply: {status: {conditions: []}}, field_manager: kueue-admission}
    """)
    wire = json.loads(json.dumps(p.to_wire()))
    assert tuple(Rule.from_dict(d) for d in wire["rules"]) == p.rules
    a = p.rules[0].param("create")
    assert [o["kind"] for o in a] == ["ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload", "Workload"]
    assert a[-1]["apiVersion"] == "kueue.x-k8s.io/v1beta2" and a[-1]["metadata"]["namespace"] == "team-a"
    assert a[0]["metadata"] == {"name": "team-a-barrier"} and a[3]["metadata"]["name"] == "barrier"
    assert p.rules[2].param("patch")["force"] is True
    # No step's trigger carries the rule-only `state`.
    assert all("state" not in t for d in wire["rules"] for t in (d.get("release") or {}).get("after", []))


def test_a_plan_may_be_steps_only_or_rules_only_but_not_empty() -> None:
    assert plan("steps:\n  - id: a\n    delete: Workload/w\n").steps == ("a",)
    assert plan("rules:\n  - id: a\n").steps == ()
    assert "`rules` must be a non-empty list (or give `steps`)" in errors("description: x\n")[0]
    assert "`steps` must be a non-empty list" in errors("steps: []\n")[0]
    assert plan("rules: []\nsteps:\n  - id: a\n    delete: Workload/w\n").steps == ("a",)


def test_without_a_namespace_the_default_namespace_is_used() -> None:
    p = plan("steps:\n  - id: a\n    wait: {object: Workload/w, deleted: true}\n  - id: b\n    wait: {log: '${namespace}/w'}\n",
             namespace=None)
    assert p.rules[0].param("wait")["namespace"] == "default" and p.rules[1].param("wait") == {"log": "default/w"}


def _at(errs: list[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for e in errs:
        m = re.match(r"plan\.yaml:(\d+): (.*)$", e)
        assert m, e
        out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def test_every_step_problem_is_reported_at_its_line() -> None:
    text = """\
rules:
  - id: hold
    match: {write: admission}
    release:
      after: [{step: nope}]   # <- trigger names unknown step 'nope'
  - id: made-a-step
    action: create   # <- is a step: write it under `steps:`
steps:
  - id: a
    create: {builder: barier}   # <- builder 'barier' is not one of
  - id: b
    after: [{rule: hold, state: held}, {object: Workload/w, condition: A, status: maybe}]   # <- step b: after[1]: status 'maybe'
    create: {kind: Workload}   # <- has no metadata.name
  - id: c
    patch: {object: w, merge: {}}   # <- object 'w' is not Kind/name
  - id: d
    delete: Workload/x
    wait: {log: x}   # <- give exactly one of create, patch, delete, wait, sleep (got delete, wait)
  - id: e
    unknown: 1   # <- steps[4]: unknown key 'unknown'
    delete: Workload/x
  - id: f
    delete: Workload/x
    timeout: 3   # <- timeout goes with wait only
  - id: g
    wait: {object: Workload/w1}   # <- object takes exactly one of
  - id: h
    wait: {log: 'x ${nmspace}'}   # <- unknown template variable ${nmspace}
  - id: i
    create: {builder: workload, args: {name: x}, with: [{fly: 1}]}   # <- WorkloadBuilder has no step 'fly'
  - id: j
    wait: {step: a}   # <- waits for a fact
  - id: k
    wait: {log: x}
    timeout: 0   # <- timeout must be seconds > 0
"""
    errs = errors(text)
    got = _at(errs)
    want = {i + 3: line.split("# <-", 1)[1].strip() for i, line in enumerate(text.splitlines(), 1) if "# <-" in line}
    assert sorted(got) == sorted(want), errs
    for n, words in want.items():
        assert any(words in m for m in got[n]), (n, words, got[n])
    assert all(not m.startswith("rule ") for n, ms in got.items() if n > 11 for m in ms), errs


def test_step_cycles_and_non_step_targets_are_refused() -> None:
    body = """\
rules:
  - id: barrier
    match: {write: pending}
    release:
      after: [{step: w1}]   # <- cycle
steps:
  - id: w1
    after: [{rule: barrier, state: released}]
    delete: Workload/x
  - id: w2
    after: [{step: barrier}]   # <- not a step
    delete: Workload/y
"""
    got = _at(errors(body))
    line = {w: i + 3 for i, ln in enumerate(body.splitlines(), 1) for w in ("cycle", "not a step") if f"# <- {w}" in ln}
    assert got[line["cycle"]] == ["release triggers form a cycle: barrier -> w1 -> barrier"], got
    assert got[line["not a step"]] == ["step w2: after[0]: waits for step barrier, but barrier (action hold) is not a "
                                       "step; wait for a rule with {rule: ID, state: …}"]
    assert sorted(got) == sorted(line.values())


def test_an_unquoted_template_in_a_flow_mapping_says_to_quote_it() -> None:
    (err,) = errors("steps:\n  - id: a\n    delete: {object: ClusterQueue/${namespace}-cq}\n")
    assert "not valid YAML" in err and "must be quoted ('${namespace}-cq')" in err


def test_plan_validate_lists_the_steps(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(HEAD + "rules:\n  - id: h\n    match: {write: pending, name: barrier}\n    release:\n"
                           "      after: [{step: b}]\nsteps:\n  - id: a\n    create: {builder: barrier}\n"
                           "  - id: b\n    after: [{rule: h, state: held}]\n    delete: Workload/barrier\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD + "steps:\n  - id: a\n    wait: {log: '(a+)+'}\n")
    assert cli.main(["plan", "validate", str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert f"{good}: valid, plan t: h; steps a, b" in out
    assert f"{bad}:6: step a: wait: log: '(a+)+' nests an unbounded repeat" in err


def test_the_docs_step_examples_load_for_a_namespace() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fault-plans.md").read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if b.startswith("apiVersion:") and "steps:" in b]
    assert len(blocks) >= 2, "docs/fault-plans.md lost its step examples"
    for b in blocks:
        assert load_plan_text(b).steps


def load_plan_text(text: str):
    return parse_plan(text, "docs/fault-plans.md", namespace="team-a")


def test_load_plan_reads_steps_from_a_file(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(HEAD + "steps:\n  - id: a\n    delete: Workload/w\n")
    assert load_plan(f, namespace="x").rules[0].param("delete") == {"object": "Workload/w", "namespace": "x"}
