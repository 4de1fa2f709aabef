"""Keeping the real violations of runs whose plan did not happen as written (issue 20 item 5, issue 25).

A perturbed run is *discarded* when an assumption failed: most often `plan_happened` saying a hold ended by
its timeout (its trigger never came). Such a run still ran on real Kueue; if an invariant was violated in
it, the violation may be real, only the plan that produced it is not the one written. `as_happened` turns
the run's own trace into the plan that did happen: a hold that ended by its timeout becomes "hold for T s"
(a `delay` of the request or of the answer, T the duration the proxy really held it), a rule that never
acted is dropped, everything that acted by its triggers stays. `replay` runs that plan up to REPLAYS
times (the replays go out together: side by side with `explore --workers`); when one reproduces the
violation the run is kept as a finding (ordered partly by time, and said so; then confirmed and minimised
like any other), otherwise it stays discarded, counted and listed with the invariant it violated
(`violated_keys`).

Pure but `replay`: reads explore.json's `events` (harness/explore/plugin.py: the proxy's held/released/hold_timeout/...
events of the plan's rules, each with `rule` and `ts`) and `findings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.explore.findings import violation_keys as _keys
from harness.explore.model import STEP_KINDS, Candidate, Move, Plan, validate

#: The assumptions whose failure `as_happened` can account for: the plan's own shape. A failed
#: `watch_caught_up` (Kueue never saw an object as it is) or a failed environment assumption makes a
#: violation an artefact of the run, so such runs stay discarded.
SALVAGEABLE = ("plan_happened",)
#: Shortest "hold for T s" a timed-out hold becomes (a hold that ended by its timeout at once is noise).
MIN_DELAY = 0.05
#: Replays of the plan that happened: a timed-out hold becomes a delay, which orders by time, so the race the
#: run lost may be won on one replay and lost on the next (bench/salvage_proof.py: kueue#14863's p0055 passed
#: its one replay).
REPLAYS = 3


def violated_keys(findings: Iterable[Mapping[str, Any]]) -> list[str]:
    """The invariants violated in a run's findings, as "checker:subject[:how]" (driver.violation_keys),
    whatever its verdict: a discarded run's violations too."""
    return _keys(findings)


def salvageable(findings: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the only assumptions that failed are the plan's own (SALVAGEABLE)."""
    failed = {str(f.get("check")) for f in findings
              if f.get("assumption") and f.get("result") in ("violated", "inconclusive")}
    return bool(failed) and failed <= set(SALVAGEABLE)


def _spans(events: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """rule id -> {"held": first held ts, "end": (event, ts) of the hold's end, "acted": bool}."""
    out: dict[str, dict[str, Any]] = {}
    for e in sorted(events, key=lambda x: float(x.get("ts") or 0.0)):
        rid = e.get("rule")
        if not rid or e.get("source", "proxy") != "proxy":
            continue
        s = out.setdefault(str(rid), {"held": None, "end": None, "acted": False})
        ev = e.get("event")
        if ev in ("held", "failed", "delayed", "reset", "signalled", "watch_event_dropped", "watch_event_delayed"):
            s["acted"] = True
        if ev == "held" and s["held"] is None:
            s["held"] = float(e["ts"])
        elif ev in ("released", "hold_timeout", "failed", "hold_expired") and s["end"] is None and s["held"] is not None:
            s["end"] = (str(ev), float(e["ts"]))
    return out


def as_happened(moves: Plan, events: Iterable[Mapping[str, Any]]) -> tuple[Plan, list[str]] | None:
    """The plan that happened in a run of `moves`, from the run's proxy `events`, and what changed, in
    words; None when nothing would change or the result is not a valid plan. A `hold`/`hold_response` that
    ended by its timeout becomes `delay`/`delay_response` for the seconds it was held (at least MIN_DELAY);
    a move whose rule never acted is dropped (the write it names never came)."""
    spans = _spans(events)
    out: list[Move] = []
    said: list[str] = []
    for m in moves:
        if m.kind in STEP_KINDS:
            out.append(m)  # not a rule of the proxy: plan_happened judges whether the step was moved or changed
            continue
        s = spans.get(m.rule_id)
        if s is None or not s["acted"]:
            said.append(f"dropped ({m.words()}: it never acted)")
            continue
        end = s["end"]
        if m.kind in ("hold", "hold_response") and end is not None and end[0] == "hold_timeout":
            seconds = max(MIN_DELAY, round(end[1] - s["held"], 3))
            new = Move("delay" if m.kind == "hold" else "delay_response", m.target, delay=seconds)
            said.append(f"{m.words()} -> {new.words()} (it ended by its timeout)")
            out.append(new)
            continue
        out.append(m)
    plan = tuple(out)
    if not said or not plan or validate(plan):
        return None
    return plan, said


def replay(ex: Any, rec: Any, cand: Candidate, res: Mapping[str, Any]) -> None:
    """A discarded run `rec` (driver.RunRecord of Explorer `ex`) that violated an invariant: replay the plan
    that happened (`as_happened`) up to REPLAYS times in one batch; the first replay that violates one of the
    run's invariants (or any, when none of them) is kept as a finding (Explorer.on_violation, then confirmed
    and minimised). Sets `rec.salvage` to what became of it."""
    if not salvageable(res.get("findings") or []):
        rec.salvage = "not replayable (an assumption other than the plan's own failed)"
        return
    got = as_happened(cand.moves, res.get("events") or [])
    if got is None:
        rec.salvage = "not replayable (nothing to change, or not a valid plan)"
        return
    plan, changes = got
    ids = [f"h{rec.index:04d}" + ("" if i == 0 else chr(ord("a") + i)) for i in range(REPLAYS)]
    cands = [Candidate(plan, cand.case, "as-happened", depth=len(plan), parent=rec.id, id=rid) for rid in ids]
    for c in cands:
        ex.cands[c.id] = c
    ex.say(f"[explore] {rec.id} was discarded but violated {', '.join(rec.violated)}: replaying the plan that "
           f"happened ({'; '.join(changes)}) up to {REPLAYS} times")
    results = ex.run_batch([(c.id, c, cand.case) for c in cands])
    outcomes = []
    for c in cands:
        r2 = ex.record(c.id, c, cand.case, results.get(c.id), role="replay")
        outcomes.append(r2.outcome)
        hit = [k for k in r2.keys if k in rec.violated] or r2.keys
        if r2.outcome != "violation" or not hit:
            continue
        rec.salvage = f"kept as {', '.join(hit)} (replay {len(outcomes)} of {REPLAYS})"
        r2.index = rec.index  # found at the discarded run's perturbation (the table's "first found")
        for key in hit:
            ex.on_violation(key, r2, c, note=f"from the discarded run {rec.id}, replayed as the plan that happened "
                                             f"({'; '.join(changes)}): ordered partly by time")
        return
    rec.salvage = f"replayed as happened {REPLAYS} times: {', '.join(outcomes)}"
