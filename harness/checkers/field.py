"""Field: any field of any object of the case, judged in the objects read at the verdict — a JSONPath that must
(or must never) equal, contain or match a value, on each object or counted per owner ("at most one admitted
slice per Job": kubernetes-sigs/kueue PR #11327, two replacement slices for one old one). So a bug Kueue leaves
in an object (an admission check's message, a second active slice) is judged from the object itself, never from
a log line whose format changes between Kueue versions (PR #13785's "Event occurred" line, which v0.17 never
writes). Uses jsonpath-ng's extended syntax (filters: `$.status.admissionChecks[?(@.name=="prov")].message`).
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from harness.checkers.base import Finding, History, Objects, register
from harness.history.names import Names

#: Kinds the objects judged hold (CaseContext.objects): kind -> its key there. LocalQueues and Pods are read when
#: the case runs the invariant monitor (the checker asks for it: needs_monitor).
KINDS = {"Workload": "workloads", "Job": "jobs", "ClusterQueue": "clusterqueues", "Cohort": "cohorts",
         "LocalQueue": "localqueues", "Pod": "pods"}


def _values(obj: Mapping[str, Any], path: Any) -> list[Any]:
    return [m.value for m in path.find(obj)]


def _compiled(what: str, expr: str) -> Any:
    """The JSONPath `expr` of parameter `what`, compiled; ValueError saying so when it is not one."""
    from harness.plan.match import RuleError, _jsonpath

    try:
        return _jsonpath(expr)
    except RuleError as e:
        raise ValueError(f"field: {what} {expr!r} is not a JSONPath ({str(e).split(': ', 2)[-1]})") from None


def _owner(obj: Mapping[str, Any]) -> str | None:
    """"Kind/name" of the object's controller owner (else its first owner), None without one."""
    refs = [r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if isinstance(r, Mapping)]
    ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else None


@register
class FieldInvariant:
    """On each object of `kind` (named by `objects`: names or globs; default all of the case's), the values at
    JSONPath `path` satisfy one of `equals` (compared as JSON: `false` is not `"false"`… unless both are written
    so), `contains` (a substring of a string value, or an item of a list value) or `matches` (a regular expression
    searched in the value as text). `never: true` turns it round: no value may satisfy it. With `per: owner`,
    `at_most: N` objects of each owner (ownerReferences, the controller first) may satisfy it. `unless`: a JSONPath
    that leaves out every object where it finds something (a finished Workload slice:
    `$.status.conditions[?(@.type=="Finished" && @.status=="True")]`). Judged in the objects read at the verdict.
    `error` when no object of `kind` (of `objects`, not left out by `unless`) is there to judge."""

    name: ClassVar[str] = "field"
    kind: ClassVar[str] = "invariant"
    #: Judged in the objects at the verdict, which Kueue may still change (a fixed build clears a stale message):
    #: a case observes until nothing of it moved for bounds.QUIET in the run's pace, then reads them.
    settles_when_quiet: ClassVar[bool] = True

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Never before the end: the value that counts is the one at the verdict (see settles_when_quiet)."""
        return False

    def __init__(self, kind: str, path: str, equals: Any = None, contains: Any = None, matches: str | None = None,
                 never: bool = False, objects: Sequence[str] | str = (), per: str = "object",
                 at_most: int | None = None, unless: str | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"field: kind {kind!r} is not one of {', '.join(KINDS)}")
        self.path = _compiled("path", path)
        self.unless_text, self.unless = unless, (_compiled("unless", unless) if unless is not None else None)
        given = [k for k, v in (("equals", equals), ("contains", contains), ("matches", matches)) if v is not None]
        if len(given) != 1:
            raise ValueError("field: give exactly one of equals, contains or matches")
        if matches is not None:
            try:
                self.regex = re.compile(matches)
            except re.error as e:
                raise ValueError(f"field: matches {matches!r} is not a regular expression: {e}") from None
        if per not in ("object", "owner"):
            raise ValueError(f"field: per must be object or owner, got {per!r}")
        if (per == "owner") != (at_most is not None):
            raise ValueError("field: per: owner goes with at_most: N (how many of an owner's objects may hold it), "
                             "and at_most with per: owner")
        if per == "owner" and never:
            raise ValueError("field: per: owner counts the objects where it holds; never does not go with it")
        if at_most is not None and (isinstance(at_most, bool) or not isinstance(at_most, int) or at_most < 0):
            raise ValueError(f"field: at_most must be a whole number ≥ 0, got {at_most!r}")
        self.kind_name, self.path_text, self.test = kind, path, given[0]
        self.value = {"equals": equals, "contains": contains, "matches": matches}[given[0]]
        self.never, self.per, self.at_most = bool(never), per, at_most
        self.objects = (objects,) if isinstance(objects, str) else tuple(objects)

    @property
    def needs_monitor(self) -> bool:
        """LocalQueues and Pods are in the objects judged only when the monitor runs (CaseContext.objects)."""
        return self.kind_name in ("LocalQueue", "Pod")

    def _holds(self, v: Any) -> bool:
        import json

        if self.test == "equals":
            return json.dumps(v, sort_keys=True) == json.dumps(self.value, sort_keys=True)
        if self.test == "contains":
            if isinstance(v, list):
                return self.value in v
            return isinstance(v, str) and str(self.value) in v
        return bool(self.regex.search(v if isinstance(v, str) else json.dumps(v, sort_keys=True)))

    def _words(self) -> str:
        how = {"equals": "equal to", "contains": "containing", "matches": "matching"}[self.test]
        return f"{self.path_text} {'not ' if self.never else ''}{how} {self.value!r}"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        subjects = []
        for obj in objects.get(KINDS[self.kind_name]) or []:
            meta = obj.get("metadata") or {}
            name, ns = str(meta.get("name")), meta.get("namespace")
            if ns not in (None, names.ns) and not self.objects:
                continue
            if self.objects and not any(fnmatch.fnmatchcase(v, s) for s in self.objects
                                        for v in (name, f"{ns}/{name}", names.wl(name))):
                continue
            if self.unless is not None and _values(obj, self.unless):
                continue
            subjects.append(obj)
        if not subjects:
            return [Finding(self.name, "error", f"no {self.kind_name} to judge",
                            f"No {self.kind_name}{' named ' + ', '.join(self.objects) if self.objects else ' of the case'} "
                            f"{'not left out by ' + repr(self.unless_text) + ' ' if self.unless_text else ''}"
                            f"was among the objects read at the verdict: field ({self._words()}) has no subject.")]
        holding = {id(o): any(self._holds(v) for v in _values(o, self.path)) for o in subjects}

        def who(o: Mapping[str, Any]) -> str:
            return names.text(f"{self.kind_name} {(o.get('metadata') or {}).get('name')}")

        if self.per == "owner":
            counts = Counter(_owner(o) or "(no owner)" for o in subjects if holding[id(o)])
            over = {k: n for k, n in counts.items() if n > (self.at_most or 0)}
            if over:
                return [Finding(self.name, "violated", f"{names.text(k)}: {n} {self.kind_name}s with {self.path_text}",
                                f"{n} {self.kind_name}s of {names.text(k)} have {self._words()} (at most "
                                f"{self.at_most}), at the verdict.") for k, n in sorted(over.items())]
            return [Finding(self.name, "held", f"at most {self.at_most} per owner",
                            f"No owner has more than {self.at_most} {self.kind_name}s where {self._words()} "
                            f"({len(subjects)} judged).")]
        out = []
        for o in subjects:
            ok = holding[id(o)] != self.never
            vals = _values(o, self.path)
            shown = ", ".join(repr(v)[:120] for v in vals) or "nothing at that path"
            out.append(Finding(self.name, "held" if ok else "violated",
                               f"{who(o)}: {self.path_text} {'as expected' if ok else 'wrong'}",
                               f"{who(o)} must have {self._words()}; at the verdict it has {shown}."))
        return out
