"""Log count: how often Kueue logged one message about an object, over the case or within any window of
`window` seconds, is within a bound — e.g. at most 3 "Workload re-queued" lines for a limits-only Workload in
any 5 s (kubernetes-sigs/kueue#9889: it is requeued for ever), or at least one "Preempted" for a victim.
Reads the history's `kueue` `log` events: Kueue's milestone lines (harness/kueue/log.py MILESTONES) and the
messages a case adds with `@pytest.mark.kueue_log("…")`, about the case's Workloads — a message that is
neither is never in the history, so with `min` such a checker says `inconclusive` when the history records
no line of that message at all. Parameters and examples: docs/checkers.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.checkers.write_count import mentioned, subject_matches
from harness.history.names import Names, case_t0, kobj_key

#: The log fields that name a Workload, in the order one is taken as the line's object (Kueue's scheduler,
#: preemption and Workload controller lines: pkg/scheduler/scheduler.go, preemption/preemption.go).
OBJECT_FIELDS = ("workload", "targetWorkload", "preemptingWorkload", "job")


def line_object(fields: Mapping[str, Any], field: str | None) -> str | None:
    """The "ns/name" a log line is about: its `field` (a klog KObj), else the first of OBJECT_FIELDS it has,
    else its top-level namespace/name (controller-runtime's reconciler lines)."""
    for f in ((field,) if field else OBJECT_FIELDS):
        k = kobj_key(fields.get(f))
        if k:
            return k
    if not field and isinstance(fields.get("name"), str):
        ns = fields.get("namespace")
        return f"{ns}/{fields['name']}" if isinstance(ns, str) and ns else fields["name"]
    return None


def most_within(times: Sequence[float], window: float | None) -> tuple[int, float, float]:
    """(the most lines in any `window` seconds — all of them when None —, that window's first and last time).
    `times` sorted."""
    if not times:
        return 0, 0.0, 0.0
    if window is None:
        return len(times), times[0], times[-1]
    best, lo, a = 0, 0, (0, 0)
    for hi, t in enumerate(times):
        while t - times[lo] > window:
            lo += 1
        if hi - lo + 1 > best:
            best, a = hi - lo + 1, (lo, hi)
    return best, times[a[0]], times[a[1]]


@register
class LogCount:
    """At most `max` / at least `min` Kueue log lines whose message matches `msg` (a regular expression,
    searched; anchor it for an exact message) about each object (`field`: the log field naming it, default
    the first of workload, targetWorkload, preemptingWorkload, job), within any `window` seconds (default:
    the whole case), or for the case as a whole (`per: case`). `objects`: roles, names or globs (as
    write_count); without them every object logged about counts. `fields` ({"added": False}): only lines whose
    every named field has that value (JSON values as they are: 0 is not false). Violated when a count is over `max`
    (decided at once) or, at the end, under `min`; inconclusive when a named object never appears or, with
    `min`, when the history holds no line of that message at all (it may not be recorded: docs/checkers.md).
    `until_admitted`: the count is final (decided, so a case stops observing) once every named object's Workload is
    Admitted in the objects read: Kueue re-queues no admitted Workload (a second pass, a requeue after a failed
    assignment: kubernetes-sigs/kueue#9889, #9591), so no evidence is waited for by the clock."""

    name: ClassVar[str] = "log_count"
    kind: ClassVar[str] = "invariant"

    def __init__(self, msg: str, max: int | None = None, min: int | None = None,  # noqa: A002
                 objects: Sequence[str] | str = (), field: str | None = None, window: float | None = None,
                 per: str = "object", fields: Mapping[str, Any] | None = None, until_admitted: bool = False) -> None:
        if not isinstance(msg, str) or not msg:
            raise ValueError("log_count: msg must be the message to count (a regular expression)")
        try:
            self.pattern = re.compile(msg)
        except re.error as e:
            raise ValueError(f"log_count: msg {msg!r} is not a regular expression: {e}") from None
        if max is None and min is None:
            raise ValueError("log_count: give max (at most) or min (at least), or both")
        for label, v in (("max", max), ("min", min)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"log_count: {label} must be a whole number ≥ 0, got {v!r}")
        if window is not None and (isinstance(window, bool) or not isinstance(window, (int, float)) or window <= 0):
            raise ValueError(f"log_count: window must be seconds > 0, got {window!r}")
        if per not in ("object", "case"):
            raise ValueError(f"log_count: per must be object or case, got {per!r}")
        if fields is not None and (not isinstance(fields, Mapping) or not all(isinstance(k, str) for k in fields)
                                   or not all(v is None or isinstance(v, (str, int, float, bool)) for v in fields.values())):
            raise ValueError(f"log_count: fields must map log field names to values ({{\"added\": false}}), got {fields!r}")
        self.fields = dict(fields or {})
        objects = (objects,) if isinstance(objects, str) else tuple(objects)
        if not isinstance(until_admitted, bool) or (until_admitted and not objects):
            raise ValueError("log_count: until_admitted is true or false, and true needs `objects` (whose admission "
                             "ends the count)")
        self.until_admitted = until_admitted
        if min and not objects and per != "case":
            raise ValueError("log_count: min per object needs `objects` (which ones must be logged about), or per: case")
        self.msg, self.max, self.min, self.objects = msg, max, min, objects
        self.field, self.window, self.per = field, (float(window) if window is not None else None), per

    def _bound(self) -> str:
        span = f" in any {self.window:g}s" if self.window else ""
        if self.min is not None and self.max is not None:
            return (f"{self.min}" if self.min == self.max else f"{self.min}–{self.max}") + span
        return (f"≤ {self.max}" if self.max is not None else f"≥ {self.min}") + span

    def times(self, history: History, names: Names) -> tuple[dict[str, list[float]], int]:
        """({subject: times of its lines}, lines of the message about any object)."""
        out: dict[str, list[float]] = {}
        total = 0
        for e in history:
            if e.get("source") != "kueue" or e.get("event") != "log" or not self.pattern.search(str(e.get("msg", ""))):
                continue
            f = e.get("fields") or {}
            if any(k not in f or f[k] != v or isinstance(f[k], bool) != isinstance(v, bool) for k, v in self.fields.items()):
                continue
            total += 1
            k = line_object(f, self.field)
            if self.per == "case":
                out.setdefault("case", []).append(e["ts"])
                continue
            if k is None:
                continue
            sub = next((s for s in self.objects if subject_matches(s, k, names.wl(k))), None) if self.objects else k
            if sub is not None:
                out.setdefault(sub, []).append(e["ts"])
        for s in self.objects if self.per == "object" else ("case",):
            out.setdefault(s, [])
        return out, total

    def _all_admitted(self, objects: Objects, names: Names) -> bool:
        """Whether each named object matches a Workload of the objects read that is Admitted=True."""
        wls = [w for w in objects.get("workloads") or [] if any(
            c.get("type") == "Admitted" and c.get("status") == "True" for c in (w.get("status") or {}).get("conditions") or [])]
        keys = [f"{(w.get('metadata') or {}).get('namespace')}/{(w.get('metadata') or {}).get('name')}" for w in wls]
        return bool(self.objects) and all(any(subject_matches(s, k, names.wl(k)) for k in keys) for s in self.objects)

    def _seen(self, history: History, sub: str, names: Names) -> bool:
        """Whether any event names `sub`: a write, watch delivery or monitor fact, or any Kueue log line."""
        if mentioned(history, sub, names):
            return True
        for e in history:
            if e.get("source") == "kueue" and e.get("event") == "log":
                f = e.get("fields") or {}
                if any((k := kobj_key(f.get(n))) and subject_matches(sub, k, names.wl(k)) for n in OBJECT_FIELDS):
                    return True
        return False

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Over `max` is final; so is every count once every named object is admitted (`until_admitted`);
        anything else is known only at the end of the case."""
        if self.until_admitted and self._all_admitted(objects, names):
            return True
        if self.max is None:
            return False
        return any(most_within(sorted(v), self.window)[0] > self.max for v in self.times(within_case(history), names)[0].values())

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        found, total = self.times(history, names)
        t0 = case_t0(history)
        shown = f"'{self.msg}'" + "".join(f" {k}={json.dumps(v)}" for k, v in self.fields.items())
        if not any(found.values()) and not self.objects and self.per == "object":
            return [Finding(self.name, "held", f"no {shown} lines",
                            f"Kueue logged no line matching {shown} about the case's objects (bound {self._bound()}).")]
        out = []
        for sub, ts in sorted(found.items()):
            who = "the case" if sub == "case" else names.text(names.wl(sub))
            n, a, b = most_within(sorted(ts), self.window)
            if self.min and n < self.min and total == 0:
                out.append(Finding(self.name, "inconclusive", f"no {shown} line recorded",
                                   f"The history holds no line matching {shown} about any object: is it a milestone "
                                   f"(harness/kueue/log.py) or declared with @pytest.mark.kueue_log? {who} cannot be judged."))
                continue
            if sub != "case" and not ts and not self._seen(history, sub, names):
                out.append(Finding(self.name, "inconclusive", f"{who} never seen",
                                   f"No event of the history names {who}: its log lines cannot be counted."))
                continue
            where = (f" (t={a - t0:.3f}–{b - t0:.3f}s)" if n else "")
            line = f"{who}: {n} line(s) matching {shown}" + (f" in {self.window:g}s" if self.window else "") + where \
                + f", {len(ts)} in all; bound {self._bound()}"
            if self.max is not None and n > self.max:
                out.append(Finding(self.name, "violated", f"{who}: {n}× {shown} (≤ {self.max})", line + "."))
            elif self.min is not None and n < self.min:
                out.append(Finding(self.name, "violated", f"{who}: {n}× {shown} (≥ {self.min})", line + "."))
            else:
                out.append(Finding(self.name, "held", f"{who}: {n}× {shown}", line + "."))
        return out
