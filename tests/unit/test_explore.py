"""harness/explore on synthetic histories: a run's trace, the generator (its order and pruning), moves
rendered as plans (and checked by the plan loader), extensions that compose the seed orderings of
kubernetes-sigs/kueue#11480, the minimiser with a stand-in oracle, shards, merge, and the plan_happened
assumption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.checkers import Selection, compose
from harness.common.errors import HarnessError
from harness.explore import command, driver, generate, tables
from harness.explore.minimize import drop_one, minimize, strengthen
from harness.explore.model import (
    After,
    Candidate,
    Move,
    Target,
    Unsatisfiable,
    move_from_dict,
    move_to_dict,
    plan_document,
    plan_key,
    plan_words,
    render_rules,
    validate,
)
from harness.explore.plugin import explore_selection, same_case
from harness.explore.trace import Trace, target_of, workload_role
from harness.plan.load import parse_plan

NS = "ns-a"
WL1, WL2 = "job-job1-abcde", "job-job2-fghij"
ADM1 = Target("admission", "job1", "job-job1-*")
EVI1 = Target("eviction", "job1", "job-job1-*")
QR1 = Target("quota_release", "job1", "job-job1-*")
ADM2 = Target("admission", "job2", "job-job2-*")
PEN1 = Target("pending", "job1", "job-job1-*")


class Events:
    """Builds proxy events the way the addon records them (docs/history.md), one flow at a time."""

    def __init__(self) -> None:
        self.out: list[dict] = []
        self.flow = 0
        self.t = 100.0

    def tick(self, dt: float = 0.01) -> float:
        self.t += dt
        return self.t

    def write(self, name: str, cls: str, *, kind: str = "Workload", strict: bool = False, status: int = 200,
              rv: str | None = None, ns: str = NS, suspend: bool | None = None, answer: bool = True,
              method: str = "PATCH", sub: str | None = "status") -> int:
        self.flow += 1
        w = {"kind": kind, "namespace": ns, "name": name, "write": cls, "method": method, "subresource": sub,
             "strict": strict, "suspend": suspend}
        self.out.append({"ts": self.tick(), "source": "proxy", "event": "request", "flow": self.flow, "write": w})
        if answer:
            self.out.append({"ts": self.tick(), "source": "proxy", "event": "response", "flow": self.flow,
                             "status": status, "resource_version": rv, "namespace": ns, "name": name, "write": cls})
        return self.flow

    def answer(self, flow: int, name: str, cls: str, rv: str, status: int = 200) -> None:
        self.out.append({"ts": self.tick(), "source": "proxy", "event": "response", "flow": flow, "status": status,
                         "resource_version": rv, "namespace": NS, "name": name, "write": cls})

    def watch(self, name: str, rv: str, *conds: str, typ: str = "MODIFIED", admission: bool = False) -> None:
        self.out.append({"ts": self.tick(), "source": "proxy", "event": "watch_event", "type": typ, "namespace": NS,
                         "name": name, "resource_version": rv, "conditions": {c: "True" for c in conds},
                         "admission": admission})


def reference() -> list[dict]:
    """The writes of the seed control case without faults (docs/kueue-notes.md §11, the reference run)."""
    e = Events()
    e.write(WL1, "post", method="POST", sub=None, status=201, rv="5")
    e.watch(WL1, "5", typ="ADDED")
    e.write(WL1, "admission", rv="10")
    e.watch(WL1, "10", "QuotaReserved", "Admitted", admission=True)
    e.write("job1", "patch", kind="Job", strict=True, suspend=False, sub=None)
    e.write(WL2, "post", method="POST", sub=None, status=201, rv="11")
    e.write(WL1, "eviction", rv="12")
    e.watch(WL1, "12", "QuotaReserved", "Evicted", admission=True)
    e.write("job1", "patch", kind="Job", strict=True, suspend=True, sub=None)
    e.write(WL1, "quota_release", strict=True, rv="14")
    e.watch(WL1, "14", "Evicted", "Requeued")
    e.write(WL2, "admission", rv="15")
    e.watch(WL2, "15", "QuotaReserved", "Admitted", admission=True)
    e.write(WL1, "pending", rv="16")
    e.watch(WL1, "16", "Evicted", "Requeued")
    # Another namespace and a write no move acts on (an Event).
    e.write(WL1, "admission", rv="90", ns="other")
    e.write("job1.123", "post", kind="Event", method="POST", sub=None, status=201)
    return e.out


def late_admission_run() -> list[dict]:
    """The trace of "hold job1's admission until its eviction was answered": the admission lands after the
    eviction and Kueue's watch delivers job1 overwritten (QuotaReserved, no Evicted)."""
    e = Events()
    e.write(WL1, "post", method="POST", sub=None, status=201, rv="5")
    held = e.write(WL1, "admission", answer=False)
    e.write(WL2, "post", method="POST", sub=None, status=201, rv="11")
    e.write(WL1, "eviction", rv="12")
    e.watch(WL1, "12", "QuotaReserved", "Evicted", admission=True)
    e.answer(held, WL1, "admission", "13")
    e.watch(WL1, "13", "QuotaReserved", "Admitted", admission=True)
    e.write(WL1, "quota_release", strict=True, status=409)
    e.write(WL1, "pending", rv="16")
    e.watch(WL1, "16", "QuotaReserved", "Admitted", admission=True)
    return e.out


# ---- the trace ---------------------------------------------------------------------------------------

def test_targets_classify_kueue_writes_by_kind_and_role() -> None:
    assert workload_role(WL1, ["job1"]) == ("job1", "job-job1-*")
    assert workload_role("job-my-job-1-x2c4d", ["my-job-1"]) == ("my-job-1", "job-my-job-1-*")
    assert workload_role("plain-wl") == ("plain-wl", "plain-wl")
    assert target_of({"kind": "Workload", "name": WL1, "write": "eviction", "subresource": "status"}) == EVI1
    assert target_of({"kind": "Workload", "name": WL1, "write": "post", "method": "POST"}).cls == "create"
    assert target_of({"kind": "Job", "name": "job1", "write": "patch", "suspend": True}).cls == "job_suspend"
    assert target_of({"kind": "Job", "name": "job1", "write": "patch", "suspend": False}).match()["body_equals"] == "False"
    # Job status, Job patches without spec.suspend, Events, Workload finalizer updates: no target.
    assert target_of({"kind": "Job", "name": "job1", "write": "patch", "subresource": "status", "suspend": None}) is None
    assert target_of({"kind": "Job", "name": "job1", "write": "patch", "suspend": None}) is None
    assert target_of({"kind": "Event", "name": "x", "write": "post"}) is None
    assert target_of({"kind": "Workload", "name": WL1, "write": "put", "method": "PUT"}) is None


def test_trace_keeps_the_case_namespace_and_knows_deliveries() -> None:
    t = Trace.from_events(reference(), NS, ["job1", "job2"])
    assert [w.target.rule_id for w in t.first_writes()] == [
        "x-create-job1", "x-admission-job1", "x-job-unsuspend-job1", "x-create-job2", "x-eviction-job1", "x-job-suspend-job1",
        "x-quota-release-job1", "x-admission-job2", "x-pending-job1"]
    adm = t.first_writes()[1]
    assert adm.loose and adm.status == 200 and adm.rv == "10"
    assert not t.first_writes()[6].loose  # the quota release is strict
    assert t.delivered_at(adm) is not None and t.delivered_at(t.first_writes()[2]) is None  # Jobs are not watched
    assert [d.rv for d in t.modified("job1")] == ["10", "12", "14", "16"]
    facts = t.facts()
    assert ("state", "job1", ("Admitted", "QuotaReserved", "admission")) in facts
    assert ("write", "quota_release", "job1", 200) in facts
    late = Trace.from_events(late_admission_run(), NS, ["job1", "job2"])
    new = late.facts() - facts
    assert ("change", "job1", ("Evicted", "QuotaReserved", "admission"),
            ("Admitted", "QuotaReserved", "admission")) in new  # the overwritten eviction: a state never seen
    assert ("write", "quota_release", "job1", 409) in new


# ---- the generator -----------------------------------------------------------------------------------

def test_later_events_same_object_first_workload_before_job_never_own_creation() -> None:
    t = Trace.from_events(reference(), NS, ["job1", "job2"])
    adm = t.first_writes()[1]
    after = generate.later_events(t, adm)
    words = [(a.target.rule_id, a.mode) for a in after]
    assert words[:4] == [("x-eviction-job1", "answered"), ("x-eviction-job1", "delivered"),
                         ("x-quota-release-job1", "answered"), ("x-quota-release-job1", "delivered")]
    assert ("x-create-job1", "answered") not in words  # its own creation precedes it causally
    assert words.index(("x-job-suspend-job1", "answered")) > words.index(("x-pending-job1", "delivered"))
    assert words.index(("x-admission-job2", "answered")) > words.index(("x-job-suspend-job1", "answered"))
    assert all(a.target.rule_id != "x-admission-job1" for a in after)


def test_roots_start_with_late_loose_writes_and_prune() -> None:
    t = Trace.from_events(reference(), NS, ["job1", "job2"])
    roots = generate.roots(t, "case")
    first = roots[0]
    assert (first.stage, first.family, first.words()) == (
        0, "stale", "hold the admission of job1 until the eviction of job1 was answered 200")
    assert roots[1].moves[0].kind == "hold_response"
    stage0 = [c for c in roots if c.stage == 0]
    assert {c.moves[0].target.rule_id for c in stage0} <= {"x-admission-job1", "x-eviction-job1", "x-admission-job2",
                                                           "x-pending-job1"}
    assert all(c.moves[0].target.cls != "quota_release" for c in stage0)  # strict: stage 2
    kinds = {c.moves[0].kind for c in roots}
    assert kinds == {"hold", "hold_response", "drop_watch", "delay_watch", "fail", "restart"}
    assert not any(c.moves[0].kind in ("hold", "hold_response") and c.moves[0].target.cls == "create" for c in roots)
    drops = [c.moves[0].times for c in roots if c.moves[0].kind == "drop_watch" and c.moves[0].target.role == "job1"]
    assert drops == [1, 2, 3]  # never the last event of an object: Kueue must see it as it is
    stage2 = [c for c in roots if c.stage == 2]
    assert [c.moves[0].kind for c in stage2[:5]] == ["hold", "drop_watch", "fail", "restart", "fail"]  # in turn
    assert stage2[4].moves[0].times == 3
    assert len({plan_key(c.moves) for c in roots}) == len(roots)
    assert all(validate(c.moves) is None for c in roots)


def test_interleave_puts_each_case_best_first() -> None:
    a = [Candidate((Move("fail", ADM1, status=500),), "a", "x", stage=s) for s in (0, 0, 2)]
    b = [Candidate((Move("fail", ADM2, status=500),), "b", "x", stage=s) for s in (0, 2)]
    got = generate.interleave([a, b])
    assert [(c.case, c.stage) for c in got] == [("a", 0), ("b", 0), ("a", 0), ("a", 2), ("b", 2)]


def test_shards_are_disjoint_and_cover_the_list() -> None:
    cands = [Candidate((Move("fail", ADM1, status=400 + i),), "a", "x") for i in range(10)]
    parts = [generate.shard(cands, i, 3) for i in (1, 2, 3)]
    assert sum(len(p) for p in parts) == 10
    assert {id(c) for p in parts for c in p} == {id(c) for c in cands}
    assert generate.shard(cands, 2, 3) == generate.shard(cands, 2, 3)  # the same order on every machine
    assert generate.parse_shard("2/4") == (2, 4) and generate.parse_shard(None) == (1, 1)
    for bad in ("0/2", "3/2", "x", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            generate.parse_shard(bad)


# ---- rendering and the plan loader ---------------------------------------------------------------------

def test_seed_stuck_preemption_composes_into_a_valid_plan() -> None:
    moves = (Move("hold", ADM1, (After(EVI1, "answered", 200),)),
             Move("hold_response", EVI1, (After(ADM1, "delivered", None),)),
             Move("hold", QR1, (After(ADM1, "answered", 200),)))
    rules = {r["id"]: r for r in render_rules(moves)}
    # The admission waits for the eviction to be applied: its answer is what the second move holds.
    assert rules["x-admission-job1"]["release"]["after"] == [{"rule": "x-eviction-job1", "state": "held", "status": 200}]
    assert rules["x-eviction-job1"]["release"]["after"] == [{"delivered": "x-admission-job1"}]
    assert rules["x-quota-release-job1"]["release"]["after"] == [{"rule": "x-admission-job1", "state": "answered",
                                                                 "status": 200}]
    text = plan_document(moves, "seed", header="found by a test")
    plan = parse_plan(text, "seed.yaml", namespace=NS)
    assert [r.id for r in plan.rules] == ["x-admission-job1", "x-eviction-job1", "x-quota-release-job1"]
    assert text.startswith("# found by a test\n")
    assert validate(moves) is None
    assert plan_words(moves).startswith("hold the admission of job1 until the eviction of job1 was applied; hold the "
                                        "answer to the eviction of job1 until Kueue saw the admission of job1")


def test_a_trigger_on_a_held_answer_waits_for_the_write_to_be_applied_whatever_its_mode() -> None:
    """`delivered` needs the answer too: a plan that held the eviction's answer while the admission waited
    for Kueue to see the eviction would wait for itself; it waits for the eviction to be applied."""
    moves = (Move("hold", ADM1, (After(EVI1, "delivered", None),)),
             Move("hold_response", EVI1, (After(ADM1, "answered", 200),)))
    rules = {r["id"]: r for r in render_rules(moves)}
    assert rules["x-admission-job1"]["release"]["after"] == [{"rule": "x-eviction-job1", "state": "held", "status": 200}]
    assert validate(moves) is None
    assert plan_words(moves).startswith("hold the admission of job1 until the eviction of job1 was applied;")


def test_observed_anchor_for_a_trigger_no_move_acts_on() -> None:
    moves = (Move("hold", ADM1, (After(ADM2, "answered", 200), After(PEN1, "delivered", None))),)
    rules = render_rules(moves)
    assert [r["id"] for r in rules] == ["x-admission-job1", "x-admission-job2", "x-pending-job1"]
    assert rules[1]["action"] == "observe" and rules[1]["times"] is None
    plan = parse_plan(plan_document(moves, "x"), "x")
    assert plan.rules[0].release.timeout > 0


def test_unsatisfiable_and_conflicting_moves_are_not_run() -> None:
    with pytest.raises(Unsatisfiable):  # waits for a 200 that a fail move prevents
        render_rules((Move("hold", ADM1, (After(EVI1),)), Move("fail", EVI1, status=500)))
    with pytest.raises(ValueError, match="two moves act"):
        render_rules((Move("fail", ADM1, status=500), Move("hold", ADM1, (After(EVI1),))))
    ring = (Move("hold_response", ADM1, (After(EVI1),)), Move("hold_response", EVI1, (After(ADM1),)))
    assert "ring" in validate(ring)
    # A deadlock the plan loader itself refuses: each waits for the other's answer.
    deadlock = (Move("hold", ADM1, (After(EVI1),)), Move("hold", EVI1, (After(ADM1),)))
    assert "cycle" in validate(deadlock)


def test_other_moves_render_as_their_actions() -> None:
    w = Target("watch", "job1", "job-job1-*")
    rules = render_rules((Move("drop_watch", w, times=2), Move("restart", EVI1, kill=True),
                          Move("fail", ADM2, status=409, times=3)))
    assert rules[0] == {"id": "x-watch-job1", "match": {"name": "job-job1-*", "event_type": "MODIFIED"},
                        "action": "drop_watch_events", "times": 2}
    assert rules[1]["action"] == "restart_kueue" and rules[1]["kill"] is True
    assert rules[1]["release"]["after"] == [{"rule": "x-eviction-job1", "state": "answered", "status": 200}]
    assert rules[2]["reason"] == "Conflict" and rules[2]["times"] == 3
    assert parse_plan(plan_document((Move("delay_watch", w, times=1, delay=2.0),), "d"), "d").rules[0].delay == 2.0
    m = Move("hold_response", EVI1, (After(ADM1, "delivered", None),))
    assert move_from_dict(json.loads(json.dumps(move_to_dict(m)))) == m


def test_observe_only_plan_for_reference_and_noop_runs() -> None:
    plan = parse_plan(plan_document((), "noop"), "noop", namespace=NS)
    assert [(r.id, r.action, r.match.namespace) for r in plan.rules] == [("observe-all", "observe", NS)]


# ---- extensions: how the search composes the seed scenarios ---------------------------------------------

def test_extension_of_the_late_admission_reaches_the_seed_stuck_plan_first() -> None:
    parent = Candidate((Move("hold", ADM1, (After(EVI1, "answered", 200),)),), "case", "stale", id="p1")
    trace = Trace.from_events(late_admission_run(), NS, ["job1", "job2"])
    ext = generate.extensions(parent, trace, set())
    words = [c.moves[1].words() for c in ext]
    # The write the parent's trigger waited for comes first, its held answer before its held request; the
    # held request would deadlock (the admission waits for its answer) and is not generated.
    assert words[:2] == ["hold the answer to the eviction of job1 until the admission of job1 was answered 200",
                         "hold the answer to the eviction of job1 until Kueue saw the admission of job1"]
    assert not any(c.moves[1].kind == "hold" and c.moves[1].target == EVI1
                   and c.moves[1].after[0].target == ADM1 for c in ext)
    assert all(c.depth == 2 and c.parent == "p1" for c in ext)
    # The seed plan (kubernetes-sigs/kueue#11480 scenario 1) is among them, and valid.
    assert validate(ext[1].moves) is None
    assert generate.extensions(ext[1], trace, set(), max_depth=2) == []


def test_extensions_are_not_generated_twice() -> None:
    parent = Candidate((Move("hold", ADM1, (After(EVI1, "answered", 200),)),), "case", "stale", id="p1")
    trace = Trace.from_events(late_admission_run(), NS, ["job1", "job2"])
    seen: set = set()
    first = generate.extensions(parent, trace, seen)
    assert first and generate.extensions(parent, trace, seen) == []


# ---- the minimiser ------------------------------------------------------------------------------------

def test_minimize_drops_moves_that_do_not_matter() -> None:
    a = Move("hold", ADM1, (After(EVI1, "answered", 200),))
    b = Move("hold_response", EVI1, (After(ADM1, "delivered", None),))
    c = Move("fail", ADM2, status=500)
    calls: list[int] = []

    def oracle(plans):  # reproduces whenever a and b are both in the plan, 3 of 3 runs
        calls.append(len(plans))
        return [3 if (a in p and b in p) else 0 for p in plans]

    m = minimize((a, b, c), oracle, runs=3)
    assert set(m.moves) == {a, b} and m.hits == 3 and m.complete
    assert calls[0] == 1  # the confirmation run of the whole plan
    assert drop_one((a,)) == []


def test_minimize_keeps_a_plan_only_as_reliable_and_stops_without_time() -> None:
    a = Move("hold", ADM1, (After(EVI1, "answered", 200),))
    b = Move("fail", ADM2, status=500)
    m = minimize((a, b), lambda plans: [2 if len(p) == 2 else 1 for p in plans], runs=3)
    assert m.moves == (a, b) and m.hits == 2  # one move fewer reproduced less often: kept both
    budget = iter([[3], None])
    m = minimize((a, b), lambda plans: next(budget), runs=3)
    assert not m.complete and m.moves == (a, b)
    assert minimize((a,), lambda plans: [0], runs=2).hits == 0  # not reproducible: nothing dropped


# ---- outcomes, keys, merge ----------------------------------------------------------------------------

def test_outcome_and_violation_keys() -> None:
    live = {"check": "liveness", "result": "violated", "summary": "job2 is stuck: got no quota (3.1s, conclusive)"}
    quota = {"check": "quota", "result": "violated", "summary": "transient: ClusterQueue cq flavor rf cpu: 2 of 1"}
    late = {"check": "liveness", "result": "violated", "summary": "job2 got quota only after 17.20s"}
    assert driver.violation_keys([live, quota, late]) == ["liveness:job2:late", "liveness:job2:stuck", "quota:cq"]
    assert driver.outcome({"verdict": "reproduced", "findings": [live]}) == ("violation", "liveness:job2:stuck")
    failed = {"check": "plan_happened", "result": "violated", "assumption": True, "summary": "s",
              "evidence": "admission-job1 ended by hold_timeout"}
    assert driver.outcome({"verdict": "error", "findings": [failed]})[0] == "discarded"
    assert driver.outcome({"verdict": "error", "findings": [], "reason": "WaitTimeout"})[0] == "error"
    assert driver.outcome(None)[0] == "error"
    assert driver.outcome({"verdict": "passed"}) == ("passed", "")


def test_merge_sums_shards_and_keeps_the_earliest_finding(tmp_path: Path) -> None:
    counts = {"tried": 5, "discarded": 1, "errors": 0, "passed": 3, "violations": 1, "distinct": 1, "noop_runs": 1,
              "false_positives": 0, "noop_discarded": 0, "pruned_blocked": 2}
    f = {"key": "quota:cq", "first_run": "s1-p0004", "first_index": 4, "first_minutes": 2.0, "plan": "x"}
    for i, minutes in ((1, 9.0), (2, 7.5)):
        d = tmp_path / f"s{i}"
        d.mkdir()
        (d / "explore.json").write_text(json.dumps({"cases": ["c"], "kueue": "v0.17.0", "shard": [i, 2],
                                                    "minutes": minutes, "counts": counts,
                                                    "findings": [{**f, "first_minutes": f["first_minutes"] * i}]}))
    r = tables.merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "all")
    assert r["counts"]["tried"] == 10 and r["counts"]["distinct"] == 1 and r["minutes"] == 9.0
    assert r["machine_minutes"] == 16.5 and r["findings"][0]["first_minutes"] == 2.0
    assert "| 10 | 2 | 0 | 4 | 2 | 1 | 2 | 0 | 9.0 |" in (tmp_path / "all" / "summary.md").read_text()
    with pytest.raises(Exception, match="no explore.json"):
        tables.merge([tmp_path])
    with pytest.raises(HarnessError, match="given twice"):
        tables.merge([tmp_path / "s1", tmp_path / "s1"])
    with pytest.raises(HarnessError, match="one of the explorations merged"):
        tables.merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "s2")
    for bad in ("{not json", "[]", '{"cases": 5}', b"\xff\xfe"):
        (tmp_path / "s2" / "explore.json").write_bytes(bad if isinstance(bad, bytes) else bad.encode())
        with pytest.raises(HarnessError, match="not an explore.json kueue-harness wrote"):
            tables.merge([tmp_path / "s1", tmp_path / "s2"])
    other = json.loads((tmp_path / "s1" / "explore.json").read_text())
    (tmp_path / "s2" / "explore.json").write_text(json.dumps({**other, "kueue": "v0.17.4"}))
    with pytest.raises(HarnessError, match="different Kueue builds"):
        tables.merge([tmp_path / "s1", tmp_path / "s2"])


def test_explore_refuses_an_out_folder_that_holds_files_and_takes_patches(tmp_path: Path, monkeypatch) -> None:
    import argparse

    from harness.build.kueue import KueueSpec

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "explore.json").write_text("{}")
    seen = {}
    real = KueueSpec.from_options

    def spy(*a, **kw):
        seen["args"] = a
        return real(*a, **kw)

    monkeypatch.setattr(KueueSpec, "from_options", staticmethod(spy))
    patch = tmp_path / "fix.patch"
    patch.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    args = argparse.Namespace(cases=["test_stuck_preemption_control"], shard=None, minutes=1.0, max_runs=1, batch=1,
                              max_depth=1, min_runs=1, noop_every=1, kueue_version="v0.17.0", kueue_ref=None,
                              kueue_source=None, kueue_repo=None, kueue_patch=[str(patch)], out=str(tmp_path / "old"),
                              reference=None, stop_after=None, reference_only=False)
    with pytest.raises(HarnessError, match="already holds files"):
        command.cli(args)
    assert seen["args"][4] == [str(patch)] and seen["args"][5] is False  # patches, then race


def test_cases_resolve_by_name_or_node_id() -> None:
    assert driver.resolve_case("test_stuck_preemption_control") == \
        "cases/kueue_11480/test_stuck_preemption.py::test_stuck_preemption_control"
    with pytest.raises(Exception, match="control cases: .*test_quota_oversubscription_control"):
        driver.resolve_case("test_nope")


def test_same_case_ignores_parameters_and_roots() -> None:
    assert same_case("cases/k/test_a.py::test_b", "/work/x/cases/k/test_a.py::test_b[p0001]")
    assert not same_case("cases/k/test_a.py::test_b", "cases/k/test_a.py::test_bc")


def test_explore_selection_adds_the_oracles_and_keeps_the_case_parameters() -> None:
    sel = explore_selection({"liveness": {"jobs": ["job2"]}, "no_hold_expired": {}})
    assert sel["liveness"] == {"jobs": ["job2"]}
    assert {"plan_happened", "quota", "log_flood"} <= set(sel)


# ---- the plan_happened assumption ----------------------------------------------------------------------

def _rule_added(ts: float, rule: dict) -> dict:
    return {"ts": ts, "source": "proxy", "event": "rule_added", "rule": rule}


def _judge(events: list[dict]) -> tuple[str, str]:
    h = [{"ts": 1.0, "source": "harness", "event": "case_started", "namespace": NS}, *events,
         {"ts": 50.0, "source": "harness", "event": "verdict"}]
    v = compose(Selection({"plan_happened": {}}), h, {}, require_invariant=False)
    return v.verdict, v.findings[0].evidence


HOLD = {"id": "x-admission-job1", "action": "hold", "stage": "request",
        "release": {"after": [{"rule": "x-eviction-job1", "state": "held", "status": 200}], "timeout": 6}}


def test_plan_happened_when_holds_end_by_their_triggers() -> None:
    ok = [_rule_added(2, HOLD), _rule_added(2, {"id": "x-pending-job1", "action": "observe"}),
          {"ts": 3, "source": "proxy", "event": "held", "rule": "x-admission-job1", "flow": 4},
          {"ts": 4, "source": "proxy", "event": "released", "rule": "x-admission-job1", "why": "triggers: eviction-job1 held"}]
    assert _judge(ok)[0] == "passed"
    timed_out = ok[:3] + [{"ts": 9, "source": "proxy", "event": "hold_timeout", "rule": "x-admission-job1"}]
    verdict, why = _judge(timed_out)
    assert verdict == "error" and "not by its triggers" in why
    verdict, why = _judge(ok[:2])
    assert verdict == "error" and "held nothing" in why


def test_plan_happened_when_a_then_fail_hold_is_failed_by_its_triggers() -> None:
    hold = {**HOLD, "id": "evict-v2", "release": {**HOLD["release"], "then": "fail"}}
    held = {"ts": 3, "source": "proxy", "event": "held", "rule": "evict-v2", "flow": 4}
    failed = {"ts": 4, "source": "proxy", "event": "failed", "rule": "evict-v2", "hold": "h1", "status": 500,
              "why": "triggers: evict-v1 answered"}
    assert _judge([_rule_added(2, hold), held, failed])[0] == "passed"
    released = {**failed, "event": "released"}  # a then: fail hold that was let through did not force the failure
    verdict, why = _judge([_rule_added(2, hold), held, released])
    assert verdict == "error" and "not by its triggers" in why


def test_plan_happened_for_fails_watch_drops_and_restarts() -> None:
    fail = _rule_added(2, {"id": "x-eviction-job1", "action": "fail", "stage": "request"})
    assert _judge([fail])[0] == "error"
    assert _judge([fail, {"ts": 3, "source": "proxy", "event": "failed", "rule": "x-eviction-job1"}])[0] == "passed"
    drop = _rule_added(2, {"id": "x-watch-job1", "action": "drop_watch_events"})
    assert _judge([drop, {"ts": 3, "source": "proxy", "event": "watch_event_dropped", "rule": "x-watch-job1"}])[0] == "passed"
    restart = _rule_added(2, {"id": "restart-kueue", "action": "restart_kueue",
                              "release": {"after": [{"rule": "x", "state": "answered"}]}})
    fired = {"ts": 3, "source": "proxy", "event": "signalled", "rule": "restart-kueue", "why": "triggers: x answered"}
    done = {"ts": 4, "source": "proxy", "event": "signal_done", "rule": "restart-kueue", "ok": True}
    assert _judge([restart, fired, done])[0] == "passed"
    assert _judge([restart, fired, {**done, "ok": False}])[0] == "error"


# ---- the search loop, with runs made up instead of run ------------------------------------------------

def test_search_order_noop_runs_extensions_and_minimising(tmp_path: Path) -> None:
    """Explorer.search with a stand-in for the pytest batches: the first batch starts with a no-op run, the
    first perturbation of the reference reproduces (and is minimised at once, in its own batches), a passed
    run that reached new states has its extensions queued before the remaining roots."""

    class Spec:
        wanted = "v0.17.0"

        def cli_args(self):
            return ["--kueue-version", "v0.17.0"]

    batches: list[list[str]] = []
    stuck = {"check": "liveness", "result": "violated", "summary": "job2 is stuck: got no quota (1.0s, conclusive)"}

    def fake_batch(items, refill=None):
        batches.append([rid for rid, _, _ in items])
        out = {}
        for rid, cand, case in items:
            res = {"events": reference(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                   "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
            if cand is not None and cand.moves[0].kind == "hold" and cand.moves[0].after[0].target == EVI1 \
                    and cand.moves[0].after[0].mode == "answered":
                res.update(verdict="reproduced", findings=[stuck])
            elif rid == "p0002":
                res["events"] = late_admission_run()
            out[rid] = res
        return out

    ex = driver.Explorer(["c.py::test_x_control"], Spec(), tmp_path, batch=4, noop_every=3, max_runs=9,
                         min_runs=2, say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    trace = Trace.from_events(reference(), NS, ["job1", "job2"])
    ex.coverage |= trace.facts()
    ex.seed({"c.py::test_x_control": trace})
    ex.search({"c.py::test_x_control": trace})
    assert batches[0] == ["n001", "p0001", "p0002", "p0003"]
    assert batches[1] == ["m01-01-r0", "m01-01-r1"]  # the violation of p0001, confirmed twice
    runs = {r.id: r for r in ex.runs}
    assert runs["p0001"].outcome == "violation" and runs["p0001"].keys == ["liveness:job2:stuck"]
    assert runs["p0002"].novelty > 0
    # Every 4th perturbation comes from the other families (stage 2: a strict or Job write held here);
    # p0002 (passed, new states) is extended: its extensions come before the remaining roots.
    assert batches[2][:3] == ["n002", "p0004", "p0005"]
    assert runs["p0004"].depth == 1 and ex.cands["p0004"].stage == 2
    assert runs["p0005"].parent == "p0002" and runs["p0006"].parent == "p0002"
    assert ex.counts()["tried"] == 9 and ex.counts()["noop_runs"] == 3 and ex.counts()["false_positives"] == 0
    f = ex.findings["liveness:job2:stuck"]
    assert f["first_index"] == 1 and f["reproduced"] == "2/2" and Path(f["file"]).is_file()
    assert "--plan" in Path(f["file"]).read_text()
    assert (tmp_path / "summary.md").exists() is False  # written by run()/write(), not by search()
    assert "| 9 |" in driver.render_summary(ex.write())


def test_stop_on_ends_the_search_once_a_named_finding_was_seen(tmp_path: Path) -> None:
    """`explore --stop-on liveness:job2`: the batch that found liveness:job2:stuck is the last perturbation
    batch (its minimising still runs); a key the prefix does not name ("quota") does not stop it."""
    from harness.explore.findings import key_matches

    assert key_matches("liveness:job2:stuck", ["liveness:job2"]) and key_matches("quota:cq", ["quota"])
    assert not key_matches("quotas:cq", ["quota"]) and not key_matches("liveness:job1:stuck", ["liveness:job2"])

    class Spec:
        wanted = "v0.17.0"

        def cli_args(self):
            return ["--kueue-version", "v0.17.0"]

    stuck = {"check": "liveness", "result": "violated", "summary": "job2 is stuck: got no quota (1.0s, conclusive)"}

    def fake_batch(items, refill=None):
        out = {}
        for rid, cand, case in items:
            res = {"events": reference(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                   "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
            if cand is not None and cand.moves[0].kind == "hold" and cand.moves[0].after[0].target == EVI1 \
                    and cand.moves[0].after[0].mode == "answered":
                res.update(verdict="reproduced", findings=[stuck])
            out[rid] = res
        return out

    said: list[str] = []
    for stop_on, tried in ((("liveness:job2",), 3), (("quota",), 9)):
        said.clear()
        ex = driver.Explorer(["c.py::test_x_control"], Spec(), tmp_path / stop_on[0], batch=4, noop_every=3,
                             max_runs=9, min_runs=2, stop_on=stop_on, say=said.append)
        ex.run_batch = fake_batch  # type: ignore[method-assign]
        trace = Trace.from_events(reference(), NS, ["job1", "job2"])
        ex.coverage |= trace.facts()
        ex.seed({"c.py::test_x_control": trace})
        ex.search({"c.py::test_x_control": trace})
        assert ex.counts()["tried"] == tried, stop_on
        assert any("stopping (--stop-on" in s for s in said) == (stop_on == ("liveness:job2",))


def test_the_same_plan_on_two_cases_is_two_candidates() -> None:
    t = Trace.from_events(reference(), NS, ["job1", "job2"])
    seen: set = set()
    a, b = generate.roots(t, "a", seen), generate.roots(t, "b", seen)
    assert len(a) == len(b) and a[0].moves == b[0].moves
    assert generate.roots(t, "a", seen) == []


def test_a_hold_that_blocked_its_trigger_is_not_tried_until_later_events(tmp_path: Path) -> None:
    """Holding job1's eviction until job2's pending write timed out (the held eviction blocks Kueue's
    scheduling cycle): holding it until any event that came later in the reference is not run."""

    class Spec:
        wanted = "v0.17.0"

        def cli_args(self):
            return []

    ran: list[str] = []

    def fake_batch(items, refill=None):
        out = {}
        for rid, cand, case in items:
            res = {"events": reference(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                   "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
            if cand is not None:
                ran.append(cand.words())
                m = cand.moves[0]
                if m.kind == "hold" and m.target == EVI1:
                    res.update(verdict="error", findings=[{"check": "plan_happened", "result": "violated",
                                                            "assumption": True, "summary": "s",
                                                            "evidence": "x-eviction-job1 ended by hold_timeout (-)"}])
            out[rid] = res
        return out

    trace = Trace.from_events(reference(), NS, ["job1", "job2"])
    ex = driver.Explorer(["c"], Spec(), tmp_path, batch=1, noop_every=1000, max_runs=400, say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    ex.coverage |= trace.facts()
    ex.queue.clear()
    roots = [c for c in generate.roots(trace, "c") if c.stage == 0]
    for c in roots:
        ex.push(c)
    ex.search({"c": trace})
    held = [c for c in roots if c.moves[0].kind == "hold" and c.moves[0].target == EVI1]
    ran_held = [c for c in held if c.words() in ran]
    # Each one that ran waited for an event earlier than every one that timed out before it.
    assert all(b.meta["until"] < a.meta["until"] for a, b in zip(ran_held, ran_held[1:]))
    # (holds of the eviction until its own consequences, job1's suspend and quota release, are not generated)
    assert len(ran_held) == 2 and ex.pruned == len(held) - 2 >= 2
    assert any(w.startswith("hold the answer to the eviction of job1") for w in ran)  # another kind: still run


def test_strengthen_adds_the_move_that_makes_a_flaky_violation_reproduce_every_time() -> None:
    a = Move("hold", ADM1, (After(EVI1, "answered", 200),))
    b = Move("hold_response", EVI1, (After(ADM1, "delivered", None),))
    c = Move("hold_response", EVI1, (After(ADM1, "answered", 200),))
    seen: list[list] = []

    def oracle(plans):
        seen.append(plans)
        return [5 if b in p else 3 for p in plans]

    best, hits, steps = strengthen((a,), 2, [(a, c), (a, b), (a, Move("fail", ADM2, status=500))], oracle, 5)
    assert best == (a, b) and hits == 5 and len(seen) == 1  # found in the first chunk of two: stops there
    best, hits, _ = strengthen((a,), 2, [(a, c)], lambda plans: [1], 5)
    assert best == (a,) and hits == 2  # nothing better: the plan stays as it was


def test_a_flaky_violation_is_strengthened_then_minimised(tmp_path: Path) -> None:
    """The late admission alone leaves job2 stuck only sometimes (Kueue may see the eviction before the
    late admission overwrites it); with the eviction's answer held until Kueue saw the admission it is
    stuck every time (kubernetes-sigs/kueue#11480 scenario 1, docs/kueue-notes.md §11)."""

    class Spec:
        wanted = "v0.17.0"

        def cli_args(self):
            return []

    stuck = {"check": "liveness", "result": "violated", "summary": "job2 is stuck: got no quota (1.0s, conclusive)"}
    late = Move("hold", ADM1, (After(EVI1, "answered", 200),))
    seed = Move("hold_response", EVI1, (After(ADM1, "delivered", None),))
    count = {"late": 0}

    def fake_batch(items, refill=None):
        out = {}
        for rid, cand, case in items:
            res = {"events": late_admission_run(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                   "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
            moves = cand.moves if cand is not None else ()
            if late in moves and (seed in moves or (len(moves) == 1 and count["late"] % 2 == 0)):
                res.update(verdict="reproduced", findings=[stuck])
            if moves == (late,):
                count["late"] += 1
            out[rid] = res
        (tmp_path / "explore.json").write_text(json.dumps(res))
        return out

    ex = driver.Explorer(["c"], Spec(), tmp_path, batch=2, noop_every=1000, max_runs=1, min_runs=4,
                         say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    ex.noops = 1  # no no-op run in this test
    trace = Trace.from_events(reference(), NS, ["job1", "job2"])
    ex.push(Candidate((late,), "c", "stale", meta={"until": 1.0}))
    ex.search({"c": trace})
    f = ex.findings["liveness:job2:stuck"]
    assert f["confirmed"] == "2/4"
    assert f["strengthened"][-1]["hits"] == 4
    assert [move_from_dict(m) for m in f["minimal"]] == [late, seed] and f["reproduced"] == "4/4"
    text = Path(f["file"]).read_text()
    assert "reproduced it 2/4 times; with one more move" in text
    assert [r.id for r in parse_plan(text, "f").rules] == ["x-admission-job1", "x-eviction-job1"]


def test_minimize_counts_every_run_of_a_plan() -> None:
    """The late admission alone reproduced 4/5 when confirmed; strengthened, 5/5; dropping the added move
    gives the late admission alone again, which a lucky sample shows 5/5: 9/10 in all, less reliable
    than 5/5, so the strengthening move stays."""
    a = Move("hold", ADM1, (After(EVI1, "answered", 200),))
    b = Move("hold_response", EVI1, (After(ADM1, "delivered", None),))
    def lucky(plans):
        return [5 if a in p else 0 for p in plans]

    m = minimize((a, b), lucky, runs=5, hits=5, known={plan_key((a,)): (4, 5)})
    assert m.moves == (a, b)
    m = minimize((a, b), lucky, runs=5, hits=5)
    assert m.moves == (a,)  # without the earlier failure the smaller plan is as good


def test_watch_caught_up_when_kueue_saw_the_object_as_it_is() -> None:
    """A dropped watch event is an unobserved *intermediate* state only if Kueue later sees the object as
    it finally is; if nothing wrote it again, Kueue's view stays stale, which no real watch does."""
    wl = {"metadata": {"namespace": NS, "name": WL1, "resourceVersion": "12"}}
    drop = {"ts": 3, "source": "proxy", "event": "watch_event_dropped", "namespace": NS, "name": WL1,
            "resource_version": "12", "rule": "x-watch-job1"}
    later = {"ts": 4, "source": "proxy", "event": "watch_event", "namespace": NS, "name": WL1, "resource_version": "12"}
    h = [{"ts": 1.0, "source": "harness", "event": "case_started", "namespace": NS}, drop,
         {"ts": 50.0, "source": "harness", "event": "verdict"}]
    sel = Selection({"watch_caught_up": {}})
    v = compose(sel, h, {"workloads": [wl]}, require_invariant=False)
    assert v.verdict == "error" and "never superseded" in v.findings[0].evidence
    assert compose(sel, sorted(h + [later], key=lambda e: e["ts"]), {"workloads": [wl]},
                   require_invariant=False).verdict == "passed"
    assert compose(sel, h, {"workloads": []}, require_invariant=False).verdict == "passed"  # deleted: Kueue learns that anyway
    assert compose(sel, [h[0], h[2]], {"workloads": [wl]}).findings[0].result == "not applicable"


def test_a_perturbed_run_is_quiet_when_nothing_is_held_and_nothing_came_for_a_while() -> None:
    import time
    from types import SimpleNamespace

    from harness.explore import plugin

    now = time.time()
    held: list[dict] = []
    events = [{"event": "request", "ts": now - 10}]
    proxy = SimpleNamespace(state=lambda: {"holds": held}, case_events=lambda: events)
    p = plugin.PerturbedRun.__new__(plugin.PerturbedRun)
    p.ctx, p.rule_ids, p.started = SimpleNamespace(proxy=proxy, nemesis=None), {"x-admission-v1"}, now - 20
    p.delay_ids = set()
    assert "nothing reached the proxy for 10" in (p.quiet() or "")
    held.append({"rule": "x-admission-v1"})
    assert p.quiet() is None  # a flow of the plan is held: its release is still to come
    held.clear()
    events.append({"event": "response", "ts": now - 1})
    assert p.quiet() is None  # something came a second ago
    p.started = now  # a run that just began is not quiet, whatever came before it
    events[:] = [{"event": "request", "ts": now - 60}]
    assert p.quiet() is None


@pytest.mark.parametrize(("argv", "words"), [
    (["--minutes", "nan"], "--minutes must be a finite number above 0, got nan"),
    (["--minutes", "inf"], "--minutes must be a finite number above 0"),
    (["--stop-after", "0"], "--stop-after must be a finite number above 0"),
    (["--stop-on", ""], "--stop-on '': give a finding key"),
    (["--stop-on", "nope:zz"], "CHECKER one of"),
    (["--stop-on", "liveness:"], "--stop-on 'liveness:'"),
    (["--reference", "/nonexistent"], "not the folder of an earlier"),
])
def test_explore_refuses_bad_options_before_anything_is_built(argv, words, capsys) -> None:
    from harness.cli.commands import main

    assert main(["explore", *argv, "test_stuck_preemption_control"]) == 2
    assert words in capsys.readouterr().err


def test_explore_cases_must_be_existing_control_cases() -> None:
    f = "cases/kueue_11480/test_stuck_preemption.py"
    with pytest.raises(HarnessError, match="no case 'test_nonexistent' in .*its control cases: test_stuck_preemption_control"):
        driver.resolve_case(f"{f}::test_nonexistent")
    with pytest.raises(HarnessError, match=r"no case '\(empty\)'"):
        driver.resolve_case(f"{f}::")
    with pytest.raises(HarnessError, match="not a control case.*test_stuck_preemption_control"):
        driver.resolve_case("test_stuck_preemption")
    assert driver.resolve_case(f"{f}::test_stuck_preemption_control[p1]") == f"{f}::test_stuck_preemption_control[p1]"


def test_refill_runs_are_judged_with_their_batch_and_ids_stay_in_order(tmp_path: Path) -> None:
    """Explorer.search with --workers: the runs a refill hands out at a batch's tail (stream.Stream.run) are
    recorded with that batch, their ids follow its own, and the next batch goes on from there."""

    class Spec:
        wanted = "v0.17.0"

        def cli_args(self):
            return []

    batches: list[list[str]] = []

    def fake_batch(items, refill=None):
        items = list(items)
        if refill is not None and len(batches) == 0:
            items += refill(2)  # workers idle at the first batch's tail
        batches.append([rid for rid, _, _ in items])
        return {rid: {"events": reference(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                      "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path),
                      "bundle": str(tmp_path / f"{rid}.tar.gz")}  # not written: only violating runs get one
                for rid, _, _ in items}

    ex = driver.Explorer(["c.py::test_x_control"], Spec(), tmp_path, batch=3, noop_every=1000, max_runs=7,
                         min_runs=2, workers=2, say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    trace = Trace.from_events(reference(), NS, ["job1", "job2"])
    ex.coverage |= trace.facts()
    ex.seed({"c.py::test_x_control": trace})
    ex.search({"c.py::test_x_control": trace})
    assert batches[0] == ["n001", "p0001", "p0002", "p0003", "p0004"]  # 2 refilled (one per worker)
    assert batches[1][0] == "p0005"
    perturbations = [r for r in ex.runs if r.role == "perturbation"]
    assert [r.id for r in perturbations] == [f"p{i:04d}" for i in range(1, 8)]
    assert [r.index for r in perturbations] == list(range(1, 8)) and ex.counts()["tried"] == 7
    assert all(r.bundle == "" for r in ex.runs)  # explore.json names no bundle that was never written


@pytest.mark.parametrize("given, stream, wanted", [(None, True, command.DEFAULT_WORKERS), (None, False, 1), (3, True, 3)])
def test_explore_workers_default_and_bounds(tmp_path: Path, given, stream, wanted) -> None:
    """`--workers`: DEFAULT_WORKERS on the stream, 1 with --no-stream when not given; above MAX_WORKERS, or
    more than 1 with --no-stream, is refused before anything is built."""
    import argparse

    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "explore.json").write_text("{}")

    def args(workers, stream):
        return argparse.Namespace(cases=["test_stuck_preemption_control"], shard=None, minutes=1.0, max_runs=1,
                                  batch=1, max_depth=1, min_runs=1, noop_every=1, kueue_version="v0.17.0",
                                  kueue_ref=None, kueue_source=None, kueue_repo=None, kueue_patch=None,
                                  out=str(tmp_path / "old"), reference=None, stop_after=None, reference_only=False,
                                  stream=stream, workers=workers)

    a = args(given, stream)
    with pytest.raises(HarnessError, match="already holds files"):  # past every check of the options
        command.cli(a)
    assert a.workers == wanted
    with pytest.raises(HarnessError, match=f"at most {command.MAX_WORKERS}"):
        command.cli(args(command.MAX_WORKERS + 1, True))
    with pytest.raises(HarnessError, match="cannot go with --no-stream"):
        command.cli(args(2, False))


def test_a_violation_no_confirming_run_reproduces_is_a_lead_not_a_finding(tmp_path: Path) -> None:
    """A finding saved with 0 of 5 confirmations ("reproduced not re-run (no time left)") was a guess: such a
    violation is a lead, in its own list and table, its plan kept under leads/ to try again by hand."""

    class Spec:
        wanted = "v0.17.0"

        def cli_args(self):
            return []

    stuck = {"check": "liveness", "result": "violated", "summary": "job2 got no quota in 16.00s"}
    late = Move("hold", ADM1, (After(EVI1, "answered", 200),))
    calls = {"n": 0}

    def fake_batch(items, refill=None):
        out = {}
        for rid, cand, case in items:
            calls["n"] += 1
            res = {"events": late_admission_run(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                   "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
            if calls["n"] == 1:  # the first run only: a slow machine, say
                res.update(verdict="reproduced", findings=[stuck])
            out[rid] = res
        (tmp_path / "explore.json").write_text(json.dumps(res))
        return out

    ex = driver.Explorer(["c"], Spec(), tmp_path, batch=1, noop_every=1000, max_runs=1, min_runs=3, say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    ex.noops = 1
    ex.push(Candidate((late,), "c", "stale", meta={"until": 1.0}))
    ex.search({"c": Trace.from_events(reference(), NS, ["job1", "job2"])})
    assert ex.findings == {} and [f["key"] for f in ex.leads] == ["liveness:job2:never"]
    assert ex.leads[0]["lead"] == "0 of 3 confirming runs reproduced it" and ex.counts()["leads"] == 1
    assert "A LEAD, NOT A FINDING" in Path(ex.leads[0]["file"]).read_text()
    from harness.explore.tables import render_summary

    result = ex.write()
    assert result["findings"] == [] and "Leads: 1 violation(s)" in render_summary(result)
    assert "No violation found." in render_summary(result)
