"""Write count: how many writes of one kind Kueue sent for an object (or a role, or the whole case) is within
a bound — "at most one eviction PATCH per victim" (kubernetes-sigs/kueue#9428: on v0.16.1 the scheduler sent
3–7 eviction PATCHes for one victim of one preemption; one from v0.16.6, fix #9437), "at least one
admission". Counted from the proxy's `request` events (every write Kueue sent through it, classified by
harness/kueue/api.py `classify_request`: the Workload status classes admission, eviction, quota_release,
pending, finish, other; for other writes the HTTP verb), optionally only those kube-apiserver answered 2xx
(`answered: ok`, from the `response` events of the same flow). Generic over the history: no case knowledge.
Parameters and examples: docs/checkers.md.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.history.names import Names, case_t0
from harness.kueue.api import WRITE_CLASSES

#: Verbs a write of a non-status object is classified as (harness/kueue/api.py: the method in lower case).
VERBS = ("post", "put", "patch", "delete")
PER = ("object", "role", "case")
ANSWERED = ("any", "ok")


def subject_matches(spec: str, key: str, role: str) -> bool:
    """Whether a case's name for a subject (`spec`) means the object "ns/name" whose role is `role` (its
    short name, harness/history/names.py: `victim` for the Workload ns/job-victim-1a2b3): the role itself,
    the object's name, "ns/name", or a glob over any of them (`job-victim-*`)."""
    name = key.partition("/")[2] or key
    return any(fnmatch.fnmatchcase(v, spec) for v in (role, name, key))


def writes_of(history: History, write: str, kind: str, answered: str = "any") -> list[Mapping[str, Any]]:
    """The proxy's `request` events of Kueue writes of class or verb `write` ("any": every write) to objects
    of `kind` (Workload, Job, ...: `KueueWrite.kind`), in time order; with answered="ok" only those whose
    `response` had a 2xx status (a write the proxy failed, or kube-apiserver refused, does not count)."""
    ok: set[Any] = set()
    if answered == "ok":
        ok = {e.get("flow") for e in history if e.get("source") == "proxy" and e.get("event") == "response"
              and isinstance(e.get("status"), int) and 200 <= e["status"] < 300}
    out = []
    for e in history:
        w = e.get("write")
        if e.get("source") != "proxy" or e.get("event") != "request" or not isinstance(w, Mapping):
            continue
        if w.get("kind") != kind or (write != "any" and w.get("write") != write):
            continue
        if answered == "ok" and e.get("flow") not in ok:
            continue
        out.append(e)
    return out


def _key(w: Mapping[str, Any]) -> str:
    return f"{w.get('namespace')}/{w.get('name')}" if w.get("namespace") else str(w.get("name"))


def mentioned(history: History, spec: str, names: Names) -> bool:
    """Whether any event of the history names an object that `spec` means (a write, a response, a watch
    delivery, a monitor fact): an object never seen cannot be judged."""
    for e in history:
        keys = []
        if isinstance(e.get("write"), Mapping):
            keys.append(_key(e["write"]))
        if e.get("name"):
            keys.append(f"{e.get('namespace')}/{e['name']}" if e.get("namespace") else str(e["name"]))
        if isinstance(e.get("key"), str):
            keys.append(e["key"])
        if any(subject_matches(spec, k, names.wl(k)) for k in keys):
            return True
    return False


@register
class WriteCount:
    """At most `max` and at least `min` writes of class or verb `write` to objects of `kind`, counted per
    object ("ns/name"), per role (the short name: a Workload re-created for the same Job is one role) or
    for the whole case (`per`). `objects`: the subjects (roles, names or globs; docs/checkers.md); without
    them every object written counts (then `min` needs `per: case`). `answered`: "any" (every request Kueue
    sent) or "ok" (answered 2xx). Violated as soon as a count exceeds `max` (final: counts only grow), or at
    the end when one is below `min`; inconclusive when a named subject never appears in the history (it
    cannot be judged, e.g. its events were not recorded); held otherwise."""

    name: ClassVar[str] = "write_count"
    kind: ClassVar[str] = "invariant"

    def __init__(self, write: str = "any", kind: str = "Workload", max: int | None = None,  # noqa: A002
                 min: int | None = None, objects: Sequence[str] | str = (), per: str = "object",  # noqa: A002
                 answered: str = "any") -> None:
        known = (*WRITE_CLASSES, *VERBS, "any")
        if write not in known:
            raise ValueError(f"write_count: write must be one of {', '.join(known)} (harness/kueue/api.py), got {write!r}")
        if max is None and min is None:
            raise ValueError("write_count: give max (at most) or min (at least), or both")
        for label, v in (("max", max), ("min", min)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"write_count: {label} must be a whole number ≥ 0, got {v!r}")
        if max is not None and min is not None and min > max:
            raise ValueError(f"write_count: min ({min}) is above max ({max})")
        if per not in PER:
            raise ValueError(f"write_count: per must be one of {', '.join(PER)}, got {per!r}")
        if answered not in ANSWERED:
            raise ValueError(f"write_count: answered must be one of {', '.join(ANSWERED)}, got {answered!r}")
        objects = (objects,) if isinstance(objects, str) else tuple(objects)
        if min and not objects and per != "case":
            raise ValueError("write_count: min per object needs `objects` (which ones must be written), or per: case")
        self.write, self.kind_, self.max, self.min = write, kind, max, min
        self.objects, self.per, self.answered = objects, per, answered

    def _what(self) -> str:
        verb = "write" if self.write == "any" else self.write
        return f"{verb} {'request' if self.answered == 'any' else 'applied write'}s of {self.kind_}s"

    def _bound(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min}" if self.min == self.max else f"{self.min}–{self.max}"
        return f"≤ {self.max}" if self.max is not None else f"≥ {self.min}"

    def counts(self, history: History, names: Names) -> dict[str, list[Mapping[str, Any]]]:
        """{subject: its writes}: subject is "ns/name", the role, or "case" (per `per`); each named subject
        is present (with no writes when it had none)."""
        writes = writes_of(history, self.write, self.kind_, self.answered)
        if self.objects:
            writes = [e for e in writes if any(subject_matches(s, _key(e["write"]), names.wl(_key(e["write"])))
                                               for s in self.objects)]
        out: dict[str, list[Mapping[str, Any]]] = {}
        if self.per == "case":
            out["case"] = writes
            return out
        if self.objects and self.per == "role":
            for s in self.objects:
                out.setdefault(s, [])
        for e in writes:
            k = _key(e["write"])
            sub = names.wl(k) if self.per == "role" else k
            if self.per == "role" and self.objects:
                sub = next(s for s in self.objects if subject_matches(s, k, names.wl(k)))
            out.setdefault(sub, []).append(e)
        if self.objects and self.per == "object":
            for s in self.objects:  # a named subject with no write is judged too (min), under its own name
                if not any(subject_matches(s, k, names.wl(k)) for k in out):
                    out[s] = []
        return out

    @property
    def settles_when_quiet(self) -> bool:
        """With a `min` only, a case may stop observing once nothing of it moves (bounds.QUIET); a `max` counts
        writes Kueue repeats after backoffs (kubernetes-sigs/kueue#9428), which a quiet second does not end."""
        return self.max is None

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Over `max` is final (counts only grow); so is every subject at `min` when there is no `max`
        (nothing can violate it any more); anything else is known only at the end of the case."""
        counts = self.counts(within_case(history), names)
        if self.max is not None:
            return any(len(v) > self.max for v in counts.values())
        return bool(counts) and all(len(v) >= (self.min or 0) for v in counts.values())

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        counts = self.counts(history, names)
        t0 = case_t0(history)
        if not any(counts.values()) and not self.objects and self.per != "case":
            return [Finding(self.name, "held", f"no {self._what()}",
                            f"Kueue sent no {self._what()} during the case (bound {self._bound()} per {self.per}).")]
        out = []
        for sub, evs in sorted(counts.items()):
            who = "the case" if sub == "case" else names.text(names.wl(sub) if self.per == "object" else sub)
            if sub != "case" and not evs and not mentioned(history, sub, names):
                out.append(Finding(self.name, "inconclusive", f"{who} never seen",
                                   f"No event of the history names {who}: its writes cannot be counted (is it an "
                                   f"object of the case, recorded in its history?)."))
                continue
            when = ", ".join(f"t={e['ts'] - t0:.3f}s" for e in evs[:10]) + (" …" if len(evs) > 10 else "")
            n = len(evs)
            line = f"{who}: {n} {self._what()}" + (f" ({when})" if evs else "") + f"; bound {self._bound()}"
            if self.max is not None and n > self.max:
                out.append(Finding(self.name, "violated", f"{who}: {n} {self.write} writes (≤ {self.max})", line + "."))
            elif self.min is not None and n < self.min:
                out.append(Finding(self.name, "violated", f"{who}: {n} {self.write} writes (≥ {self.min})", line + "."))
            else:
                out.append(Finding(self.name, "held", f"{who}: {n} {self.write} writes", line + "."))
        return out
