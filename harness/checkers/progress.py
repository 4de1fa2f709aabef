"""Progress and pace: what moved in a case, and how fast its own control plane moved. A bounded checker rests
its verdict on these, never on the clock alone: a slow machine is never a Kueue bug.

- A **progress step** is a change that moves an object of the case (`steps`): the case acted (a Job created, a
  plan step done, a fault lifted, Pods finished); Kueue's write took effect (a Workload write that changed its
  resourceVersion: admission, eviction, quota release, finish; a Job suspended or resumed); Kueue's watch
  delivered a Workload whose conditions or admission changed; the invariant monitor saw a Workload, a queue or a
  Pod change (seen, active changed, quota reserved or released, evicted, deletion started, deleted); Kueue logged
  that it admitted or preempted.
- An **external wait** is a stretch in which the next step is in another component's hands (`external_waits`):
  a Pod of the case being deleted (kubelet or kwok stops it; the Job controller's garbage collection).
  It is not counted as a stall.
- A **stall** is the longest stretch without a progress step, external waits taken out (`longest_stall`);
  with it, the **scheduling cycles** Kueue ran in it: distinct `schedulingCycle` numbers of Kueue's log lines
  about the case's Workloads ("Attempting to schedule workload", "Preemption already issued …":
  pkg/scheduler/scheduler.go logs every line of a cycle with its number). Kueue working in cycles while nothing
  moves is evidence of a loop; silence is not.
- The **pace** of a run (`pace`) is how fast its control plane moved, each figure the median of what this run
  did: Kueue's writes answered (`api`, through the proxy), Kueue's watch delivering what was written (`watch`),
  Kueue's scheduler first trying a new Workload after its watch delivered it (`schedule`), a Pod gone after its
  deletion started (`pod_stop`). (Not a quota release after an eviction: it waits for the Job's Pods by design.) `factor` is the largest ratio of a figure to its idle value
  (`NORMAL`, bounds.py); a bound counted in the run's own pace is the bound times that factor.

Pure functions of the merged history (docs/history.md); times are epoch seconds.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.checkers.base import Finding, History, fault_lifts
from harness.checkers.bounds import GIVE_UP, NORMAL_PACE, SLOW_FACTOR, STALL_CYCLES
from harness.kueue import log as kueue_log

#: Kueue Workload write classes (harness/kueue/api.py) whose effect moves a Workload toward or away from quota.
MOVING_WRITES = ("admission", "eviction", "quota_release", "finish", "create", "delete")
#: The invariant monitor's events that are changes of an object of the case.
MONITOR_STEPS = ("workload_seen", "workload_active_changed", "workload_quota_reserved", "workload_quota_released",
                 "workload_evicted", "object_deleting", "object_deleted")
#: The case's own actions.
HARNESS_STEPS = ("job_created", "pods_finished", "kueue_restart", "nodes_created", "queues_created",
                 "cohort_queues_created")
#: Kueue log lines that say it acted (admitted, preempted).
LOG_STEPS = (kueue_log.ADMITTED, kueue_log.PREEMPTED)


@dataclass(frozen=True)
class Step:
    """One progress step: when (`ts`) and what, in words."""

    ts: float
    what: str


def _rv(e: Mapping[str, Any]) -> str | None:
    rv = e.get("resource_version")
    return str(rv) if rv not in (None, "") else None


def steps(history: History) -> list[Step]:
    """Every progress step of the history (module docstring), sorted by time."""
    out: list[Step] = []
    last_rv: dict[str, str] = {}
    last_seen: dict[str, tuple[Any, Any]] = {}
    requests = {e.get("flow"): e.get("write") for e in history
                if e.get("source") == "proxy" and e.get("event") == "request" and isinstance(e.get("write"), Mapping)}
    for e in history:
        src, ev = e.get("source"), e.get("event")
        if src == "harness" and ev in HARNESS_STEPS:
            out.append(Step(e["ts"], ev.replace("_", " ")))
        elif src == "monitor" and ev in MONITOR_STEPS:
            out.append(Step(e["ts"], f"{ev.replace('_', ' ')} {e.get('kind') or ''} {e.get('key')}".replace("  ", " ")))
        elif src == "kueue" and ev == "log" and e.get("msg") in LOG_STEPS:
            out.append(Step(e["ts"], f"Kueue logged {e.get('msg')!r}"))
        elif src == "proxy" and ev == "signal_done" and e.get("ok") and e.get("action") not in ("wait", "sleep"):
            out.append(Step(e["ts"], f"plan step {e.get('rule')} done"))
        elif src == "proxy" and ev == "response" and isinstance(e.get("status"), int) and 200 <= e["status"] < 300:
            w = requests.get(e.get("flow")) or {}
            key = f"{w.get('kind')}/{w.get('namespace')}/{w.get('name')}"
            rv = _rv(e)
            moved = rv is not None and last_rv.get(key) != rv
            if rv is not None:
                last_rv[key] = rv
            if w.get("kind") == "Job" and w.get("suspend") is not None and moved:
                out.append(Step(e["ts"], f"Job {w.get('name')} {'suspended' if w['suspend'] else 'resumed'}"))
            elif (e.get("write") in MOVING_WRITES or w.get("write") in MOVING_WRITES) and moved:
                out.append(Step(e["ts"], f"{e.get('write') or w.get('write')} of {w.get('name') or e.get('name')} took effect"))
        elif src == "proxy" and ev == "watch_event":
            key = f"{e.get('namespace')}/{e.get('name')}"
            now = (tuple(sorted((e.get("conditions") or {}).items())), e.get("admission"))
            if e.get("type") in ("ADDED", "DELETED") or last_seen.get(key) != now:
                out.append(Step(e["ts"], f"Kueue's watch delivered {e.get('name')} changed ({e.get('type')})"))
            last_seen[key] = now
    out += [Step(t, "a fault was lifted") for t in fault_lifts(history)]
    out.sort(key=lambda s: s.ts)
    return out


def external_waits(history: History, end: float) -> list[tuple[float, float, str]]:
    """[(from, to, what)]: stretches in which a Pod of the case was being deleted (its deletion started, it was
    not gone yet; `end` for one still there): the next step is kubelet's or kwok's, not Kueue's."""
    started: dict[str, float] = {}
    out = []
    for e in history:
        if e.get("source") != "monitor" or e.get("kind") != "Pod":
            continue
        key = str(e.get("key"))
        if e.get("event") == "object_deleting":
            started.setdefault(key, e["ts"])
        elif e.get("event") == "object_deleted" and key in started:
            out.append((started.pop(key), e["ts"], f"Pod {key} stopping"))
    out += [(t, end, f"Pod {k} stopping") for k, t in started.items()]
    return out


def cycles(history: History, start: float, end: float) -> int:
    """How many scheduling cycles of Kueue's logged lines about the case's Workloads fall in (start, end]:
    distinct `schedulingCycle` numbers (each line of a cycle carries it: pkg/scheduler/scheduler.go)."""
    seen = set()
    for e in history:
        if e.get("source") == "kueue" and e.get("event") == "log" and start < e["ts"] <= end:
            n = (e.get("fields") or {}).get("schedulingCycle")
            if isinstance(n, int):
                seen.add(n)
    return len(seen)


def outside(a: float, b: float, waits: list[tuple[float, float, str]]) -> float:
    """Seconds of [a, b] not covered by any of `waits`."""
    cuts = sorted((max(a, x), min(b, y)) for x, y, _ in waits if y > a and x < b)
    covered, cur = 0.0, a
    for x, y in cuts:
        if y <= cur:
            continue
        covered += y - max(x, cur)
        cur = y
    return (b - a) - covered


@dataclass(frozen=True)
class Stall:
    """The longest stretch without progress in a window: from `start` (after the step `after`, in words) to
    `end`, `seconds` of it not in an external wait, and the scheduling `cycles` Kueue ran in it."""

    start: float
    end: float
    seconds: float
    cycles: int
    after: str

    def text(self, t0: float) -> str:
        return (f"nothing moved for {self.seconds:.2f}s after {self.after} (t={self.start - t0:.3f}s), while Kueue "
                f"ran {self.cycles} scheduling cycle(s) about the case")


def longest_stall(history: History, start: float, end: float, first: str = "the window began") -> Stall:
    """The longest stretch of [start, end] with no progress step (external waits taken out). `first` names what
    the window's start is."""
    waits = external_waits(history, end)
    marks = [(start, first)] + [(s.ts, s.what) for s in steps(history) if start < s.ts < end] + [(end, "")]
    best = Stall(start, start, 0.0, 0, first)
    for (a, what), (b, _) in zip(marks, marks[1:]):
        sec = outside(a, b, waits)
        if sec > best.seconds:
            best = Stall(a, b, sec, 0, what)
    return Stall(best.start, best.end, best.seconds, cycles(history, best.start, best.end), best.after)


def quiet_until(history: History, end: float, after: float | None = None) -> Stall:
    """The stretch from the last progress step (at or after `after`, when given) up to `end`: how long nothing has
    moved at the end of a window, external waits taken out."""
    found = [s for s in steps(history) if s.ts <= end and (after is None or s.ts >= after)]
    if found:
        return longest_stall(history, found[-1].ts, end, found[-1].what)
    start = after if after is not None else min((e["ts"] for e in history), default=end)
    return longest_stall(history, start, end, "the window began")


@dataclass(frozen=True)
class Pace:
    """How fast the run's control plane moved: {figure: median seconds}, the number of samples of each, and
    `factor` (>= 1): the largest ratio of a figure to its idle value (bounds.NORMAL_PACE)."""

    figures: dict[str, float] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    factor: float = 1.0

    @property
    def slow(self) -> bool:
        """Far slower than normal: `factor` above bounds.SLOW_FACTOR."""
        return self.factor > SLOW_FACTOR

    def text(self) -> str:
        """"api 0.012s, watch 0.004s, … (2.1x idle)"."""
        if not self.figures:
            return "no pace figures (nothing to time)"
        figs = ", ".join(f"{k} {v:.3f}s" for k, v in self.figures.items())
        return f"{figs} ({self.factor:.1f}x idle)"

    def to_json(self) -> dict[str, Any]:
        return {"figures": {k: round(v, 4) for k, v in self.figures.items()}, "samples": dict(self.samples),
                "factor": round(self.factor, 2), "slow": self.slow}


def pace(history: History) -> Pace:
    """The run's pace (module docstring), from its history alone."""
    held = {e.get("flow") for e in history if e.get("source") == "proxy"
            and e.get("event") in ("held", "delayed", "failed", "reset")}
    req: dict[Any, Mapping[str, Any]] = {}
    samples: dict[str, list[float]] = {k: [] for k in NORMAL_PACE}
    written: dict[tuple[str, str], float] = {}  # (ns/name, rv) -> when the write was answered
    added: dict[str, float] = {}
    tried: set[str] = set()
    deleting: dict[str, float] = {}
    for e in history:
        src, ev = e.get("source"), e.get("event")
        if src == "proxy" and ev == "request":
            req[e.get("flow")] = e
        elif src == "proxy" and ev == "response" and e.get("flow") in req and e.get("flow") not in held:
            r = req.pop(e.get("flow"))
            samples["api"].append(e["ts"] - r["ts"])
            w = r.get("write") if isinstance(r.get("write"), Mapping) else {}
            key = f"{w.get('namespace')}/{w.get('name')}"
            if isinstance(e.get("status"), int) and 200 <= e["status"] < 300 and _rv(e):
                written[(key, _rv(e) or "")] = e["ts"]
        elif src == "proxy" and ev == "watch_event" and not e.get("delayed"):
            key = f"{e.get('namespace')}/{e.get('name')}"
            t = written.pop((key, _rv(e) or ""), None)
            if t is not None:
                samples["watch"].append(max(0.0, e["ts"] - t))
            if e.get("type") == "ADDED":
                added.setdefault(key, e["ts"])
        elif src == "kueue" and ev == "log" and e.get("msg") == kueue_log.ATTEMPTING:
            key = _workload_of(e)
            if key in added and key not in tried:
                tried.add(key)
                samples["schedule"].append(max(0.0, e["ts"] - added[key]))
        elif src == "monitor" and e.get("kind") == "Pod":
            if ev == "object_deleting":
                deleting.setdefault(str(e.get("key")), e["ts"])
            elif ev == "object_deleted" and str(e.get("key")) in deleting:
                samples["pod_stop"].append(e["ts"] - deleting.pop(str(e.get("key"))))
    figures = {k: statistics.median(v) for k, v in samples.items() if v}
    factor = max([1.0] + [v / NORMAL_PACE[k] for k, v in figures.items()])
    return Pace(figures, {k: len(v) for k, v in samples.items() if v}, factor)


def _workload_of(e: Mapping[str, Any]) -> str | None:
    w = (e.get("fields") or {}).get("workload")
    if isinstance(w, Mapping):
        return f"{w.get('namespace')}/{w.get('name')}"
    return str(w) if isinstance(w, str) else None


def judge_stall(stall: Stall, bound: float, run_pace: Pace) -> str:
    """How a stall weighs, given a checker's `bound` (seconds at an idle machine's pace):
    - "moving": no longer than the bound counted in the run's pace (bound × pace factor, at most
      bounds.GIVE_UP when that is longer than the bound);
    - "stuck": longer, and Kueue ran at least bounds.STALL_CYCLES scheduling cycles about the case in it (it
      worked, and nothing moved: a loop);
    - "idle": longer, Kueue ran fewer cycles, and the run's pace was normal (Kueue did nothing on a machine
      that was not slow);
    - "too slow": longer, fewer cycles, and the run's pace far slower than normal: time alone, which cannot be
      told apart from a slow machine (the verdict is `error`, never `reproduced`)."""
    if stall.seconds <= min(bound * run_pace.factor, max(bound, GIVE_UP)):
        return "moving"
    if stall.cycles >= STALL_CYCLES:
        return "stuck"
    return "too slow" if run_pace.slow else "idle"


#: Events that are not something of the case moving: the harness's own bookkeeping, the monitor's periodic reads
#: of a deletion still pending (a stuck deletion is quiet), a watch re-opened.
_NOT_ACTIVITY = {("monitor", "object_still_deleting"), ("monitor", "watch_error"), ("harness", "observed"),
                 ("harness", "judging"), ("harness", "plan_step")}


def last_activity(history: History) -> float | None:
    """When anything of the case last happened (epoch seconds): any event of any source but the bookkeeping of
    `_NOT_ACTIVITY`; None for an empty history."""
    return max((e["ts"] for e in history if (e.get("source"), e.get("event")) not in _NOT_ACTIVITY), default=None)


#: How a finding that gives up on a run too slow to judge starts its summary (`too_slow`).
TOO_SLOW = "too slow to judge"


def too_slow(finding: Any) -> bool:
    """Whether `finding` is an `error` because the run was too slow to judge (final: a checker's `decided` may
    stop observing on it), as opposed to one whose subject was never seen (which may still come)."""
    return finding.result == "error" and str(finding.summary).startswith(TOO_SLOW)


def limit_words(bound: float, run_pace: Pace) -> str:
    """"bound 5s at an idle pace; this run's pace: api 0.02s, … (1.0x idle)": what a bounded finding says of its
    bound."""
    return f"bound {bound:g}s at an idle pace; this run's pace: {run_pace.text()}"


def too_slow_finding(check: str, summary: str, what: str, quiet: str, limit: str, after: str = "") -> Finding:
    """The `error` a bounded checker gives when only time says its subject is stuck, on a run far slower than an
    idle one: `summary` after "too slow to judge: ", `what` happened, `quiet` (Stall.text) and `limit` (limit_words)
    in the evidence, then `after` (e.g. the final state)."""
    return Finding(check, "error", f"{TOO_SLOW}: {summary}",
                   f"{what}; {quiet}: time alone, on a run far slower than an idle one ({limit}), cannot tell a slow "
                   f"machine from a Kueue bug.{after}")
