"""Fault rules: what request to act on (a Match over a classified KueueWrite and raw fields), what to
do with it (an action of the registry in harness/plan/actions.py: hold the request or the response, delay,
fail with a Kubernetes Status, reset the stream, observe, drop or delay watch events, restart Kueue), and
when a hold ends or a process fault fires (Release triggers). Pure logic.

The proxy (harness/proxy/addons/) asks `RuleBook` for every request and `trigger_satisfied` after every
event; the harness and YAML plans (harness/plan/load.py) build the same classes, so no path can drift.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from functools import lru_cache
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.plan import actions
from harness.plan.actions import STAGES, WATCH_EVENT_TYPES, RuleError
from harness.kueue.api import WRITE_CLASSES, KueueWrite, WatchEvent, parse_path


@lru_cache(maxsize=256)
def _jsonpath(expr: str):
    from jsonpath_ng.exceptions import JsonPathLexerError, JsonPathParserError
    from jsonpath_ng.ext import parse

    try:
        return parse(expr)
    except (JsonPathLexerError, JsonPathParserError, Exception) as e:  # noqa: BLE001 - any parse failure
        raise RuleError(f"match.body_jsonpath: {expr!r} is not a JSONPath: {e}") from None

#: The registered action names (harness/plan/actions.py), in registration order.
ACTIONS = actions.names()
#: Those a plan writes under `rules:` (the step kinds go under `steps:`).
RULE_ACTIONS = tuple(a for a in ACTIONS if not actions.get(a).is_step)
#: States of a rule's flow a trigger can wait for: "held" (for a response hold: kube-apiserver has
#: answered), "released" (the proxy let it go), "answered" (the answer was delivered to Kueue).
TRIGGER_STATES = ("held", "released", "answered")


_RULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def _nested_repeat(pattern: str) -> bool:
    """True if `pattern` has an unbounded repeat (*, +, {n,}) inside another repeat: the shape behind
    catastrophic backtracking. Uses the re module's own parser (re._parser, Python 3.11)."""
    from re import _constants as c
    from re import _parser as p

    repeats = (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT))

    def walk(items, inside: bool) -> bool:
        for op, av in items:
            if op in repeats:
                lo, hi, sub = av
                unbounded = hi == c.MAXREPEAT
                if unbounded and inside:
                    return True
                if walk(sub, inside or unbounded):
                    return True
            elif op == c.SUBPATTERN:
                if walk(av[-1], inside):
                    return True
            elif op == c.BRANCH:
                if any(walk(b, inside) for b in av[1]):
                    return True
            elif op in (c.ASSERT, c.ASSERT_NOT):
                if walk(av[1], inside):
                    return True
        return False

    return walk(p.parse(pattern), False)


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
        if m.path_regex:
            try:
                re.compile(m.path_regex)
            except re.error as e:
                raise RuleError(f"match.path_regex: {e}") from None
            if _nested_repeat(m.path_regex):
                # The proxy matches on its event loop: a regex that backtracks exponentially would stall
                # every request Kueue makes (found by trying `^(.+)+Z$`).
                raise RuleError(f"match.path_regex: {m.path_regex!r} nests an unbounded repeat inside another "
                                "(like (a+)+), which can backtrack for minutes; write it without the nesting")
        for k in ("name", "namespace"):
            glob = getattr(m, k)
            if glob and glob.count("[") != glob.count("]"):
                raise RuleError(f"match.{k}: glob {glob!r} has an unbalanced '['")
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


#: Trigger kinds: one of these keys names what a trigger waits for (docs/fault-plans.md, Triggers).
TRIGGER_KINDS = ("rule", "delivered", "step", "log", "object")
#: Condition statuses an `{object: …, condition: T, status: S}` trigger may wait for.
CONDITION_STATUSES = ("True", "False", "Unknown")
#: "Kind/name" or "Kind.group/name" (Workload/w1, ClusterQueue/${namespace}-cq, Job.batch/j1); the name may be
#: an fnmatch glob (Workload/job-a-*: harness/plan/steps.py FactObserver, "exactly one object when it matters").
_OBJECT_REF = re.compile(r"[A-Z][A-Za-z0-9]*(\.[a-z0-9][a-z0-9.-]*)?/[a-z0-9$*?\[][a-z0-9.${}*?\[\]!-]*")


def check_regex(pattern: Any, what: str) -> None:
    """Raise RuleError unless `pattern` is a string that compiles and cannot backtrack for minutes."""
    if not isinstance(pattern, str) or not pattern:
        raise RuleError(f"{what}: expected a regular expression (a non-empty string)")
    try:
        re.compile(pattern)
    except re.error as e:
        raise RuleError(f"{what}: {pattern!r} is not a regular expression: {e}") from None
    if _nested_repeat(pattern):
        raise RuleError(f"{what}: {pattern!r} nests an unbounded repeat inside another (like (a+)+), which can "
                        "backtrack for minutes; write it without the nesting")


def fact_value(v: Any) -> str:
    """How an `equals` value and a value found in an object compare: strings as they are, anything else as
    JSON (`false`, `3`, `null`), so `equals: false` and `equals: "false"` both take a JSON false."""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


@dataclass(frozen=True)
class Trigger:
    """One condition for ending a hold or starting a step (or a process fault). Exactly one kind:

    `rule` + `state`: a flow caught by rule `rule` reached `state` (TRIGGER_STATES), with HTTP `status`
    if given (for "held" at the response stage and "answered");
    `delivered`: Kueue's Workload watch delivered the object of rule `delivered`'s answered flow at a
    resourceVersion >= the one in that answer (the proxy sees the watch stream);
    `step`: plan step `step` finished successfully (its `signal_done` with ok);
    `log`: a line of Kueue's log matched this regex since the plan was loaded (`kueue_log.normalized`
    says what text it is searched in);
    `object` ("Kind/name", in `namespace` or the plan's): since the plan was loaded the object was
    `deleted` (a deletion seen, not mere absence), or had condition `condition` with `status` ("True" by
    default), or had a value at JSONPath `field` (equal to `equals` when given, compared by `fact_value`).

    `log` and `object` triggers are *facts*: the proxy cannot see them, so the harness side
    (harness/nemesis/runner.py) observes them and reports each to the proxy (`POST /facts`, keyed by `fact_key`).
    """

    rule: str | None = None
    state: str = "answered"
    status: int | str | None = None
    delivered: str | None = None
    step: str | None = None
    log: str | None = None
    object: str | None = None
    namespace: str | None = None
    deleted: bool | None = None
    condition: str | None = None
    field: str | None = None
    equals: Any = None

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "Trigger":
        """Build from a plan's trigger mapping; `where` prefixes errors ("rule a: release.after[0]").
        Raises RuleError naming what to change."""
        if not isinstance(d, dict):
            raise RuleError(f"{where}: expected an object like {{rule: X, state: answered}}, {{delivered: X}}, "
                            "{step: X}, {log: REGEX} or {object: Kind/name, condition: Type}")
        _check_keys(d, set(cls.__dataclass_fields__), where)
        kinds = [k for k in TRIGGER_KINDS if d.get(k) not in (None, "")]
        if len(kinds) != 1:
            raise RuleError(f"{where}: give exactly one of `rule` (with `state`), `delivered`, `step`, `log` or "
                            f"`object`{' (got ' + ', '.join(kinds) + ')' if kinds else ''}")
        kind = kinds[0]
        if not isinstance(d[kind], str):
            raise RuleError(f"{where}: `{kind}` must be a string")
        extra = {"rule": {"state", "status"}, "delivered": set(), "step": set(), "log": set(),
                 "object": {"namespace", "deleted", "condition", "status", "field", "equals"}}[kind]
        # `state: answered` is the dataclass default and comes back from Rule.to_dict: not an extra key.
        given = {k for k, v in d.items() if v is not None and k != kind and not (k == "state" and v == "answered")}
        if given - extra:
            bad = sorted(given - extra)
            if kind == "delivered":
                raise RuleError(f"{where}: `delivered` takes no `state` or `status` (it waits for an answered 200)")
            raise RuleError(f"{where}: `{kind}` takes no {', '.join(f'`{k}`' for k in bad)}"
                            + (f" (it takes {', '.join(f'`{k}`' for k in sorted(extra))})" if extra else ""))
        d = dict(d)
        if kind == "rule":
            t = cls(**d)
            if t.state not in TRIGGER_STATES:
                raise RuleError(f"{where}: state {t.state!r} is not one of {', '.join(TRIGGER_STATES)}")
            if t.status is not None and (isinstance(t.status, bool) or not isinstance(t.status, int)):
                raise RuleError(f"{where}: status must be an HTTP status code")
            return t
        if kind == "log":
            check_regex(d["log"], f"{where}: log")
        if kind == "object":
            if not _OBJECT_REF.fullmatch(d["object"]):
                raise RuleError(f"{where}: object {d['object']!r} is not Kind/name (e.g. Workload/w1, "
                                "ClusterQueue/${namespace}-cq, Workload/job-a-* for Job a's Workload)")
            name = d["object"].split("/", 1)[1]
            if name.count("[") != name.count("]"):
                raise RuleError(f"{where}: object {d['object']!r}: glob {name!r} has an unbalanced '['")
            if d.get("namespace") is not None and not isinstance(d["namespace"], str):
                raise RuleError(f"{where}: namespace must be a string")
            what = [k for k in ("deleted", "condition", "field") if d.get(k) is not None]
            if len(what) != 1:
                raise RuleError(f"{where}: object takes exactly one of `deleted: true`, `condition` (with `status`) "
                                "or `field` (with `equals`)")
            if d.get("deleted") is not None and d["deleted"] is not True:
                raise RuleError(f"{where}: deleted must be true (it waits for the object's deletion)")
            if d.get("status") is not None and what != ["condition"]:
                raise RuleError(f"{where}: status goes with `condition` only")
            if d.get("equals") is not None and what != ["field"]:
                raise RuleError(f"{where}: equals goes with `field` only")
            if what == ["condition"]:
                if not isinstance(d["condition"], str):
                    raise RuleError(f"{where}: condition must be a condition type (a string, e.g. QuotaReserved)")
                st = d.get("status", "True")
                st = {True: "True", False: "False"}.get(st, st) if isinstance(st, bool) else st
                if st not in CONDITION_STATUSES:
                    raise RuleError(f"{where}: status {st!r} is not one of {', '.join(CONDITION_STATUSES)}")
                d["status"] = st
            if what == ["field"]:
                if not isinstance(d["field"], str):
                    raise RuleError(f"{where}: field must be a JSONPath (e.g. $.spec.active)")
                try:
                    _jsonpath(d["field"])
                except RuleError as e:
                    raise RuleError(f"{where}: field: {str(e).split(': ', 1)[1]}") from None
                if isinstance(d.get("equals"), (dict, list)):
                    raise RuleError(f"{where}: equals must be a scalar (string, number, true/false, null)")
        return cls(**d)

    @property
    def kind(self) -> str:
        """Which kind of trigger this is: one of TRIGGER_KINDS."""
        return next(k for k in TRIGGER_KINDS if getattr(self, k))

    @property
    def ref(self) -> str:
        """The rule (or step) id this trigger names; "" for a fact (log, object)."""
        return self.rule or self.delivered or self.step or ""

    @property
    def is_fact(self) -> bool:
        """Whether the harness side must observe it (a log line, an object's state)."""
        return bool(self.log or self.object)

    def fact_key(self) -> str:
        """The fact's identity between the proxy and the harness (canonical JSON of its keys)."""
        keys = ("log",) if self.log else ("object", "namespace", "deleted", "condition", "status", "field", "equals")
        return json.dumps({k: getattr(self, k) for k in keys if getattr(self, k) is not None}, sort_keys=True)

    def describe(self) -> str:
        """The words of a `why` ("triggers: …") and of report.md: "eviction-job1 held", "step w1 done",
        "Kueue logged /Preempted/", "Workload/w1 QuotaReserved=True", "Workload/w1 deleted"."""
        if self.rule:
            return f"{self.rule} {self.state}"
        if self.delivered:
            return f"Kueue's watch delivered {self.delivered}'s object"
        if self.step:
            return f"step {self.step} done"
        if self.log:
            return f"Kueue logged /{self.log}/"
        obj = self.object  # its namespace is the plan's unless the trigger names another: not repeated here
        if self.deleted:
            return f"{obj} deleted"
        if self.condition:
            return f"{obj} {self.condition}={self.status}"
        return f"{obj} {self.field}" + (f" = {fact_value(self.equals)}" if self.equals is not None else " set")


#: The Status message of a hold failed by its release.timeout (on_timeout: fail) unless the plan gives one.
TIMEOUT_MESSAGE = "injected by kueue-harness (hold timed out)"
#: … and of a hold failed by its triggers (then: fail).
THEN_FAIL_MESSAGE = "injected by kueue-harness (plan: its release triggers held)"


@dataclass(frozen=True)
class Release:
    """When a hold ends by itself: once every trigger in `after` holds (none: only by command or
    timeout), then `then` ("release": the flow goes on; "fail": the proxy answers `status`/`reason`/
    `message` instead), or after `timeout` seconds, then `on_timeout` ("release" or "fail" with `status`)."""

    after: tuple[Trigger, ...] = ()
    timeout: float | None = None
    on_timeout: str = "release"
    then: str = "release"
    status: int = 500
    reason: str = "InternalError"
    message: str = TIMEOUT_MESSAGE

    @classmethod
    def from_dict(cls, d: Any, rule_id: str) -> "Release":
        where = f"rule {rule_id}: release"
        if not isinstance(d, dict):
            raise RuleError(f"{where}: expected an object with `after`, `timeout`, `on_timeout`, `then`")
        _check_keys(d, set(cls.__dataclass_fields__), where)
        d = dict(d)
        after = d.get("after") or []
        if not isinstance(after, list):
            raise RuleError(f"{where}.after: expected a list of triggers")
        d["after"] = tuple(Trigger.from_dict(t, f"{where}.after[{i}]") for i, t in enumerate(after))
        r = cls(**d)
        if r.timeout is not None and (isinstance(r.timeout, bool) or not isinstance(r.timeout, (int, float))
                                      or not math.isfinite(r.timeout) or r.timeout <= 0):
            raise RuleError(f"{where}.timeout: expected seconds > 0")
        if r.on_timeout not in ("release", "fail"):
            raise RuleError(f"{where}.on_timeout: {r.on_timeout!r} is not release or fail")
        if r.then not in ("release", "fail"):
            raise RuleError(f"{where}.then: {r.then!r} is not release or fail")
        if r.then == "fail" and not r.after:
            raise RuleError(f"{where}.then: `then: fail` needs `after` triggers (it is what happens when they hold)")
        if isinstance(r.status, bool) or not isinstance(r.status, int) or not 100 <= r.status <= 599:
            raise RuleError(f"{where}.status: {r.status!r} is not an HTTP status")
        return r

    def fail_message(self, timed_out: bool) -> str:
        """The Status message when the hold is failed by its timeout (`timed_out`) or by `then: fail`."""
        if self.message == TIMEOUT_MESSAGE and not timed_out:
            return THEN_FAIL_MESSAGE
        return self.message


#: Rule keys every action shares (Rule's fields except `params`); extra keys come from the actions.
_BASE_KEYS = ("id", "match", "action", "stage", "times", "status", "reason", "message", "delay", "max_hold",
              "release")


def rule_keys() -> set[str]:
    """Every key a rule may have: the shared ones and each registered action's `params`."""
    return set(_BASE_KEYS) | set(actions.all_params())


@dataclass(frozen=True)
class Rule:
    """A fault: at `stage` ("request" before kube-apiserver sees it, "response" after it answered),
    do `action` to the first `times` matching requests (None = every match).

    `action` names a kind of harness/plan/actions.py (its class says what it does, where it acts, and what it
    accepts): "hold" parks the flow until released or failed (or until `max_hold` seconds pass: then it
    is released and the hold is marked expired); "delay" waits `delay` seconds; "fail" answers `status`
    with a Kubernetes Status body; "reset" resets the stream; "observe" records the flow for triggers;
    "drop_watch_events" / "delay_watch_events" drop or delay Workload events on Kueue's watch streams
    (`times` counts events); "restart_kueue" restarts Kueue when its triggers hold.
    `release`: when a hold ends by itself, or when a process fault fires (triggers, a timeout).
    `params`: the extra keys of the action (("kill", True) for restart_kueue), sorted by key.
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
    release: Release | None = None
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> actions.Action:
        """The action's class instance from the registry."""
        return actions.get(self.action)

    def param(self, key: str) -> Any:
        """The value of the action's extra key `key` (its default when the rule does not give it)."""
        for k, v in self.params:
            if k == key:
                return v
        return self.kind.params.get(key)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Rule":
        """Build from a dict (the control channel's JSON). Raises RuleError on bad input."""
        _check_keys(d, rule_keys(), f"rule {d.get('id', '?')}")
        if not d.get("id"):
            raise RuleError("rule: `id` is required")
        if not isinstance(d["id"], str):
            raise RuleError(f"rule {d['id']!r}: id must be a string")
        if not _RULE_ID.fullmatch(d["id"]):
            # Ids travel in control-channel paths (DELETE /rules/<id>) and in file names of reports.
            raise RuleError(f"rule {d['id']!r}: id must be letters, digits, '.', '_' or '-' (at most 63), "
                            "starting with a letter or digit")
        d = dict(d)
        rid = d["id"]
        match = d.get("match") or {}
        if not isinstance(match, dict):
            raise RuleError(f"rule {rid}: match: expected an object, got {type(match).__name__}")
        try:
            d["match"] = Match.from_dict(dict(match))
        except RuleError as e:
            raise RuleError(f"rule {rid}: {e}", key="match") from None
        try:
            kind = actions.get(d.get("action", "hold"))
        except KeyError:
            raise RuleError(f"rule {rid}: action {d.get('action')!r} is not one of {', '.join(RULE_ACTIONS)}",
                            key="action") from None
        d = kind.normalize(d)
        if d.get("release") is not None:
            d["release"] = Release.from_dict(d["release"], rid)
        for k, types in (("times", int), ("status", int), ("delay", (int, float)), ("max_hold", (int, float))):
            if k not in d or (k == "times" and d[k] is None):
                continue
            if isinstance(d[k], bool) or not isinstance(d[k], types) or not math.isfinite(d[k]):
                raise RuleError(f"rule {rid}: {k} must be a finite number, got {d[k]!r}", key=k)
        params = dict(kind.params)  # the action's defaults, then what the rule gives
        for k, (owner, _default) in actions.all_params().items():
            if k in d:
                if owner != kind.name:
                    raise RuleError(f"rule {rid}: {k} applies to action {owner} only, not {kind.name}", key=k)
                params[k] = d.pop(k)
        d["params"] = tuple(sorted(params.items()))
        r = cls(**d)
        if r.stage not in STAGES:
            raise RuleError(f"rule {r.id}: stage {r.stage!r} is not one of {', '.join(STAGES)}", key="stage")
        if r.times is not None and r.times < 1:
            raise RuleError(f"rule {r.id}: times must be >= 1 or null", key="times")
        if not 100 <= r.status <= 599:
            raise RuleError(f"rule {r.id}: status {r.status} is not an HTTP status", key="status")
        if r.delay < 0:
            raise RuleError(f"rule {r.id}: delay must be >= 0, got {r.delay}", key="delay")
        if r.max_hold <= 0:
            raise RuleError(f"rule {r.id}: max_hold must be > 0, got {r.max_hold}", key="max_hold")
        if r.release is not None and not kind.takes_release:
            takers = ", ".join(a for a in RULE_ACTIONS if actions.get(a).takes_release)
            raise RuleError(f"rule {r.id}: `release` applies to actions {takers} only, not {r.action}",
                            key="release")
        if r.stage not in kind.stages:
            # The proxy consults these at the request stage only; anything else would never act.
            raise RuleError(f"rule {r.id}: stage {r.stage!r} does not apply to action {r.action} "
                            f"({kind.stage_hint}; leave `stage` out)", key="stage")
        if r.match.event_type is not None and kind.consulted != "watch":
            raise RuleError(f"rule {r.id}: match.event_type applies to watch actions only "
                            f"({', '.join(a for a in ACTIONS if actions.get(a).consulted == 'watch')})",
                            key="match")
        kind.validate(r)
        return r

    def to_dict(self) -> dict[str, Any]:
        """The rule as the control channel's JSON (and `rule_added` events) carry it: match without unset
        keys, the action's extra keys at the top level, `release` only when given."""
        d = asdict(self)
        d["match"] = {k: v for k, v in d["match"].items() if v is not None}
        d.pop("params")
        d.update(dict(self.params))
        if self.release is None:
            d.pop("release")
        else:
            d["release"]["after"] = [{k: v for k, v in t.items() if v is not None and (k != "state" or t.get("rule"))}
                                     for t in d["release"]["after"]]
        return d

    def refs(self) -> set[str]:
        """Ids of the rules this rule's release triggers refer to."""
        return {t.ref for t in self.release.after if t.ref} if self.release else set()


def validate_rule_set(rules: list[Rule], loaded: set[str] = frozenset()) -> None:
    """Check a set of rules loaded together: unique ids (also against `loaded`), triggers naming known
    rules, and no cycle of holds that each wait for another's release (a deadlock). Raises RuleError
    naming the rules involved (the first problem of `rule_set_errors`)."""
    errors = rule_set_errors(rules, loaded)
    if errors:
        raise errors[0]


def rule_set_errors(rules: list[Rule], loaded: set[str] = frozenset(),
                    elsewhere: set[str] = frozenset()) -> list[RuleError]:
    """Every problem of a set of rules loaded together (see `validate_rule_set`), in rule order, the
    cycle last (only the first cycle found). `loaded`: ids already in the proxy (a clash is an error);
    `elsewhere`: ids that exist but are not in `rules` (a plan's rules that failed their own checks), so
    triggers naming them are not reported as unknown a second time. Returns [] when the set is valid."""
    errors: list[RuleError] = []
    ids: set[str] = set()
    for r in rules:
        if r.id in ids or r.id in loaded:
            errors.append(RuleError(f"rule {r.id}: a rule with this id is already loaded"))
        ids.add(r.id)
    known = ids | set(loaded) | set(elsewhere)
    for r in rules:
        steps = {t.step for t in (r.release.after if r.release else ()) if t.step}
        for ref in sorted(r.refs()):
            if ref not in known:
                what = "step" if ref in steps else "rule"
                errors.append(RuleError(f"rule {r.id}: release trigger names unknown {what} {ref!r}"))
        since = r.param("since") if r.kind.is_step else None
        if isinstance(since, str) and since and since != r.id:
            target = next((x for x in rules if x.id == since), None)
            if target is None and since not in known:
                errors.append(RuleError(f"rule {r.id}: since names unknown step {since!r}", key="since"))
            elif target is not None and not target.kind.is_step:
                errors.append(RuleError(f"rule {r.id}: since names {since} (action {target.action}), which is not a "
                                        "step; a wait counts from when a step began", key="since"))
    # Triggers that can never hold (the hold would only end by its timeout), for rules in this set.
    by_id = {r.id: r for r in rules}
    for r in rules:
        for i, t in enumerate(r.release.after if r.release else ()):
            target = by_id.get(t.ref)
            if target is None:
                continue
            if t.step and not target.kind.is_step:
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for step {t.step}, but {t.step} "
                                        f"(action {target.action}) is not a step; wait for a rule with "
                                        "{rule: ID, state: …}"))
            elif t.rule and t.state not in target.kind.trigger_states:
                if t.state in ("held", "released") and target.kind.consulted != "signal":
                    errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.rule} {t.state}, but "
                                            f"{t.rule} (action {target.action}) never holds a flow"))
                else:
                    errors.append(RuleError(
                        f"rule {r.id}: release.after[{i}]: waits for {t.rule} {t.state}, but {t.rule} "
                        f"(action {target.action}) can only be waited for as "
                        f"{' or '.join(target.kind.trigger_states) or 'nothing'}"))
            elif t.delivered and target.kind.consulted in ("watch", "signal"):
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.delivered}'s object to be "
                                        f"delivered, but {t.delivered} (action {target.action}) has no answered write"))
            elif t.status is not None and target.kind.consulted == "signal":
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.rule} {t.state} with status "
                                        f"{t.status}, but {t.rule} (action {target.action}) has no HTTP status"))
            elif t.state == "held" and t.status is not None and target.stage != "response":
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.rule} held with status "
                                        f"{t.status}, but {t.rule} holds requests (stage request), which have no "
                                        "status"))
    # A hold waiting for X to be released or answered (or delivered) needs X's own hold to end first;
    # waiting for X to be "held" does not, so such triggers make no edge (scenario 1 needs exactly that:
    # the admission waits for the eviction to be held, the eviction's answer for the admission). A step
    # waits for the other step to be done: an edge. Facts (log, object) name no rule: no edge.
    graph = {
        r.id: {t.ref for t in (r.release.after if r.release else ())
               if t.delivered or t.step or (t.rule and t.state != "held")} & ids
        for r in rules
    }
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cycle = path[path.index(m):] + [m] if m in path else [n, m]
                raise RuleError(f"release triggers form a cycle: {' -> '.join(cycle)}")
            if state.get(m) is None:
                visit(m, path + [m])
        state[n] = 2

    try:
        for n in graph:
            if state.get(n) is None:
                visit(n, [n])
    except RuleError as e:
        errors.append(e)
    return errors


@dataclass
class FlowRecord:
    """What a rule's flow has gone through, for triggers. `answered_rv`: resourceVersion in the answer."""

    flow: int
    namespace: str | None
    name: str | None
    held: bool = False
    held_status: int | None = None
    released: bool = False
    answered_status: int | None = None
    answered_rv: str | None = None
    #: For a signal (process fault, step): whether the harness reported it done successfully.
    ok: bool | None = None


def trigger_satisfied(t: Trigger, flows: dict[str, list[FlowRecord]], delivered_rv: dict[str, int],
                      facts: Any = frozenset()) -> bool:
    """Whether trigger `t` holds, given each rule's flows, the highest resourceVersion Kueue's watch
    delivered per "namespace/name", and the keys of the facts the harness reported (`Trigger.fact_key`).
    A trigger over a rule with several flows holds when any flow does; a step trigger when the step was
    done with success."""
    if t.is_fact:
        return t.fact_key() in facts
    if t.step:
        return any(f.released and f.ok is True for f in flows.get(t.step, []))
    if t.delivered:
        for f in flows.get(t.delivered, []):
            if f.answered_rv is None or f.answered_status != 200:
                continue
            got = delivered_rv.get(f"{f.namespace}/{f.name}")
            try:
                if got is not None and got >= int(f.answered_rv):
                    return True
            except ValueError:
                continue
        return False
    for f in flows.get(t.rule or "", []):
        if t.state == "held" and f.held and (t.status is None or f.held_status == t.status):
            return True
        if t.state == "released" and f.released:
            return True
        if t.state == "answered" and f.answered_status is not None and (
            t.status is None or f.answered_status == t.status
        ):
            return True
    return False


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

    def take(self, write: KueueWrite | None, method: str, path: str, stage: str, body: Any = None) -> bool:
        """If this rule applies to the request at `stage` and has uses left, count it and return True."""
        if self.rule.stage != stage:
            return False
        if self.rule.times is not None and self.hits >= self.rule.times:
            return False
        if not self.rule.match.matches(write, method, path, body):
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

    def first(self, write: KueueWrite | None, method: str, path: str, stage: str, body: Any = None) -> Rule | None:
        """The first acting rule (its action acts on flows: not observe, watch or signal kinds) that takes
        this request at `stage`."""
        for st in self.rules.values():
            if st.rule.kind.consulted != "flow":
                continue
            if st.take(write, method, path, stage, body):
                return st.rule
        return None

    def observers(self, write: KueueWrite | None, method: str, path: str, body: Any = None) -> list[Rule]:
        """Every observe rule that takes this request (they do not exclude each other or acting rules)."""
        return [st.rule for st in self.rules.values()
                if st.rule.kind.consulted == "observe" and st.take(write, method, path, "request", body)]

    def watch_rule(self, ev: WatchEvent) -> Rule | None:
        """The first watch rule (drop_watch_events, delay_watch_events, …) with uses left whose match takes
        this Workload watch event; counts the use. None if no rule takes it."""
        for st in self.rules.values():
            r = st.rule
            if r.kind.consulted != "watch" or (r.times is not None and st.hits >= r.times):
                continue
            if r.match.matches_watch_event(ev):
                st.hits += 1
                return r
        return None

    def has(self, consulted: str) -> bool:
        """Whether any loaded rule's action is consulted that way ("watch", "signal", …)."""
        return any(st.rule.kind.consulted == consulted for st in self.rules.values())

    def drop_watch_event(self, namespace: str | None, name: str | None) -> Rule | None:
        """The watch rule that takes a MODIFIED event for namespace/name (counts it), if any. Kept for
        callers of the older API; the proxy uses `watch_rule`."""
        return self.watch_rule(WatchEvent("MODIFIED", "Workload", namespace, name, None))
