"""Plan steps, fact triggers, `then: fail` and the scheduler barrier on the real components (Kueue v0.17.0
by default), every scenario written as a plan alone — the case body only loads it and waits for its last
step. The cases run in a child pytest, the way a user runs them, so that their verdicts and histories can
be read from the artifacts.

- `test_barrier_two_in_one_cycle`: `create` steps build two ClusterQueues and the barrier's objects; the
  barrier (a hold of the sacrificial Workload's Pending write) blocks the scheduler inside a cycle while
  steps create w1 and w2 and a `wait` step sees Kueue log w2's create event; released, the next cycle
  considers both (the same `schedulingCycle` on their "Attempting to schedule workload" lines); then a
  `patch` step deactivates w1, a `wait` sees it evicted, a `delete` step removes the barrier Workload.
- `test_fail_second_eviction_after_first_answered`: a preemptor evicts v1 and v2 in one cycle; the plan
  fails v2's eviction with 409 once v1's was answered (`then: fail`).
- `test_a_failing_step_makes_the_verdict_error`: a `wait` step that times out, and a `patch` step that
  kube-apiserver refuses: the verdict is "error" (assumption steps_done), not "passed".
- `test_delete_kept_terminating`: a `delete` step with `keep_terminating: 2` keeps an admitted Workload
  Terminating 2 s (a wait begun at the plan's load sees its deletionTimestamp before the step ends); it goes
  once the step removed its finalizer.

Prints what it measured: step latency (trigger → signalled → done), fact latency (Kueue's log line →
the proxy's `fact` → the hold's release), the scheduling cycles.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.integration.child import run_child_cases

CASES = textwrap.dedent('''
    import pytest
    from harness.plan.load import parse_plan
    # A case with no invariant that applied is an error (harness/checkers/base.py compose): quota judges them all.
    pytestmark = pytest.mark.checkers("quota")

    QUEUES = """
      - id: queues
        create:
          - {builder: resource_flavor, args: ["${namespace}-rf"]}
          - {builder: cluster_queue, args: ["${namespace}-a"], with: [{flavor_quota: {flavor: "${namespace}-rf", cpu: "1"}}]}
          - {builder: cluster_queue, args: ["${namespace}-b"], with: [{flavor_quota: {flavor: "${namespace}-rf", cpu: "1"}}]}
          - {builder: local_queue, args: {name: lq-a, cluster_queue: "${namespace}-a"}}
          - {builder: local_queue, args: {name: lq-b, cluster_queue: "${namespace}-b"}}
      - id: queues-active
        wait: {object: LocalQueue/lq-b, condition: Active}
    """

    BARRIER = """
    apiVersion: kueue-harness/v1
    kind: FaultPlan
    name: barrier-two-in-one-cycle
    rules:
      - id: barrier
        match: {write: pending, name: barrier}
        action: hold
        release:
          after: [{step: w2-queued}]
          timeout: 60
    steps:
    """ + QUEUES + """
      - id: barrier-objects
        create: {builder: barrier}
      - id: w1
        after: [{rule: barrier, state: held}]
        create: {builder: workload, args: {name: w1}, with: [{queue: lq-a}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
      - id: w2
        create: {builder: workload, args: {name: w2}, with: [{queue: lq-b}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
      - id: w2-queued
        wait: {log: 'Workload create event .*workload=${namespace}/w2 '}
        timeout: 30
      - id: w1-reserved
        after: [{rule: barrier, state: released}, {step: w2-queued}]
        wait: {object: Workload/w1, condition: QuotaReserved}
        timeout: 30
      - id: deactivate-w1
        patch: {object: Workload/w1, merge: {spec: {active: false}}}
      - id: w1-evicted
        wait: {object: Workload/w1, condition: Evicted}
        timeout: 30
      - id: cleanup
        delete: Workload/barrier
    """

    # The same objects and order without the barrier: the two Workloads are created ~10 ms apart.
    NO_BARRIER = """
    apiVersion: kueue-harness/v1
    kind: FaultPlan
    name: no-barrier
    steps:
    """ + QUEUES + """
      - id: w1
        create: {builder: workload, args: {name: w1}, with: [{queue: lq-a}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
      - id: w2
        create: {builder: workload, args: {name: w2}, with: [{queue: lq-b}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
      - id: both-reserved
        wait: {object: Workload/w2, condition: QuotaReserved}
        timeout: 30
    """

    FAIL_SECOND = """
    apiVersion: kueue-harness/v1
    kind: FaultPlan
    name: fail-second-eviction
    rules:
      - id: evict-v1
        match: {write: eviction, name: "job-v1-*"}
        action: observe
      - id: evict-v2
        match: {write: eviction, name: "job-v2-*"}
        action: hold
        release:
          after: [{rule: evict-v1, state: answered, status: 200}]
          then: fail
          status: 409
          reason: Conflict
          timeout: 60
    steps:
      - id: objects
        create:
          - {builder: resource_flavor, args: ["${namespace}-rf"]}
          - {builder: cluster_queue, args: ["${namespace}-cq"], with: [{flavor_quota: {flavor: "${namespace}-rf", cpu: "2"}}, {preemption: {within_cluster_queue: LowerPriority}}]}
          - {builder: local_queue, args: {name: lq, cluster_queue: "${namespace}-cq"}}
          - {builder: workload_priority_class, args: ["${namespace}-low", 10]}
          - {builder: workload_priority_class, args: ["${namespace}-high", 1000]}
      - id: lq-active
        wait: {object: LocalQueue/lq, condition: Active}
      - id: victims
        create:
          - {builder: job, args: {name: v1}, with: [{queue: lq}, {priority_class: "${namespace}-low"}, {requests: {cpu: "1"}}]}
          - {builder: job, args: {name: v2}, with: [{queue: lq}, {priority_class: "${namespace}-low"}, {requests: {cpu: "1"}}]}
      - id: v1-running
        wait: {object: Job/v1, field: $.spec.suspend, equals: false}
        timeout: 30
      - id: v2-running
        wait: {object: Job/v2, field: $.spec.suspend, equals: false}
        timeout: 30
      - id: preemptor
        create: {builder: job, args: {name: p}, with: [{queue: lq}, {priority_class: "${namespace}-high"}, {requests: {cpu: "2"}}]}
      - id: v2-failed
        after: [{rule: evict-v2, state: answered, status: 409}]
        wait: {log: 'Failed to preempt workloads'}
        timeout: 30
    """

    BROKEN = """
    apiVersion: kueue-harness/v1
    kind: FaultPlan
    name: broken
    steps:
      - id: never
        wait: {object: Workload/nothing-creates-this, condition: QuotaReserved}
        timeout: 2
      - id: refused
        after: []
        patch: {object: Workload/absent, merge: {spec: {active: false}}}
    """

    # A delete step that keeps its object Terminating 2 s (keep_terminating: a finalizer added, removed after
    # 2 s); a wait that began at the plan's load sees the deletionTimestamp while the step still runs.
    KEPT = """
    apiVersion: kueue-harness/v1
    kind: FaultPlan
    name: kept-terminating
    steps:
    """ + QUEUES + """
      - id: w1
        create: {builder: workload, args: {name: w1}, with: [{queue: lq-a}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
      - id: w1-reserved
        wait: {object: Workload/w1, condition: QuotaReserved}
        timeout: 30
      - id: delete-w1
        delete: {object: Workload/w1, keep_terminating: 2}
      - id: w1-gone
        wait: {object: Workload/w1, deleted: true}
        timeout: 30
      - id: seen-terminating
        after: []
        wait: {object: Workload/w1, field: $.metadata.deletionTimestamp}
        timeout: 60
    """

    def run_plan(case, text, last, timeout=90):
        plan = parse_plan(text, "plan.yaml", namespace=case.ns)
        case.proxy.load_plan(plan)
        case.record("plan_loaded", plan=plan.name, rules=[r.id for r in plan.rules])
        case.wait_plan(last, timeout)

    @pytest.mark.kueue_log("Attempting to schedule workload", "Workload create event")
    @pytest.mark.checkers(forced={"rules": ["barrier"]})
    def test_barrier_two_in_one_cycle(case):
        run_plan(case, BARRIER, ["cleanup"])

    @pytest.mark.kueue_log("Attempting to schedule workload", "Workload create event")
    def test_no_barrier(case):
        run_plan(case, NO_BARRIER, ["both-reserved"])

    @pytest.mark.kueue_log("Failed to preempt workloads")
    @pytest.mark.checkers(forced={"rules": ["evict-v2"]})
    def test_fail_second_eviction_after_first_answered(case):
        run_plan(case, FAIL_SECOND, ["v2-failed"])

    def test_a_failing_step_makes_the_verdict_error(case):
        run_plan(case, BROKEN, ["never", "refused"], timeout=30)

    def test_delete_kept_terminating(case):
        run_plan(case, KEPT, ["w1-gone", "seen-terminating"])
''')


def _history(art: Path, name: str) -> list[dict]:
    (d,) = [p for p in (art / "cases").iterdir() if p.is_dir() and p.name.startswith(name)]
    return [json.loads(x) for x in (d / "history.jsonl").read_text().splitlines()]


def _first(history: list[dict], **want) -> dict:
    for e in history:
        if all(e.get(k) == v for k, v in want.items()):
            return e
    raise AssertionError(f"no event {want} in the history")


def _cycles(history: list[dict], ns: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for e in history:
        if e.get("event") == "log" and e.get("msg") == "Attempting to schedule workload":
            wl = (e["fields"].get("workload") or {})
            if wl.get("namespace") == ns:
                out.setdefault(wl["name"], []).append(e["fields"]["schedulingCycle"])
    return out


def test_plan_steps_on_real_kueue(tmp_path: Path, kueue_version: str) -> None:
    run = run_child_cases(tmp_path, CASES, kueue_version)
    out, verdicts, art = run.out, run.verdicts, run.art
    assert verdicts["test_barrier_two_in_one_cycle"]["verdict"] == "passed", (verdicts, out)
    assert verdicts["test_no_barrier"]["verdict"] == "passed", (verdicts, out)
    assert verdicts["test_fail_second_eviction_after_first_answered"]["verdict"] == "passed", (verdicts, out)
    broken = verdicts["test_a_failing_step_makes_the_verdict_error"]
    assert broken["verdict"] == "error" and "steps_done" in out, (broken, out)

    # ---- the barrier: the order of what happened, and one cycle for both Workloads
    h = _history(art, "test-barrier-two-in-one-cycle")
    ns = _first(h, event="case_started")["namespace"]
    held = _first(h, source="proxy", event="held", rule="barrier")
    done = {e["rule"]: e for e in h if e.get("event") == "signal_done"}
    signalled = {e["rule"]: e for e in h if e.get("event") == "signalled"}
    released = _first(h, source="proxy", event="released", rule="barrier")
    assert released["why"] == "triggers: step w2-queued done", released
    assert all(d["ok"] for d in done.values()), done
    assert held["ts"] < signalled["w1"]["ts"] < done["w1"]["ts"] < done["w2"]["ts"] < done["w2-queued"]["ts"] \
        <= released["ts"], "steps ran while the barrier held"
    assert signalled["w1"]["why"] == "triggers: barrier held"
    admissions = [e for e in h if e.get("event") == "request" and (e.get("write") or {}).get("write") == "admission"
                  and (e["write"].get("name") in ("w1", "w2"))]
    assert {a["write"]["name"] for a in admissions} == {"w1", "w2"}
    assert all(a["ts"] > released["ts"] for a in admissions), "both admissions came after the barrier"
    cycles = _cycles(h, ns)
    assert cycles["w1"][0] == cycles["w2"][0], cycles
    barrier_cycle = [e for e in h if e.get("event") == "log" and e.get("msg") == "Attempting to schedule workload"
                     and (e["fields"].get("workload") or {}).get("name") == "barrier"]
    assert done["deactivate-w1"]["ts"] < done["w1-evicted"]["ts"] < done["cleanup"]["ts"]
    fact = _first(h, source="proxy", event="fact", rules=["w2-queued"])
    print("\nbarrier: cycles", cycles, "barrier's cycle", [e["fields"]["schedulingCycle"] for e in barrier_cycle])
    print("step latency (trigger -> signalled -> done), s:",
          {"w1": (round(signalled["w1"]["ts"] - held["ts"], 4), done["w1"]["since_signalled"]),
           **{k: (None, done[k]["since_signalled"]) for k in ("w2", "deactivate-w1", "cleanup")}})
    print("fact latency: Kueue log line -> proxy fact", round(fact["ts"] - fact["detail"]["log_ts"], 4) if
          fact["detail"].get("log_ts") else None, "s; fact -> w2-queued done",
          round(done["w2-queued"]["ts"] - fact["ts"], 4), "s; w2-queued done -> barrier released",
          round(released["ts"] - done["w2-queued"]["ts"], 4), "s")

    hn = _history(art, "test-no-barrier")
    print("without the barrier: cycles", _cycles(hn, _first(hn, event="case_started")["namespace"]))

    # ---- then: fail
    hf = _history(art, "test-fail-second-eviction")
    answered_v1 = next(e for e in hf if e.get("event") == "response" and e.get("write") == "eviction"
                       and str(e.get("name")).startswith("job-v1-"))
    failed_v2 = _first(hf, source="proxy", event="failed", rule="evict-v2")
    assert failed_v2["status"] == 409 and failed_v2["why"] == "triggers: evict-v1 answered", failed_v2
    assert failed_v2["ts"] >= answered_v1["ts"]

    # ---- keep_terminating: Terminating while the delete step ran, gone once it removed its finalizer
    assert verdicts["test_delete_kept_terminating"]["verdict"] == "passed", (verdicts, out)
    hk = _history(art, "test-delete-kept-terminating")
    kd = {e["rule"]: e for e in hk if e.get("event") == "signal_done"}
    assert all(d["ok"] for d in kd.values()), kd
    assert kd["delete-w1"]["since_signalled"] >= 2.0, kd["delete-w1"]
    assert kd["seen-terminating"]["ts"] < kd["delete-w1"]["ts"] <= kd["w1-gone"]["ts"], kd
    print("keep_terminating 2 s: the delete step took", kd["delete-w1"]["since_signalled"], "s")

    # ---- a failed step is recorded and voids the verdict
    hb = _history(art, "test-a-failing-step")
    bad = {e["rule"]: e for e in hb if e.get("event") == "signal_done"}
    assert not bad["never"]["ok"] and "not seen within 2 s" in bad["never"]["error"], bad
    assert not bad["refused"]["ok"] and "404" in bad["refused"]["error"], bad
