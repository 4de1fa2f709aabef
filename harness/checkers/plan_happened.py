"""Assumption `plan_happened`: every acting rule of the plans loaded during the case acted, and every hold
and process fault with release triggers ended by them. The plans come from the case's history itself
(the proxy's `rule_added` events), so the checker needs no parameters: it judges any plan, including the
ones `kueue-harness explore` generates and replays with `pytest --plan FILE` (harness/explore/).

A run where a rule never matched (the write it names never came), or a hold ended by its timeout (its
trigger never came), did not have the ordering the plan describes: its verdict is "error", and explore
counts it as discarded, never as a finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.history.names import Names

#: The proxy event that shows a rule of each action acted (docs/history.md, source proxy).
ACTED = {"fail": ("failed",), "delay": ("delayed",), "reset": ("reset",),
         "drop_watch_events": ("watch_event_dropped",), "delay_watch_events": ("watch_event_delayed",)}
ENDS = ("released", "hold_timeout", "failed", "hold_expired")


def _problem(rule: Mapping[str, Any], seen: list[Mapping[str, Any]], windows: frozenset[str] = frozenset()) -> str | None:
    rid, action = rule.get("id"), rule.get("action")
    mine = [e for e in seen if e.get("source") == "proxy" and e.get("rule") == rid and e.get("event") != "rule_added"]
    triggers = bool((rule.get("release") or {}).get("after"))
    if action == "hold":
        if not any(e.get("event") == "held" for e in mine):
            return f"{rid} held nothing (the write it names never came)"
        end = next((e for e in mine if e.get("event") in ENDS), None)
        if end is None:
            return f"{rid}'s hold did not end before the verdict"
        # A hold with `then: fail` ends `failed` when its triggers fire (harness/plan/rules.py Release.then).
        by_triggers = "failed" if (rule.get("release") or {}).get("then") == "fail" else "released"
        if rid in windows and end.get("event") == "hold_timeout":
            return None  # its timeout is the case's observation window: the symptom never came (a fixed Kueue)
        if triggers and not (end.get("event") == by_triggers and str(end.get("why", "")).startswith("triggers")):
            return f"{rid} ended by {end.get('event')} ({end.get('why', '-')}), not by its triggers"
        return None
    if action == "restart_kueue":
        fired = next((e for e in mine if e.get("event") == "signalled"), None)
        done = next((e for e in mine if e.get("event") == "signal_done"), None)
        if fired is None:
            return f"{rid} never fired"
        if triggers and not str(fired.get("why", "")).startswith("triggers"):
            return f"{rid} fired by {fired.get('why')}, not by its triggers"
        if done is None or not done.get("ok"):
            return f"{rid}'s restart did not finish ({(done or {}).get('error', 'no signal_done')})"
        return None
    wanted = ACTED.get(str(action))
    if wanted is None:  # an action this checker does not know: any event of the rule shows it acted
        return None if mine else f"{rid} ({action}) never acted"
    if not any(e.get("event") in wanted for e in mine):
        return f"{rid} ({action}) never acted (no {' or '.join(wanted)} event)"
    return None


@register
class PlanHappened:
    """Violated when an acting rule of a plan loaded in the case never acted, or a hold (or a process
    fault) with triggers ended some other way than by them (a hold with `then: fail`: failed by them), or a
    step a plan's `steps_after` moves was in no plan the case loaded, or a step its `deletes_as` changes was
    no delete step of one; `observe` rules only record and are not judged."""

    name: ClassVar[str] = "plan_happened"
    kind: ClassVar[str] = "assumption"

    def __init__(self, windows: tuple[str, ...] | list[str] = ()) -> None:
        """`windows`: ids of holds whose release.timeout is an observation window, not an ordering: they wait
        for a bug's symptom (a counting trigger: "job-a evicted 4 times") that a fixed Kueue never shows, and
        ending by that timeout is the plan happening on such a build (docs/fault-plans.md, "When a timeout is
        legitimate"). Any other way of ending still counts against the plan."""
        self.windows = frozenset(str(w) for w in windows)

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        rules = [e.get("rule") for e in seen if e.get("source") == "proxy" and e.get("event") == "rule_added"
                 and isinstance(e.get("rule"), Mapping)]
        acting = [r for r in rules if r.get("action") != "observe"]
        bad = [p for r in acting if (p := _problem(r, seen, self.windows))]
        asked = {str(s) for e in seen if e.get("event") == "steps_after_asked" for s in e.get("steps") or ()}
        moved = {str(s) for e in seen if e.get("event") == "plan_loaded" for s in e.get("steps_moved") or ()}
        bad += [f"steps_after moves step {s}, which no plan the case loaded has" for s in sorted(asked - moved)]
        asked = {str(s) for e in seen if e.get("event") == "deletes_as_asked" for s in e.get("steps") or ()}
        changed = {str(s) for e in seen if e.get("event") == "plan_loaded" for s in e.get("steps_changed") or ()}
        bad += [f"deletes_as changes step {s}, which is no delete step of a plan the case loaded"
                for s in sorted(asked - changed)]
        if bad:
            return [Finding(self.name, "violated", "the plan did not happen as written", "; ".join(bad) + ".",
                            assumption=True)]
        return [Finding(self.name, "held", "the plan happened as written",
                        f"Every acting rule ({', '.join(str(r.get('id')) for r in acting) or 'none'}) acted, and "
                        "every hold with triggers ended by them.", assumption=True)]
