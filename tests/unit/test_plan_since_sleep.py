"""The plan language's `since: TRIGGER` (a wait counting from any trigger, through a `sleep: 0` anchor step)
and the `sleep` step, as the loader builds them (harness/plan/load.py, harness/plan/actions.py)."""

from __future__ import annotations

import threading

import pytest

from harness.plan.load import PlanError, load_plan

PLAN = """apiVersion: kueue-harness/v1
kind: FaultPlan
name: since-any
rules:
  - {id: adm, match: {write: admission, name: "job-a-*"}, action: observe}
steps:
  - {id: first, sleep: 1.5}
  - {id: w, since: {rule: adm, state: answered}, wait: {log: 'Workload successfully admitted'}}
  - {id: w2, since: {log: Preempted}, wait: {object: Workload/x, condition: Evicted}}
  - {id: w3, since: first, wait: {log: x}}
"""


def load(text, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    return {r.id: r for r in load_plan(str(f), namespace="ns").rules}


def test_since_a_trigger_becomes_an_anchor_step_the_wait_counts_from(tmp_path):
    rules = load(PLAN, tmp_path)
    assert list(rules) == ["adm", "first", "w-since", "w", "w2-since", "w2", "w3"]
    anchor = rules["w-since"]
    assert anchor.action == "sleep" and anchor.param("sleep") == 0
    assert [(t.rule, t.state) for t in anchor.release.after] == [("adm", "answered")]
    w = rules["w"]
    assert w.param("since") == "w-since"
    assert [t.step for t in w.release.after] == ["first", "w-since"]  # its place in the chain, then the anchor
    assert [t.log for t in rules["w2-since"].release.after] == ["Preempted"]
    assert [t.step for t in rules["w2"].release.after] == ["w", "w2-since"]
    assert rules["w3"].param("since") == "first" and [t.step for t in rules["w3"].release.after] == ["w2"]


def test_sleep_bounds_and_since_only_with_wait(tmp_path):
    bad = PLAN.replace("{id: first, sleep: 1.5}", "{id: first, sleep: 601}").replace(
        "{id: w3, since: first, wait: {log: x}}", "{id: w3, since: first, sleep: 1}")
    with pytest.raises(PlanError) as e:
        load(bad, tmp_path)
    text = str(e.value)
    assert "step first: sleep must be seconds from 0 to 600, got 601" in text
    assert "step w3: since goes with wait only" in text


def test_since_a_trigger_naming_an_unknown_rule_is_an_error(tmp_path):
    with pytest.raises(PlanError, match="unknown rule 'nope'"):
        load(PLAN.replace("{rule: adm, state: answered}", "{rule: nope, state: answered}"), tmp_path)


class _Runner:
    def __init__(self):
        from harness.nemesis.runner import Nemesis

        self._cancel = threading.Event()
        self.done = []
        self._lock = threading.Lock()
        self.step_sleep = Nemesis.step_sleep.__get__(self)
        self._step_done = Nemesis._step_done.__get__(self)


def test_sleep_step_lets_time_pass_and_ends_with_the_case():
    from harness.plan import actions

    r = _Runner()
    out = actions.get("sleep").perform(r, {"id": "s", "sleep": 0.05})
    assert out["seconds"] >= 0.05 and r.done[0]["action"] == "sleep"
    r._cancel.set()
    with pytest.raises(InterruptedError, match="the case ended first"):
        actions.get("sleep").perform(r, {"id": "s", "sleep": 5})
