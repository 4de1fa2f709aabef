"""The checker interface: a checker reads a case's history (and its final objects) and returns findings;
`compose` runs a named set of them, assumptions first, and turns their findings into one verdict. The same
composition decides the verdict during the run (harness/scenarios/plugin.py) and in `kueue-harness report`.

Verdicts: "error" when an assumption failed (the forced ordering did not happen, a hold expired, Kueue
restarted unasked, the proxy failed a request on its own, the monitor's watch broke); else "reproduced"
when an invariant was violated; else "error" when an invariant could not judge its declared subject
(result "error": a Job named but never created, a Workload never seen, nothing deleted for a deletion
checker); "inconclusive" when one could not be decided; "error" when no invariant judged anything (none
declared, or every one "not applicable": a verdict is never vacuous); else "passed". A checker that raises yields an inconclusive
finding instead of crashing the run (Jepsen's check-safe).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Protocol

from harness.history.names import Names

History = Sequence[Mapping[str, Any]]
Objects = Mapping[str, Any]


@dataclass(frozen=True)
class Finding:
    """One checker result. `result`: "held" | "violated" | "inconclusive" | "error" | "not applicable" | "info".
    "error": the checker cannot judge what the case declared (its subject never existed or never reached
    the state judged); the verdict is then "error", never "passed".
    `bearing`: whether it decides the verdict (info rows only describe); `assumption`: a violated one
    voids the run ("error") instead of reproducing the bug. `summary` is one line for the diagram;
    `evidence` the report table cell."""

    check: str
    result: str
    summary: str
    evidence: str
    bearing: bool = True
    assumption: bool = False

    @property
    def validity(self) -> str:
        """"valid" | "violated" | "unknown" (the three outcomes every checker maps to)."""
        return {"violated": "violated", "inconclusive": "unknown"}.get(self.result, "valid")


class Checker(Protocol):
    """What a checker is. `name`: its key in the registry and in a case's `checkers` marker; `kind`:
    "assumption", "invariant" or "info". `check` must be pure: no sleeping, no API calls."""

    name: ClassVar[str]
    kind: ClassVar[str]

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]: ...


#: name -> checker class; filled by @register in each checker's module.
REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: make a checker available by its `name` (one file per checker, no list to edit)."""
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise ValueError(f"two checkers are named {cls.name!r}")
    REGISTRY[cls.name] = cls
    return cls


@dataclass
class Verdict:
    """The composed outcome: `verdict`, every finding (assumptions first), and `reason` (one line)."""

    verdict: str
    findings: list[Finding]
    reason: str


@dataclass(frozen=True)
class Selection:
    """Which checkers a case declared and with which parameters: {name: {param: value}} (JSON-able, so a
    bundle stores it and the offline re-check builds the same checkers)."""

    checkers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def build(self) -> list[Any]:
        """The checker objects, assumptions first. Raises KeyError naming an unknown checker."""
        import harness.checkers  # noqa: F401 - registers every checker

        out = []
        for name, params in self.checkers.items():
            if name not in REGISTRY:
                raise KeyError(f"no checker named {name!r} (known: {', '.join(sorted(REGISTRY))})")
            out.append(REGISTRY[name](**(params or {})))
        return sorted(out, key=lambda c: {"assumption": 0, "invariant": 1}.get(c.kind, 2))


def run_safely(checker: Any, history: History, objects: Objects, names: Names) -> list[Finding]:
    """checker.check(), with an exception turned into an inconclusive finding that names it."""
    try:
        return list(checker.check(history, objects, names))
    except Exception as e:  # noqa: BLE001 - a broken checker must not crash the run or hide the rest
        return [Finding(checker.name, "inconclusive", f"checker {checker.name} failed",
                        f"the checker raised {type(e).__name__}: {e}", bearing=checker.kind != "info",
                        assumption=checker.kind == "assumption")]


#: The results that judge something: a case passes only when at least one invariant gave one of these.
JUDGED = ("held", "violated", "inconclusive")


def compose(selection: Selection, history: History, objects: Objects, names: Names | None = None,
            require_invariant: bool = True) -> Verdict:
    """Run `selection`'s checkers over `history` and `objects` and decide the verdict (module docstring).
    A history whose repeated log lines were summarised (`log_repeated`, harness/history/repeats.py) is expanded
    first, so the checkers judge it exactly as the full one. Without `require_invariant` (a case whose body
    raised its own InvariantViolation: only the assumptions run) no invariant finding is needed."""
    from harness.history import repeats

    history = repeats.expand(history)
    names = names or Names(history)
    findings: list[Finding] = []
    for checker in selection.build():
        for f in run_safely(checker, history, objects, names):
            if checker.kind == "assumption" and not f.assumption:
                f = Finding(f.check, f.result, f.summary, f.evidence, f.bearing, True)
            if checker.kind == "info" and f.bearing:
                f = Finding(f.check, f.result, f.summary, f.evidence, False, f.assumption)
            findings.append(f)
    failed = [f for f in findings if f.assumption and f.result in ("violated", "inconclusive", "error")]
    if failed:
        return Verdict("error", findings, "; ".join(f"{f.check}: {f.summary}" for f in failed))
    bearing = [f for f in findings if f.bearing and not f.assumption]
    violated = [f for f in bearing if f.result == "violated"]
    if violated:  # a violation seen is evidence of its own, whatever another invariant could not judge
        return Verdict("reproduced", findings, "; ".join(f"{f.check}: {f.summary}" for f in violated))
    cannot = [f for f in bearing if f.result == "error"]
    if cannot:
        return Verdict("error", findings, "; ".join(f"{f.check}: {f.summary}" for f in cannot))
    if require_invariant and not any(f.result in JUDGED for f in bearing):
        idle = [f for f in bearing if f.result == "not applicable"]
        return Verdict("error", findings, "no invariant applied: " + (
            "; ".join(f"{f.check}: {f.summary}" for f in idle) if idle else "the case declared no invariant"))
    unknown = [f for f in bearing if f.result == "inconclusive"]
    if unknown:
        return Verdict("inconclusive", findings, "; ".join(f"{f.check}: {f.summary}" for f in unknown))
    return Verdict("passed", findings, "every invariant held")


# ---- helpers shared by checkers --------------------------------------------------------------------

def case_end(history: History) -> float:
    """When the case stopped acting: its verdict record, else case_finished, else the last event."""
    for name in ("verdict", "case_finished"):
        ts = [e["ts"] for e in history if e.get("source") == "harness" and e.get("event") == name]
        if ts:
            return min(ts)
    return max((e["ts"] for e in history), default=0.0)


#: Slack (seconds) when comparing a time with the verdict's `seen` times: a summarised log line's time is
#: rebuilt to the microsecond (harness/history/repeats.py).
SEEN_SLACK = 1e-6


def verdict_event(history: History) -> Mapping[str, Any] | None:
    """The harness's first `verdict` event, or None (a history judged live has none yet)."""
    return next((e for e in history if e.get("source") == "harness" and e.get("event") == "verdict"), None)


def _seen(history: History) -> Mapping[str, float] | None:
    v = verdict_event(history)
    seen = v.get("seen") if v is not None else None
    if not isinstance(seen, Mapping) or not all(isinstance(t, (int, float)) for t in seen.values()):
        return None
    return seen


def within_case(history: History) -> list[Mapping[str, Any]]:
    """What the live verdict judged: the events up to the case's end (later events are clean-up). When the
    verdict records `seen` (per source, the time of the last event the live checkers had: Kueue's log and
    the proxy's events reach the harness a little late), only the events of each source up to that time,
    and the verdict event itself; so an offline re-check judges exactly what the live verdict judged."""
    end = case_end(history)
    seen = _seen(history)
    if seen is None:
        return [e for e in history if e["ts"] <= end]
    v = verdict_event(history)
    return [e for e in history if e is v or (e["ts"] <= end and e.get("source") in seen
                                             and e["ts"] <= seen[e["source"]] + SEEN_SLACK)]


def observed_until(history: History) -> float:
    """Until when the case was observed when it was judged (epoch seconds): the latest of the verdict's
    `seen` times, else the last event before the verdict, else the last event. The harness records
    `judging` the moment it judges a case, right before it reads the objects judged (harness/scenarios/
    verdicts.py): so the window ends at the verdict, not at the last event of a quiet source."""
    seen = _seen(history)
    if seen:
        return max(float(t) for t in seen.values())
    v = verdict_event(history)
    before = [e["ts"] for e in history if e is not v and (v is None or e["ts"] <= v["ts"])]
    return max(before, default=max((e["ts"] for e in history), default=0.0))


#: Seconds before a `kueue_configured` restart's recorded duration in which the old Kueue process's
#: connections may already be dying (the restart is timed from after the stop was asked for).
RESTART_SLACK = 0.5


def restart_cut_flow_errors(history: History) -> dict[int, str]:
    """{id(event): why} for the proxy's `flow_error` events that are not the case's: connections of
    the Kueue process a configuration change stopped (logged while a `kueue_configured` event with
    restarted=true restarted Kueue: from its `seconds` (+RESTART_SLACK) before it to it; why
    "restart"), and any other error logged before the case started (why "before"). Kueue's client
    connections, its watches above all, die with the process that held them; that is expected, not a
    proxy failure (harness/scenarios/plugin.py configures Kueue before `case_started`)."""
    t0 = next((e["ts"] for e in history if e.get("source") == "harness" and e.get("event") == "case_started"), None)
    windows = [(float(e["ts"]) - float(e.get("seconds") or 0) - RESTART_SLACK, float(e["ts"])) for e in history
               if e.get("source") == "harness" and e.get("event") == "kueue_configured" and e.get("restarted")
               and isinstance(e.get("seconds", 0), (int, float))]
    out: dict[int, str] = {}
    for e in history:
        if e.get("source") != "proxy" or e.get("event") != "flow_error":
            continue
        if any(a <= e["ts"] <= b for a, b in windows):
            out[id(e)] = "restart"
        elif t0 is not None and e["ts"] < t0:
            out[id(e)] = "before"
    return out


def persistent_fail_rules(history: History) -> set[str]:
    """Ids of the `fail` rules loaded (`rule_added`) with `times: null`: they fail every write they match for
    as long as they are loaded, so a failure of theirs is the fault going on, not its end."""
    return {str(r.get("id")) for e in history if e.get("source") == "proxy" and e.get("event") == "rule_added"
            and isinstance(r := e.get("rule"), Mapping) and r.get("action") == "fail" and r.get("times") is None}


def fault_lifts(history: History) -> list[float]:
    """Times a held flow was let go (released, failed, timed out) while the case was still acting, and
    times a fault rule failed a write outright (a `fail` rule with a count: its failures end it). The
    failures of a `fail` rule with `times: null` are not lifts: that fault lasts the whole case (a case
    that keeps a write failing on purpose, kubernetes-sigs/kueue#14863), and bounds run from before it."""
    end = case_end(history)
    steady = persistent_fail_rules(history)
    return [e["ts"] for e in history if e.get("source") == "proxy"
            and e.get("event") in ("released", "failed", "hold_expired", "hold_timeout")
            and e["ts"] <= end and e.get("why") != "end of case"
            and not (e.get("event") == "failed" and e.get("hold") is None and e.get("rule") in steady)]


def conditions_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """{condition type: status} of an object's status.conditions."""
    return {c.get("type"): c.get("status") for c in ((obj.get("status") or {}).get("conditions") or [])
            if isinstance(c, Mapping)}


def cond_text(obj: Mapping[str, Any]) -> str:
    """"QuotaReserved=True, Admitted=True" for the conditions that matter to a report line."""
    conds = conditions_of(obj)
    shown = [f"{k}={v}" for k, v in conds.items() if k in ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Finished")]
    return ", ".join(shown) or "no conditions"


def events(history: History, source: str, *kinds: str) -> list[Mapping[str, Any]]:
    """The events of `source` whose `event` is one of `kinds` (all of the source when none is given)."""
    return [e for e in history if e.get("source") == source and (not kinds or e.get("event") in kinds)]


Describe = Callable[[Any], str]


@dataclass
class LoadedRule:
    """One load of a rule, with the proxy's events of *that* load: a rule id may be loaded, removed (`plan
    clear`) and loaded again, so a `signalled` or `signal_done` belongs to the load of its id that came last
    before it (the proxy refuses an id that is loaded already: harness/proxy/addons/state.py add_rules).
    `load`: 1, 2, … for the loads (add_rules calls) in the history's order; `nth`/`of`: which load of this
    id it is, and how many the history has."""

    rule: Mapping[str, Any]
    added: Mapping[str, Any]
    load: int
    plan: str | None
    nth: int = 1
    of: int = 1
    fired: Mapping[str, Any] | None = None
    done: Mapping[str, Any] | None = None
    removed: Mapping[str, Any] | None = None

    @property
    def id(self) -> str:
        return str(self.rule.get("id"))

    @property
    def label(self) -> str:
        """The id, and which load of it when it was loaded more than once ("w1 (2nd of 2 loads)")."""
        if self.of == 1:
            return self.id
        nth = {1: "1st", 2: "2nd", 3: "3rd"}.get(self.nth, f"{self.nth}th")
        return f"{self.id} ({nth} of {self.of} loads)"


def rule_loads(history: History) -> list[LoadedRule]:
    """Every rule the proxy loaded (`rule_added`), in the history's order, each with its first `signalled`,
    its `signal_done` and its `rule_removed` of that load (LoadedRule). Loads are told apart by the event's
    `load` number; histories from before it by grouping: consecutive `rule_added` events of one plan (and
    plan_source) whose ids do not repeat are one load, a rule added alone is a load of its own."""
    out: list[LoadedRule] = []
    current: dict[str, LoadedRule] = {}
    numbers: dict[Any, int] = {}
    group: tuple[Any, set[str]] | None = None  # the load being read, for histories without `load`
    for e in history:
        if e.get("source", "proxy") != "proxy":
            continue
        ev = e.get("event")
        if ev != "rule_added":
            group = None  # one load's rule_added events are logged one after another
        if ev == "rule_added" and isinstance(e.get("rule"), Mapping):
            rid = str(e["rule"].get("id"))
            if "load" in e:
                key: Any = ("load", e["load"])
            else:
                src = e.get("plan_source") if isinstance(e.get("plan_source"), Mapping) else {}
                plan_key = (e.get("plan"), tuple(sorted((str(k), str(v)) for k, v in src.items())))
                if not e.get("plan") or group is None or group[0][0] != plan_key or rid in group[1]:
                    group = ((plan_key, len(numbers)), set())
                group[1].add(rid)
                key = ("group", group[0])
            load = numbers.setdefault(key, len(numbers) + 1)
            lr = LoadedRule(e["rule"], e, load, e.get("plan"))
            out.append(lr)
            current[rid] = lr
        elif ev in ("signalled", "signal_done") and str(e.get("rule")) in current:
            lr = current[str(e.get("rule"))]
            if ev == "signalled" and lr.fired is None:
                lr.fired = e
            elif ev == "signal_done" and lr.done is None:
                lr.done = e
        elif ev == "rule_removed" and str(e.get("rule")) in current:
            current.pop(str(e.get("rule"))).removed = e
    counts: dict[str, int] = {}
    for lr in out:
        counts[lr.id] = counts.get(lr.id, 0) + 1
        lr.nth = counts[lr.id]
    for lr in out:
        lr.of = counts[lr.id]
    return out
