"""What the proxy's parts share: the loaded rules, the parked flows (holds), what each rule's flows went
through (for triggers), what Kueue's watches delivered, the process faults (signals) and the event log.

One ProxyState per mitmdump; every part of harness/proxy/addons gets the same one. Pure Python and asyncio:
no mitmproxy import, so it can be tested alone.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import fnmatch
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from harness.kueue.api import KueueWrite
from harness.plan.rules import FlowRecord, Rule, RuleBook, RuleError, Trigger, trigger_satisfied, validate_rule_set
from harness.plan.triggers import WRITING_STEPS, delivered_key, step_writes
from harness.proxy.notices import clock

#: How many ended holds the proxy remembers (to answer `release ID` of one that is gone).
ENDED_HOLDS_KEPT = 256
#: How many expired holds `GET /state` lists (the most recent).
EXPIRED_SHOWN = 10
#: Match keys a request may differ in and still be one a rule "could have matched" (a near miss).
NEAR_MISS_KEYS = ("name", "field_manager")


@dataclass
class Decision:
    """How a hold ends: `action` "release" (the flow goes on) or "fail" (answered with a Kubernetes
    Status of `status`/`reason`/`message`); `why` is logged with `released`."""

    action: str = "release"
    why: str = "control"
    status: int = 500
    reason: str = "InternalError"
    message: str = "injected by kueue-harness"

    @classmethod
    def from_body(cls, action: str, body: dict[str, Any]) -> "Decision":
        """From a control-channel body ({"why", "status", "reason", "message"}; missing keys: defaults)."""
        d = cls(action=action)
        for k in ("why", "status", "reason", "message"):
            if body.get(k) is not None:
                setattr(d, k, body[k])
        return d


@dataclass
class Hold:
    """A parked request or response, waiting for its decision (triggers, control channel, timeouts).
    `since`: epoch seconds; `max_hold`: seconds."""

    id: str
    rule_id: str
    stage: str
    flow: int | None
    label: str
    since: float
    max_hold: float
    rule: Rule | None = None
    decision: Decision | None = None
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def decide(self, decision: Decision) -> None:
        """End the hold with `decision` (the parked hook resumes on its next loop iteration)."""
        self.decision = decision
        self.event.set()

    def view(self) -> dict[str, Any]:
        """The hold as `GET /state` shows it. Seconds: `age`; `max_hold`; `expires_in` (max_hold - age:
        when the safety net releases it, logging `hold_expired`); `timeout_in` (its rule's release.timeout
        - age, when that comes first; else None)."""
        age = time.time() - self.since
        rel = self.rule.release if self.rule is not None else None
        timeout = rel.timeout if rel is not None and rel.timeout and rel.timeout <= self.max_hold else None
        return {
            "id": self.id, "rule": self.rule_id, "stage": self.stage, "flow": self.flow,
            "label": self.label, "since": self.since, "age": round(age, 3), "max_hold": self.max_hold,
            "expires_in": round(self.max_hold - age, 3),
            "timeout_in": round(timeout - age, 3) if timeout is not None else None,
        }


@dataclass
class EndedHold:
    """A hold that is over: `how` "released", "failed", "timeout" (its release.timeout) or "expired" (its
    max_hold), at `ended` (epoch seconds), `why` as logged. Kept so that a command naming it can say so."""

    id: str
    rule: str
    stage: str
    flow: int | None
    label: str
    since: float
    ended: float
    how: str
    why: str
    max_hold: float

    def view(self) -> dict[str, Any]:
        """As `GET /state` lists expired holds: also `at`, the local time it ended."""
        return {**dataclasses.asdict(self), "at": clock(self.ended)}

    def sentence(self) -> str:
        """"hold h1 expired at 2026-11-30T12:19:27 (…)": what became of it, for a refused command."""
        ago = time.time() - self.ended
        what = f"rule {self.rule}, {self.label}"
        if self.how == "expired":
            return (f"hold {self.id} expired at {clock(self.ended)} ({ago:.0f} s ago), after its rule's max_hold of "
                    f"{self.max_hold:g} s ({what}); the proxy released it then, so kube-apiserver and Kueue went on "
                    "without you: a manual ordering that relied on it did not happen")
        verb = {"released": "was released", "failed": "was failed", "timeout": "ended by its release.timeout"}
        return (f"hold {self.id} {verb.get(self.how, self.how)} at {clock(self.ended)} ({ago:.0f} s ago; {self.why}; "
                f"{what}); nothing is left to do with it")


@dataclass
class FlowState:
    """Per-flow facts the parts pass along (kept off flow.metadata, which mitmproxy serializes):
    the proxy's flow number, its classification, the rules that recorded it, the response-stage rule."""

    seq: int
    write: KueueWrite | None = None
    label: str = ""
    records: dict[str, FlowRecord] = field(default_factory=dict)
    response_rule: Rule | None = None


@dataclass
class Signal:
    """A process-fault or step rule loaded in the proxy: when it fired (`signalled`, epoch s) and whether the
    harness reported it done (`signal_done`: `ok`, and `result`, its seconds, objects, matched or error);
    `timer` is its release.timeout."""

    rule: Rule
    fired: float | None = None
    done: bool = False
    timer: asyncio.TimerHandle | None = None
    ok: bool | None = None
    result: dict[str, Any] = field(default_factory=dict)


class EventLog:
    """Append-only JSONL, flushed per event (the primary record: .mitm files can lose the tail)."""

    def __init__(self) -> None:
        self._fh = None
        self.events: list[dict[str, Any]] = []

    def open(self, path: str) -> None:
        """Append to `path` from now on (empty: memory only). Raises OSError if it cannot be opened."""
        if self._fh:
            self._fh.close()
        self._fh = open(path, "a", buffering=1) if path else None

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Record event `kind` with `fields` (plus ts, epoch seconds, and source "proxy"); returns it."""
        ev = {"ts": time.time(), "source": "proxy", "event": kind, **fields}
        self.events.append(ev)
        if self._fh:
            self._fh.write(json.dumps(ev, sort_keys=True) + "\n")
        return ev

    def close(self) -> None:
        """Stop writing the file (events are still kept in memory)."""
        if self._fh:
            self._fh.close()
            self._fh = None


class ProxyState:
    """Everything the parts share (module docstring)."""

    def __init__(self) -> None:
        self.rules = RuleBook()
        self.holds: dict[str, Hold] = {}
        self.log = EventLog()
        self.delivered: dict[str, dict[str, Any]] = {}  # "ns/name" -> last watch event delivered
        self.delivered_rv: dict[str, int] = {}  # "ns/name" -> highest resourceVersion delivered
        self.rule_flows: dict[str, list[FlowRecord]] = {}  # rule id -> flows it caught (for triggers)
        self.flows: dict[str, FlowState] = {}  # mitmproxy flow id -> FlowState
        self.signals: dict[str, Signal] = {}  # process-fault rule id -> its state
        self.ended: collections.OrderedDict[str, EndedHold] = collections.OrderedDict()  # last ENDED_HOLDS_KEPT
        self.unmatched: dict[str, dict[str, Any]] = {}  # rule id -> its first likely mistake (while it has no hits)
        self.near: dict[str, dict[str, Any]] = {}  # rule id -> its first other near miss (while it has no hits)
        self.facts: dict[str, dict[str, Any]] = {}  # fact key -> what the harness saw (log/object triggers)
        self.fact_problems: dict[str, str] = {}  # fact key -> why it can never hold (the harness found out)
        self._seq = itertools.count(1)
        self._hold_seq = itertools.count(1)
        self._load_seq = itertools.count(1)  # one number per add_rules call: `rule_added`'s `load`

    # ---- flows -----------------------------------------------------------------------------------
    def new_flow(self, flow_id: str, write: KueueWrite | None, label: str) -> FlowState:
        """Number a new flow and keep its FlowState until `forget`."""
        fs = FlowState(next(self._seq), write, label)
        self.flows[flow_id] = fs
        return fs

    def flow(self, flow_id: str) -> FlowState | None:
        """The FlowState of mitmproxy flow `flow_id`, None if it was never numbered or is forgotten."""
        return self.flows.get(flow_id)

    def forget(self, flow_id: str) -> FlowState | None:
        """Drop a finished flow's FlowState; returns it (None if there was none)."""
        return self.flows.pop(flow_id, None)

    def record_flow(self, fs: FlowState, rule: Rule) -> FlowRecord:
        """Note that `rule` caught this flow (its triggers look at the record from now on)."""
        w = fs.write
        rec = FlowRecord(fs.seq, w.namespace if w else None, w.name if w else None, kind=w.kind if w else None)
        fs.records[rule.id] = rec
        self.rule_flows.setdefault(rule.id, []).append(rec)
        return rec

    def unrecord_flow(self, fs: FlowState, rule: Rule) -> None:
        """Undo `record_flow` and give the rule's use back (a response rule of a flow the proxy answered)."""
        st = self.rules.rules.get(rule.id)
        if st is not None and st.rule is rule:
            st.hits -= 1
            fs.records.pop(rule.id, None)
            self.rule_flows[rule.id] = [f for f in self.rule_flows.get(rule.id, []) if f.flow != fs.seq]

    def new_hold(self, rule: Rule, stage: str, fs: FlowState) -> Hold:
        """Park flow `fs` for `rule` at `stage`: a new Hold ("h1", "h2", …) in `holds`."""
        hold = Hold(id=f"h{next(self._hold_seq)}", rule_id=rule.id, stage=stage, flow=fs.seq, label=fs.label,
                    since=time.time(), max_hold=rule.param("max_hold"), rule=rule)
        self.holds[hold.id] = hold
        return hold

    def end_hold(self, hold: Hold, how: str, why: str) -> EndedHold:
        """Take `hold` out of `holds` and remember how it ended (`how`: released, failed, timeout, expired;
        `why` as logged) among the last ENDED_HOLDS_KEPT."""
        self.holds.pop(hold.id, None)
        rec = EndedHold(hold.id, hold.rule_id, hold.stage, hold.flow, hold.label, hold.since, time.time(), how, why,
                        hold.max_hold)
        self.ended[hold.id] = rec
        while len(self.ended) > ENDED_HOLDS_KEPT:
            self.ended.popitem(last=False)
        return rec

    def expired_views(self) -> list[dict[str, Any]]:
        """The last EXPIRED_SHOWN holds that reached their max_hold, oldest first (EndedHold.view)."""
        return [e.view() for e in self.ended.values() if e.how == "expired"][-EXPIRED_SHOWN:]

    # ---- near misses ---------------------------------------------------------------------------
    def near_misses(self, write: KueueWrite | None, method: str, path: str, body: Any = None) -> list[dict[str, Any]]:
        """Note the rules this classified write *could* have matched but did not: rules (acting or observe)
        with no hit yet whose match takes the write once its `name` / `field_manager` are left out — the
        same kind of write, another name.

        When the rule's value looks like a wrong spelling of what Kueue wrote (`name: job1` for the
        Workload job-job1-62dce; a field manager that is part of the real one), the first such write is a
        *warning*: logged as `rule_unmatched` (rule, label, seen: {key: value seen}, want: {key: the rule's
        value}, hint) and kept in `unmatched`. Any other near miss (most often simply another object, such
        as job1's admission before job2's) is only kept, as the rule's first `near_miss`, for `GET /state`.
        Both are forgotten when the rule is removed or loaded again. Returns the new warnings."""
        if write is None:
            return []
        new = []
        for st in self.rules.rules.values():
            r = st.rule
            if st.hits or r.id in self.unmatched or r.kind.consulted not in ("flow", "observe"):
                continue
            loose = {k: None for k in NEAR_MISS_KEYS if getattr(r.match, k) is not None}
            if not loose or r.match.matches(write, method, path, body):
                continue
            if not dataclasses.replace(r.match, **loose).matches(write, method, path, body):
                continue
            seen = {k: getattr(write, k) for k in loose}
            want = {k: getattr(r.match, k) for k in loose}
            differ = [k for k in loose if not (k == "name" and fnmatch.fnmatchcase(seen[k] or "", want[k]))
                      and not (k == "field_manager" and seen[k] == want[k])]
            hint, likely = near_miss_hint(seen, want, differ)
            miss = {"rule": r.id, "label": write.summary(), "seen": {k: seen[k] for k in differ},
                    "want": {k: want[k] for k in differ}, "hint": hint, "ts": time.time()}
            if likely:
                self.unmatched[r.id] = miss
                self.near.pop(r.id, None)
                self.log.write("rule_unmatched", **{k: v for k, v in miss.items() if k != "ts"})
                new.append(miss)
            else:
                self.near.setdefault(r.id, miss)
        return new

    # ---- rules -----------------------------------------------------------------------------------
    def add_rules(self, rules: list[Rule], plan: str | None = None, single: bool = False,
                  source: dict[str, str] | None = None) -> None:
        """Load `rules` all or nothing. Raises RuleError (nothing changed) on an id clash or a trigger
        naming an unknown rule. Logs `rule_added` per rule (with `load`: the number of this call, 1, 2, …,
        the same for every rule it adds, so a plan loaded again with the same ids is told apart; `plan`
        unless `single`, and `plan_source` when given: the plan's file, namespace and the command that
        loaded it); process faults without triggers fire now, those with a `release.timeout` get their
        timer."""
        validate_rule_set(rules, set(self.rules.rules))
        load = next(self._load_seq)
        for r in rules:
            self.rules.add(r)
            self.rule_flows.pop(r.id, None)  # a reloaded id starts with fresh trigger state
            self.unmatched.pop(r.id, None)
            self.near.pop(r.id, None)
            if single:
                self.log.write("rule_added", rule=r.to_dict(), load=load)
            elif source:
                self.log.write("rule_added", rule=r.to_dict(), plan=plan, plan_source=source, load=load)
            else:
                self.log.write("rule_added", rule=r.to_dict(), plan=plan, load=load)
        for r in rules:
            if r.kind.consulted == "signal":
                self._arm(r)
        self.check_triggers()

    def remove_rule(self, rule_id: str) -> None:
        """Unload a rule (nothing happens for an unknown id); its flows stay as they are."""
        self.rules.remove(rule_id)
        self.rule_flows.pop(rule_id, None)
        self.unmatched.pop(rule_id, None)
        self.near.pop(rule_id, None)
        sig = self.signals.pop(rule_id, None)
        if sig is not None and sig.timer is not None:
            sig.timer.cancel()
        referenced = self.fact_keys()
        for key in [k for k in self.facts if k not in referenced]:
            del self.facts[key]  # no loaded rule waits for it: a later plan must see it happen again
        for key in [k for k in self.fact_problems if k not in referenced]:
            del self.fact_problems[key]
        self.log.write("rule_removed", rule=rule_id)

    # ---- process faults (signals) ----------------------------------------------------------------
    def _arm(self, rule: Rule) -> None:
        sig = self.signals[rule.id] = Signal(rule)
        rel = rule.release
        if rel is None or (not rel.after and not rel.timeout):
            self.fire(rule.id, "loaded")
            return
        if rel.timeout:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no event loop (a unit test driving the state by hand): triggers only
            sig.timer = loop.call_later(rel.timeout, self.fire, rule.id, f"release.timeout {rel.timeout:g}s")

    def fire(self, rule_id: str, why: str) -> bool:
        """Signal process fault `rule_id` now (once): log `signalled` (rule, action, its params, why) for
        the harness's runner, and mark its trigger record `held`. False if it already fired or is gone."""
        sig = self.signals.get(rule_id)
        if sig is None or sig.fired is not None:
            return False
        sig.fired = time.time()
        if sig.timer is not None:
            sig.timer.cancel()
            sig.timer = None
        rec = FlowRecord(0, None, None, held=True)
        self.rule_flows.setdefault(rule_id, []).append(rec)
        self.log.write("signalled", rule=rule_id, action=sig.rule.action, why=why, **dict(sig.rule.params))
        self.check_triggers()
        return True

    def signal_done(self, rule_id: str, ok: bool, detail: dict[str, Any]) -> dict[str, Any]:
        """The harness finished a fired process fault or step: log `signal_done` (`since_signalled` in
        seconds, and the harness's `detail`: kill, seconds, objects, matched, error) and mark its record
        `released` (and `ok`: `{step: ID}` triggers need ok). Raises KeyError for an unknown rule, RuleError
        if it has not fired."""
        sig = self.signals[rule_id]
        if sig.fired is None:
            raise RuleError(f"rule {rule_id} has not been signalled")
        sig.done, sig.ok, sig.result = True, ok, dict(detail)
        for rec in self.rule_flows.get(rule_id, []):
            rec.released, rec.ok = True, ok
        if ok and sig.rule.action in WRITING_STEPS:  # what it wrote, for `{delivered: STEP}`
            self.rule_flows.setdefault(rule_id, []).extend(step_writes(detail.get("objects")))
        ev = self.log.write("signal_done", rule=rule_id, action=sig.rule.action, ok=ok,
                            since_signalled=round(time.time() - sig.fired, 3), **detail)
        self.check_triggers()
        return ev

    def signal_views(self) -> list[dict[str, Any]]:
        """The process faults and steps as `GET /state` shows them: rule, action, fired (epoch s of its
        `signalled`, or None), done; once done `ok` and `result` (its `signal_done` detail: seconds, objects,
        matched, or error); while not fired, `waiting_for`: the words (Trigger.describe) of the triggers
        that do not hold yet, and `timeout` (its release.timeout, seconds from when it was loaded)."""
        out = []
        for s in self.signals.values():
            v: dict[str, Any] = {"rule": s.rule.id, "action": s.rule.action, "fired": s.fired, "done": s.done}
            if s.done:
                v.update(ok=s.ok, result=s.result)
            rel = s.rule.release
            if s.fired is None and rel is not None:
                v["waiting_for"] = [t.describe() for t in rel.after
                                    if not trigger_satisfied(t, self.rule_flows, self.delivered_rv, self.facts)]
                if rel.timeout:
                    v["timeout"] = rel.timeout
            out.append(v)
        return out

    # ---- facts (log and object triggers, wait steps: observed by the harness) -----------------------
    def fact_keys(self) -> dict[str, list[str]]:
        """Every fact a loaded rule waits for (its `log`/`object` triggers, a wait step's condition): fact key
        -> the ids of those rules."""
        out: dict[str, list[str]] = {}
        for st in self.rules.rules.values():
            r = st.rule
            triggers = [t for t in (r.release.after if r.release else ()) if t.is_fact]
            if r.kind.is_step and r.action == "wait" and isinstance(r.param("wait"), dict):
                try:
                    triggers.append(Trigger(**r.param("wait")))
                except TypeError:
                    pass
            for t in triggers:
                out.setdefault(t.fact_key(), []).append(r.id)
        return out

    def add_fact(self, key: str, detail: dict[str, Any]) -> dict[str, Any]:
        """The harness saw fact `key` happen (`detail`: what it saw): log `fact` (fact, what, rules, detail)
        once and re-evaluate triggers. Raises KeyError when no loaded rule waits for it."""
        waiting = self.fact_keys()
        if key not in waiting:
            raise KeyError(key)
        if key in self.facts:
            return {"event": "fact", "fact": key, "known": True}
        self.facts[key] = detail
        try:
            what = Trigger(**json.loads(key)).describe()
        except (TypeError, ValueError):
            what = key
        ev = self.log.write("fact", fact=key, what=what, rules=waiting[key], detail=detail)
        self.check_triggers()
        return ev

    def fact_problem(self, key: str, problem: str) -> dict[str, Any]:
        """The harness found that fact `key` can never hold (`problem`: why; a name glob that matched several
        objects when it mattered): log `fact_problem` (fact, what, rules, problem) once and keep it for
        `GET /state`; the fact stays unseen. Raises KeyError when no loaded rule waits for it."""
        waiting = self.fact_keys()
        if key not in waiting:
            raise KeyError(key)
        if key in self.fact_problems:
            return {"event": "fact_problem", "fact": key, "known": True}
        self.fact_problems[key] = problem
        try:
            what = Trigger(**json.loads(key)).describe()
        except (TypeError, ValueError):
            what = key
        return self.log.write("fact_problem", fact=key, what=what, rules=waiting[key], problem=problem)

    # ---- triggers --------------------------------------------------------------------------------
    def waiting(self) -> bool:
        """Whether anything waits for triggers (a hold, or a process fault that has not fired)."""
        return bool(self.holds) or any(s.fired is None for s in self.signals.values())

    def check_triggers(self) -> None:
        """End every hold whose rule's release triggers all hold now, and fire every process fault whose
        triggers all hold (plans: harness/plan/rules.py)."""
        for hold in list(self.holds.values()):
            rule = hold.rule
            if rule is None or rule.release is None or not rule.release.after or hold.event.is_set():
                continue
            if self._satisfied(rule):
                rel = rule.release
                hold.decide(Decision(rel.then, why=self.why(rule), status=rel.status, reason=rel.reason,
                                     message=rel.fail_message(timed_out=False)))
        for sig in list(self.signals.values()):
            rel = sig.rule.release
            if sig.fired is None and rel is not None and rel.after and self._satisfied(sig.rule):
                self.fire(sig.rule.id, self.why(sig.rule))

    def _satisfied(self, rule: Rule) -> bool:
        return all(trigger_satisfied(t, self.rule_flows, self.delivered_rv, self.facts) for t in rule.release.after)

    @staticmethod
    def why(rule: Rule) -> str:
        """"triggers: eviction-job1 held, Kueue's watch delivered admission-job1's object, step w1 done,
        Kueue logged /Preempted/" (Trigger.describe; the `forced` checker reads the "triggers:" prefix)."""
        return "triggers: " + ", ".join(t.describe() for t in rule.release.after)

    # ---- watch deliveries ------------------------------------------------------------------------
    def delivered_event(self, rec: dict[str, Any]) -> None:
        """Note that Kueue received this object version (`rec`: namespace, name, resource_version …; `kind` for
        an object other than a Workload: `object_kind`, as `delivered_key` keys it)."""
        key = delivered_key(rec.get("object_kind"), rec["namespace"], rec["name"])
        self.delivered[key] = rec
        try:
            self.delivered_rv[key] = max(self.delivered_rv.get(key, 0), int(rec.get("resource_version") or 0))
        except ValueError:
            pass

    def reached(self, rule_id: str, state: str, status: int | None = None) -> dict[str, Any]:
        """Whether a flow of rule `rule_id` reached `state` (held, released, answered; with HTTP `status` if
        given), as a release trigger `{rule, state, status}` would see it now: {"reached", "hits",
        "warning", "near_miss"} (see `near_misses`; None once the rule has a hit). Raises KeyError for a rule that is not loaded, RuleError for a state the rule's action
        never reaches (an observe rule is never held)."""
        st = self.rules.rules[rule_id]
        kind = st.rule.kind
        if state not in kind.trigger_states:
            raise RuleError(f"rule {rule_id} (action {st.rule.action}) never reaches state {state}: it can be "
                            f"waited for as {' or '.join(kind.trigger_states) or 'nothing'}")
        t = Trigger(rule=rule_id, state=state, status=status)
        return {"reached": trigger_satisfied(t, self.rule_flows, self.delivered_rv), "hits": st.hits,
                "warning": self.unmatched.get(rule_id) if not st.hits else None,
                "near_miss": self.near.get(rule_id) if not st.hits else None}

    def view(self) -> dict[str, Any]:
        """`GET /state`: rules with hits (and, while a rule has none, its `warning` or else its first
        `near_miss`: see `near_misses`), holds (with their expiry), the last expired holds, process faults,
        number of events."""
        return {
            "rules": [{"rule": s.rule.to_dict(), "hits": s.hits,
                       **({"warning": self.unmatched[i]} if not s.hits and i in self.unmatched else
                          {"near_miss": self.near[i]} if not s.hits and i in self.near else {})}
                      for i, s in self.rules.rules.items()],
            "holds": [h.view() for h in self.holds.values()],
            "expired": self.expired_views(),
            "signals": self.signal_views(),
            "facts": sorted(self.facts),
            "fact_problems": dict(self.fact_problems),
            "events": len(self.log.events),
        }


def near_miss_hint(seen: dict[str, Any], want: dict[str, Any], differ: list[str]) -> tuple[str, bool]:
    """(What to change, whether the rule's values look like wrong spellings of what Kueue wrote) for a rule
    whose match missed a write only by its `differ` keys. A name glob that is the Job's name inside the
    Workload's name ("job1" for job-job1-62dce: hint "match.name 'job-job1-*'"), or whose literal text is
    part of the name Kueue wrote, is likely wrong; a field manager that is part of the one Kueue sent
    (or contains it, or differs in case only) too."""
    hints = []
    likely = bool(differ)
    for k in differ:
        got, glob = seen.get(k) or "", want[k]
        if k == "name":
            # Kueue names a job's Workload <kind>-<job name>-<5 hex> (job-job1-62dce).
            m = re.fullmatch(r"([a-z0-9]+)-(.+)-[0-9a-f]{5}", got)
            chunks = [c for c in re.split(r"[*?]|\[[^]]*\]", glob) if len(c) >= 3]
            if m and fnmatch.fnmatchcase(m.group(2), glob):
                hints.append(f"match.name '{m.group(1)}-{glob}-*' (Kueue names the Workload of {m.group(1)} "
                             f"{m.group(2)!r} {got!r}: {m.group(1)}-<name>-<hash>)")
                continue
            likely = likely and any(c in got for c in chunks)
            hints.append(f"match.name {glob!r} does not take {got!r}"
                         + (" (`kubectl get workloads -A` lists the names)" if likely else ""))
        else:
            likely = likely and bool(got) and (glob in got or got in glob or glob.lower() == got.lower())
            hints.append(f"match.{k} {glob!r} is not {got!r}")
    return "; ".join(hints), likely
