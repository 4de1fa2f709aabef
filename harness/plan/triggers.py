"""When a hold ends or a step (or process fault) starts: `Trigger` (another rule's flow held, released or
answered; Kueue's watch delivered an object; a step done; a Kueue log line; an object's condition,
deletion or field), `Release` (the triggers, then release or fail; a timeout), and `trigger_satisfied`,
the one evaluator the proxy uses after every event (over `FlowRecord`s). Pure logic.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.plan.match import RuleError, _check_keys, _jsonpath, check_regex, fact_value

#: States of a rule's flow a trigger can wait for: "held" (for a response hold: kube-apiserver has
#: answered), "released" (the proxy let it go), "answered" (the answer was delivered to Kueue).
TRIGGER_STATES = ("held", "released", "answered")


#: Condition statuses an `{object: …, condition: T, status: S}` trigger may wait for.
CONDITION_STATUSES = ("True", "False", "Unknown")
#: "Kind/name" or "Kind.group/name" (Workload/w1, ClusterQueue/${namespace}-cq, Job.batch/j1); the name may be
#: an fnmatch glob (Workload/job-a-*: harness/plan/steps.py FactObserver, "exactly one object when it matters").
_OBJECT_REF = re.compile(r"[A-Z][A-Za-z0-9]*(\.[a-z0-9][a-z0-9.-]*)?/[a-z0-9$*?\[][a-z0-9.${}*?\[\]!-]*")


@dataclass(frozen=True)
class Trigger:
    """One condition for ending a hold or starting a step (or a process fault): the parsed value of a plan's
    trigger mapping. Exactly one kind (its key names it), whose class in `TRIGGERS` checks it, evaluates it
    and says it in words (`TriggerKind` below: one small class a kind, as fault kinds are):

    `rule` + `state`: a flow caught by rule `rule` reached `state` (TRIGGER_STATES), with HTTP `status`
    if given (for "held" at the response stage and "answered");
    `delivered`: Kueue's watch (of any resource: `delivered_key`) delivered the object of rule `delivered`'s flow answered 2xx (200, or 201
    for a create) at a resourceVersion >= the one in that answer (the proxy sees the watch stream);
    `step`: plan step `step` finished successfully (its `signal_done` with ok);
    `log`: a line of Kueue's log matched this regex since the plan was loaded (`kueue_log.normalized`
    says what text it is searched in);
    `object` ("Kind/name", in `namespace` or the plan's): since the plan was loaded the object was
    `deleted` (a deletion seen, not mere absence), or had condition `condition` with `status` ("True" by
    default), or had a value at JSONPath `field` (equal to `equals` when given, compared by `fact_value`);
    `count` + `at_least` (+ `state`, `status`): at least `at_least` flows of rule `count` reached `state`
    ("answered" by default), each with HTTP `status` if given — an ordering by how often something happened,
    never by how long.

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
    count: str | None = None
    at_least: int | None = None

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "Trigger":
        """Build from a plan's trigger mapping; `where` prefixes errors ("rule a: release.after[0]").
        Raises RuleError naming what to change."""
        if not isinstance(d, dict):
            raise RuleError(f"{where}: expected an object like {{rule: X, state: answered}}, {{delivered: X}}, "
                            "{step: X}, {log: REGEX} or {object: Kind/name, condition: Type}")
        _check_keys(d, set(cls.__dataclass_fields__), where)
        kinds = [k for k in TRIGGERS if d.get(k) not in (None, "")]
        if len(kinds) != 1:
            raise RuleError(f"{where}: give exactly one of `rule` (with `state`), `delivered`, `step`, `log`, "
                            f"`object` or `count` (with `at_least`){' (got ' + ', '.join(kinds) + ')' if kinds else ''}")
        kind = TRIGGERS[kinds[0]]
        if not isinstance(d[kind.name], str):
            raise RuleError(f"{where}: `{kind.name}` must be a string")
        # `state: answered` is the dataclass default and comes back from Rule.to_dict: not an extra key.
        given = {k for k, v in d.items() if v is not None and k != kind.name and not (k == "state" and v == "answered")}
        if given - kind.takes:
            raise RuleError(kind.refuse_extra(sorted(given - kind.takes), where))
        return cls(**kind.check(dict(d), where))

    @property
    def kind(self) -> str:
        """Which kind of trigger this is: one of TRIGGER_KINDS."""
        return next(k for k in TRIGGERS if getattr(self, k))

    @property
    def ref(self) -> str:
        """The rule (or step) id this trigger names; "" for a fact (log, object)."""
        return TRIGGERS[self.kind].ref(self)

    @property
    def is_fact(self) -> bool:
        """Whether the harness side must observe it (a log line, an object's state)."""
        return TRIGGERS[self.kind].is_fact

    def fact_key(self) -> str:
        """The fact's identity between the proxy and the harness (canonical JSON of its keys)."""
        keys = (self.kind, *sorted(TRIGGERS[self.kind].takes))
        return json.dumps({k: getattr(self, k) for k in keys if getattr(self, k) is not None}, sort_keys=True)

    def describe(self) -> str:
        """The words of a `why` ("triggers: …") and of report.md: "eviction-job1 held", "step w1 done",
        "Kueue logged /Preempted/", "Workload/w1 QuotaReserved=True", "Workload/w1 deleted"."""
        return TRIGGERS[self.kind].describe(self)


class TriggerKind:
    """One kind of trigger (a registry entry, `@register`): `name` (the plan key that names it), `takes` (the
    other keys it accepts), `is_fact` (the harness observes it and reports it to the proxy); `check` (its keys,
    checked: RuleError naming what to change), `satisfied` (from the proxy's flow records, the watch's
    resourceVersions, the facts reported), `describe` (its words), `ref` (the rule or step it names)."""

    name: ClassVar[str]
    takes: ClassVar[frozenset[str]] = frozenset()
    is_fact: ClassVar[bool] = False

    def check(self, d: dict[str, Any], where: str) -> dict[str, Any]:
        return d

    def refuse_extra(self, bad: list[str], where: str) -> str:
        return (f"{where}: `{self.name}` takes no {', '.join(f'`{k}`' for k in bad)}"
                + (f" (it takes {', '.join(f'`{k}`' for k in sorted(self.takes))})" if self.takes else ""))

    def satisfied(self, t: Trigger, flows: dict[str, list["FlowRecord"]], delivered_rv: dict[str, int],
                  facts: Any) -> bool:
        return t.fact_key() in facts  # a fact: holds once the harness reported it

    def describe(self, t: Trigger) -> str:
        raise NotImplementedError

    def ref(self, t: Trigger) -> str:
        return "" if self.is_fact else str(getattr(t, self.name) or "")


#: name -> the kind's one instance; filled by @register below, in the order the docs list them.
TRIGGERS: dict[str, TriggerKind] = {}


def register(cls: type) -> type:
    """Class decorator: make a trigger kind available by its `name` (one class per kind, no list to edit)."""
    if cls.name in TRIGGERS:
        raise ValueError(f"two trigger kinds are named {cls.name!r}")
    TRIGGERS[cls.name] = cls()
    return cls


def _check_status(st: Any, where: str) -> None:
    if st is not None and (isinstance(st, bool) or not isinstance(st, int) or not 100 <= st <= 599):
        raise RuleError(f"{where}: status must be an HTTP status code (100-599), not {st!r}")


def _check_state(state: Any, where: str) -> None:
    if state not in TRIGGER_STATES:
        raise RuleError(f"{where}: state {state!r} is not one of {', '.join(TRIGGER_STATES)}")


def _reached(f: "FlowRecord", state: str, status: Any) -> bool:
    """Whether flow record `f` reached `state` (with HTTP `status`, when given)."""
    if state == "held":
        return f.held and (status is None or f.held_status == status)
    if state == "released":
        return f.released
    return f.answered_status is not None and (status is None or f.answered_status == status)


@register
class RuleTrigger(TriggerKind):
    """`{rule: ID, state: held|released|answered, status: N}`: a flow of rule ID reached the state."""

    name = "rule"
    takes = frozenset({"state", "status"})

    def check(self, d: dict[str, Any], where: str) -> dict[str, Any]:
        _check_state(d.get("state", "answered"), where)
        _check_status(d.get("status"), where)
        return d

    def satisfied(self, t, flows, delivered_rv, facts) -> bool:
        return any(_reached(f, t.state, t.status) for f in flows.get(t.rule or "", []))

    def describe(self, t: Trigger) -> str:
        return f"{t.rule} {t.state}"


@register
class DeliveredTrigger(TriggerKind):
    """`{delivered: ID}`: Kueue's watch delivered the object of rule ID's flow answered 2xx (a create is 201), at the
    answer's resourceVersion or later; for a create or patch step ID, every object the step wrote (`step_writes`)."""

    name = "delivered"

    def refuse_extra(self, bad: list[str], where: str) -> str:
        return f"{where}: `delivered` takes no `state` or `status` (it waits for an answer of 2xx: 200, or 201 for a create)"

    def satisfied(self, t, flows, delivered_rv, facts) -> bool:
        def seen(f: FlowRecord) -> bool:
            if f.answered_rv is None or not isinstance(f.answered_status, int) or not 200 <= f.answered_status < 300:
                return False
            got = delivered_rv.get(delivered_key(f.kind, f.namespace, f.name))
            try:
                return got is not None and got >= int(f.answered_rv)
            except ValueError:
                return False

        mine = flows.get(t.delivered or "", [])
        writes = [f for f in mine if f.step_write]
        if writes:  # a step: Kueue has seen every object it wrote
            return all(seen(f) for f in writes)
        return any(seen(f) for f in mine)

    def describe(self, t: Trigger) -> str:
        return f"Kueue's watch delivered {t.delivered}'s object"


@register
class StepTrigger(TriggerKind):
    """`{step: ID}`: plan step ID was done with success."""

    name = "step"

    def satisfied(self, t, flows, delivered_rv, facts) -> bool:
        return any(f.released and f.ok is True for f in flows.get(t.step or "", []))

    def describe(self, t: Trigger) -> str:
        return f"step {t.step} done"


@register
class LogTrigger(TriggerKind):
    """`{log: REGEX}` (a fact): a line of Kueue's log matched since the plan was loaded."""

    name = "log"
    is_fact = True

    def check(self, d: dict[str, Any], where: str) -> dict[str, Any]:
        check_regex(d["log"], f"{where}: log")
        return d

    def describe(self, t: Trigger) -> str:
        return f"Kueue logged /{t.log}/"


@register
class ObjectTrigger(TriggerKind):
    """`{object: Kind/name, namespace?, deleted: true | condition: T, status: S | field: JSONPATH, equals: V}`
    (a fact): since the plan was loaded the object was deleted, had the condition, or had the field's value."""

    name = "object"
    takes = frozenset({"namespace", "deleted", "condition", "status", "field", "equals"})
    is_fact = True

    def check(self, d: dict[str, Any], where: str) -> dict[str, Any]:
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
        return d

    def describe(self, t: Trigger) -> str:
        obj = t.object  # its namespace is the plan's unless the trigger names another: not repeated here
        if t.deleted:
            return f"{obj} deleted"
        if t.condition:
            return f"{obj} {t.condition}={t.status}"
        return f"{obj} {t.field}" + (f" = {fact_value(t.equals)}" if t.equals is not None else " set")


@register
class CountTrigger(TriggerKind):
    """`{count: ID, at_least: N, state: answered, status: 200}`: at least N flows of rule ID reached the state —
    an ordering by how often something happened (kubernetes-sigs/kueue#13662: "until job-a was evicted N
    times"), never by how long: a fixed-duration hold lets a slow machine see fewer repetitions than a fast one."""

    name = "count"
    takes = frozenset({"state", "status", "at_least"})

    def check(self, d: dict[str, Any], where: str) -> dict[str, Any]:
        n = d.get("at_least")
        if n is None or isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RuleError(f"{where}: `count` needs `at_least: N` (a whole number >= 1: how many flows of rule "
                            f"{d.get('count')!r} must reach the state)")
        state = d.get("state", "answered")
        _check_state(state, where)
        _check_status(d.get("status"), where)
        return {**d, "state": state}

    def satisfied(self, t, flows, delivered_rv, facts) -> bool:
        return sum(_reached(f, t.state, t.status) for f in flows.get(t.count or "", [])) >= (t.at_least or 1)

    def describe(self, t: Trigger) -> str:
        """"the 4th flow of quota-release-job-a answered" (with " with 200" when a status is asked for)."""
        n = t.at_least or 1
        suffix = "th" if 10 < n % 100 < 14 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"the {n}{suffix} flow of {t.count} {t.state}" + (f" with {t.status}" if t.status is not None else "")


#: Trigger kinds: one of these keys names what a trigger waits for (docs/fault-plans.md, Triggers).
TRIGGER_KINDS = tuple(TRIGGERS)


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
        if r.on_timeout == "fail" and r.timeout is None:
            raise RuleError(f"{where}.on_timeout: `on_timeout: fail` needs a `timeout` (it is what happens when "
                            "the timeout passes); give `timeout: SECONDS` or leave on_timeout out")
        if r.on_timeout != "fail" and r.then != "fail":
            given = [k for k in ("status", "reason", "message") if getattr(r, k) != cls.__dataclass_fields__[k].default]
            if given:
                raise RuleError(f"{where}.{given[0]}: {' and '.join(given)} {'say' if len(given) > 1 else 'says'} how the hold is failed, but nothing "
                                "fails it (give `then: fail` or `on_timeout: fail`, or leave "
                                f"{'them' if len(given) > 1 else 'it'} out)")
        return r

    def fail_message(self, timed_out: bool) -> str:
        """The Status message when the hold is failed by its timeout (`timed_out`) or by `then: fail`."""
        if self.message == TIMEOUT_MESSAGE and not timed_out:
            return THEN_FAIL_MESSAGE
        return self.message


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
    #: The written object's kind (a KueueWrite's `kind`); None or "Workload": a Workload (`delivered_key`).
    kind: str | None = None
    #: One object a plan step (create, patch) wrote, as the harness reported it done (`step_writes`).
    step_write: bool = False


#: The steps whose writes a `{delivered: STEP}` waits for (step_writes).
WRITING_STEPS = ("create", "patch")
#: "Workload team-a/w1 rv 12" (or "ClusterQueue cq rv 5"): how a step's `objects` name what it wrote.
_STEP_OBJECT = re.compile(r"^(?P<kind>\S+) (?:(?P<ns>[^/\s]+)/)?(?P<name>\S+) rv (?P<rv>\d+)$")


def step_writes(objects: Any) -> list[FlowRecord]:
    """The records of what a create or patch step wrote, from its `signal_done` objects ("Workload team-a/w1 rv
    12"), for `{delivered: STEP}`: answered 200 at that resourceVersion. Other strings are skipped."""
    out = []
    for text in objects if isinstance(objects, list) else ():
        m = _STEP_OBJECT.match(str(text))
        if m:
            out.append(FlowRecord(0, m["ns"], m["name"], answered_status=200, answered_rv=m["rv"], kind=m["kind"],
                                  step_write=True))
    return out


def delivered_key(kind: str | None, namespace: str | None, name: str | None) -> str:
    """The key of `delivered_rv` for one object: "namespace/name" for a Workload (kind None or "Workload"),
    "Kind:namespace/name" for any other kind Kueue watches (a ProvisioningRequest, a Job)."""
    obj = f"{namespace}/{name}"
    return obj if kind in (None, "Workload") else f"{kind}:{obj}"


def trigger_satisfied(t: Trigger, flows: dict[str, list[FlowRecord]], delivered_rv: dict[str, int],
                      facts: Any = frozenset()) -> bool:
    """Whether trigger `t` holds, given each rule's flows, the highest resourceVersion Kueue's watch
    delivered per "namespace/name", and the keys of the facts the harness reported (`Trigger.fact_key`).
    A trigger over a rule with several flows holds when any flow does; a step trigger when the step was
    done with success. The one evaluator: it asks the trigger's kind (`TRIGGERS`)."""
    return TRIGGERS[t.kind].satisfied(t, flows, delivered_rv, facts)
