"""Fault actions: what a rule does, one small class per kind, in one registry.

Each class says its `name`, which `stage` values a rule of it may give, where the proxy consults it
(`consulted`: "flow" = the first acting rule takes a request; "observe" = every flow, alongside;
"watch" = events on Kueue's Workload watch streams; "signal" = no traffic at all, it fires when its
release triggers hold and the harness acts), which trigger states other rules may wait for on it, the
extra rule keys it takes (`params`), how it checks a rule (`validate`), what it does (`apply` on a flow in
the proxy, `on_watch_event` on a watch event, `perform` on the harness side for a signal) and how the
report's fault table says it (`describe`).

Adding a fault kind = one class here with `@register` + a row in docs/fault-plans.md (recipe:
docs/architecture.md "How to add a fault kind"). Pure logic: no mitmproxy import, so harness/plan/rules.py,
the plan loader and the report can use the registry; the proxy passes its own context objects in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from harness.plan.match import STAGES, TICK_WORKLOAD, WATCH_EVENT_TYPES, RuleError  # noqa: F401 - used here and re-exported

if TYPE_CHECKING:  # pragma: no cover - types only
    from harness.kueue.api import WatchEvent


class Rule(Protocol):
    """What a kind reads of a rule (harness/plan/rules.py `Rule` is the one implementation; named here as a
    protocol so this module, below rules.py, never imports it)."""

    id: str
    match: Any
    action: str
    stage: str
    times: int | None
    delay: float
    release: Any

    def param(self, key: str) -> Any:
        """The value of this kind's own key `key` (its default when the rule does not give it)."""

class FlowAct(Protocol):
    """What the proxy gives a flow action's `apply` (harness/proxy/addons/inject.py implements it)."""

    seq: int | None
    label: str

    def log(self, event: str, **fields: Any) -> None:
        """Record a proxy event about this flow (`flow`, `rule`, `stage`, `label` are filled in)."""

    def fail(self, status: int, reason: str, message: str) -> None:
        """Answer the flow with a Kubernetes Status (kube-apiserver is not contacted at stage request)."""

    def kill(self) -> None:
        """Reset the stream (HTTP/2) or close the connection (HTTP/1.1): Kueue gets no answer."""

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (other traffic keeps flowing)."""

    async def hold(self) -> None:
        """Park the flow until a release trigger, a command, `release.timeout` or `max_hold` ends it."""


class Action:
    """Base of every fault kind. Subclasses set the class attributes and override what they use."""

    #: The value of a rule's `action` key.
    name: ClassVar[str] = ""
    #: Other names accepted in plans, rewritten by `normalize` ("hold_response" -> hold at stage response).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Values a rule's `stage` key may take for this action.
    stages: ClassVar[tuple[str, ...]] = STAGES
    #: Why other stages do not apply (said in the error).
    stage_hint: ClassVar[str] = ""
    #: Where the proxy consults such rules: "flow", "observe", "watch" or "signal" (module docstring).
    consulted: ClassVar[str] = "flow"
    #: Trigger states (harness.plan.rules.TRIGGER_STATES) another rule may wait for on a rule of this kind.
    trigger_states: ClassVar[tuple[str, ...]] = ("answered",)
    #: Whether a rule of this kind takes a `release` (its triggers end a hold / fire a signal).
    takes_release: ClassVar[bool] = False
    #: Whether a rule of this kind uses the base `delay` key (delay, fail, delay_watch_events); any other
    #: kind refuses a `delay` > 0 instead of ignoring it (Rule.from_dict).
    takes_delay: ClassVar[bool] = False
    #: Extra rule keys this kind takes, with their defaults (stored in Rule.params): the kind owns them, and a
    #: rule of another kind that gives one is refused (Rule.from_dict).
    params: ClassVar[dict[str, Any]] = {}
    #: Why a key another kind owns does not apply to this one, when there is more to say (key -> words).
    misuse_hints: ClassVar[dict[str, str]] = {}
    #: One line for docs and `kueue-harness` help: what the kind does.
    one_line: ClassVar[str] = ""
    #: Whether the harness must make watch chunks arrive for it (harness/nemesis/runner.py prepares its tick
    #: Workload when such a rule is loaded).
    needs_ticks: ClassVar[bool] = False
    #: Whether it is a plan step (create, patch, delete, wait: a signal written under a plan's `steps:`),
    #: which `{step: ID}` triggers may name.
    is_step: ClassVar[bool] = False

    def normalize(self, d: dict[str, Any]) -> dict[str, Any]:
        """Rewrite plan sugar in a rule dict before it is built (default: unchanged). Raises RuleError."""
        return d

    def validate(self, rule: "Rule") -> None:
        """Check what only this kind cares about; raise RuleError naming the rule and the key."""

    def describe(self, rule: Mapping[str, Any]) -> str:
        """The fault table's words for a rule (its `Rule.to_dict()` form, as history.jsonl holds it)."""
        return self.name

    async def apply(self, act: FlowAct, rule: "Rule", stage: str) -> None:
        """Do this fault to a flow at `stage` (consulted == "flow" only)."""
        raise NotImplementedError(f"action {self.name} does not act on flows")

    def on_watch_event(self, rule: "Rule", event: "WatchEvent") -> tuple[str, float]:
        """For consulted == "watch": ("drop", 0) or ("delay", seconds) for an event the rule took."""
        raise NotImplementedError(f"action {self.name} does not act on watch events")

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        """For consulted == "signal": the harness side's work once the proxy signalled the rule
        (harness/nemesis/runner.py calls it with itself as `runner`). Returns fields for the record."""
        raise NotImplementedError(f"action {self.name} is not a signal")


_REGISTRY: dict[str, Action] = {}
_ALIASES: dict[str, str] = {}


def register(cls: type[Action]) -> type[Action]:
    """Class decorator: add a fault kind to the registry (its name and aliases must be new)."""
    inst = cls()
    for n in (cls.name, *cls.aliases):
        if not n or n in _REGISTRY or n in _ALIASES:
            raise ValueError(f"fault action name {n!r} is empty or taken")
    _REGISTRY[cls.name] = inst
    for a in cls.aliases:
        _ALIASES[a] = cls.name
    return cls


def names() -> tuple[str, ...]:
    """Every registered action name, in registration order (aliases not included)."""
    return tuple(_REGISTRY)


def get(name: Any) -> Action:
    """The action called `name` (or one of its aliases). Raises KeyError if there is none."""
    if isinstance(name, str):
        if name in _REGISTRY:
            return _REGISTRY[name]
        if name in _ALIASES:
            return _REGISTRY[_ALIASES[name]]
    raise KeyError(name)


def all_params() -> dict[str, tuple[str, Any]]:
    """Every extra rule key any kind takes: key -> (action name, default)."""
    return {k: (a.name, v) for a in _REGISTRY.values() for k, v in a.params.items()}


def describe(rule: Mapping[str, Any]) -> str:
    """The fault table's words for a rule dict (Rule.to_dict() form); an unknown action is named as is."""
    name = rule.get("action", "hold")
    skip = f" (the first {rule['skip']} let through)" if rule.get("skip") else ""
    try:
        return get(name).describe(rule) + skip
    except KeyError:
        return str(name)


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _times(rule: Mapping[str, Any], what: str) -> str:
    t = rule.get("times", 1)
    return f" (every {what})" if t is None else (f" (the first {t} {what}s)" if t != 1 else "")


# ---- acting on flows ------------------------------------------------------------------------------


@register
class Hold(Action):
    """Park the flow at `stage` until its `release` triggers hold, a command, or a timeout."""

    name = "hold"
    aliases = ("hold_response",)
    trigger_states = ("held", "released", "answered")
    takes_release = True
    #: `max_hold`: seconds after which the proxy releases the hold by itself (the case's verdict becomes
    #: `error`: harness/checkers/assumptions.py); a `release.timeout` must not be longer.
    params = {"max_hold": 600.0}
    one_line = "park the request (or with stage response / hold_response: the answer) until released"
    misuse_hints = {k: "a hold answers an error through release: `then: fail` or `on_timeout: fail` with release.status"
                    for k in ("status", "reason", "message")}

    def validate(self, rule: "Rule") -> None:
        max_hold = rule.param("max_hold")
        if isinstance(max_hold, bool) or not isinstance(max_hold, (int, float)) or not max_hold > 0:
            raise RuleError(f"rule {rule.id}: max_hold must be a number > 0, got {max_hold!r}", key="max_hold")
        rel = rule.release
        if rel is not None and rel.timeout is not None and rel.timeout > max_hold:
            raise RuleError(f"rule {rule.id}: release.timeout {rel.timeout:g} s is longer than max_hold "
                            f"{max_hold:g} s: the proxy would end the hold first; raise max_hold or lower the timeout",
                            key="release")

    def normalize(self, d: dict[str, Any]) -> dict[str, Any]:
        if d.get("action") == "hold_response":  # plan sugar: a hold at stage response
            if d.get("stage", "response") != "response":
                raise RuleError(f"rule {d['id']}: stage {d['stage']!r} conflicts with action hold_response "
                                "(a hold at stage response)", key="stage")
            d = {**d, "action": "hold", "stage": "response"}
        return d

    def describe(self, rule: Mapping[str, Any]) -> str:
        return "hold the answer" if rule.get("stage") == "response" else "hold the request"

    async def apply(self, act: FlowAct, rule: "Rule", stage: str) -> None:
        await act.hold()


@register
class Delay(Action):
    """Wait `delay` seconds at `stage`, then go on."""

    takes_delay = True
    name = "delay"
    one_line = "wait `delay` seconds, then continue"

    def describe(self, rule: Mapping[str, Any]) -> str:
        return f"delay {_num(rule.get('delay', 0))}s"

    async def apply(self, act: FlowAct, rule: "Rule", stage: str) -> None:
        act.log("delayed", seconds=rule.delay)
        await act.sleep(rule.delay)


@register
class Fail(Action):
    """Answer with a Kubernetes Status (`status`, `reason`, `message`); with `delay` > 0, after waiting that
    many seconds. The wait paces a write Kueue retries in a loop (its scheduler issues a preemption's
    evictions synchronously in the scheduling cycle, pkg/scheduler/preemption/preemption.go
    IssuePreemptions, so a failure answered late slows the next attempt): kubernetes-sigs/kueue#14863 on
    v0.19.2 retried a failing eviction ~75 times a second, and the flood of flows and log lines made a
    case on a loaded machine last 79 s instead of 7 s. A pace, never an ordering (docs/fault-plans.md)."""

    takes_delay = True
    name = "fail"
    #: The Kubernetes Status answered: HTTP `status` (400-599), its `reason` and `message`.
    params = {"status": 500, "reason": "InternalError", "message": "injected by kueue-harness"}
    one_line = "answer `status` with a Kubernetes Status body (after `delay` seconds when given)"

    def describe(self, rule: Mapping[str, Any]) -> str:
        after = f" after {_num(rule.get('delay'))}s" if rule.get("delay") else ""
        return f"fail {rule.get('status', 500)} {rule.get('reason', 'InternalError')}{after}" + (
            " (after kube-apiserver applied it)" if rule.get("stage") == "response" else "")

    def validate(self, rule: "Rule") -> None:
        status = rule.param("status")
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            # A Kubernetes Status of a failed call: client-go treats any other answer as a success or a redirect.
            raise RuleError(f"rule {rule.id}: a fail answers an error: status must be 400-599, got {status!r}",
                            key="status")
        for key in ("reason", "message"):
            if not isinstance(rule.param(key), str):
                raise RuleError(f"rule {rule.id}: {key} must be a string, got {rule.param(key)!r}", key=key)

    async def apply(self, act: FlowAct, rule: "Rule", stage: str) -> None:
        if rule.delay > 0:
            await act.sleep(rule.delay)
        status = rule.param("status")
        act.fail(status, rule.param("reason"), rule.param("message"))
        act.log("failed", status=status, **({"after": rule.delay} if rule.delay > 0 else {}))


@register
class Reset(Action):
    """Reset the stream instead of answering."""

    name = "reset"
    one_line = "reset the HTTP/2 stream (close the HTTP/1.1 connection): no answer"

    def describe(self, rule: Mapping[str, Any]) -> str:
        return "reset the stream" + (" (after kube-apiserver applied it)" if rule.get("stage") == "response" else "")

    async def apply(self, act: FlowAct, rule: "Rule", stage: str) -> None:
        act.log("reset")
        act.kill()


@register
class Observe(Action):
    """Do nothing to the flow; record it so that other rules' triggers can name it."""

    name = "observe"
    stages = ("request",)
    stage_hint = "observe records the whole flow"
    consulted = "observe"
    one_line = "do nothing; record the flow for other rules' triggers"

    def describe(self, rule: Mapping[str, Any]) -> str:
        return "observe (for triggers)"


# ---- acting on Workload watch events ------------------------------------------------------------


class _WatchAction(Action):
    stages = ("request",)
    consulted = "watch"
    trigger_states = ()

    def validate(self, rule: "Rule") -> None:
        m = rule.match
        if m.write or m.method or m.path_regex or m.kind or m.field_manager or m.subresource or m.body_jsonpath:
            raise RuleError(f"rule {rule.id}: {self.name} matches watch events by resource/name/namespace/event_type "
                            "only", key="match")
        if m.resource is not None and not re.fullmatch(r"[a-z][a-z0-9.-]*", m.resource):
            raise RuleError(f"rule {rule.id}: match.resource {m.resource!r} is the resource Kueue watches, plural and "
                            "lower-case as in the API path (workloads, provisioningrequests, jobs, pods, "
                            "clusterqueues, localqueues, cohorts, admissionchecks, nodes)", key="match")


@register
class DropWatchEvents(_WatchAction):
    """Leave matching events out of Kueue's watch streams of `match.resource` (default workloads; any resource Kueue
    watches: provisioningrequests, jobs, pods, clusterqueues, …) (`times` counts dropped events)."""

    name = "drop_watch_events"
    stage_hint = "watch rules act on Kueue's Workload watch streams"
    one_line = "leave matching events out of Kueue's Workload watches"

    def describe(self, rule: Mapping[str, Any]) -> str:
        return "drop watch events" + _times(rule, "event")

    def on_watch_event(self, rule: "Rule", event: "WatchEvent") -> tuple[str, float]:
        return "drop", 0.0


@register
class DelayWatchEvents(_WatchAction):
    """Deliver matching events to Kueue `delay` seconds after they reached the proxy; later events of the
    same watch stream wait behind them (a watch is ordered). Held lines go out with the first chunk that
    arrives after their due time: the harness makes one arrive (harness/nemesis/runner.py touches a Workload)."""

    takes_delay = True
    name = "delay_watch_events"
    needs_ticks = True
    stage_hint = "watch rules act on Kueue's Workload watch streams"
    one_line = "deliver matching Workload watch events `delay` seconds late"

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        if rule.delay <= 0:
            raise RuleError(f"rule {rule.id}: delay must be > 0 seconds for delay_watch_events, got {rule.delay}",
                            key="delay")

    def describe(self, rule: Mapping[str, Any]) -> str:
        return f"delay watch events {_num(rule.get('delay', 0))}s" + _times(rule, "event")

    def on_watch_event(self, rule: "Rule", event: "WatchEvent") -> tuple[str, float]:
        return "delay", float(rule.delay)


# ---- process faults (signals: fired by triggers, done by the harness) ----------------------------


class _SignalAction(Action):
    stages = ("request",)
    stage_hint = "a process fault has no request"
    consulted = "signal"
    #: held = the proxy signalled it (its triggers held); released = the harness finished the work.
    trigger_states = ("held", "released")
    takes_release = True

    def validate(self, rule: "Rule") -> None:
        m = rule.match
        if any(v is not None for k, v in m.__dict__.items() if k != "namespace"):
            # A plan loaded for a case gets the case's namespace on every rule: that one is harmless.
            raise RuleError(f"rule {rule.id}: {self.name} takes no `match` (it acts on a process, fired by its "
                            "release triggers)", key="match")
        if rule.times != 1:
            raise RuleError(f"rule {rule.id}: times: {self.name} fires once per load", key="times")
        rel = rule.release
        if rel is not None and rel.on_timeout != "release":
            raise RuleError(f"rule {rule.id}: release.on_timeout: a process fault fires on timeout "
                            "(on_timeout: release) or waits; it cannot fail", key="release")
        if rel is not None and rel.then != "release":
            raise RuleError(f"rule {rule.id}: release.then: {self.name} has no flow to fail; `then: fail` is for "
                            "holds", key="release")


@register
class RestartKueue(_SignalAction):
    """Restart the Kueue manager (SIGTERM, or SIGKILL with `kill: true`) once the release triggers hold
    (with no `release`: as soon as the rule is loaded; `release.timeout` alone: that many seconds later).
    The proxy emits `signalled`; the harness's runner restarts Kueue, records `kueue_restart`, counts it as
    a restart the case asked for, and tells the proxy it is done (`signal_done`)."""

    name = "restart_kueue"
    params = {"kill": False}
    one_line = "restart the Kueue manager (kill: SIGKILL) when the release triggers hold"

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        if not isinstance(rule.param("kill"), bool):
            raise RuleError(f"rule {rule.id}: kill must be true or false, got {rule.param('kill')!r}", key="kill")

    def describe(self, rule: Mapping[str, Any]) -> str:
        return "restart Kueue (SIGKILL)" if rule.get("kill") else "restart Kueue (SIGTERM, graceful)"

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        kill = bool(rule.get("kill", False))
        seconds = runner.restart_kueue(kill=kill, rule=str(rule.get("id")))
        return {"kill": kill, "seconds": seconds}


def step_names() -> tuple[str, ...]:
    """The registered step actions (create, patch, delete, wait)."""
    return tuple(n for n, a in _REGISTRY.items() if a.is_step)
