"""A `wait` step's `since: STEP` (docs/fault-plans.md, Steps): the wait counts only what happened after plan
step STEP began (its `signalled`), e.g. the ClusterQueue reconcile that follows a delete step and not the
one after the ClusterQueue was created (kubernetes-sigs/kueue#10759). The loader's checks, the rule set's,
and the Nemesis doing such a wait over a Kueue log file and a fake proxy (no environment)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.common.waiting import wait_for
from harness.nemesis import facts
from harness.nemesis.runner import Nemesis
from harness.plan.load import PlanError, parse_plan
from tests.unit.test_nemesis import FakeProxy

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\nsteps:\n"
STEPS = """  - {id: delete-cq, delete: "ClusterQueue/${namespace}-cq"}
  - {id: reconciled, since: delete-cq, wait: {log: 'Reconcile ClusterQueue .*name=${namespace}-cq'}, timeout: 5}
"""


def log_line(path: Path, ts: float, msg: str, **kv: object) -> None:
    """Append a line as Kueue's JSON log writes it, at epoch seconds `ts`."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1e9):09d}Z"
    with open(path, "a") as fh:
        fh.write(json.dumps({"level": "info", "ts": stamp, "msg": msg, **kv}) + "\n")


def test_since_goes_into_the_wait_rule() -> None:
    plan = parse_plan(HEAD + STEPS, "p.yaml", namespace="ns1")
    (wait,) = [r for r in plan.rules if r.id == "reconciled"]
    assert wait.param("since") == "delete-cq" and wait.param("timeout") == 5
    assert "since step delete-cq began" in wait.kind.describe(wait.to_dict())


@pytest.mark.parametrize("step, words", [
    ('  - {id: d, since: a, delete: "ClusterQueue/x"}\n', "p.yaml:6: step d: since goes with wait only"),
    ("  - {id: w, since: nope, wait: {log: x}}\n", "p.yaml:6: step w: since names unknown step 'nope'"),
    ("  - {id: w, since: w, wait: {log: x}}\n", "p.yaml:6: step w: since names the wait step itself"),
    ("  - {id: w, since: 3, wait: {log: x}}\n", "p.yaml:6: step w: since must name a step of the plan"),
])
def test_a_bad_since_is_reported_at_its_line(step: str, words: str) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(HEAD + '  - {id: a, delete: "ClusterQueue/x"}\n' + step, "p.yaml")
    assert any(line.startswith(words) for line in e.value.errors), e.value.errors


def test_since_naming_a_rule_that_is_not_a_step_is_refused() -> None:
    text = ("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\nrules:\n  - id: adm\n    match: {write: admission}\n"
            "steps:\n  - {id: w, since: adm, wait: {log: x}}\n")
    with pytest.raises(PlanError, match="since names adm .action hold., which is not a step"):
        parse_plan(text, "p.yaml")


def test_a_private_fact_is_keyed_apart_and_not_reported(tmp_path: Path) -> None:
    log = tmp_path / "kueue.log"
    log.write_text("")
    told: list[str] = []
    obs = facts.FactObserver(None, log, lambda k, d: told.append(k))
    t0 = time.time()
    log_line(log, t0 - 1, "Reconcile ClusterQueue", name="cq")
    shared = obs.register({"log": "Reconcile ClusterQueue"}, since=t0 - 2, owner="r")
    private = obs.register({"log": "Reconcile ClusterQueue"}, since=t0, owner="w", private=True)
    obs.poll()
    assert private != shared and obs.seen(shared) is not None and obs.seen(private) is None
    log_line(log, t0 + 0.01, "Reconcile ClusterQueue", name="cq")
    obs.poll()
    assert obs.seen(private) is not None and told == [shared]


def wait_rule(since: str) -> dict:
    return {"id": "reconciled", "action": "wait", "wait": {"log": "Reconcile ClusterQueue .*name=ns1-cq"},
            "timeout": 5, "since": since}


def test_the_nemesis_counts_a_since_wait_from_the_named_step(tmp_path: Path) -> None:
    log = tmp_path / "kueue.log"
    log.write_text("")
    proxy = FakeProxy(tmp_path / "proxy-events.jsonl")
    proxy.append("proxy_ready")
    nem = Nemesis(proxy, kueue_log=log, namespace="ns1").start()
    try:
        proxy.append("rule_added", rule=wait_rule("delete-cq"))
        # The reconcile after the ClusterQueue's creation: since the plan loaded, before the delete step.
        log_line(log, time.time() - 1, "Reconcile ClusterQueue", name="ns1-cq")
        wait_for(lambda: nem.facts.lines_read >= 1, timeout=5, what="the Nemesis to read the first line")
        proxy.append("signalled", rule="delete-cq", action="delete", why="loaded", delete={"object": "ClusterQueue/x"})
        wait_for(lambda: proxy.done, timeout=5, what="delete-cq done")  # no API client: the delete fails; fine
        proxy.append("signalled", rule="reconciled", action="wait", why="triggers: step delete-cq done",
                     **{k: v for k, v in wait_rule("delete-cq").items() if k not in ("id", "action")})
        log_line(log, time.time(), "Reconcile ClusterQueue", name="ns1-cq")  # the one after the deletion
        wait_for(lambda: [d for d in proxy.done if d[0] == "reconciled"], timeout=5, what="the wait done")
    finally:
        nem.stop(5)
    ((_, ok, detail),) = [d for d in proxy.done if d[0] == "reconciled"]
    # Had the first line counted, the wait would have ended on it at once (its time is before the step's).
    assert ok and detail["matched"]["log_ts"] > nem.signalled_at["delete-cq"], detail


def test_a_since_wait_for_a_step_that_has_not_begun_fails(tmp_path: Path) -> None:
    proxy = FakeProxy(tmp_path / "proxy-events.jsonl")
    proxy.append("proxy_ready")
    nem = Nemesis(proxy, kueue_log=tmp_path / "none.log", namespace="ns1").start()
    try:
        proxy.append("signalled", rule="reconciled", action="wait", why="loaded",
                     **{k: v for k, v in wait_rule("later").items() if k not in ("id", "action")})
        wait_for(lambda: proxy.done, timeout=5, what="the wait done")
    finally:
        nem.stop(5)
    ((rule, ok, detail),) = proxy.done
    assert rule == "reconciled" and not ok and "step later has not begun" in detail["error"], detail
