"""harness/checkers/progress.py on synthetic histories: what counts as a progress step, external waits, Kueue's
scheduling cycles, the run's pace — and the liveness verdicts a slow machine gave as `reproduced` before
(issue "Judge progress, not the clock"): a slow chain of steps is slow, not stuck."""

from __future__ import annotations

from harness.checkers import progress
from harness.checkers.bounds import NORMAL_PACE, STALL_CYCLES
from harness.checkers.liveness import Liveness
from harness.history.names import Names
from tests.unit.test_report import NS, WL1, WL2, base, ev, kobj, log


def req(dt, flow, write, name, kind="Workload", **w):
    return ev(dt, "proxy", "request", flow=flow, method="PATCH", path="/x",
              write={"kind": kind, "namespace": NS, "name": name, "write": write, **w})


def resp(dt, flow, write, name, rv, status=200):
    return ev(dt, "proxy", "response", flow=flow, status=status, resource_version=rv, label="x", write=write,
              namespace=NS, name=name)


def watch(dt, name, rv, typ="MODIFIED", **conds):
    return ev(dt, "proxy", "watch_event", flow=99, type=typ, namespace=NS, name=name, resource_version=rv,
              conditions=conds)


def attempt(dt, cycle, name=WL2):
    return log(dt, "Attempting to schedule workload", workload=kobj(name), schedulingCycle=cycle)


def sort(h):
    return sorted(h, key=lambda e: e["ts"])


# ---- steps ------------------------------------------------------------------------------------------------

def test_a_write_is_a_step_only_when_it_changed_the_object() -> None:
    h = [req(1.0, 1, "eviction", WL1), resp(1.01, 1, "eviction", WL1, "10"),
         req(2.0, 2, "eviction", WL1), resp(2.01, 2, "eviction", WL1, "10"),  # a no-op: same resourceVersion
         req(3.0, 3, "pending", WL2), resp(3.01, 3, "pending", WL2, "11"),  # a pending status: not progress
         req(4.0, 4, "eviction", WL1), resp(4.01, 4, "eviction", WL1, "12", status=500)]  # refused
    assert [s.ts for s in progress.steps(h)] == [h[1]["ts"]]


def test_a_job_suspended_and_a_watch_delivering_a_change_are_steps() -> None:
    h = [req(1.0, 1, "patch", "job1", kind="Job", suspend=True), resp(1.01, 1, "patch", "job1", "7"),
         watch(2.0, WL1, "8", Evicted="True"), watch(2.5, WL1, "9", Evicted="True"),  # same conditions: no step
         watch(3.0, WL1, "10", Evicted="True", QuotaReserved="False")]
    assert [s.what for s in progress.steps(h)] == [
        "Job job1 suspended", f"Kueue's watch delivered {WL1} changed (MODIFIED)",
        f"Kueue's watch delivered {WL1} changed (MODIFIED)"]


def test_a_pod_stopping_is_an_external_wait_not_a_stall() -> None:
    h = [ev(0, "harness", "case_started", case="t", namespace=NS),
         ev(1.0, "monitor", "object_deleting", kind="Pod", key=f"{NS}/p1", finalizers=[]),
         ev(19.0, "monitor", "object_deleted", kind="Pod", key=f"{NS}/p1", finalizers=[])]
    st = progress.longest_stall(h, h[0]["ts"], h[0]["ts"] + 20)
    assert round(st.seconds, 3) == 1.0  # 1 s before the deletion began and 1 s after the Pod was gone
    assert progress.outside(0, 10, [(2, 4, ""), (3, 6, ""), (8, 12, "")]) == 4


def test_cycles_are_distinct_scheduling_cycle_numbers() -> None:
    h = [attempt(1.0, 5), log(1.0, "Preemption already issued, waiting for observation", schedulingCycle=5),
         attempt(2.0, 6), attempt(3.0, 7), log(3.5, "Preempted")]
    assert progress.cycles(h, h[0]["ts"] - 1, h[-1]["ts"]) == 3
    assert progress.cycles(h, h[1]["ts"], h[-1]["ts"]) == 2  # (start, end]


# ---- pace -------------------------------------------------------------------------------------------------

def test_pace_medians_and_factor() -> None:
    h = [watch(0.0, WL1, "1", typ="ADDED"), attempt(0.05, 1, WL1),
         req(1.0, 1, "admission", WL1), resp(1.02, 1, "admission", WL1, "5"), watch(1.03, WL1, "5", QuotaReserved="True"),
         req(2.0, 2, "eviction", WL1), resp(2.9, 2, "eviction", WL1, "6")]
    p = progress.pace(h)
    assert p.samples == {"api": 2, "watch": 1, "schedule": 1}
    assert round(p.figures["api"], 2) == round((0.02 + 0.9) / 2, 2)
    assert round(p.factor, 1) == round(p.figures["api"] / NORMAL_PACE["api"], 1) and p.slow
    # A held flow is not timed: the plan kept it, not the machine.
    held = h + [ev(2.1, "proxy", "held", flow=2, hold="h1", rule="r", stage="request", label="x")]
    assert progress.pace(sort(held)).samples["api"] == 1 and not progress.pace(sort(held)).slow


def test_judge_stall() -> None:
    normal, slow = progress.Pace({"api": 0.05}, {"api": 3}, 1.0), progress.Pace({"api": 1.0}, {"api": 3}, 10.0)
    quiet = progress.Stall(0, 20, 20.0, 0, "x")
    looping = progress.Stall(0, 20, 20.0, STALL_CYCLES, "x")
    assert progress.judge_stall(quiet, 15, normal) == "idle"
    assert progress.judge_stall(looping, 15, normal) == "stuck"
    assert progress.judge_stall(quiet, 15, slow) == "moving"  # 20 s < 15 s × 10
    assert progress.judge_stall(progress.Stall(0, 200, 200.0, 0, "x"), 15, slow) == "too slow"
    assert progress.judge_stall(progress.Stall(0, 200, 200.0, STALL_CYCLES, "x"), 15, slow) == "stuck"


# ---- liveness on the false reproductions of a loaded machine ---------------------------------------------

def _preemption(quota_at: float, *between, end: float = 30.0):
    """job2 preempts job1 at t=0.4 (base), then `between` happen, then job2 gets quota at `quota_at`."""
    h = base(end) + list(between) + [watch(quota_at, WL2, "50", QuotaReserved="True")]
    return sort(h)


def test_a_slow_chain_of_steps_is_slow_not_stuck() -> None:
    """#14863's control at load 30: p evicted, its quota released 3.25 s later, s admitted 1.33 s after: every
    step within the bound though the whole wait was longer (6.7 s against 5 s)."""
    h = _preemption(7.0, req(1.0, 1, "eviction", WL1), resp(1.1, 1, "eviction", WL1, "20"),
                    req(4.3, 2, "quota_release", WL1), resp(4.35, 2, "quota_release", WL1, "21"))
    [f] = Liveness(bound=5, jobs=["job2"]).check(h, {}, Names(h))
    assert f.result == "held" and "the longest stretch without progress was 3.25s" in f.evidence


def test_pods_stopping_slowly_are_not_kueue_stuck() -> None:
    """#13662's control at load 31-43: the victims' Pods took ~18 s to stop on kwok (bound 15 s)."""
    h = _preemption(21.0, resp(1.0, 1, "eviction", WL1, "20"),
                    ev(1.5, "monitor", "object_deleting", kind="Pod", key=f"{NS}/v-pod", finalizers=[]),
                    ev(19.5, "monitor", "object_deleted", kind="Pod", key=f"{NS}/v-pod", finalizers=[]),
                    *[attempt(2 + i, i) for i in range(15)])
    [f] = Liveness(bound=15, jobs=["job2"]).check(h, {}, Names(h))
    assert f.result == "held", f.evidence


def test_time_alone_on_a_slow_run_is_too_slow_to_judge() -> None:
    """#10181's control at load 32-34: nothing Kueue-like looping, every step slow (writes answered in ~1 s)."""
    slow_writes = [x for i in range(3) for x in (req(20 + i, 10 + i, "pending", WL2), resp(21 + i, 10 + i, "pending", WL2, str(60 + i)))]
    h = sort(base(100.0) + slow_writes)
    [f] = Liveness(bound=15, jobs=["job2"]).check(h, {}, Names(h))
    assert f.result == "error" and f.summary.startswith("too slow to judge"), f
    assert Liveness(bound=15, jobs=["job2"]).decided(h, {}, Names(h))
    # The same quiet with Kueue trying job2 in cycle after cycle is a loop: stuck, on any pace.
    looping = sort(h + [attempt(30 + i, 100 + i) for i in range(60)])
    [f] = Liveness(bound=15, jobs=["job2"]).check(looping, {}, Names(looping))
    assert f.result == "violated" and "scheduling cycle" in f.evidence, f


def test_a_subject_waits_from_when_anyone_first_saw_it() -> None:
    """An elastic Job's j2 admitted 0.1 s after its creation, but the plan step that created it reported 11 s
    later: its admission is not dropped, and it did not wait 11 s."""
    wl = "job-j2-ccccc"
    h = [e for e in base(30.0) if e["source"] != "kueue"]
    h += [watch(1.0, wl, "30", typ="ADDED"), req(1.05, 3, "admission", wl), resp(1.1, 3, "admission", wl, "31"),
          ev(12.0, "proxy", "signal_done", rule="mk-j2", action="create", ok=True, objects=[f"Job {NS}/j2 rv 29"])]
    h = sort(h)
    [f] = Liveness(bound=10, jobs=["j2"]).check(h, {}, Names(h))
    assert f.result == "held" and "0.10s after its Job was created" in f.evidence, f.evidence


def test_summarised_repeats_keep_their_cycles() -> None:
    """A stuck loop's lines are summarised in history.jsonl (harness/history/repeats.py); the offline re-check
    must count the same cycles as the live verdict did (a run judged 297 cycles live and 1 offline before)."""
    from harness.history import repeats

    h = [attempt(1 + i / 100, 40 + i) for i in range(50)]
    short = repeats.summarize(h)
    assert len(short) < len(h) and short[-1]["cycles"][-1] == 89
    assert progress.cycles(repeats.expand(short), 0, h[-1]["ts"]) == progress.cycles(h, 0, h[-1]["ts"]) == 50
