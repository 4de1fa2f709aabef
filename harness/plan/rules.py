"""Fault rules: what request to act on (a Match over a classified KueueWrite and raw fields), what to
do with it (an action of the registry in harness/plan/actions.py: hold the request or the response, delay,
fail with a Kubernetes Status, reset the stream, observe, drop or delay watch events, restart Kueue), and
when a hold ends or a process fault fires (Release triggers). Pure logic.

The proxy (harness/proxy/addons/) asks `RuleBook` for every request and `trigger_satisfied` after every
event; the harness and YAML plans (harness/plan/load.py) build the same classes, so no path can drift.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.kueue.api import KueueWrite, WatchEvent
from harness.plan import actions
from harness.plan.match import (  # noqa: F401 - the rule's parts, importable from here too
    STAGES,
    WATCH_EVENT_TYPES,
    Match,
    RuleError,
    _check_keys,
    _jsonpath,
    check_regex,
    fact_value,
)
from harness.plan.triggers import (  # noqa: F401
    CONDITION_STATUSES,
    THEN_FAIL_MESSAGE,
    TIMEOUT_MESSAGE,
    TRIGGER_KINDS,
    TRIGGER_STATES,
    WRITING_STEPS,
    FlowRecord,
    Release,
    Trigger,
    trigger_satisfied,
)

#: The registered action names (harness/plan/actions.py), in registration order.
ACTIONS = actions.names()
#: Those a plan writes under `rules:` (the step kinds go under `steps:`).
RULE_ACTIONS = tuple(a for a in ACTIONS if not actions.get(a).is_step)

_RULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")



#: Rule keys every action shares (Rule's fields except `params`); extra keys come from the actions.
_BASE_KEYS = ("id", "match", "action", "stage", "times", "skip", "delay", "release")


#: The largest `times`, `skip`, `status`, `delay` or `max_hold` a rule takes: far beyond any run.
MAX_COUNT = 1_000_000


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
    #: Matching requests let through untouched before the rule acts (the next rule may take them): `skip: 1,
    #: times: null` fails every write of a kind but the first ("a write that starts failing").
    skip: int = 0
    delay: float = 0.0
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
        for k, types in (("times", int), ("skip", int), ("status", int), ("delay", (int, float)), ("max_hold", (int, float))):
            # status and max_hold belong to fail and hold (their `params`); checked here, before the kind's own
            # checks, so every kind's number keys say the same thing when they are no number
            if k not in d or (k == "times" and d[k] is None):
                continue
            if isinstance(d[k], bool) or not isinstance(d[k], types) or (
                    isinstance(d[k], float) and not math.isfinite(d[k])):
                what = "a whole number" if types is int else "a finite number"
                raise RuleError(f"rule {rid}: {k} must be {what}, got {d[k]!r}", key=k)
            if abs(d[k]) > MAX_COUNT:  # beyond any run (and float() of a larger int overflows)
                raise RuleError(f"rule {rid}: {k} {d[k]} is beyond any run (at most {MAX_COUNT})", key=k)
        params = dict(kind.params)  # the action's defaults, then what the rule gives
        for k, (owner, _default) in actions.all_params().items():
            if k in d:
                if owner != kind.name:
                    hint = kind.misuse_hints.get(k)
                    raise RuleError(f"rule {rid}: {k} applies to action {owner} only, not {kind.name}"
                                    + (f" ({hint})" if hint else ""), key=k)
                params[k] = d.pop(k)
        d["params"] = tuple(sorted(params.items()))
        r = cls(**d)
        if r.stage not in STAGES:
            raise RuleError(f"rule {r.id}: stage {r.stage!r} is not one of {', '.join(STAGES)}", key="stage")
        if r.times is not None and r.times < 1:
            raise RuleError(f"rule {r.id}: times must be >= 1 or null", key="times")
        if r.skip < 0:
            raise RuleError(f"rule {r.id}: skip must be >= 0 (the matching requests let through first)", key="skip")
        if r.skip and kind.consulted != "flow":
            takers = ", ".join(a for a in RULE_ACTIONS if actions.get(a).consulted == "flow")
            raise RuleError(f"rule {r.id}: skip applies to actions {takers} only, not {r.action}", key="skip")
        if r.delay < 0:
            raise RuleError(f"rule {r.id}: delay must be >= 0, got {r.delay}", key="delay")
        if r.delay > 0 and not kind.takes_delay:
            takers = ", ".join(a for a in RULE_ACTIONS if actions.get(a).takes_delay)
            hint = " (a hold ends by its `release` triggers or `release.timeout`)" if kind.name == "hold" else ""
            raise RuleError(f"rule {r.id}: delay applies to actions {takers} only, not {r.action}{hint}", key="delay")
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
            d["release"]["after"] = [{k: v for k, v in t.items() if v is not None and (k != "state" or t.get("rule") or t.get("count"))}
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
        if r.id in ids:
            errors.append(RuleError(f"rule {r.id}: this id is given twice in the plan (its rules and steps); "
                                    "every rule and step needs its own id"))
        elif r.id in loaded:
            errors.append(RuleError(f"rule {r.id}: a rule with this id is already loaded"))
        ids.add(r.id)
    known = ids | set(loaded) | set(elsewhere)
    first_by_id: dict[str, Rule] = {}
    for r in rules:
        first_by_id.setdefault(r.id, r)
    for r in rules:
        steps = {t.step for t in (r.release.after if r.release else ()) if t.step}
        for ref in sorted(r.refs()):
            if ref not in known:
                what = "step" if ref in steps else "rule"
                errors.append(RuleError(f"rule {r.id}: release trigger names unknown {what} {ref!r}"))
        since = r.param("since") if r.kind.is_step else None
        if isinstance(since, str) and since and since != r.id:
            target = first_by_id.get(since)
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
            elif t.count and target.times is not None and target.times < (t.at_least or 1):
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: counts {t.at_least} flows of {t.count}, but "
                                        f"{t.count} catches only {target.times} (times: {target.times}); give it "
                                        "`times: null` (every match) or at least as many"))
            elif t.count and t.state not in target.kind.trigger_states:
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: counts {t.count}'s flows {t.state}, but "
                                        f"{t.count} (action {target.action}) can only be waited for as "
                                        f"{' or '.join(target.kind.trigger_states) or 'nothing'}"))
            elif t.rule and t.state not in target.kind.trigger_states:
                if t.state in ("held", "released") and target.kind.consulted != "signal":
                    errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.ref} {t.state}, but "
                                            f"{t.ref} (action {target.action}) never holds a flow"))
                else:
                    errors.append(RuleError(
                        f"rule {r.id}: release.after[{i}]: waits for {t.ref} {t.state}, but {t.ref} "
                        f"(action {target.action}) can only be waited for as "
                        f"{' or '.join(target.kind.trigger_states) or 'nothing'}"))
            elif t.delivered and (target.kind.consulted == "watch"
                                  or (target.kind.consulted == "signal" and target.action not in WRITING_STEPS)):
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.delivered}'s object to be "
                                        f"delivered, but {t.delivered} (action {target.action}) has no answered write"))
            elif t.status is not None and target.kind.consulted == "signal":
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.ref} {t.state} with status "
                                        f"{t.status}, but {t.ref} (action {target.action}) has no HTTP status"))
            elif t.state == "held" and t.status is not None and target.stage != "response":
                errors.append(RuleError(f"rule {r.id}: release.after[{i}]: waits for {t.ref} held with status "
                                        f"{t.status}, but {t.ref} holds requests (stage request), which have no "
                                        "status"))
    # A hold waiting for X to be released or answered (or delivered) needs X's own hold to end first;
    # waiting for X to be "held" does not, so such triggers make no edge (scenario 1 needs exactly that:
    # the admission waits for the eviction to be held, the eviction's answer for the admission). A step
    # waits for the other step to be done: an edge. Facts (log, object) name no rule: no edge.
    graph = {
        r.id: {t.ref for t in (r.release.after if r.release else ())
               if t.delivered or t.step or ((t.rule or t.count) and t.state != "held")} & ids
        for r in rules
    }
    cycle = _first_cycle(graph)
    if cycle:
        errors.append(RuleError(f"release triggers form a cycle: {' -> '.join(cycle)}"))
    return errors


def _first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """The first cycle a depth-first search meets ([A, B, …, A]), visiting nodes in `graph`'s order and
    each node's edges sorted; None when the graph is acyclic. Iterative, linear in nodes + edges: a chain of
    thousands of triggers neither exhausts Python's stack nor copies the path at each step."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in graph:
        if start in state:
            continue
        path = [start]
        stack = [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            m = next(stack[-1], None)
            if m is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(m) == 1:
                return path[path.index(m):] + [m]
            if m not in state:
                state[m] = 1
                path.append(m)
                stack.append(iter(sorted(graph.get(m, ()))))
    return None


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
    #: Matching requests let through so far because of `skip`.
    skipped: int = 0

    def take(self, write: KueueWrite | None, method: str, path: str, stage: str, body: Any = None) -> bool:
        """If this rule applies to the request at `stage`, let its first `skip` through, and has uses left,
        count it and return True."""
        if self.rule.stage != stage:
            return False
        if self.rule.times is not None and self.hits >= self.rule.times:
            return False
        if not self.rule.match.matches(write, method, path, body):
            return False
        if self.skipped < self.rule.skip:
            self.skipped += 1
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

    def watch_rule(self, ev: WatchEvent, resource: str = "workloads") -> Rule | None:
        """The first watch rule (drop_watch_events, delay_watch_events, …) with uses left whose match takes
        this event of a watch of `resource` (a rule's match.resource, default workloads); counts the use. None
        if no rule takes it."""
        for st in self.rules.values():
            r = st.rule
            if r.kind.consulted != "watch" or (r.times is not None and st.hits >= r.times):
                continue
            if (r.match.resource or "workloads") == resource and r.match.matches_watch_event(ev):
                st.hits += 1
                return r
        return None

    def has_watch(self, resource: str) -> bool:
        """Whether a loaded watch rule acts on the watches of `resource` (its match.resource, default workloads)."""
        return any(st.rule.kind.consulted == "watch" and (st.rule.match.resource or "workloads") == resource
                   for st in self.rules.values())

    def delivered_resources(self) -> set[str]:
        """The resources (API path plural: `provisioningrequests`) other than workloads whose watch must be read for a
        `{delivered: ID}` trigger of a loaded rule or step: ID's `match.resource`; "*" (every watch) when ID is a
        create or patch step, which may write any kind. Workload watches are always read."""
        named = {t.delivered for st in self.rules.values() for t in (st.rule.release.after if st.rule.release else ())
                 if t.delivered}
        out = set()
        for rid in named & set(self.rules):
            r = self.rules[rid].rule
            if r.kind.consulted == "signal":
                out.add("*")
            elif r.match.resource not in (None, "workloads"):
                out.add(r.match.resource)
        return out

    def has(self, consulted: str) -> bool:
        """Whether any loaded rule's action is consulted that way ("watch", "signal", …)."""
        return any(st.rule.kind.consulted == consulted for st in self.rules.values())

    def drop_watch_event(self, namespace: str | None, name: str | None) -> Rule | None:
        """The watch rule that takes a MODIFIED event for namespace/name (counts it), if any. Kept for
        callers of the older API; the proxy uses `watch_rule`."""
        return self.watch_rule(WatchEvent("MODIFIED", "Workload", namespace, name, None))
