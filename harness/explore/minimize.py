"""Minimising a violating plan: drop one move at a time while the violation still reproduces.

`minimize` is pure: it asks `evaluate` (the driver runs the plans on real Kueue, `runs` times each) how
often each candidate plan reproduced the violation, and keeps a smaller plan when it reproduces at least
as often as the plan it came from (never less reliable). `strengthen` goes the other way for a plan that
reproduced only sometimes: it tries the plan with one more move (driver: the extensions of the violating
run, generate.extensions) and keeps the first that reproduces every time. It stops when no single move can be dropped
(1-minimal, as delta debugging's last step), after `max_rounds` rounds, or when `evaluate` returns None
(out of time). Dropping a move that a trigger names turns that write into an observed one (an `observe`
rule), so the remaining holds still wait for the same event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.explore.model import Plan, plan_key, validate


def drop_one(moves: Plan) -> list[Plan]:
    """Every plan with one move fewer that the plan loader accepts, in move order."""
    out = []
    for i in range(len(moves)):
        smaller = moves[:i] + moves[i + 1:]
        if smaller and not validate(smaller):
            out.append(smaller)
    return out


@dataclass
class Minimized:
    """The outcome: `moves` (the smallest plan kept), `hits`/`runs` of its last evaluation, `steps`: every
    evaluation as (plan, hits), and `complete`: False when it stopped for lack of time."""

    moves: Plan
    hits: int
    runs: int
    steps: list[tuple[Plan, int]] = field(default_factory=list)
    complete: bool = True


def minimize(moves: Plan, evaluate: Callable[[list[Plan]], list[int] | None], runs: int,
             max_rounds: int = 6, hits: int | None = None,
             known: dict[tuple, tuple[int, int]] | None = None) -> Minimized:
    """Confirm `moves` (evaluate([moves]); skipped when its `hits` are known), then per round evaluate
    every one-move-smaller plan at once and keep the most reliable of those that reproduced at least as
    often as the plan they came from (the first in move order on a tie). `evaluate(plans)` returns the
    hits out of `runs` for each plan, or None when there is no time left. "As often" counts every run of a plan so far (`known`: plan_key -> (hits, runs) of earlier
    evaluations, e.g. the confirmation of the plan a strengthened one came from): a plan that failed once
    is not made "as reliable" by one lucky sample."""
    record: dict[tuple, list[int]] = {k: [h, r] for k, (h, r) in (known or {}).items()}

    def note(p: Plan, h: int) -> float:
        rec = record.setdefault(plan_key(p), [0, 0])
        rec[0] += h
        rec[1] += runs
        return rec[0] / rec[1]

    def rate(p: Plan) -> float:
        h, r = record.get(plan_key(p), (0, 0))
        return h / r if r else 0.0

    if hits is None:
        got = evaluate([moves])
        if got is None:
            return Minimized(moves, 0, 0, [], complete=False)
        hits = got[0]
    if plan_key(moves) not in record:
        note(moves, hits)
    best = moves
    out = Minimized(best, hits, runs, [(moves, hits)])
    if hits == 0:
        return out
    for _ in range(max_rounds):
        smaller = drop_one(best)
        if not smaller:
            break
        res = evaluate(smaller)
        if res is None:
            out.complete = False
            break
        out.steps += list(zip(smaller, res))
        # Keep the most reliable sibling (first in move order on a tie), if it is at least as reliable.
        floor = rate(best)
        scored = [(note(p, h), i, p, h) for i, (p, h) in enumerate(zip(smaller, res))]
        fit = [x for x in scored if x[0] >= floor]
        if not fit:
            break
        _, _, kp, kh = max(fit, key=lambda x: (x[0], -x[1]))
        keep = (kp, kh)
        best, hits = keep
    out.moves, out.hits = best, hits
    return out

def strengthen(moves: Plan, hits: int, candidates: list[Plan], evaluate: Callable[[list[Plan]], list[int] | None],
               runs: int, chunk: int = 2) -> tuple[Plan, int, list[tuple[Plan, int]]]:
    """For `moves`, which reproduced `hits` of `runs` times: evaluate `candidates` (plans that extend it,
    best first) `chunk` at a time until one reproduces `runs` of `runs`; return (the most reliable plan
    seen, its hits, every evaluation). Stops early when `evaluate` returns None (no time left)."""
    best, best_hits, steps = moves, hits, []
    for i in range(0, len(candidates), chunk):
        part = candidates[i:i + chunk]
        res = evaluate(part)
        if res is None:
            break
        steps += list(zip(part, res))
        for p, h in zip(part, res):
            if h > best_hits:
                best, best_hits = p, h
        if best_hits >= runs:
            break
    return best, best_hits, steps
