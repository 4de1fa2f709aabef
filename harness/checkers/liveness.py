"""Liveness: a Workload that preempts another (or a Workload the case names) gets quota within a bound
once every fault is lifted. Decides early, without waiting out the bound, when the evidence is conclusive:
the Workload got quota (held), or its preemption is stuck (violated; see `_stuck`).

Sources: "Preempted", "Preemption ongoing" and "Preemption already issued, waiting for observation" are
logged by Kueue's pkg/scheduler/preemption/preemption.go with preemptingWorkload and targetWorkload; the
stuck state is kubernetes-sigs/kueue#11480 scenario 1 (an eviction overwritten by a late admission).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.checkers.base import (
    Finding,
    History,
    Objects,
    cond_text,
    conditions_of,
    fault_lifts,
    observed_until,
    register,
    within_case,
)
from harness.checkers import progress, subjects
from harness.checkers.bounds import LIVENESS_BOUND, STUCK_LINES
from harness.checkers.model import quota as checks
from harness.history.names import Names, case_t0, kobj_key
from harness.kueue import log as kueue_log


def _subjects(history: History, jobs: tuple[str, ...], names: Names, objects: Objects,
              workloads: tuple[str, ...] = (), preemptors: bool = True) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(subjects, problems). Subjects: "ns/name" -> {"first": ts it started to wait, "targets": {"ns/name"},
    "why": "preempting"|"named"|"workload"}. Problems: one line per named subject that cannot be judged.

    A named Job ("name" in the case's namespace) is found however it was created (harness/checkers/subjects.py:
    the case's `job_created`, a plan step, the objects judged); its Workload by owner reference or name. It waits
    from when the history says the Job was created, else from when its Workload was first seen. A Job never
    created, or one of which no Workload was seen, is a problem, never a subject that "waited from t=0".
    A named plain Workload ("name" or "ns/name") waits from when it was first seen (the monitor's
    `workload_seen`, Kueue's watch, a plan step's create, else its creationTimestamp in the objects judged);
    one never seen is a problem. Without `preemptors`, Workloads Kueue logged preempting are subjects only
    when named."""
    out: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for e in history:
        if not preemptors or e.get("source") != "kueue" or e.get("event") != "log":
            continue
        f = e.get("fields") or {}
        p, t = kobj_key(f.get("preemptingWorkload")), kobj_key(f.get("targetWorkload"))
        if p and e.get("msg") in (kueue_log.PREEMPTED, kueue_log.PREEMPTION_ONGOING, kueue_log.PREEMPTION_WAITING):
            d = out.setdefault(p, {"first": e["ts"], "targets": set(), "why": "preempting"})
            if t:
                d["targets"].add(t)
    created_in_history = subjects.jobs_created(history, {}, names.ns)
    created_any = subjects.jobs_created(history, objects, names.ns)
    for job in jobs:
        wl = subjects.workload_of_job(history, objects, names.ns, job)
        if wl is None:
            problems.append(f"Job {job} was named but no Workload of it was seen" if job in created_any else
                            f"Job {job} was named but never created (no job_created record, no plan step created "
                            "it, and it is not among the objects judged)")
            continue
        key = f"{names.ns}/{wl}"
        # From the first time anyone saw it: the Job's creation, or its Workload seen earlier (a plan step's
        # `signal_done` comes after its calls returned, and Kueue may have admitted the Workload before that).
        sightings = [t for t in (created_in_history.get(job),
                                 subjects.workloads_seen(history, objects, names.ns).get(wl)) if t is not None]
        first = min(sightings) if sightings else case_t0(history)
        out.setdefault(key, {"first": first, "targets": set(), "why": "named"})
    for wl in workloads:
        key = wl if "/" in wl else f"{names.ns}/{wl}"
        ns, _, name = key.partition("/")
        seen = subjects.workloads_seen(history, objects, ns)
        if name not in seen:
            problems.append(f"Workload {names.wl(name)} was named but never seen (no watch delivered it, no plan step "
                            "created it, and it is not among the objects judged)")
            continue
        out.setdefault(key, {"first": seen[name], "targets": set(), "why": "workload"})
    return out, problems


def _quota_at(history: History, key: str, since: float) -> list[float]:
    ns, _, name = key.partition("/")
    return [e["ts"] for e in history if e["ts"] >= since and ((e.get("source") == "proxy" and (
        (e.get("event") == "watch_event" and e.get("name") == name and e.get("namespace") == ns
         and (e.get("conditions") or {}).get("QuotaReserved") == "True")
        or (e.get("event") == "response" and e.get("write") == "admission" and e.get("name") == name
            and e.get("namespace") == ns and e.get("status") == 200)))
        or (e.get("source") == "monitor" and e.get("event") == "workload_quota_reserved" and e.get("key") == key))]


def _held_now(history: History, name: str) -> bool:
    """Whether a flow about Workload `name` is still held at the end of `history`."""
    held: dict[Any, bool] = {}
    for e in history:
        if e.get("source") != "proxy" or name not in str(e.get("label", "")):
            continue
        if e.get("event") == "held":
            held[e.get("hold")] = True
        elif e.get("event") in ("released", "failed", "hold_expired", "hold_timeout"):
            held[e.get("hold")] = False
    return any(held.values())


def _stuck(history: History, preemptor: str, target: str, start: float) -> str | None:
    """Conclusive evidence that `preemptor` waits forever on `target`, or None. All must hold:
    - Kueue's watch delivered `target` evicted (Evicted=True), later delivered it with quota and no Evicted
      condition (a late write overwrote the eviction), and the eviction write was answered 200;
    - Kueue sent no write about `target` since that last delivery that the API server did not refuse, and
      nothing about it is held in the proxy (no eviction is on its way);
    - after the last fault was lifted and after that delivery, Kueue logged "Preemption already issued,
      waiting for observation" for the pair at least STUCK_LINES times (it waits for an eviction it will
      never observe: pkg/scheduler/preemption/preemption.go).
    """
    tns, _, tname = target.partition("/")
    deliveries = [e for e in history if e.get("source") == "proxy" and e.get("event") == "watch_event"
                  and e.get("name") == tname and e.get("namespace") == tns]
    evicted = [e for e in deliveries if (e.get("conditions") or {}).get("Evicted") == "True"]
    if not evicted or deliveries[-1]["ts"] <= evicted[0]["ts"]:
        return None
    last = deliveries[-1]
    conds = last.get("conditions") or {}
    if conds.get("QuotaReserved") != "True" or conds.get("Evicted") == "True":
        return None
    answered = any(e.get("source") == "proxy" and e.get("event") == "response" and e.get("write") == "eviction"
                   and e.get("name") == tname and e.get("namespace") == tns and e.get("status") == 200 for e in history)
    # A write about the target since then may change it, unless the API server refused it (a strict
    # quota release answered 409 leaves the object as it was).
    status = {e.get("flow"): e.get("status") for e in history if e.get("source") == "proxy" and e.get("event") == "response"}
    writes_after = [e for e in history if e.get("source") == "proxy" and e.get("event") == "request"
                    and isinstance(e.get("write"), Mapping) and e["write"].get("name") == tname
                    and e["ts"] > last["ts"] and not (isinstance(status.get(e.get("flow")), int)
                                                      and status[e.get("flow")] >= 400)]
    if not answered or writes_after or _held_now(history, tname):
        return None
    since = max(start, last["ts"])
    lines = [e for e in history if e.get("source") == "kueue" and e.get("msg") == kueue_log.PREEMPTION_WAITING
             and e["ts"] > since and kobj_key((e.get("fields") or {}).get("preemptingWorkload")) == preemptor
             and kobj_key((e.get("fields") or {}).get("targetWorkload")) == target]
    if len(lines) < STUCK_LINES:
        return None
    return (f"Kueue's watch delivered its target evicted (resourceVersion {evicted[0].get('resource_version')}), then "
            f"with quota and no Evicted condition (resourceVersion {last.get('resource_version')}); the eviction was "
            f"answered, nothing about the target is held or written since, and Kueue logged 'Preemption already "
            f"issued, waiting for observation' {len(lines)} times after that")


@register
class Liveness:
    """Every preempting Workload, the Workloads of the named `jobs` and the named plain `workloads` ("name" in
    the case's namespace or "ns/name"; their facts come from the invariant monitor), get quota within `bound` seconds
    after the last fault was lifted (or after they started waiting, when no fault was lifted later).
    Violated when one did not and the history covers that long, or as soon as it is conclusively stuck;
    inconclusive when the history ends sooner; `error` for a named Job or Workload that was never created
    or seen; not applicable with nothing named and no preemption (alone, that makes the verdict `error`). `preemptors=False`
    judges only the named ones: for a case that keeps a preemptor from its quota on purpose (its victim's
    eviction keeps failing, kubernetes-sigs/kueue#14863) and asks about another Workload."""

    name: ClassVar[str] = "liveness"
    #: Its bound is counted in the run's pace (harness/checkers/progress.py): observe may wait up to GIVE_UP more.
    paced: ClassVar[bool] = True
    kind: ClassVar[str] = "invariant"

    def __init__(self, bound: float = LIVENESS_BOUND, jobs: tuple[str, ...] | list[str] = (),
                 workloads: tuple[str, ...] | list[str] = (), preemptors: bool = True) -> None:
        self.bound = float(bound)
        self.jobs = tuple(jobs)
        self.workloads = tuple(workloads)
        self.preemptors = bool(preemptors)

    @property
    def needs_monitor(self) -> bool:
        """Plain Workloads are judged on the invariant monitor's facts (the plugin runs it for the case)."""
        return bool(self.workloads)

    def _judge(self, history: History, key: str, d: dict[str, Any], got: float | None, lifts: list[float],
               end: float, t0: float, final: dict[str, Any], run_pace: progress.Pace, names: Names) -> Finding:
        """One subject's finding: by the longest stretch in which nothing moved toward it (progress.longest_stall),
        never by the time it waited alone (module docstring of harness/checkers/progress.py)."""
        name = key.partition("/")[2]
        who = names.wl(name)
        later = [t for t in lifts if t >= d["first"] and (got is None or t <= got)]
        start = max(later) if later else d["first"]
        since = "the last fault was lifted" if later else {
            "preempting": "its first preemption", "named": "its Job was created"}.get(d["why"], "it was first seen")
        targets = ", ".join(names.wl(t.split('/')[-1]) for t in sorted(d["targets"]))
        waited = f"preempted {targets}" if targets else "waited for quota"
        state = ""
        if key in final:
            state = f" Final state: {who} {cond_text(final[key])}"
            for t in sorted(d["targets"]):
                if t in final:
                    state += f"; {names.wl(t.split('/')[-1])} {cond_text(final[t])}"
            state += "."
        limit = progress.limit_words(self.bound, run_pace)
        if got is not None and got < start:
            return Finding(self.name, "held", f"{who} got quota",
                           f"{who} {waited} and got quota at t={got - t0:.3f}s, {got - d['first']:.2f}s after it "
                           "started waiting, before the last fault was lifted.")
        stall = progress.longest_stall(history, start, got if got is not None else end, since)
        how = progress.judge_stall(stall, self.bound, run_pace)
        quiet = names.text(stall.text(t0))
        if got is not None:
            took = f"{got - start:.2f}s after {since} (t={start - t0:.3f}s)"
            if how == "moving":
                return Finding(self.name, "held", f"{who} got quota",
                               f"{who} {waited} and got quota at t={got - t0:.3f}s, {took}; the longest stretch "
                               f"without progress was {stall.seconds:.2f}s ({limit}).")
            if how == "too slow":
                return progress.too_slow_finding(self.name, f"{who} got quota after {got - start:.2f}s",
                                                 f"{who} {waited} and got quota {took}", quiet, limit, state)
            return Finding(self.name, "violated", f"{who} got quota only after {got - start:.2f}s",
                           f"{who} {waited}; it got quota {took}, but {quiet} ({limit}).{state}")
        observed = end - start
        stuck = next((s for t in sorted(d["targets"]) if (s := _stuck(history, key, t, start))), None)
        if stuck:
            return Finding(self.name, "violated", f"{who} is stuck: got no quota ({observed:.2f}s, conclusive)",
                           f"{who} {waited} and got no quota in the {observed:.2f}s observed after {since} "
                           f"(t={start - t0:.3f}s). Conclusive before the bound of {self.bound:g}s: "
                           f"{names.text(stuck)}.{state}")
        if how == "stuck":
            return Finding(self.name, "violated", f"{who} got no quota: {stall.cycles} cycles, nothing moved for "
                           f"{stall.seconds:.2f}s",
                           f"{who} {waited} and got no quota in the {observed:.2f}s observed after {since} "
                           f"(t={start - t0:.3f}s): {quiet} ({limit}).{state}")
        if how == "idle":
            return Finding(self.name, "violated", f"{who} got no quota in {observed:.2f}s",
                           f"{who} {waited} and got no quota in the {observed:.2f}s observed after {since} "
                           f"(t={start - t0:.3f}s): {quiet}, on a run of normal pace ({limit}).{state}")
        if how == "too slow":
            return progress.too_slow_finding(self.name, f"{who} got no quota in {observed:.2f}s",
                                             f"{who} {waited} and got no quota in the {observed:.2f}s observed after "
                                             f"{since}", quiet, limit, state)
        return Finding(self.name, "inconclusive", f"{who}: still moving, no quota yet",
                       f"{who} had no quota yet {observed:.2f}s after {since}, but something moved toward it "
                       f"{stall.seconds:.2f}s or less before the end ({limit}).{state}")

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Whether `check` already has its answer (every subject held or violated): the case may stop
        observing now."""
        found = self.check(history, objects, names)
        return bool(found) and all(f.result in ("held", "violated") or progress.too_slow(f) for f in found)

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)  # what the live verdict saw: clean-up after it is not judged
        found, problems = _subjects(history, self.jobs, names, objects, self.workloads, self.preemptors)
        cannot = [Finding(self.name, "error", p.split(" (")[0], f"liveness cannot judge it: {p}.") for p in problems]
        if not found:
            # Nothing named and nothing preempted: the generic "every preemptor gets quota" has nothing to say;
            # a case whose only invariant says this is `error` (base.compose: no invariant applied).
            return cannot or [Finding(self.name, "not applicable", "no preemption in the history",
                                      "Kueue logged no preemption for the case's Workloads, and the case named no "
                                      "Workload that must get quota, so none waited.")]
        lifts = fault_lifts(history)
        end = observed_until(history)  # as far as the live verdict had seen (base.within_case)
        t0 = case_t0(history)
        final = {checks.workload_key(w): w for w in objects.get("workloads") or []}
        run_pace = progress.pace(history)
        out = list(cannot)
        for key, d in found.items():
            name = key.partition("/")[2]
            quota_at = _quota_at(history, key, d["first"])
            final_obj = final.get(key)
            if final_obj is not None and not quota_at and ((final_obj.get("spec") or {}).get("active", True) is False):
                who = names.wl(name)
                out.append(Finding(self.name, "not applicable", f"{who} was deactivated",
                                   f"{who} ends with spec.active false: Kueue admits no inactive Workload "
                                   "(pkg/workload/workload.go IsActive), so it is not expected to get quota "
                                   "(a case or a moved step deactivated it: kubernetes-sigs/kueue#10901's scene)."))
                continue
            if not quota_at and final_obj is not None and conditions_of(final_obj).get("QuotaReserved") == "True":
                quota_at = [end]
            out.append(self._judge(history, key, d, quota_at[0] if quota_at else None, lifts, end, t0, final,
                                   run_pace, names))
        return out
