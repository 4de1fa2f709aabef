"""Bounded evictions: no Workload is evicted (preempted included) more than `max` times while the case runs
— more is thrashing, e.g. two ClusterQueues preempting each other's Workloads under fair sharing
(kubernetes-sigs/kueue#13662). Counted from the invariant monitor's `workload_evicted` facts (each one an
Evicted condition turning True: admission resets it, pkg/workload/workload.go:849-875), and, for Workloads
the monitor did not see, from Kueue's watch deliveries through the proxy.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, observed_until, register, within_case
from harness.checkers.bounds import MAX_EVICTIONS
from harness.names import Names


def eviction_times(history: History) -> dict[str, list[tuple[float, str]]]:
    """"ns/name" -> [(ts, reason)] of each eviction: the monitor's `workload_evicted` events, else the
    proxy's `watch_event`s where Evicted turns True for a Workload the monitor never reported on."""
    out: dict[str, list[tuple[float, str]]] = {}
    for e in history:
        if e.get("source") == "monitor" and e.get("event") == "workload_evicted":
            out.setdefault(str(e.get("key")), []).append((e["ts"], str(e.get("reason") or "")))
    seen_by_monitor = set(out) | {str(e.get("key")) for e in history if e.get("source") == "monitor"
                                  and str(e.get("event", "")).startswith("workload_")}
    last: dict[str, bool] = {}
    for e in history:
        if e.get("source") != "proxy" or e.get("event") != "watch_event":
            continue
        key = f"{e.get('namespace')}/{e.get('name')}"
        if key in seen_by_monitor:
            continue
        now = (e.get("conditions") or {}).get("Evicted") == "True"
        if now and not last.get(key, False):
            out.setdefault(key, []).append((e["ts"], "watch"))
        last[key] = now
    return out


@register
class BoundedEvictions:
    """Each Workload (or only the named `workloads`: "name" in the case's namespace or "ns/name") is
    evicted at most `max` times in the case. Violated as soon as one is evicted more often; held otherwise;
    not applicable when nothing was evicted and nothing is named."""

    name: ClassVar[str] = "bounded_evictions"
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

    def __init__(self, max: int = MAX_EVICTIONS, workloads: tuple[str, ...] | list[str] = ()) -> None:  # noqa: A002
        if int(max) < 0:
            raise ValueError(f"bounded_evictions: max must be 0 or more, got {max}")
        self.max = int(max)
        self.workloads = tuple(workloads)

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Only a violation is decided early: more evictions may still come until the case ends."""
        return any(f.result == "violated" for f in self.check(history, objects, names))

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        times = eviction_times(history)
        wanted = {w if "/" in w else f"{names.ns}/{w}" for w in self.workloads}
        if wanted:
            times = {k: v for k, v in times.items() if k in wanted}
        if not times and not wanted:
            return [Finding(self.name, "not applicable", "no Workload was evicted",
                            "No eviction of any Workload was seen during the case.")]
        out = []
        t_end = observed_until(history)
        for key in sorted(wanted | set(times)):
            evs = times.get(key, [])
            who = names.wl(key.partition("/")[2])
            reasons = Counter(r for _, r in evs)
            why = ", ".join(f"{r or '?'} ×{n}" for r, n in reasons.most_common())
            if len(evs) > self.max:
                span = evs[-1][0] - evs[0][0]
                out.append(Finding(self.name, "violated", f"{who} evicted {len(evs)} times",
                                   f"{who} was evicted {len(evs)} times in {span:.2f}s ({why}), more than the bound of "
                                   f"{self.max}: it is thrashing."))
            else:
                out.append(Finding(self.name, "held", f"{who} evicted {len(evs)} time(s)",
                                   f"{who} was evicted {len(evs)} time(s) ({why or 'never'}) in the "
                                   f"{t_end - history[0]['ts'] if history else 0:.2f}s observed (bound {self.max})."))
        return out
