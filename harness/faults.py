"""Fault rules: what request to act on (a Match over a classified KueueWrite and raw fields) and what to
do with it (hold the request, hold the response, delay, fail with a Kubernetes Status). Pure logic.

The proxy addon asks `Rule.matches()` for every request; the harness builds rules with the same class,
so Python cases and the control channel share one definition.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.kueue_api import WRITE_CLASSES, KueueWrite, ResourceRef

STAGES = ("request", "response")
ACTIONS = ("hold", "delay", "fail")


class RuleError(ValueError):
    """A rule or match has an unknown key or a bad value; the message names it."""


def _check_keys(d: dict[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise RuleError(f"{what}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class Match:
    """Which requests a rule applies to. Every given field must match; None means any.

    `write`: a class from kueue_api.WRITE_CLASSES (Workload status writes) or a verb ("patch", "post",
    "delete", "put") for other writes; `name`/`namespace`: fnmatch globs; `field_manager`: exact;
    `kind`: "Workload", "Job", ...; `method`: HTTP verb; `path_regex`: searched in the full path+query.
    """

    write: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    field_manager: str | None = None
    method: str | None = None
    path_regex: str | None = None

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
        if m.path_regex:
            try:
                re.compile(m.path_regex)
            except re.error as e:
                raise RuleError(f"match.path_regex: {e}") from None
        return m

    def matches(self, write: KueueWrite | None, method: str, path: str) -> bool:
        """True if a request (its classification `write`, HTTP `method`, full `path`) matches."""
        if self.method and self.method.upper() != method.upper():
            return False
        if self.path_regex and not re.search(self.path_regex, path):
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


@dataclass(frozen=True)
class Rule:
    """A fault: at `stage` ("request" before kube-apiserver sees it, "response" after it answered),
    do `action` to the first `times` matching requests (None = every match).

    action "hold": park the flow until released or failed through the control channel (or until
    `max_hold` seconds pass: then it is released and the hold is marked expired);
    action "delay": wait `delay` seconds, then continue;
    action "fail": answer `status` with a Kubernetes Status body (request stage: the server is never
    contacted; response stage: the server's answer is replaced).
    """

    id: str
    match: Match
    action: str = "hold"
    stage: str = "request"
    times: int | None = 1
    status: int = 500
    reason: str = "InternalError"
    message: str = "injected by kueue-harness"
    delay: float = 0.0
    max_hold: float = 600.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Rule":
        """Build from a dict (the control channel's JSON). Raises RuleError on bad input."""
        _check_keys(d, set(cls.__dataclass_fields__), f"rule {d.get('id', '?')}")
        if not d.get("id"):
            raise RuleError("rule: `id` is required")
        d = dict(d)
        match = d.get("match") or {}
        if not isinstance(match, dict):
            raise RuleError(f"rule {d['id']}: match: expected an object, got {type(match).__name__}")
        d["match"] = Match.from_dict(dict(match))
        for k, types in (("times", int), ("status", int), ("delay", (int, float)), ("max_hold", (int, float))):
            if k not in d or (k == "times" and d[k] is None):
                continue
            if isinstance(d[k], bool) or not isinstance(d[k], types):
                raise RuleError(f"rule {d['id']}: {k} must be a number, got {d[k]!r}")
        r = cls(**d)
        if r.action not in ACTIONS:
            raise RuleError(f"rule {r.id}: action {r.action!r} is not one of {', '.join(ACTIONS)}")
        if r.stage not in STAGES:
            raise RuleError(f"rule {r.id}: stage {r.stage!r} is not one of {', '.join(STAGES)}")
        if r.times is not None and r.times < 1:
            raise RuleError(f"rule {r.id}: times must be >= 1 or null")
        if not 100 <= r.status <= 599:
            raise RuleError(f"rule {r.id}: status {r.status} is not an HTTP status")
        if r.delay < 0 or r.max_hold <= 0:
            raise RuleError(f"rule {r.id}: delay must be >= 0 and max_hold > 0")
        return r

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["match"] = {k: v for k, v in d["match"].items() if v is not None}
        return d


def kubernetes_status(code: int, reason: str, message: str) -> dict[str, Any]:
    """A metav1.Status body as kube-apiserver sends it for a failed request."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class RuleState:
    """A rule in the proxy with how many requests it acted on."""

    rule: Rule
    hits: int = 0

    def take(self, write: KueueWrite | None, method: str, path: str, stage: str) -> bool:
        """If this rule applies to the request at `stage` and has uses left, count it and return True."""
        if self.rule.stage != stage:
            return False
        if self.rule.times is not None and self.hits >= self.rule.times:
            return False
        if not self.rule.match.matches(write, method, path):
            return False
        self.hits += 1
        return True


@dataclass
class RuleBook:
    """The rules a proxy holds, in insertion order; the first rule that takes a request acts on it."""

    rules: dict[str, RuleState] = field(default_factory=dict)

    def add(self, rule: Rule) -> None:
        if rule.id in self.rules:
            raise RuleError(f"rule {rule.id}: a rule with this id is already loaded")
        self.rules[rule.id] = RuleState(rule)

    def remove(self, rule_id: str) -> None:
        self.rules.pop(rule_id, None)

    def first(self, write: KueueWrite | None, method: str, path: str, stage: str) -> Rule | None:
        for st in self.rules.values():
            if st.take(write, method, path, stage):
                return st.rule
        return None
