"""Bounded evictions: no Workload is evicted (preempted included) more than `max` times while the case runs
— more is thrashing, e.g. two ClusterQueues preempting each other's Workloads under fair sharing
(kubernetes-sigs/kueue#13662). Counted from the invariant monitor's `workload_evicted` facts (each one an
Evicted condition turning True: admission resets it, pkg/workload/workload.go:849-875), and, for Workloads
the monitor did not see, from Kueue's watch deliveries through the proxy; and from Kueue's own writes
through the proxy: an eviction write (Evicted=True) answered 2xx after the Workload's last admission write
is one eviction (a repeated eviction write with no admission between — kubernetes-sigs/kueue#9428 — is not
another). Per Workload the larger count stands: the monitor reads the objects, and on a loaded machine it
sees a Workload that is evicted and re-admitted within its lag as evicted once, seconds late (2026-12-02,
load 15-27: 2 evictions of job-a seen before the preemptor's quota where Kueue sent 5), while Kueue's
writes are stamped when Kueue sent them. With `until_quota` (a Job of the case: the preemptor the victims
make room for) only evictions before its Workload first holds quota count (the earliest of the monitor's
fact, a watch delivery and Kueue's answered admission write): the contest for that quota is then over, and
the checker decides (held) at that moment.
"""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, observed_until, register, within_case
from harness.checkers import subjects
from harness.checkers.bounds import MAX_EVICTIONS
from harness.history.names import Names, case_t0


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


def _answered_ok(history: History) -> dict[object, float]:
    """flow -> when kube-apiserver's 2xx answer to it passed the proxy (the write took effect by then; a held
    request's own `request` event is older than its effect)."""
    return {e.get("flow"): e["ts"] for e in history if e.get("source") == "proxy" and e.get("event") == "response"
            and isinstance(e.get("status"), int) and 200 <= e["status"] < 300}


def write_eviction_times(history: History) -> dict[str, list[tuple[float, str]]]:
    """"ns/name" -> [(ts, "eviction write")] from Kueue's Workload status writes through the proxy (`request`
    events classified by harness/kueue/api.py, answered 2xx; ts: the answer's): an eviction write counts when
    it is the Workload's first, or the first since an admission write."""
    ok = _answered_ok(history)
    out: dict[str, list[tuple[float, str]]] = {}
    evicted: dict[str, bool] = {}
    for e in history:
        w = e.get("write")
        if e.get("source") != "proxy" or e.get("event") != "request" or not isinstance(w, dict) \
                or w.get("kind") != "Workload" or e.get("flow") not in ok:
            continue
        key = f"{w.get('namespace')}/{w.get('name')}"
        if w.get("write") == "admission":
            evicted[key] = False
        elif w.get("write") == "eviction" and not evicted.get(key, False):
            out.setdefault(key, []).append((ok[e.get("flow")], "eviction write"))
            evicted[key] = True
    return out


def quota_since(history: History, job: str, names: Names) -> float | None:
    """When the Workload of the case's Job `job` first held quota (the monitor's `workload_quota_reserved`,
    else Kueue's watch delivering QuotaReserved=True), or None."""
    wl = next((long for long, short in names.workloads.items() if short == job), None)
    if wl is None:
        return None
    key = f"{names.ns}/{wl}"
    ok = _answered_ok(history)
    return min((ok[e.get("flow")] if e.get("event") == "request" else e["ts"] for e in history
                if (e.get("source") == "monitor" and e.get("event") == "workload_quota_reserved" and e.get("key") == key)
                or (e.get("source") == "proxy" and e.get("event") == "watch_event" and e.get("name") == wl
                    and e.get("namespace") == names.ns and (e.get("conditions") or {}).get("QuotaReserved") == "True")
                or (e.get("source") == "proxy" and e.get("event") == "request" and e.get("flow") in ok
                    and isinstance(e.get("write"), dict) and e["write"].get("write") == "admission"
                    and e["write"].get("kind") == "Workload" and e["write"].get("name") == wl
                    and e["write"].get("namespace") == names.ns)),
               default=None)


@register
class BoundedEvictions:
    """Each Workload (or only the named `workloads`: "name" in the case's namespace or "ns/name") is
    evicted at most `max` times in the case — with `until_quota` (a Job's name), before that Job's Workload
    first holds quota. Violated as soon as one is evicted more often; held otherwise (also when no Workload
    of the case was evicted); `error` when no Workload of the case was seen, or a named one or the
    `until_quota` Job never was. Decided early on a violation, or (held) once the
    `until_quota` Workload holds quota."""

    name: ClassVar[str] = "bounded_evictions"
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

    def __init__(self, max: int = MAX_EVICTIONS, workloads: tuple[str, ...] | list[str] = (),  # noqa: A002
                 until_quota: str | None = None) -> None:
        if int(max) < 0:
            raise ValueError(f"bounded_evictions: max must be 0 or more, got {max}")
        if until_quota is not None and (not isinstance(until_quota, str) or not until_quota):
            raise ValueError(f"bounded_evictions: until_quota must be the name of one of the case's Jobs, got {until_quota!r}")
        self.max = int(max)
        self.workloads = tuple(workloads)
        self.until_quota = until_quota

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """A violation is decided at once; otherwise more evictions may still come until the case ends, or
        until the `until_quota` Workload holds quota."""
        if self.until_quota and quota_since(within_case(history), self.until_quota, names) is not None:
            return True
        return any(f.result == "violated" for f in self.check(history, objects, names))

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        until = quota_since(history, self.until_quota, names) if self.until_quota else None

        def before(found: dict[str, list[tuple[float, str]]]) -> dict[str, list[tuple[float, str]]]:
            if until is None:
                return found
            return {k: kept for k, v in found.items() if (kept := [(t, r) for t, r in v if t < until])}

        # The larger count per Workload stands, each source cut at `until` first: the monitor sees evictions
        # seconds late on a loaded machine (kind, 8 busy loops: 5 evictions of job-a, all 5 seen by the monitor
        # but 2 of them after the preemptor's admission write, which Kueue's own writes show before it).
        times = before(eviction_times(history))
        for key, writes in before(write_eviction_times(history)).items():
            if len(writes) > len(times.get(key, [])):
                times[key] = writes
        wanted = {w if "/" in w else f"{names.ns}/{w}" for w in self.workloads}
        if wanted:
            times = {k: v for k, v in times.items() if k in wanted}
        seen = subjects.workloads_seen(history, objects, names.ns)
        out = []
        if self.until_quota and self.until_quota not in subjects.jobs_created(history, objects, names.ns) and \
                subjects.workload_of_job(history, objects, names.ns, self.until_quota) is None:
            out.append(Finding(self.name, "error", f"Job {self.until_quota} was named but never created",
                               f"bounded_evictions counts evictions until Job {self.until_quota}'s Workload holds "
                               "quota, but no such Job or Workload was seen in the case."))
        for key in sorted(wanted - set(times)):
            ns, _, name = key.partition("/")
            if name not in (seen if ns == names.ns else subjects.workloads_seen(history, objects, ns)):
                out.append(Finding(self.name, "error", f"Workload {names.wl(name)} was named but never seen",
                                   f"bounded_evictions cannot count the evictions of {names.wl(name)}: no watch "
                                   "delivered it, no plan step created it, and it is not among the objects judged."))
                wanted.discard(key)
        if not times and not wanted:
            if not seen and not out:
                out.append(Finding(self.name, "error", "no Workload of the case was seen",
                                   "No Workload of the case was seen during the case: bounded_evictions has "
                                   "nothing to count."))
            elif seen and not out:
                out.append(Finding(self.name, "held", "no Workload was evicted",
                                   f"None of the case's {len(seen)} Workload(s) was evicted during the case "
                                   f"(bound {self.max})."))
            return out
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
                window = (f"before {self.until_quota} got quota (t={until - case_t0(history):.3f}s)"
                          if until is not None else
                          f"in the {t_end - history[0]['ts'] if history else 0:.2f}s observed")
                out.append(Finding(self.name, "held", f"{who} evicted {len(evs)} time(s)",
                                   f"{who} was evicted {len(evs)} time(s) ({why or 'never'}) {window} (bound {self.max})."))
        return out
