"""Which requests a fault rule applies to (`Match`, over a classified KueueWrite and raw fields), the
error every part of the plan language raises (`RuleError`), and the small checks the rest shares: JSONPath
and regular expressions that cannot stall the proxy, how values compare (`fact_value`). Pure logic.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from harness.kueue.api import KNOWN_KINDS, WRITE_CLASSES, KueueWrite, WatchEvent, parse_path

#: Where a rule acts on a flow: before kube-apiserver sees the request, or after it answered.
STAGES = ("request", "response")
#: Watch event types a watch action's `match.event_type` may name (BOOKMARK events are never acted on).
WATCH_EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
#: The throwaway Workload harness/nemesis/runner.py touches so that a delayed watch line can go out on time;
#: watch rules never act on its events (a rule delaying it would keep the ticks going).
TICK_WORKLOAD = "kueue-harness-tick"


class RuleError(ValueError):
    """A rule or match has an unknown key or a bad value; the message names the rule and the key
    ("rule a: delay must be >= 0"), which the plan loader turns into `file:line:` (harness/plan/load.py).
    `key`: the rule key the message is about, when one is (the loader points at its line)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@lru_cache(maxsize=256)
def _jsonpath(expr: str):
    from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
    from jsonpath_ng.ext import parse

    try:
        return parse(expr)
    except (JsonPathLexerError, JsonPathParserError, Exception) as e:  # noqa: BLE001 - any parse failure
        raise RuleError(f"match.body_jsonpath: {expr!r} is not a JSONPath: {e}") from None


HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def _nested_repeat(pattern: str) -> bool:
    """True if `pattern` has a repeat inside a repeat that can backtrack for minutes: an unbounded repeat
    (*, +, {n,}) inside any repeat that may run more than once (`(a+)+`, `(.*e){12}`: polynomial of degree
    12), or an alternation inside an unbounded repeat (`(a|aa)+b`: exponential). Uses the re module's own
    parser (re._parser, Python 3.11)."""
    from re import _constants as c
    from re import _parser as p

    repeats = (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT))

    def walk(items, multi: bool, unbounded_outer: bool) -> bool:
        # multi: inside a repeat that may match more than once; unbounded_outer: inside an unbounded one.
        for op, av in items:
            if op in repeats:
                lo, hi, sub = av
                unbounded = hi == c.MAXREPEAT
                if unbounded and multi:
                    return True
                if walk(sub, multi or hi > 1, unbounded_outer or unbounded):
                    return True
            elif op == c.SUBPATTERN:
                if walk(av[-1], multi, unbounded_outer):
                    return True
            elif op == c.BRANCH:
                if unbounded_outer:
                    return True
                if any(walk(b, multi, unbounded_outer) for b in av[1]):
                    return True
            elif op in (c.ASSERT, c.ASSERT_NOT):
                if walk(av[1], multi, unbounded_outer):
                    return True
        return False

    return walk(p.parse(pattern), False, False)


def _check_keys(d: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise RuleError(f"{what}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class Match:
    """Which requests a rule applies to. Every given field must match; None means any.

    `write`: a class from kueue_api.WRITE_CLASSES (Workload status writes) or a verb ("patch", "post",
    "delete", "put") for other writes; `name`/`namespace`: fnmatch globs; `field_manager`: exact;
    `kind`: "Workload", "Job", ...; `method`: HTTP verb; `path_regex`: searched in the full path+query;
    `resource`/`subresource`: from the API path ("workloads", "status"); `body_jsonpath`: a JSONPath
    (jsonpath-ng, extended syntax) that must find something in the JSON body, and equal `body_equals`
    (compared as strings) when that is given; `event_type`: for watch actions only, the watch event's
    type (ADDED, MODIFIED or DELETED; several joined by "|").
    """

    write: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    field_manager: str | None = None
    method: str | None = None
    path_regex: str | None = None
    resource: str | None = None
    subresource: str | None = None
    body_jsonpath: str | None = None
    body_equals: str | None = None
    event_type: str | None = None

    def __str__(self) -> str:
        """Only the fields that are set: "write=admission, name=job-job1-*"."""
        return ", ".join(f"{k}={v}" for k, v in self.__dict__.items() if v is not None) or "any request"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Match":
        """Build from a dict, raising RuleError on unknown keys, classes or bad regexes."""
        if not isinstance(d, dict):
            raise RuleError(f"match: expected an object, got {type(d).__name__}")
        _check_keys(d, set(cls.__dataclass_fields__), "match")
        for k, v in d.items():
            if v is not None and not isinstance(v, str):
                raise RuleError(f"match.{k}: expected a string, got {type(v).__name__}")
        m = cls(**d)
        if m.write and m.write not in WRITE_CLASSES and m.write not in ("post", "put", "patch", "delete"):
            raise RuleError(f"match.write: {m.write!r} is not one of {', '.join(WRITE_CLASSES)} or a write verb")
        if m.method is not None and m.method.upper() not in HTTP_METHODS:
            raise RuleError(f"match.method: {m.method!r} is not an HTTP method ({', '.join(HTTP_METHODS)})")
        if m.kind is not None and m.kind not in KNOWN_KINDS:
            # A Kind is matched exactly, as kube-apiserver spells it: "workload" or "workloads" never matches.
            same = next((k for k, r in KNOWN_KINDS.items() if m.kind.lower() in (k.lower(), r)), None)
            if same:
                raise RuleError(f"match.kind: {m.kind!r} never matches: the Kind is spelt {same!r} "
                                f"(the resource, {KNOWN_KINDS[same]!r}, goes in match.resource)")
        if m.path_regex:
            try:
                re.compile(m.path_regex)
            except re.error as e:
                raise RuleError(f"match.path_regex: {e}") from None
            if _nested_repeat(m.path_regex):
                # The proxy matches on its event loop: a regex that backtracks exponentially would stall
                # every request Kueue makes (found by trying `^(.+)+Z$`).
                raise RuleError(f"match.path_regex: {m.path_regex!r} nests an unbounded repeat inside another "
                                "repeat or an alternation inside an unbounded repeat (like (a+)+, (.*e){12}, (a|aa)+), "
                                "which can backtrack for minutes; write it without the nesting")
        for k in ("name", "namespace"):
            glob = getattr(m, k)
            if glob and glob.count("[") != glob.count("]"):
                raise RuleError(f"match.{k}: glob {glob!r} has an unbalanced '['")
        if m.body_jsonpath == "":
            raise RuleError("match.body_jsonpath is empty: it would match every request; give a JSONPath "
                            "('$.status.reservingWorkloads') or leave the key out")
        if m.body_jsonpath:
            _jsonpath(m.body_jsonpath)
        if m.body_equals is not None and not m.body_jsonpath:
            raise RuleError("match.body_equals needs match.body_jsonpath")
        if m.event_type is not None:
            bad = [t for t in m.event_type.split("|") if t not in WATCH_EVENT_TYPES]
            if bad:
                raise RuleError(f"match.event_type: {bad[0]!r} is not one of {', '.join(WATCH_EVENT_TYPES)} "
                                "(several: joined by '|')")
        return m

    def matches_watch_event(self, ev: WatchEvent) -> bool:
        """True if a Workload watch event matches `name`, `namespace` and `event_type` (the only keys watch
        actions take). BOOKMARK and ERROR events, and events without an object name, never match."""
        if ev.type not in WATCH_EVENT_TYPES or ev.name is None:
            return False
        if self.event_type and ev.type not in self.event_type.split("|"):
            return False
        if self.name and not fnmatch.fnmatchcase(ev.name, self.name):
            return False
        if self.namespace and not fnmatch.fnmatchcase(ev.namespace or "", self.namespace):
            return False
        return True

    def matches(self, write: KueueWrite | None, method: str, path: str, body: Any = None) -> bool:
        """True if a request (its classification `write`, HTTP `method`, full `path`, parsed JSON `body`)
        matches."""
        if self.method and self.method.upper() != method.upper():
            return False
        if self.path_regex and not re.search(self.path_regex, path):
            return False
        if self.resource or self.subresource:
            ref = parse_path(path)
            if ref is None or (self.resource and ref.resource != self.resource) or (
                self.subresource and ref.subresource != self.subresource
            ):
                return False
        if self.body_jsonpath:
            found = [m.value for m in _jsonpath(self.body_jsonpath).find(body)] if body is not None else []
            if not found or (self.body_equals is not None and not any(str(v) == self.body_equals for v in found)):
                return False
        needs_write = any(
            v is not None for v in (self.write, self.kind, self.name, self.namespace, self.field_manager)
        )
        if not needs_write:
            return True
        if write is None:
            return False
        if self.write and self.write != write.write:
            return False
        if self.kind and self.kind != write.kind:
            return False
        if self.name and not fnmatch.fnmatchcase(write.name or "", self.name):
            return False
        if self.namespace and not fnmatch.fnmatchcase(write.namespace or "", self.namespace):
            return False
        if self.field_manager and self.field_manager != write.field_manager:
            return False
        return True


def check_regex(pattern: Any, what: str) -> None:
    """Raise RuleError unless `pattern` is a string that compiles and cannot backtrack for minutes."""
    if not isinstance(pattern, str) or not pattern:
        raise RuleError(f"{what}: expected a regular expression (a non-empty string)")
    try:
        re.compile(pattern)
    except re.error as e:
        raise RuleError(f"{what}: {pattern!r} is not a regular expression: {e}") from None
    if _nested_repeat(pattern):
        raise RuleError(f"{what}: {pattern!r} nests an unbounded repeat inside another repeat or an "
                        "alternation inside an unbounded repeat (like (a+)+, (.*e){12}, (a|aa)+), which can backtrack "
                        "for minutes; write it without the nesting")


def fact_value(v: Any) -> str:
    """How an `equals` value and a value found in an object compare: strings as they are, anything else as
    JSON (`false`, `3`, `null`), so `equals: false` and `equals: "false"` both take a JSON false."""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)
