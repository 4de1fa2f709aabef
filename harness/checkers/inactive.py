"""Inactive Workloads are never scheduled: once a Workload's spec.active=false is stored, Kueue gives it no
new quota reservation while it stays inactive (kubernetes-sigs/kueue#10901: a deactivated Workload requeued
and re-scheduled by a cycle in flight).

What counts, precisely (facts of the invariant monitor, which watches kube-apiserver directly, and of the
proxy, which sees Kueue's writes):
- the deactivation: the first stored version with spec.active=false (`workload_active_changed`
  active=false); a later active=true ends it;
- a violation: a stored version, after that, in which QuotaReserved turns True while still inactive
  (`workload_quota_reserved` with active=false), written by an admission Kueue *sent after the deactivation
  was seen* (the proxy's `request` of that admission write, matched by the answer's resourceVersion);
- in flight, not a violation: the same, but the admission request was sent before the deactivation was seen
  (a cycle that began before it; Kueue then evicts the Workload, reason Deactivated);
- without the proxy's record of the write (a Workload the case did not hand to the proxy's history): a
  reservation seen more than `grace` seconds after the deactivation is a violation, within it inconclusive.
A Workload that already held quota when it was deactivated is not judged here (Kueue evicts it).
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.checkers import progress
from harness.checkers.base import Finding, History, Objects, observed_until, register, within_case
from harness.checkers.bounds import INACTIVE_GRACE, INACTIVE_SETTLE
from harness.history.names import Names, case_t0


def _admission_sent(history: History, key: str, rv: Any) -> float | None:
    """When Kueue sent the admission write whose answer had resourceVersion `rv` for Workload `key` (the
    proxy's `request` of that flow), or None when the history has no such write."""
    ns, _, name = key.partition("/")
    flows = [e.get("flow") for e in history if e.get("source") == "proxy" and e.get("event") == "response"
             and e.get("name") == name and e.get("namespace") == ns and e.get("write") == "admission"
             and str(e.get("resource_version")) == str(rv)]
    for e in history:
        if e.get("source") == "proxy" and e.get("event") == "request" and e.get("flow") in flows:
            return e["ts"]
    return None


@register
class InactiveNeverScheduled:
    """No Workload gets a new quota reservation while spec.active=false (module docstring: what counts)."""

    name: ClassVar[str] = "inactive_never_scheduled"
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

    def __init__(self, grace: float = INACTIVE_GRACE, settle: float = INACTIVE_SETTLE) -> None:
        self.grace = float(grace)
        self.settle = float(settle)

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Whether the judgement is conclusive, either way: a violation; or every Workload deactivated in the
        case was judged without an inconclusive finding and is either active again, deleted, or was watched
        inactive without a new reservation for `settle` seconds (bounds.INACTIVE_SETTLE) up to the last
        event seen. Not decided while nothing was deactivated (the case may still do it)."""
        found = self.check(history, objects, names)
        if any(f.result == "violated" for f in found):
            return True
        if any(f.result in ("inconclusive", "error") for f in found):
            return False
        history = within_case(history)
        end = observed_until(history)
        since: dict[str, float | None] = {}  # key -> when its current deactivation began (None: it ended)
        for e in history:
            if e.get("source") != "monitor":
                continue
            key = str(e.get("key"))
            if e.get("event") == "workload_active_changed":
                if e.get("active") is False:
                    if since.get(key) is None:
                        since[key] = e["ts"]
                elif key in since:
                    since[key] = None
            elif e.get("event") == "object_deleted" and e.get("kind") == "Workload" and key in since:
                since[key] = None
        settle = self.settle * progress.pace(history).factor  # counted in the run's pace (progress.py)
        return bool(since) and all(t is None or end - t >= settle for t in since.values())

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        mon = [e for e in history if e.get("source") == "monitor"]
        grace = self.grace * progress.pace(history).factor  # counted in the run's pace (progress.py)
        deactivated: dict[str, float] = {}
        judged: dict[str, list[Finding]] = {}
        t0 = case_t0(history)
        for e in mon:
            key = str(e.get("key"))
            who = names.wl(key.partition("/")[2])
            if e.get("event") == "workload_active_changed":
                if e.get("active") is False:
                    deactivated.setdefault(key, e["ts"])
                    judged.setdefault(key, [])
                else:
                    deactivated.pop(key, None)
            elif e.get("event") == "workload_quota_reserved" and key in deactivated and e.get("active") is False:
                since = deactivated[key]
                sent = _admission_sent(history, key, e.get("resource_version"))
                at = f"t={e['ts'] - t0:.3f}s, {e['ts'] - since:.2f}s after it was deactivated"
                if sent is not None and sent < since:
                    judged[key].append(Finding(self.name, "held", f"{who}: reservation in flight",
                                               f"{who} got quota while inactive ({at}), but Kueue sent that admission "
                                               f"{since - sent:.3f}s before the deactivation was seen: a cycle in flight."))
                elif sent is not None or e["ts"] - since > grace:
                    how = (f"Kueue sent the admission {sent - since:.3f}s after the deactivation was seen" if sent is not None
                           else f"seen more than the grace of {grace:.2f}s (in the run's pace) after the deactivation")
                    judged[key].append(Finding(self.name, "violated", f"{who} got quota while inactive",
                                               f"{who} has spec.active=false and got a quota reservation in "
                                               f"{e.get('cluster_queue')} ({at}); {how}."))
                else:
                    judged[key].append(Finding(self.name, "inconclusive", f"{who}: reservation just after deactivation",
                                               f"{who} got quota while inactive ({at}), within the grace of "
                                               f"{grace:.2f}s (in the run's pace), and the history has no record of the admission write "
                                               "to tell whether it was in flight."))
        if not judged:
            return [Finding(self.name, "error", "no Workload was deactivated",
                            "No Workload of the case had spec.active=false during the case: "
                            "inactive_never_scheduled has no subject.")]
        out = []
        for key, found in judged.items():
            if found:
                out.extend(found)
            else:
                who = names.wl(key.partition("/")[2])
                out.append(Finding(self.name, "held", f"{who} not scheduled while inactive",
                                   f"{who} got no quota reservation while spec.active=false."))
        return out
