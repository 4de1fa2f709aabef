"""Assumption `watch_caught_up`: when a plan dropped Workload watch events, Kueue's watch later delivered
each such Workload as it finally was (its resourceVersion in the objects judged), or the Workload is gone.

Dropping events models an *unobserved intermediate state* (Sieve's term): Kueue misses some states of an
object but still learns its latest one, as after a re-list. When nothing writes the object again — often
because the write that would have followed was Kueue's own reaction to the dropped state — Kueue's view
stays stale for ever, which no real watch does (a watch delivers every change or ends, and the informer
re-lists). Such a run tests a fault that cannot happen, so its verdict is "error" (explore discards it).
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.history.names import Names


@register
class WatchCaughtUp:
    name: ClassVar[str] = "watch_caught_up"
    kind: ClassVar[str] = "assumption"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        dropped = {(e.get("namespace"), e.get("name")) for e in seen
                   if e.get("source") == "proxy" and e.get("event") == "watch_event_dropped"}
        if not dropped:
            return [Finding(self.name, "not applicable", "no watch event dropped",
                            "No rule dropped a watch event of the case's Workloads.", assumption=True)]
        final = {(w["metadata"].get("namespace"), w["metadata"].get("name")): str(w["metadata"].get("resourceVersion"))
                 for w in objects.get("workloads") or [] if isinstance(w.get("metadata"), dict)}
        stale = []
        for key in sorted(dropped, key=str):
            if key not in final:
                continue  # deleted: its DELETED event or a re-list tells Kueue
            delivered = [str(e.get("resource_version")) for e in seen if e.get("source") == "proxy"
                         and e.get("event") == "watch_event" and (e.get("namespace"), e.get("name")) == key]
            if final[key] not in delivered:
                stale.append(f"{names.wl(key[1])} is at resourceVersion {final[key]}, Kueue's watch last delivered "
                             f"{delivered[-1] if delivered else 'nothing'}")
        if stale:
            return [Finding(self.name, "violated", "Kueue never saw a Workload whose events were dropped as it is",
                            "; ".join(stale) + ": the dropped state was never superseded, a fault no real watch "
                            "makes.", assumption=True)]
        return [Finding(self.name, "held", "Kueue's watch caught up",
                        "Every Workload whose watch events were dropped was delivered to Kueue as it finally was.",
                        assumption=True)]
