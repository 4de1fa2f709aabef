"""What a manual session's supervisor says about the proxy's events (issue 16): a hold that reached its
max_hold (`hold_expired`), a rule that matched nothing although a write it could have matched came by
(`rule_unmatched`), a plan step or process fault done or failed (`signal_done`: one line each, in the
order the proxy logged them), a fact that can never hold (`fact_problem`). The supervisor (harness/cli/session.py) follows proxy-events.jsonl with an EventFollower
and prints each `notice` to its output, the session log (<artifacts>/session.log).

The same sentences are used by `kueue-harness holds`/`status` (harness/cli/commands.py), so the log and the
commands say it alike.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.common.jsonl import JsonlTail


def clock(ts: float) -> str:
    """Epoch seconds as local time, "2026-11-30T12:19:27" (as the proxy writes `at`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def unmatched_sentence(rule: str, warning: dict[str, Any]) -> str:
    """"rule X has matched nothing, but <label> came by: <hint>" for a rule's near-miss `warning`."""
    return f"rule {rule} has matched nothing, but {warning.get('label')} came by: {warning.get('hint')}"


def expired_sentence(ev: dict[str, Any]) -> str:
    """What a `hold_expired` event means, for the session log."""
    max_hold = ev.get("max_hold")
    held = f" for its max_hold of {max_hold:g} s" if isinstance(max_hold, (int, float)) else " until its max_hold"
    return (f"hold {ev.get('hold')} EXPIRED: rule {ev.get('rule')} held {ev.get('label')}{held}, and the proxy "
            f"released it at {clock(ev.get('ts') or time.time())}. A manual ordering that needed it did not happen "
            "(a larger max_hold in the plan gives you more time: docs/fault-plans.md, Timeouts)")


def seconds_text(seconds: Any) -> str:
    """"0.049 s", "1.2 s"; "< 0.001 s" for a step that had nothing left to do (a wait whose fact was seen)."""
    if not isinstance(seconds, (int, float)):
        return "? s"
    return "< 0.001 s" if seconds < 0.001 else f"{seconds:g} s"


def done_sentence(ev: dict[str, Any]) -> str:
    """What a `signal_done` means: "step w1 (create) done in 0.049 s: Workload team-a/w1 rv 123", "step ready
    (wait) done in 1.2 s: LocalQueue lq: Active=True(Ready) at rv 88", "process fault restart-kueue
    (restart_kueue) done in 1.38 s", "step w2 (wait) FAILED after 30 s: TimeoutError: not seen within 30 s
    (last observed: …)"."""
    from harness.plan import actions

    try:
        kind = "step" if actions.get(ev.get("action")).is_step else "process fault"
    except KeyError:
        kind = "rule"
    head = f"{kind} {ev.get('rule')} ({ev.get('action')})"
    if not ev.get("ok"):
        return f"{head} FAILED after {seconds_text(ev.get('since_signalled'))}: {ev.get('error') or 'no error given'}"
    matched = ev.get("matched") if isinstance(ev.get("matched"), dict) else {}
    observed = str(matched.get("observed") or "")
    if observed and matched.get("object") and not observed.startswith(str(matched["object"])):
        observed = f"{matched['object']}: {observed}"
    what = ", ".join(str(o) for o in ev.get("objects") or ()) or observed or matched.get("line") or ""
    return f"{head} done in {seconds_text(ev.get('seconds', ev.get('since_signalled')))}" + \
        (f": {str(what)[:200]}" if what else "")


def notice(ev: dict[str, Any]) -> str | None:
    """The session-log line for a proxy event worth telling a person about, else None: an expired hold, a rule
    that names Kueue's write wrongly, a plan step or process fault done or failed (with its error), a fact that
    can never hold."""
    kind = ev.get("event")
    if kind == "hold_expired":
        return f"[kueue-harness] {expired_sentence(ev)}"
    if kind == "rule_unmatched":
        return f"[kueue-harness] warning: {unmatched_sentence(str(ev.get('rule')), ev)}"
    if kind == "signal_done":
        return f"[kueue-harness] {done_sentence(ev)}"
    if kind == "fact_problem":
        return f"[kueue-harness] PROBLEM: {ev.get('problem')} (waiting: {', '.join(map(str, ev.get('rules') or ()))})"
    return None


class EventFollower(JsonlTail):
    """The events appended to a proxy-events.jsonl since the last `read()` (harness/common/jsonl.py): from its
    end when made, or from byte `offset`."""

    def __init__(self, path: str | Path, offset: int | None = None) -> None:
        super().__init__(path, from_end=offset is None)
        if offset is not None:
            self.offset = offset
