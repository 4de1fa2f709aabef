"""Assumption `watch_delayed`: the watch events a `delay_watch_events` rule held reached Kueue when the plan
meant them to — at or after their due time, not flushed early because the watch ended nor lost with a
broken watch (docs/fault-plans.md, Delaying watch events) — and, with `after`, only once another rule's
flow was answered. kubernetes-sigs/kueue#10759 needs the Workload's DELETED event to reach Kueue after its
failed admission write (404): delivered before, the deletion frees the ClusterQueue and the run shows
nothing about the bug either way.
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.history.names import Names


@register
class WatchDelayed:
    """Every watch event rule `rule` (a delay_watch_events rule) delayed went out to Kueue no earlier than
    its due time, and — with `after` — after the first answer Kueue got to a flow of rule `after` (with
    HTTP `status` when given, e.g. 404). Violated when the rule delayed nothing, an event was lost, went out
    early, was still held at the verdict, or went out before that answer."""

    name: ClassVar[str] = "watch_delayed"
    kind: ClassVar[str] = "assumption"

    def __init__(self, rule: str, after: str | None = None, status: int | None = None) -> None:
        if not isinstance(rule, str) or not rule:
            raise ValueError("watch_delayed: rule must name the delay_watch_events rule")
        if status is not None and after is None:
            raise ValueError("watch_delayed: status goes with after (the status of that rule's answer)")
        self.rule, self.after, self.status = rule, after, status

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        proxy = [e for e in seen if e.get("source") == "proxy"]
        held = [e for e in proxy if e.get("event") == "watch_event_delayed" and e.get("rule") == self.rule]
        if not held:
            return [self._void(f"{self.rule} delayed no watch event (the event it names never came)")]
        bad, outs = [], []
        for d in held:
            what = f"{d.get('type', 'event')} of {d.get('name')} (rv {d.get('resource_version')})"
            out = next((e for e in proxy if e.get("event") == "watch_event" and e.get("delay_rule") == self.rule
                        and e.get("flow") == d.get("flow") and e.get("resource_version") == d.get("resource_version")
                        and e["ts"] >= d["ts"]), None)
            if out is None:
                lost = any(e.get("event") == "watch_events_undelivered" and e.get("flow") == d.get("flow")
                           and e["ts"] >= d["ts"] for e in proxy)
                bad.append(f"the {what} {'was lost with its watch' if lost else 'was still held at the verdict'}")
            elif float(out.get("late") or 0.0) < 0:
                bad.append(f"the {what} went out {-float(out['late']):.3f}s before its due time (its watch ended)")
            else:
                outs.append((what, out))
        answered = None
        if self.after is not None and not bad:
            flows = {e.get("flow") for e in proxy if e.get("rule") == self.after and e.get("flow") is not None}
            answers = [e for e in proxy if e.get("event") in ("response", "failed") and e.get("flow") in flows
                       and (self.status is None or e.get("status") == self.status)]
            if not answers:
                bad.append(f"no flow of {self.after} was answered{f' {self.status}' if self.status else ''} before "
                           "the verdict")
            else:
                answered = min(answers, key=lambda e: e["ts"])
                bad += [f"the {what} went out {answered['ts'] - out['ts']:.3f}s before {self.after}'s answer "
                        f"({answered.get('status')})" for what, out in outs if out["ts"] < answered["ts"]]
        if bad:
            return [self._void("; ".join(bad))]
        after = (f", {min(o['ts'] for _, o in outs) - answered['ts']:.3f}s after {self.after}'s answer "
                 f"({answered.get('status')})" if answered is not None else "")
        return [Finding(self.name, "held", "the delayed watch events went out as planned",
                        names.text(f"{self.rule} delayed {', '.join(w for w, _ in outs)}; each went out at its due "
                                   f"time (late {max(float(o.get('late') or 0) for _, o in outs):.3f}s at most){after}."),
                        assumption=True)]

    def _void(self, why: str) -> Finding:
        return Finding(self.name, "violated", "the watch delay did not happen as planned", why + ".", assumption=True)
