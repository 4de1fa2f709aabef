"""A plan loaded, cleared and loaded again with the same step ids (a session: the first `plan load` named a
namespace that did not exist, so its create step failed; `plan clear`; a second load that worked): each load
of a step is its own (harness/checkers/base.py rule_loads, keyed by the proxy's `rule_added` `load`), so
report.md's diagram draws the first load's step as FAILED, not as the second's "done in 0.029s", its "load
fault plan" line names each load's ids at that load's time, and steps_done names the failed load."""

from __future__ import annotations

from harness.checkers.assumptions import StepsDone
from harness.checkers.base import rule_loads
from harness.history.names import Names
from harness.plan.load import parse_plan
from harness.proxy.addons.state import ProxyState
from harness.report.diagram import diagram_lines, validate_sequence_diagram
from tests.unit.test_report import base

PLAN = """apiVersion: kueue-harness/v1
kind: FaultPlan
name: queues
steps:
  - id: lq
    create: {builder: local_queue, args: {name: lq, cluster_queue: cq}}
  - id: ready
    wait: {object: LocalQueue/lq, condition: Active}
"""


def _two_loads(with_load_numbers: bool = True) -> list[dict]:
    """The proxy's own events (ProxyState: load, fail, clear, load again, succeed), on a case's base history."""
    st = ProxyState()
    plan = parse_plan(PLAN, "queues.yaml", namespace="team-a")
    st.add_rules(list(plan.rules), plan="queues", source={"file": "/p/queues.yaml", "namespace": "team-a",
                                                          "by": "plan load"})
    st.signal_done("lq", False, {"error": "StepError: create LocalQueue team-a/lq: kube-apiserver answered 404 "
                                          "NotFound (namespaces \"team-a\" not found)"})
    for rid in ("lq", "ready"):
        st.remove_rule(rid)
    st.add_rules(list(plan.rules), plan="queues", source={"file": "/p/queues.yaml", "namespace": "team-a",
                                                          "by": "plan load"})
    st.signal_done("lq", True, {"seconds": 0.029, "objects": ["LocalQueue team-a/lq rv 12"]})
    st.signal_done("ready", True, {"seconds": 0.2, "matched": {"observed": "Active=True at rv 13"}})
    h = base(20.0)
    for i, e in enumerate(st.log.events):  # spread over the case, in the proxy's order
        e = dict(e, source="proxy", ts=h[0]["ts"] + 1 + 0.5 * i)
        if not with_load_numbers:
            e.pop("load", None)
        h.append(e)
    return sorted(h, key=lambda e: e["ts"])


def test_each_load_of_a_rule_has_its_own_events() -> None:
    for numbered in (True, False):  # histories from before the `load` number are grouped the same way
        loads = rule_loads(_two_loads(numbered))
        assert [(lr.id, lr.load, lr.label) for lr in loads] == [
            ("lq", 1, "lq (1st of 2 loads)"), ("ready", 1, "ready (1st of 2 loads)"),
            ("lq", 2, "lq (2nd of 2 loads)"), ("ready", 2, "ready (2nd of 2 loads)")], numbered
        first_lq, first_ready, second_lq, second_ready = loads
        assert first_lq.done["ok"] is False and first_lq.removed is not None
        assert first_ready.fired is None and first_ready.removed is not None  # withdrawn before it began
        assert second_lq.done["ok"] is True and second_lq.done["seconds"] == 0.029 and second_lq.removed is None
        assert second_ready.done["ok"] is True


def test_the_diagram_draws_the_failed_load_as_failed_and_each_load_at_its_time() -> None:
    h = _two_loads()
    body = diagram_lines(h, Names(h, "team-a"))
    text = "\n".join(body)
    assert validate_sequence_diagram(text) == [], text
    steps = [ln.strip() for ln in body if "step lq:" in ln]
    assert len(steps) == 2, text
    assert steps[0].startswith("Test-xAPI:") and "FAILED: StepError: create LocalQueue" in steps[0], steps
    assert "done in" not in steps[0], steps
    assert steps[1].startswith("Test->>API:") and steps[1].endswith("done in 0.029s"), steps
    t0 = h[0]["ts"]
    loaded = [ln.strip() for ln in body if "load fault plan" in ln]
    assert loaded == [f"Test->>Proxy: {1.0:.3f}s load fault plan queues: lq, ready",
                      f"Test->>Proxy: {1 + 0.5 * _index(h, 2):.3f}s load fault plan queues: lq, ready"], (loaded, t0)
    # The first load's wait was removed before it began: it is drawn nowhere; the second's is.
    assert sum("step ready:" in ln for ln in body) == 1, text


def _index(h: list[dict], load: int) -> int:
    """The position among the proxy's events of the first rule_added of `load`."""
    proxy = [e for e in h if e.get("source") == "proxy"]
    return next(i for i, e in enumerate(proxy) if e["event"] == "rule_added" and e.get("load") == load)


def test_steps_done_names_the_load_that_failed() -> None:
    h = _two_loads()
    [f] = StepsDone().check(h, {}, Names(h, "team-a"))
    assert f.result == "violated" and f.summary == "1 plan step(s) did not run to success", f
    assert "step lq (1st of 2 loads) (create) failed: StepError: create LocalQueue" in f.evidence, f.evidence
    assert "Removed before they began (not judged): ready (1st of 2 loads)." in f.evidence, f.evidence
    # Only the second load: every step ran and succeeded.
    second = [e for e in h if not (e.get("source") == "proxy" and e["ts"] < h[0]["ts"] + 1 + 0.5 * _index(h, 2))]
    [f] = StepsDone().check(second, {}, Names(second, "team-a"))
    assert f.result == "held" and "lq (create, 0.029 s), ready (wait, 0.2 s)" in f.evidence, f.evidence


def test_a_step_removed_while_it_ran_is_not_a_success() -> None:
    st = ProxyState()
    plan = parse_plan(PLAN, "queues.yaml", namespace="team-a")
    st.add_rules(list(plan.rules), plan="queues")
    st.remove_rule("lq")  # fired on load, removed before the harness said how it ended
    h = base(20.0)
    h += [dict(e, source="proxy", ts=h[0]["ts"] + 1 + i) for i, e in enumerate(st.log.events)]
    h.sort(key=lambda e: e["ts"])
    [f] = StepsDone().check(h, {}, Names(h))
    assert f.result == "violated" and "step lq was removed while it ran, so how it ended is unknown" in f.evidence


def test_the_history_keeps_rule_removed_so_a_withdrawn_step_is_not_a_failure(tmp_path) -> None:
    # What a session bundle merges (harness/history/record.py): the proxy's rule_removed events must be in it, or the
    # steps a `plan clear` withdrew read as "never ran" (seen live: "4 plan step(s) did not run to success").
    from harness.history.record import History

    proxy = [e for e in _two_loads() if e.get("source") == "proxy"]
    history = History(tmp_path / "history.jsonl")
    history.started = proxy[0]["ts"] - 1
    merged = history.merged(proxy, [], set())
    assert [e["rule"] for e in merged if e["event"] == "rule_removed"] == ["lq", "ready"]
    [f] = StepsDone().check(merged, {}, Names(merged, "team-a"))
    assert f.summary == "1 plan step(s) did not run to success", f.evidence
