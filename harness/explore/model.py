"""Perturbations as data, and how a set of them becomes an ordinary YAML fault plan (docs/fault-plans.md).

A `Target` is one kind of Kueue write to one object role ("admission of job1": every admission PATCH of
the Workload `job-job1-<hash>`); a `Move` is one fault on a target (hold its request until another event,
hold its response until another event, fail it, drop or delay the watch events of its object, restart
Kueue after it was answered); a plan is a tuple of moves. `render` turns moves into plan rules, with an
`observe` rule for every write a trigger waits for that no move acts on. One acting rule per target:
two faults on the same write kind of the same role cannot both act (the proxy's first acting rule wins).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from harness.kueue.api import WRITE_CLASSES

#: Seconds a generated hold waits for its trigger before it lets the flow go (the run is then discarded:
#: the forced ordering did not happen). The reference runs of the seed controls take ~1.5 s from job1's
#: creation to the last write, so 6 s leaves room under load without making a hopeless hold expensive.
HOLD_TIMEOUT = 6.0
#: Seconds a `delay_watch_events` move delays its events.
WATCH_DELAY = 2.0

#: Write kinds a target can have besides the Workload status classes of harness/kueue/api.py.
EXTRA_CLASSES = ("create", "job_suspend", "job_unsuspend", "watch", "step")
#: Seconds a write failed every time waits before each failure (docs/fault-plans.md "a pace"): Kueue's
#: scheduler retries a failed eviction in its next cycle, ~75 times a second on v0.19.2 when answered at once.
FAIL_PACE = 0.25

MOVE_KINDS = ("hold", "hold_response", "fail", "drop_watch", "delay_watch", "restart", "delay", "delay_response",
              "step", "delete_as")
#: Move kinds that change a step of the case's own plan (a Target of class "step"), rendered outside `rules`.
STEP_KINDS = ("step", "delete_as")
AFTER_MODES = ("answered", "delivered")


class Unsatisfiable(ValueError):
    """A combination of moves whose triggers can never hold (a trigger waits for a 200 answer to a write
    another move fails), so it is not worth a run."""


@dataclass(frozen=True, order=True)
class Target:
    """A kind of write (`cls`: a Workload status class of harness/kueue_api.WRITE_CLASSES, "create" for
    the Workload's creation, "job_suspend"/"job_unsuspend" for Kueue's PATCH of a Job's spec.suspend, or
    "watch" for the object's watch events) to the object of `role` ("job1"); `glob`: the object name as a
    rule matches it ("job-job1-*" for the Workload of Job job1, "job1" for the Job); `verb`: the HTTP verb
    of creates and Job writes (lower case)."""

    cls: str
    role: str
    glob: str
    verb: str = ""

    def __post_init__(self) -> None:
        if self.cls not in WRITE_CLASSES and self.cls not in EXTRA_CLASSES:
            raise ValueError(f"unknown write class {self.cls!r}")

    @property
    def rule_id(self) -> str:
        """The plan rule id for this target: "x-admission-job1", "x-quota-release-job1", "x-job-suspend-job1".
        The "x-" keeps it apart from the ids of a control case's own plan, loaded beside it in the same proxy
        (kueue_9591's plan names its rule "pending-b": 16 of 38 runs of the 2026-12-05 rediscovery of #9591
        errored on "a rule with this id is already loaded" before the prefix)."""
        rid = re.sub(r"[^A-Za-z0-9._-]+", "-", f"x-{self.cls.replace('_', '-')}-{self.role}")
        return rid[:63].strip("-.") or "target"

    def match(self) -> dict[str, str]:
        """The plan rule `match` for this target (the namespace is added when a case loads the plan)."""
        if self.cls == "step":
            raise ValueError("a step of the case's own plan is moved by steps_after, not matched by a rule")
        if self.cls == "watch":
            return {"name": self.glob}
        if self.cls == "create":
            return {"kind": "Workload", "write": self.verb or "post", "name": self.glob}
        if self.cls in ("job_suspend", "job_unsuspend"):
            return {"kind": "Job", "write": self.verb or "patch", "name": self.glob,
                    "body_jsonpath": "$.spec.suspend", "body_equals": "True" if self.cls == "job_suspend" else "False"}
        return {"write": self.cls, "name": self.glob}

    def words(self) -> str:
        what = {"quota_release": "quota release", "job_suspend": "Job suspend", "job_unsuspend": "Job unsuspend",
                "create": "creation", "watch": "watch events", "step": "step"}.get(self.cls, self.cls)
        return f"{what} of {self.role}"


def how_of(text: Any) -> dict[str, Any] | None:
    """A delete_as move's `how` (JSON text) as a mapping, or None when it is not the text of a JSON object."""
    try:
        v = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def ordinal(n: int) -> str:
    """2 -> "2nd", 3 -> "3rd", 4 -> "4th" (the counts explore's words use: 2 to a few)."""
    return f"{n}{'nd' if n == 2 else 'rd' if n == 3 else 'th'}"


@dataclass(frozen=True, order=True)
class After:
    """A trigger of a move: `target`'s write `answered` (with HTTP `status`) or `delivered` (Kueue's watch
    delivered its result)."""

    target: Target
    mode: str = "answered"
    status: int | None = 200
    #: The how-manyth write of the target (mode "answered" only): 2 = its second write answered, rendered as
    #: a `count` trigger on the target's observe rule.
    nth: int = 1

    def words(self, applied: bool = False) -> str:
        """In words; `applied`: the plan holds this write's answer, so the trigger waits for it to be
        applied by kube-apiserver instead (render_rules)."""
        if applied:
            return f"the {self.target.words()} was applied"
        if self.mode == "delivered":
            return f"Kueue saw the {self.target.words()}"
        nth = f"{ordinal(self.nth)} " if self.nth > 1 else ""
        return f"the {nth}{self.target.words()} was answered" + (f" {self.status}" if self.status else "")


@dataclass(frozen=True, order=True)
class Move:
    """One fault. `kind`: "hold" (hold the request of `target` until every `after` holds: a stale write /
    reorder), "hold_response" (let it apply, hold Kueue's answer until `after`), "fail" (answer `status`,
    `times` times), "drop_watch" / "delay_watch" (the first `times` MODIFIED events of the object of a
    "watch" target, dropped or delayed `delay` seconds: unobserved state), "restart" (restart Kueue,
    SIGKILL with `kill`, once `target` was answered 200: intermediate state), "delay" / "delay_response"
    (hold the request / the answer of `target` for `delay` seconds: never generated, only what a hold
    that ended by its timeout became in the run — driver.as_happened — an ordering by time)."""

    kind: str
    target: Target
    after: tuple[After, ...] = ()
    status: int | None = None
    times: int | None = 1
    delay: float = 0.0
    kill: bool = False
    #: For "step": the triggers the step of the case's own plan runs on instead of its own, each a JSON text
    #: of one plan trigger as that plan writes it (`${namespace}` kept): rendered as `steps_after`.
    triggers: tuple[str, ...] = ()
    #: For "fail", "hold", "hold_response": writes of the target let through before the fault acts (the rule's
    #: `skip`): "a write that starts failing" after the first `skip` went through; a hold of a later write of
    #: the kind ("the 2nd pending of b": kubernetes-sigs/kueue#9591's requeue after its quota grew).
    skip: int = 0
    #: For "delete_as": how the delete step deletes instead, a JSON text of {propagation?, keep_terminating?}
    #: (rendered as `deletes_as`: harness/plan/moved.py).
    how: str = ""

    def __post_init__(self) -> None:
        if self.kind not in MOVE_KINDS:
            raise ValueError(f"unknown move kind {self.kind!r}")
        if (self.kind in ("drop_watch", "delay_watch")) != (self.target.cls == "watch"):
            raise ValueError(f"{self.kind} needs a watch target and a watch target needs a watch move")
        if (self.kind in STEP_KINDS) != (self.target.cls == "step"):
            raise ValueError("a step move needs a step target and a step target needs a step move")
        for a in self.after:
            if a.mode not in AFTER_MODES:
                raise ValueError(f"unknown trigger mode {a.mode!r}")
        if self.kind == "delete_as":
            how = how_of(self.how)
            if not how or set(how) - {"propagation", "keep_terminating"} or None in how.values():
                raise ValueError(f"a delete_as move needs `how`, a JSON object of propagation and/or keep_terminating "
                                 f"with values, not {self.how[:80]!r}")
            from harness.plan.steps import StepError, delete_spec

            try:
                delete_spec({"object": "Job/x", **how})
            except StepError as e:
                raise ValueError(f"a delete_as move: {e}") from None

    @property
    def rule_id(self) -> str:
        """The plan rule id of this move: its target's ("watch-job1" for both watch moves on job1, so only
        one of them acts on an object), "restart-kueue" for the one restart a plan may have."""
        if self.kind == "delete_as":  # apart from "step" on the same step: a plan may move it and change it
            return f"{self.target.rule_id}-deletes"
        return "restart-kueue" if self.kind == "restart" else self.target.rule_id

    def trigger_list(self) -> list[dict[str, Any]]:
        """A step move's triggers as plan triggers."""
        return [json.loads(t) for t in self.triggers]

    def words(self, answers_held: frozenset[str] = frozenset()) -> str:
        """In words; `answers_held`: rule ids whose answers the plan holds (their triggers read "applied")."""
        until = " and ".join(a.words(a.target.rule_id in answers_held) for a in self.after)
        t = self.target.words()
        if self.skip and self.kind != "fail":  # a hold of a later write of the kind: "the 2nd pending of b"
            t = f"{ordinal(self.skip + 1)} {t}"
        if self.kind == "hold":
            return f"hold the {t} until {until}"
        if self.kind == "hold_response":
            return f"hold the answer to the {t} until {until}"
        if self.kind == "fail":
            return f"fail the {t} with {self.status}" + (" once" if self.times == 1 else f" {self.times} times"
                                                         if self.times else " every time") + (
                (" after the first" if self.skip == 1 else f" after the first {self.skip}") if self.skip else "")
        if self.kind == "delay":
            return f"hold the {t} for {self.delay:g}s"
        if self.kind == "delay_response":
            return f"hold the answer to the {t} for {self.delay:g}s"
        if self.kind == "step":
            return f"run step {self.target.role} " + (f"on {trigger_words(self.trigger_list())} only"
                                                      if self.triggers else "as soon as its plan is loaded")
        if self.kind == "delete_as":
            how = how_of(self.how) or {}
            ways = ([f"with propagation {how['propagation']}"] if how.get("propagation") else []) + (
                [f"kept Terminating {how['keep_terminating']:g}s by a finalizer"] if how.get("keep_terminating") else [])
            return f"step {self.target.role} deletes {' and '.join(ways) or 'as written'}"
        if self.kind == "drop_watch":
            return f"drop the first {self.times} MODIFIED {t}"
        if self.kind == "delay_watch":
            return f"delay the first {self.times} MODIFIED {t} by {self.delay:g}s"
        return f"{'kill' if self.kill else 'restart'} Kueue once the {t} was answered"


Plan = tuple[Move, ...]


def trigger_words(triggers: list[dict[str, Any]]) -> str:
    """Plan triggers in short words: "rule release-v1 answered 200 and step b" (docs/fault-plans.md)."""
    out = []
    for t in triggers:
        if "rule" in t:
            out.append(f"rule {t['rule']} {t.get('state', 'answered')}" + (f" {t['status']}" if t.get("status") else ""))
        elif "delivered" in t:
            out.append(f"Kueue saw {t['delivered']}")
        elif "step" in t:
            out.append(f"step {t['step']}")
        elif "count" in t:
            out.append(f"{t['count']} {t.get('at_least')} times")
        elif "log" in t:
            out.append(f"log /{t['log']}/")
        else:
            out.append(", ".join(f"{k} {v}" for k, v in t.items()))
    return " and ".join(out)


def step_move(step: str, triggers: list[dict[str, Any]]) -> Move:
    """A move that runs step `step` of the case's own plan on `triggers` instead of its own."""
    return Move("step", Target("step", step, ""), triggers=tuple(json.dumps(t, sort_keys=True) for t in triggers))


def delete_as_move(step: str, **how: Any) -> Move:
    """A move that makes delete step `step` of the case's own plan delete as `how` says (propagation,
    keep_terminating: harness/plan/steps.py delete_spec)."""
    return Move("delete_as", Target("step", step, ""), how=json.dumps(how, sort_keys=True))


def plan_words(moves: Plan) -> str:
    """The plan in words, one clause per move, as render_rules writes its triggers."""
    held = frozenset(m.target.rule_id for m in moves if m.kind == "hold_response")
    return "; ".join(m.words(held) for m in moves)


def plan_key(moves: Plan) -> tuple:
    """A key that is equal for the same set of moves in any order (dedup of generated plans)."""
    return tuple(sorted(moves))


def conflicts(moves: Plan) -> str | None:
    """Why these moves cannot form one plan (two acting moves on one target, two restarts), or None."""
    seen: set[str] = set()
    for m in moves:
        if m.rule_id in seen:
            return f"two moves act on {m.rule_id}"
        seen.add(m.rule_id)
    return None


def render_rules(moves: Plan, hold_timeout: float = HOLD_TIMEOUT) -> list[dict[str, Any]]:
    """The plan rules of `moves`, in move order, then an `observe` rule (every time, `times: null`) for each
    write a trigger names that no move acts on. A trigger on a write whose answer a `hold_response` move
    holds waits for it to be *applied* (held with status 200), not answered or delivered (a `delivered`
    trigger needs the answer too): the answer is what that move holds back, so waiting for it could only
    wait for itself.

    Raises Unsatisfiable when a trigger waits for a 200 answer of a write another move fails, and
    ValueError when two moves act on one target."""
    why = conflicts(moves)
    if why:
        raise ValueError(why)
    acting = {m.target.rule_id: m for m in moves if m.kind in ("hold", "hold_response", "fail")}
    anchors: dict[str, Target] = {}
    rules: list[dict[str, Any]] = []

    def trigger(a: After) -> dict[str, Any]:
        rid = a.target.rule_id
        other = acting.get(rid)
        if other is None:
            anchors.setdefault(rid, a.target)
        elif other.kind == "fail":
            raise Unsatisfiable(f"a trigger waits for {rid} while a move fails it")
        if other is not None and other.kind == "hold_response":
            # The answer (which `delivered` needs too) is what that move holds: wait for it to be applied.
            return {"rule": rid, "state": "held", "status": 200}
        if a.mode == "delivered":
            return {"delivered": rid}
        if a.nth > 1:
            c: dict[str, Any] = {"count": rid, "at_least": a.nth}
            if a.status is not None:
                c["status"] = a.status
            return c
        t: dict[str, Any] = {"rule": rid, "state": "answered"}
        if a.status is not None:
            t["status"] = a.status
        return t

    for m in moves:
        rid = m.rule_id
        if m.kind in STEP_KINDS:
            continue  # not a rule: plan_document writes it under steps_after / deletes_as
        if m.kind in ("hold", "hold_response"):
            r: dict[str, Any] = {"id": rid, "match": m.target.match(), "action": m.kind}
            if m.after:
                r["release"] = {"after": [trigger(a) for a in m.after], "timeout": hold_timeout}
            else:
                r["release"] = {"timeout": hold_timeout}
            if m.skip:
                r["skip"] = m.skip
        elif m.kind == "fail":
            r = {"id": rid, "match": m.target.match(), "action": "fail", "status": int(m.status or 500),
                 "times": m.times, "reason": _REASONS.get(int(m.status or 500), "InternalError")}
            if m.times is None:  # a pace, not an ordering: Kueue retries such a write as fast as it can
                r["delay"] = FAIL_PACE
            if m.skip:
                r["skip"] = m.skip
        elif m.kind in ("delay", "delay_response"):
            r = {"id": rid, "match": m.target.match(), "action": "delay", "delay": round(float(m.delay), 3)}
            if m.kind == "delay_response":
                r["stage"] = "response"
        elif m.kind in ("drop_watch", "delay_watch"):
            r = {"id": rid, "match": {"name": m.target.glob, "event_type": "MODIFIED"},
                 "action": "drop_watch_events" if m.kind == "drop_watch" else "delay_watch_events", "times": m.times}
            if m.kind == "delay_watch":
                r["delay"] = m.delay or WATCH_DELAY
        else:  # restart
            r = {"id": rid, "action": "restart_kueue", "kill": bool(m.kill),
                 "release": {"after": [trigger(After(m.target, "answered", 200))]}}
        rules.append(r)
    for rid, t in anchors.items():
        rules.append({"id": rid, "match": t.match(), "action": "observe", "times": None})
    _held_cycle(rules)
    return rules


def _held_cycle(rules: list[dict[str, Any]]) -> None:
    """Raise Unsatisfiable for holds that wait for each other to be *held* in a ring: `held` means parked
    now, so the first one released ends the other's chance (the plan loader accepts such rings: waiting for
    `held` adds no edge to its deadlock check, docs/fault-plans.md)."""
    edges = {r["id"]: {t["rule"] for t in (r.get("release") or {}).get("after") or []
                       if t.get("state") == "held" and "rule" in t} for r in rules}

    def reach(start: str, node: str, seen: set[str]) -> bool:
        for nxt in edges.get(node, ()):
            if nxt == start or (nxt not in seen and reach(start, nxt, seen | {nxt})):
                return True
        return False

    for rid in edges:
        if reach(rid, rid, {rid}):
            raise Unsatisfiable(f"holds wait for each other to be held: {rid} is in a ring of `held` triggers")


_REASONS = {409: "Conflict", 500: "InternalError", 429: "TooManyRequests", 503: "ServiceUnavailable"}

#: The observe-only plan of the reference and no-op runs: one rule that observes every Kueue write of the
#: case's namespace (the case loads it limited to its namespace) and changes nothing.
OBSERVE_ALL_RULES = [{"id": "observe-all", "action": "observe", "times": None}]


def plan_document(moves: Plan, name: str, description: str = "", hold_timeout: float = HOLD_TIMEOUT,
                  header: str = "") -> str:
    """The YAML text of a plan of `moves` (no moves: the observe-only plan), with `header` as leading
    comment lines. Validated by the caller with harness.plan.load.parse_plan."""
    rules = render_rules(moves, hold_timeout) if moves else [dict(r) for r in OBSERVE_ALL_RULES]
    doc = {"apiVersion": "kueue-harness/v1", "kind": "FaultPlan", "name": name,
           "description": description or plan_words(moves) or "observe every Kueue write",
           "rules": rules}
    moved = {m.target.role: m.trigger_list() for m in moves if m.kind == "step"}
    if moved:
        doc["steps_after"] = moved
    deletes = {m.target.role: json.loads(m.how) for m in moves if m.kind == "delete_as"}
    if deletes:
        doc["deletes_as"] = deletes
    text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return head + text


def validate(moves: Plan, hold_timeout: float = HOLD_TIMEOUT) -> str | None:
    """None when `moves` render to a plan the loader accepts (harness/plan/load.py: keys, values, trigger
    cycles), else the first problem in words."""
    from harness.plan.load import PlanError, parse_plan

    try:
        parse_plan(plan_document(moves, "candidate", hold_timeout=hold_timeout), "candidate")
    except (Unsatisfiable, ValueError) as e:
        return str(e)
    except PlanError as e:
        return str(e).splitlines()[0]
    return None


@dataclass
class Candidate:
    """A plan to try on one case. `moves`: the plan; `case`: the pytest node id of the control case;
    `depth`: number of moves; `stage`/`seq`: its place in the search order (driver.py); `parent`: the id of
    the run it extends; `family`: the generator family of its last move."""

    moves: Plan
    case: str
    family: str
    depth: int = 1
    parent: str | None = None
    id: str = ""
    stage: int = 0
    seq: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    def words(self) -> str:
        return plan_words(self.moves) or "no fault (observe only)"


def move_to_dict(m: Move) -> dict[str, Any]:
    """A Move as JSON (explore.json, shards' results)."""
    return {"kind": m.kind, "target": m.target.__dict__, "after": [{"target": a.target.__dict__, "mode": a.mode,
                                                                    "status": a.status, **({"nth": a.nth} if a.nth > 1 else {})}
                                                                   for a in m.after],
            "status": m.status, "times": m.times, "delay": m.delay, "kill": m.kill,
            **({"triggers": list(m.triggers)} if m.triggers else {}), **({"skip": m.skip} if m.skip else {}),
            **({"how": m.how} if m.how else {})}


def move_from_dict(d: dict[str, Any]) -> Move:
    return Move(d["kind"], Target(**d["target"]),
                tuple(After(Target(**a["target"]), a["mode"], a.get("status"), int(a.get("nth") or 1))
                      for a in d.get("after") or ()),
                d.get("status"), d.get("times", 1), d.get("delay", 0.0), d.get("kill", False),
                tuple(d.get("triggers") or ()), int(d.get("skip") or 0), _how_text(d.get("how")))


def _how_text(v: Any) -> str:
    """A stored `how` as the JSON text a Move keeps; ValueError for anything but text (explore.json as written)."""
    if v is None or v == "":
        return ""
    if not isinstance(v, str):
        raise ValueError(f"a move's `how` is JSON text, not {type(v).__name__}")
    return v
