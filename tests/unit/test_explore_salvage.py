"""explore beyond kueue#11480 (issue 25, issue 20 item 5): no hold until its own consequence, a write that
keeps failing, the oracles a reference run makes meaningful, discarded runs that violated an invariant
replayed as the plan that happened, the best sibling when minimising, findings clustered by cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.explore import driver, generate, model, oracles, salvage
from harness.explore.findings import cluster_key, clusters
from harness.explore.minimize import minimize
from harness.explore.model import After, Move, Target, move_to_dict, plan_document
from harness.explore.plugin import explore_selection
from harness.explore.trace import Trace
from harness.plan.load import parse_plan
from tests.unit.test_explore import ADM1, ADM2, EVI1, NS, QR1, reference

UNSUSP1 = Target("job_unsuspend", "job1", "job1", "patch")
SUSP1 = Target("job_suspend", "job1", "job1", "patch")


def trace() -> Trace:
    return Trace.from_events(reference(), NS, ["job1", "job2"])


# ---- causality -----------------------------------------------------------------------------------

def test_consequences_follow_kueues_job_reconciler_transitively() -> None:
    assert generate.consequences("admission") == {"job_unsuspend", "job_suspend"}  # not its quota release
    assert generate.consequences("eviction") == {"job_suspend", "quota_release"}
    assert generate.consequences("pending") == set()


def test_no_request_is_held_until_its_own_consequence() -> None:
    moves = [m for _, _, m in generate.root_moves(trace())]
    for m in moves:
        if m.kind != "hold":
            continue
        for a in m.after:
            assert not generate.is_consequence(m.target, a), m.words()
    words = {m.words() for m in moves}
    assert "hold the admission of job1 until the Job unsuspend of job1 was answered 200" not in words
    assert "hold the eviction of job1 until the quota release of job1 was answered 200" not in words
    # A Job is suspended again only after it ran, so after its admission; its quota release is not (#11480
    # scenario 2's late admission is held exactly until that).
    assert "hold the admission of job1 until the Job suspend of job1 was answered 200" not in words
    assert "hold the admission of job1 until the quota release of job1 was answered 200" in words
    # The answer may still be held until them (kube-apiserver applied the write; Kueue sees it by watch) ...
    assert "hold the answer to the admission of job1 until the Job unsuspend of job1 was answered 200" in words
    # ... and a request until another object's write.
    assert "hold the admission of job1 until the admission of job2 was answered 200" in words


def test_a_write_that_keeps_failing_is_a_family_and_renders_times_null() -> None:
    fams = [(f, m) for _, f, m in generate.root_moves(trace()) if f == "failing"]
    assert fams and all(m.kind == "fail" and m.times is None for _, m in fams)
    assert all(m.target.cls != "create" for _, m in fams)
    kinds = [m.target.cls for _, m in fams]
    assert kinds[0] == "eviction" and kinds[-1] == "admission"  # evictions first, admissions last
    assert kinds == sorted(kinds, key=lambda c: {"eviction": 0, "admission": 2}.get(c, 1))
    m = next(m for _, m in fams if m.target == EVI1)
    assert m.words() == "fail the eviction of job1 with 500 every time"
    plan = parse_plan(plan_document((m,), "x"), "x")
    assert plan.rules[0].times is None
    assert plan.rules[0].delay == model.FAIL_PACE  # each failure paced (docs/fault-plans.md "a pace")


# ---- oracles -------------------------------------------------------------------------------------

def test_oracles_are_chosen_from_the_reference_run() -> None:
    reg = ("liveness", "quota", "bounded_evictions", "deletion_completes", "pending_fits_admitted")
    got = oracles.choose(trace(), {"deleting": False}, reg)
    assert set(got) == {"bounded_evictions", "pending_fits_admitted"}  # an eviction and a pending write
    assert "deletion_completes" in oracles.choose(trace(), {"deleting": True}, reg)
    only_admission = Trace.from_events([e for e in reference() if (e.get("write") or {}) in ("admission",)
                                        or e.get("event") != "request"], NS, ["job1"])
    assert oracles.choose(only_admission, {}, reg) == {}
    assert oracles.choose(trace(), {}, ("liveness",)) == {}  # only registered checkers


def test_a_write_failed_every_time_leaves_progress_unjudged() -> None:
    # An eviction failed every time: liveness and deletion are blocked by the fault, a Workload that fits
    # in the API state is not (kubernetes-sigs/kueue#14863's shape).
    assert oracles.not_judged([Move("fail", EVI1, status=500, times=None)]) == ["liveness", "deletion_completes"]
    assert oracles.not_judged([Move("fail", ADM1, status=500, times=None)]) == list(oracles.PROGRESS)
    assert oracles.not_judged([Move("fail", EVI1, status=500, times=3)]) == []
    sel = explore_selection({"liveness": {"jobs": ["job2"]}}, {"bounded_evictions": {}}, oracles.PROGRESS)
    assert "liveness" not in sel and "bounded_evictions" in sel and "quota" in sel
    sel = explore_selection({"bounded_evictions": {"max": 5}}, {"bounded_evictions": {}})
    assert sel["bounded_evictions"] == {"max": 5}  # the case's parameters win


# ---- salvage -------------------------------------------------------------------------------------

def _ev(ts: float, event: str, rule: str) -> dict:
    return {"ts": ts, "source": "proxy", "event": event, "rule": rule}


def test_a_hold_that_timed_out_is_replayed_for_the_time_it_was_held() -> None:
    hold = Move("hold", ADM1, (After(QR1, "answered", 200),))
    late = Move("hold_response", ADM2, (After(EVI1, "answered", 200),))
    events = [_ev(10.0, "held", "x-admission-job1"), _ev(16.02, "hold_timeout", "x-admission-job1"),
              _ev(11.0, "held", "x-admission-job2"), _ev(11.5, "released", "x-admission-job2")]
    plan, said = salvage.as_happened((hold, late), events)
    assert plan[0] == Move("delay", ADM1, delay=6.02) and plan[1] == late
    assert said == [("hold the admission of job1 until the quota release of job1 was answered 200 -> "
                    "hold the admission of job1 for 6.02s (it ended by its timeout)")]
    rules = parse_plan(plan_document(plan, "x"), "x").rules
    assert rules[0].action == "delay" and rules[0].delay == 6.02


def test_a_rule_that_never_acted_is_dropped_and_an_unchanged_plan_is_none() -> None:
    hold = Move("hold_response", ADM1, (After(EVI1, "answered", 200),))
    fail = Move("fail", QR1, status=409)
    events = [_ev(1.0, "held", "x-admission-job1"), _ev(2.0, "hold_timeout", "x-admission-job1")]
    plan, said = salvage.as_happened((hold, fail), events)
    assert plan == (Move("delay_response", ADM1, delay=1.0),) and "never acted" in said[1]
    ok = [_ev(1.0, "held", "x-admission-job1"), _ev(2.0, "released", "x-admission-job1")]
    assert salvage.as_happened((hold,), ok) is None
    assert salvage.as_happened((fail,), []) is None  # nothing acted: no plan left


def test_only_runs_whose_plan_assumption_failed_are_salvageable() -> None:
    plan_failed = {"check": "plan_happened", "result": "violated", "assumption": True}
    watch_failed = {"check": "watch_caught_up", "result": "violated", "assumption": True}
    quota = {"check": "quota", "result": "violated", "assumption": False, "summary": "ClusterQueue cq: 2 used of 1"}
    assert salvage.salvageable([plan_failed, quota])
    assert not salvage.salvageable([plan_failed, watch_failed, quota])
    assert not salvage.salvageable([quota])
    assert salvage.violated_keys([plan_failed, quota]) == ["quota:cq"]


class Spec:
    wanted = "v0.17.0"

    def cli_args(self):
        return []


@pytest.mark.parametrize("reproducing", ["h0001", "h0001c"])
def test_a_discarded_run_that_violated_is_replayed_as_it_happened_and_kept(tmp_path: Path, reproducing: str) -> None:
    """Kept when one of salvage.REPLAYS replays reproduces (the first, or only the last)."""
    quota = {"check": "quota", "result": "violated", "assumption": False, "summary": "ClusterQueue cq: 2 used of 1",
             "evidence": ""}
    timed_out = {"check": "plan_happened", "result": "violated", "assumption": True, "summary": "s",
                 "evidence": "admission-job1 ended by hold_timeout (-)"}
    ran: list[tuple[str, str]] = []

    def fake_batch(items, refill=None):
        out = {}
        for rid, cand, case in items:
            res = {"events": reference(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [],
                   "verdict": "passed", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
            if cand is not None:
                ran.append((rid, cand.words()))
                kinds = {m.kind for m in cand.moves}
                if rid.startswith("p") and cand.moves[0].kind == "hold" and cand.moves[0].target == ADM1:
                    res.update(verdict="error", findings=[timed_out, quota],
                               events=reference() + [_ev(200.0, "held", "x-admission-job1"),
                                                     _ev(206.0, "hold_timeout", "x-admission-job1")])
                elif "delay" in kinds and (not rid.startswith("h") or rid == reproducing):
                    res.update(verdict="reproduced", findings=[quota])
            out[rid] = res
        return out

    t = trace()
    ex = driver.Explorer(["c"], Spec(), tmp_path, batch=1, noop_every=1000, max_runs=3, min_runs=2,
                         say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    ex.queue.clear()
    first = next(c for c in generate.roots(t, "c") if c.moves[0].kind == "hold" and c.moves[0].target == ADM1)
    ex.push(first)
    ex.search({"c": t})
    result = ex.write()
    c = result["counts"]
    assert c["discarded"] == 1 and c["discarded_violating"] == 1 and c["salvaged"] == 1
    f = result["findings"][0]
    assert f["key"] == "quota:cq" and "replayed as the plan that happened" in f["note"]
    assert f["first_index"] == 1  # the discarded run's perturbation, not the replay's (replays are not counted)
    assert f["minimal_words"] == "hold the admission of job1 for 6s"
    assert any(rid.startswith("h") for rid, _ in ran)
    rec = next(r for r in result["runs"] if r["id"] == first.id)
    replay_no = salvage.REPLAYS if reproducing.endswith("c") else 1
    assert rec["violated"] == ["quota:cq"] and rec["salvage"] == f"kept as quota:cq (replay {replay_no} of {salvage.REPLAYS})"
    assert sorted(rid for rid, _ in ran if rid.startswith("h")) == ["h0001", "h0001b", "h0001c"]
    assert "1 of them violated an invariant" in (tmp_path / "summary.md").read_text()


# ---- minimising and clustering -------------------------------------------------------------------

def test_minimising_keeps_the_most_reliable_sibling() -> None:
    a, b, c = (Move("fail", t, status=409) for t in (ADM1, EVI1, QR1))
    rates = {(b, c): 2, (a, c): 3, (a, b): 3}

    def evaluate(plans):
        return [rates.get(p, 0) for p in plans]

    m = minimize((a, b, c), evaluate, runs=5, hits=2)
    # (b, c) reproduced as often as its parent (2/5), (a, c) and (a, b) more (3/5): the first of the best
    # is kept, not the first that was as good as the parent.
    assert m.moves == (a, c)
    assert m.steps[1:4] == [((b, c), 2), ((a, c), 3), ((a, b), 3)]


def test_findings_cluster_by_invariant_and_plan_shape() -> None:
    h1 = move_to_dict(Move("hold", ADM1, (After(EVI1, "answered", 200),)))
    h2 = move_to_dict(Move("hold", ADM2, (After(QR1, "answered", 200),)))
    assert cluster_key("liveness:job1:stuck", [h1]) == "liveness:stuck | hold admission (subject)"
    fs = [{"key": "liveness:job1:stuck", "minimal": [h1], "first_minutes": 1.0},
          {"key": "liveness:job2:stuck", "minimal": [h2], "first_minutes": 2.0},
          {"key": "quota:cq", "minimal": [h1], "first_minutes": 3.0}]
    got = clusters(fs)
    assert [c["keys"] for c in got] == [["liveness:job1:stuck", "liveness:job2:stuck"], ["quota:cq"]]


def test_an_orphan_deletion_leaves_deletion_completes_unjudged() -> None:
    """A delete step made to orphan its dependents deletes only its Job (not a kind deletion_completes
    watches): the oracle has no subject then (a real run said `error: nothing was deleted`)."""
    orphan = model.delete_as_move("delete-j1", propagation="Orphan")
    kept = model.delete_as_move("delete-j1", keep_terminating=5)
    assert oracles.not_judged([orphan]) == ["deletion_completes"]
    assert oracles.not_judged([kept]) == []
    assert oracles.not_judged([model.delete_as_move("delete-j1", propagation="Foreground")]) == []


def test_a_delay_under_way_paces_the_case_as_the_hold_it_replays() -> None:
    """PerturbedRun._holding: salvage replays a timed-out hold as a `delay`; while that delay is under way the
    case's steps must end as they did under the hold ("plan holds a request"), else the replay orders the
    control's next step after the delayed write (a 2026-12-06 replay of a held admission: job2 was created
    6 s later than in the run it replayed, and the oversubscription did not happen)."""
    import time
    from types import SimpleNamespace

    from harness.explore.plugin import PerturbedRun

    events: list[dict] = []
    proxy = SimpleNamespace(state=lambda: {"holds": []}, case_events=lambda: events)
    run = SimpleNamespace(ctx=SimpleNamespace(proxy=proxy, nemesis=None), rule_ids={"x-admission-job1"},
                          delay_ids={"x-admission-job1"})
    assert not PerturbedRun._holding(run)  # type: ignore[arg-type]
    events.append({"event": "delayed", "rule": "x-admission-job1", "ts": time.time(), "seconds": 60.0})
    assert PerturbedRun._holding(run)  # type: ignore[arg-type]
    events[-1]["ts"] = time.time() - 61.0  # its delay is over
    assert not PerturbedRun._holding(run)  # type: ignore[arg-type]
    events.append({"event": "delayed", "rule": "someone-else", "ts": time.time(), "seconds": 60.0})
    assert not PerturbedRun._holding(run)  # type: ignore[arg-type]  # not this run's plan
    proxy.state = lambda: {"holds": [{"rule": "x-admission-job1"}]}
    assert PerturbedRun._holding(run)  # type: ignore[arg-type]
