"""Assumption checkers: what must have happened for a verdict to mean anything. A violated (or undecided)
assumption makes the case's verdict "error", never "reproduced" (etcd robustness checks its assumptions
before its invariants in the same way). DEFAULT_ASSUMPTIONS run for every case; a case adds its own
(the forced ordering it relies on) in its `checkers` marker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.checkers.base import (
    Finding,
    History,
    Objects,
    case_end,
    events,
    register,
    restart_cut_flow_errors,
    rule_loads,
    within_case,
)
from harness.history.names import Names

#: Flow errors that are the client's doing, not the proxy's: client-go cancels watches and requests.
CLIENT_SIDE_ERRORS = ("by client", "client disconnected", "Client disconnected", "peer closed connection")

#: Run for every case, whatever it declares.
DEFAULT_ASSUMPTIONS = ("no_hold_expired", "no_unexplained_proxy_failure", "kueue_not_restarted_unasked",
                       "kueue_log_followed", "monitor_healthy", "steps_done", "teardown_clean")


def _ok(name: str, summary: str, evidence: str) -> Finding:
    return Finding(name, "held", summary, evidence, assumption=True)


def _void(name: str, summary: str, evidence: str) -> Finding:
    return Finding(name, "violated", summary, evidence, assumption=True)


@register
class Forced:
    """Each hold rule in `rules` let its flow go — or failed it, with `then: fail` — because its release
    triggers fired (not by its plan timeout, a command, max_hold, or the end of the case), and each process
    fault in `rules` (restart_kueue) fired by its triggers and succeeded: the forced ordering happened.

    `guards`: hold rules that keep a write Kueue *may* make from landing too early (the stuck-preemption plan's
    strict quota release of job1, held until the late admission was answered). One that never caught a flow
    guarded nothing — the write never came, so it could not land out of order (seen on kind under load: Kueue's
    watch delivered the overwrite 17 ms after the eviction, and its job reconciler never released job1's quota);
    one that caught a flow is judged like `rules`."""

    name: ClassVar[str] = "forced"
    kind: ClassVar[str] = "assumption"

    def __init__(self, rules: list[str] | tuple[str, ...] = (), guards: list[str] | tuple[str, ...] = ()) -> None:
        self.rules, self.guards = tuple(rules), tuple(guards)

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        bad, idle = [], []
        for rid in (*self.rules, *self.guards):
            ends = [e for e in seen if e.get("source") == "proxy" and e.get("rule") == rid
                    and e.get("event") in ("released", "hold_timeout", "failed", "hold_expired", "signal_done")]
            held = any(e.get("source") == "proxy" and e.get("rule") == rid and e.get("event") == "held" for e in seen)
            if rid in self.guards and rid not in self.rules and not ends and not held:
                idle.append(rid)
            elif not ends:
                bad.append(f"{rid} never let a flow go (or, a process fault, never happened) before the case ended")
            elif ends[0].get("event") == "signal_done":
                # A process fault (restart_kueue): it must have fired by its triggers and succeeded.
                fired = next((e for e in seen if e.get("source") == "proxy" and e.get("event") == "signalled"
                              and e.get("rule") == rid), {})
                if not ends[0].get("ok") or not str(fired.get("why", "")).startswith("triggers"):
                    bad.append(f"{rid} fired by {fired.get('why', '-')} and ended ok={ends[0].get('ok')}, not by its "
                               "triggers with success")
            elif ends[0].get("event") not in ("released", "failed") or not str(ends[0].get("why", "")).startswith(
                    "triggers"):
                bad.append(f"{rid} ended by {ends[0].get('event')} ({ends[0].get('why', '-')}), not by its triggers")
        if bad:
            return [_void(self.name, "the forced ordering did not happen", "; ".join(bad) + ".")]
        acted = [r for r in (*self.rules, *self.guards) if r not in idle]
        note = (f" Guard{'s' if len(idle) > 1 else ''} {', '.join(idle)} caught no flow: the write {'they guard' if len(idle) > 1 else 'it guards'} "
                "never came, so it could not land out of order." if idle else "")
        return [_ok(self.name, "the forced ordering happened",
                    f"Plan rules {', '.join(acted) or '(none)'} each let their flow go when their triggers fired.{note}")]


@register
class WriteLanded:
    """The flow rule `rule` held was answered 200 and, with `overwrote`, Kueue's watch then delivered the
    object at that resourceVersion without condition `overwrote`=True (e.g. the late admission removed
    Evicted: kubernetes-sigs/kueue#11480 scenario 1)."""

    name: ClassVar[str] = "write_landed"
    kind: ClassVar[str] = "assumption"

    def __init__(self, rule: str, overwrote: str | None = None) -> None:
        self.rule, self.overwrote = rule, overwrote

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        flows = [e.get("flow") for e in seen if e.get("source") == "proxy" and e.get("event") == "held"
                 and e.get("rule") == self.rule]
        if not flows:
            return [_void(self.name, f"{self.rule} held nothing", f"Plan rule {self.rule} never held a flow.")]
        answer = next((e for e in seen if e.get("source") == "proxy" and e.get("event") == "response"
                       and e.get("flow") == flows[0]), None)
        if answer is None or answer.get("status") != 200:
            got = "no answer" if answer is None else f"answer {answer.get('status')}"
            return [_void(self.name, f"{self.rule}'s write did not land", f"The flow {self.rule} held got {got}, not 200.")]
        what = names.wl(str(answer.get("name", "")))
        if not self.overwrote:
            return [_ok(self.name, f"{self.rule}'s write landed", f"The flow {self.rule} held ({what}) was answered 200.")]
        rv = answer.get("resource_version")
        delivered = [e for e in seen if e.get("source") == "proxy" and e.get("event") == "watch_event"
                     and e.get("name") == answer.get("name") and e.get("namespace") == answer.get("namespace")
                     and str(e.get("resource_version")) == str(rv)]
        if not delivered:
            return [_void(self.name, f"Kueue never saw {what} as {self.rule} left it",
                          f"No watch delivery of {what} at resourceVersion {rv} (the answer to {self.rule}).")]
        if (delivered[0].get("conditions") or {}).get(self.overwrote) == "True":
            return [_void(self.name, f"{self.rule} did not remove {self.overwrote}",
                          f"Kueue's watch delivered {what} at resourceVersion {rv} still with {self.overwrote}=True: "
                          f"{delivered[0].get('conditions')}.")]
        return [_ok(self.name, f"{self.rule} overwrote {self.overwrote}",
                    f"{self.rule} was answered 200 (resourceVersion {rv}) and Kueue's watch delivered {what} at that "
                    f"resourceVersion without {self.overwrote}=True: {delivered[0].get('conditions')}.")]


@register
class StepsDone:
    """Every plan step loaded during the case (harness/plan/actions.py step kinds: create, patch, delete, wait)
    ran and succeeded before the verdict: the proxy signalled it and the harness reported it done with
    ok (its `signal_done`). A step that failed (kube-apiserver refused it, a wait timed out), never ran
    (its `after` triggers never held), was still running, or was removed while it ran means the scenario the
    plan describes did not happen. Each load of a step is judged on its own (base.rule_loads): a step that
    failed and was loaded again is still a failure of its first load. A step removed before it began (`plan
    clear` in a session) was withdrawn: said, not a failure. No steps: nothing to judge (no finding).

    `waits_pace` (a perturbed run's: harness/explore/plugin.py): a `wait` step that timed out, and a step that
    never ran because it waits only for such steps, are said, not failures — the perturbation kept from
    happening what the control's wait observes, as a perturbed case's own waits pace it instead of judging
    it; every create, patch and delete must still have run."""

    name: ClassVar[str] = "steps_done"
    kind: ClassVar[str] = "assumption"

    def __init__(self, waits_pace: bool = False) -> None:
        self.waits_pace = bool(waits_pace)

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        from harness.plan import actions

        seen = within_case(history)
        step_kinds = set(actions.step_names())
        steps = [lr for lr in rule_loads(seen) if lr.rule.get("action") in step_kinds]
        if not steps:
            return []
        bad, good, withdrawn, paced = [], [], [], []
        for lr in steps:
            rule, done = lr.rule, lr.done
            after = [t for t in (rule.get("release") or {}).get("after") or [] if isinstance(t, Mapping)]
            waits_for = {t.get("step") for t in after} if after and all(t.get("step") for t in after) else set()
            if lr.fired is None and lr.removed is not None:
                withdrawn.append(lr.label)
            elif self.waits_pace and lr.fired is None and waits_for and waits_for <= set(paced):
                paced.append(str(rule.get("id")))
            elif self.waits_pace and rule.get("action") == "wait" and done is not None and not done.get("ok"):
                paced.append(str(rule.get("id")))
            elif lr.fired is None:
                after = ", ".join(_trigger_words(t) for t in (rule.get("release") or {}).get("after") or [])
                bad.append(f"step {lr.label} never ran (its triggers never all held: {after or 'none'})")
            elif done is None and lr.removed is not None:
                bad.append(f"step {lr.label} was removed while it ran, so how it ended is unknown")
            elif done is None:
                bad.append(f"step {lr.label} was still running when the case was judged")
            elif not done.get("ok"):
                bad.append(f"step {lr.label} ({rule.get('action')}) failed: {done.get('error', '?')}")
            else:
                good.append(f"{lr.label} ({rule.get('action')}, {done.get('seconds', '?')} s)")
        note = (f" Removed before they began (not judged): {', '.join(withdrawn)}." if withdrawn else "") + (
            f" Paced by the perturbation (a wait that timed out, or only waiting for one; not judged): "
            f"{', '.join(paced)}." if paced else "")
        if bad:
            return [_void(self.name, f"{len(bad)} plan step(s) did not run to success",
                          names.text("; ".join(bad)) + "." + note)]
        if not good:
            return [_ok(self.name, "every plan step was removed before it began or paced", note.strip())]
        return [_ok(self.name, "every plan step ran and succeeded",
                    "Steps " + ", ".join(good) + " ran and succeeded." + note)]


def _trigger_words(t: Any) -> str:
    from harness.plan.rules import Trigger

    try:
        return Trigger(**t).describe() if isinstance(t, Mapping) else str(t)
    except TypeError:
        return str(t)


@register
class NoHoldExpired:
    name: ClassVar[str] = "no_hold_expired"
    kind: ClassVar[str] = "assumption"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        expired = events(within_case(history), "proxy", "hold_expired")
        if expired:
            return [_void(self.name, f"{len(expired)} hold(s) reached max_hold",
                          f"{len(expired)} hold(s) reached their max_hold and were released by the proxy: "
                          + ", ".join(names.text(str(e.get("label", "?"))) for e in expired) + ".")]
        return [_ok(self.name, "no hold expired", "No hold reached its max_hold.")]


@register
class NoUnexplainedProxyFailure:
    """The proxy failed no request that no rule told it to fail (a `reset` rule kills flows on purpose;
    a cancelled watch is client-go's normal behaviour). Errors of connections that are not the case's
    (`restart_cut_flow_errors`: logged before the case started, or while a configuration change restarted
    Kueue and its old process's connections died) are not counted."""

    name: ClassVar[str] = "no_unexplained_proxy_failure"
    kind: ClassVar[str] = "assumption"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        reset_flows = {e.get("flow") for e in seen if e.get("event") == "reset"}
        cut = restart_cut_flow_errors(seen)
        bad = [e for e in seen if e.get("source") == "proxy" and e.get("event") == "flow_error"
               and e.get("flow") not in reset_flows and id(e) not in cut
               and not any(m in str(e.get("error")) for m in CLIENT_SIDE_ERRORS)]
        if bad:
            return [_void(self.name, f"the proxy failed {len(bad)} request(s) on its own",
                          f"the proxy failed {len(bad)} request(s) it was not told to: "
                          + "; ".join(f"flow {e.get('flow')}: {e.get('error')}" for e in bad[:3]))]
        return [_ok(self.name, "no unexplained proxy failure", "The proxy failed no request it was not told to.")]


@register
class KueueNotRestartedUnasked:
    """Kueue ran throughout the case, restarted only as often as the case asked (its `kueue_restart`
    events, and `kueue_configured` ones with restarted=true after the case started: a Kueue configuration a
    plan declared): the harness records Kueue's start count and liveness when the case starts and at its
    verdict. A configuration change before `case_started` is already in the first start count. `scope`:
    what is judged, for the words ("case"; a session's bundle says "session": harness/cli/bundle.py
    records the session's Kueue states the same way, with its pid)."""

    name: ClassVar[str] = "kueue_not_restarted_unasked"
    kind: ClassVar[str] = "assumption"

    def __init__(self, scope: str = "case") -> None:
        self.scope = scope

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        scope = self.scope
        states = [e for e in seen if e.get("source") == "harness" and isinstance(e.get("kueue"), Mapping)]
        if len(states) < 2:
            return [_ok(self.name, "Kueue's state not recorded", "The history has no Kueue start counts to compare.")]
        first, last = states[0]["kueue"], states[-1]["kueue"]
        asked = len(events(seen, "harness", "kueue_restart")) + len(events(seen, "nemesis", "kueue_restart"))
        asked += len([e for e in events(seen, "harness", "kueue_configured")
                      if e.get("restarted") and e["ts"] > states[0]["ts"]])
        pid = f" (pid {last['pid']})" if last.get("pid") else ""
        if not last.get("alive", True):
            return [_void(self.name, f"Kueue exited during the {scope}",
                          f"Kueue{pid} was not running when the {scope} was judged, so its verdict means nothing "
                          f"(see the {scope}'s kueue.log).")]
        if last.get("starts", 1) != first.get("starts", 1) + asked:
            return [_void(self.name, f"Kueue was restarted during the {scope} without the {scope} asking for it",
                          f"Kueue started {last.get('starts', 1) - first.get('starts', 1)} more time(s) during the "
                          f"{scope}; the {scope} asked for {asked}.")]
        return [_ok(self.name, "Kueue ran throughout", f"Kueue{pid} kept running ({asked} restart(s) asked for).")]


@register
class KueueLogFollowed:
    """Kueue's log reached kueue.log throughout the case, where it is followed through the API (the kind and
    kubeconfig targets: harness/env/pod_logs.py; the plugin records the follower's health with Kueue's state
    at the case's start and at its verdict). Violated when the follower failed to stream during the case, had
    stopped by the verdict, or had written no byte at all: checkers that read Kueue's log (liveness's stuck
    detection, the milestones) would judge a log that is not there. Where Kueue's log is its own stdout (the
    local target) nothing is recorded and nothing is judged (no finding)."""

    name: ClassVar[str] = "kueue_log_followed"
    kind: ClassVar[str] = "assumption"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        seen = within_case(history)
        logs = [e["kueue"]["log"] for e in seen if e.get("source") == "harness" and isinstance(e.get("kueue"), Mapping)
                and isinstance(e["kueue"].get("log"), Mapping)]
        if not logs:
            return []
        first, last = logs[0], logs[-1]
        new = int(last.get("problems", 0)) - (int(first.get("problems", 0)) if len(logs) > 1 else 0)
        if new > 0:
            return [_void(self.name, f"Kueue's log could not be followed ({new} failure(s) during the case)",
                          f"The log follower failed {new} time(s) during the case; the last: {last.get('last')}. "
                          "Lines of Kueue's log are missing from kueue.log, so checkers that read it mean nothing.")]
        if not last.get("alive", True):
            return [_void(self.name, "Kueue's log was no longer followed at the verdict",
                          "The log follower had stopped before the verdict (the Pod gone, or stopped).")]
        if not last.get("bytes"):
            return [_void(self.name, "no line of Kueue's log reached kueue.log",
                          "The log follower wrote no byte of Kueue's log by the verdict.")]
        return [_ok(self.name, "Kueue's log was followed",
                    f"The log follower streamed throughout ({last.get('bytes')} bytes by the verdict, no failure).")]


@register
class MonitorHealthy:
    """The invariant monitor's watches never broke: a dead watch would silently weaken the quota verdict."""

    name: ClassVar[str] = "monitor_healthy"
    kind: ClassVar[str] = "assumption"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        errs = events(within_case(history), "monitor", "watch_error")
        if errs:
            return [_void(self.name, f"the monitor's watch broke {len(errs)} time(s)",
                          "; ".join(str(e.get("error")) for e in errs[:3]))]
        return [_ok(self.name, "the monitor's watches stayed up", "No watch of the invariant monitor broke.")]


@register
class TeardownClean:
    """Nothing went wrong after the verdict that voids it (recorded as `teardown_problem` by the plugin)."""

    name: ClassVar[str] = "teardown_clean"
    kind: ClassVar[str] = "assumption"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        probs = [e for e in history if e.get("source") == "harness" and e.get("event") == "teardown_problem"
                 and e["ts"] >= case_end(history)]
        if probs:
            return [_void(self.name, "; ".join(str(p.get("problem", "")).splitlines()[0] for p in probs)[:200],
                          "; ".join(str(p.get("problem", "")) for p in probs))]
        return []


def selection_with_defaults(declared: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The declared checkers with DEFAULT_ASSUMPTIONS first (declared parameters win)."""
    out: dict[str, dict[str, Any]] = {n: {} for n in DEFAULT_ASSUMPTIONS}
    for name, params in declared.items():
        out[name] = dict(params or {})
    return out
