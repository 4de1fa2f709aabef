"""Every pending Workload that fits is admitted: at the verdict, no active, unfinished Workload of the case
waits without quota while its ClusterQueue has the nominal quota it asks for free — and, in a cohort, the
cohort has it free too — for longer than `bound` seconds since anything last changed in that ClusterQueue
(kubernetes-sigs/kueue#14863: a small Workload that fits is never admitted after a failed preemption).

"Fits" is deliberately narrow, so a violation means Kueue could have admitted it without preempting or
borrowing: one flavor of the resource group that covers its resources has, for every resource it requests,
nominal quota minus what the ClusterQueue's admitted Workloads use at least the request (the pod sets'
requests times their counts), and the cohort's nominal quota minus the whole cohort's use is at least the
request too (others may borrow this ClusterQueue's unused quota), and what Kueue's scheduler calls
`available` through the whole cohort tree (the Cohort objects judged: parents, own quotas, lending and
borrowing limits; model/quota.py available, pkg/cache/scheduler/resource_node.go) is at least the request.
A ClusterQueue with a stopPolicy, or not
Active in its status, is left out. Uses the objects judged (Workloads, LocalQueues, ClusterQueues) and the
monitor's facts for "since anything changed".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from harness.checkers import progress, subjects
from harness.checkers.base import (
    Finding,
    History,
    Objects,
    conditions_of,
    observed_until,
    register,
    within_case,
)
from harness.checkers.bounds import LIVENESS_BOUND
from harness.checkers.model import quota as checks
from harness.history.names import Names, case_t0


def _requests(wl: Mapping[str, Any]) -> dict[str, int]:
    """A Workload's total requests per resource (milli-units, Kueue's grid): pod-set count × the sum of
    its containers' requests."""
    out: dict[str, int] = {}
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        n = int(ps.get("count") or 1)
        for c in (((ps.get("template") or {}).get("spec") or {}).get("containers")) or []:
            for r, q in (((c.get("resources") or {}).get("requests")) or {}).items():
                out[r] = out.get(r, 0) + n * checks.kueue_milli(r, q)
    return out


def _nominal(cq: Mapping[str, Any]) -> list[dict[str, dict[str, int]]]:
    """Per resource group: {flavor: {resource: nominal milli}}."""
    groups = []
    for g in (cq.get("spec") or {}).get("resourceGroups") or []:
        flavors = {}
        for f in g.get("flavors") or []:
            flavors[str(f.get("name"))] = {str(r.get("name")): checks.kueue_milli(str(r.get("name")), r.get("nominalQuota") or 0)
                                           for r in f.get("resources") or []}
        groups.append(flavors)
    return groups


def fitting_pending(objects: Objects) -> list[tuple[str, str, str]]:
    """[(workload key, ClusterQueue, flavor)] of the pending Workloads that fit (module docstring)."""
    cqs = {str(c["metadata"]["name"]): c for c in objects.get("clusterqueues") or []}
    lqs = {f"{lq['metadata'].get('namespace')}/{lq['metadata']['name']}": (lq.get("spec") or {}).get("clusterQueue")
           for lq in objects.get("localqueues") or []}
    wls = list(objects.get("workloads") or [])
    usage = checks.usage_by_cluster_queue(wls)
    # What Kueue's scheduler would call available through the whole cohort tree (its Cohort objects, parents,
    # lending and borrowing limits: model/quota.py available): a Workload fits only where that agrees too.
    per_cq: dict[str, dict[tuple[str, str], int]] = {}
    for (cq_name, flavor, resource), (milli, _keys) in usage.items():
        per_cq.setdefault(cq_name, {})[(flavor, resource)] = milli
    tree_available = checks.available(list(cqs.values()), objects.get("cohorts") or [], per_cq)
    out = []
    for wl in wls:
        conds = conditions_of(wl)
        if conds.get("QuotaReserved") == "True" or conds.get("Finished") == "True" or \
                (wl.get("spec") or {}).get("active", True) is False or (wl.get("metadata") or {}).get("deletionTimestamp"):
            continue
        cq_name = lqs.get(f"{wl['metadata'].get('namespace')}/{(wl.get('spec') or {}).get('queueName')}")
        cq = cqs.get(str(cq_name))
        if cq is None or (cq.get("spec") or {}).get("stopPolicy") not in (None, "None") or \
                conditions_of(cq).get("Active") == "False":
            continue
        cohort = (cq.get("spec") or {}).get("cohortName") or (cq.get("spec") or {}).get("cohort")
        members = [c for c in cqs.values() if cohort and ((c.get("spec") or {}).get("cohortName")
                                                          or (c.get("spec") or {}).get("cohort")) == cohort]
        req = _requests(wl)
        if not req:
            continue
        for group in _nominal(cq):
            hit = None
            for flavor, nominal in group.items():
                if not set(req) <= set(nominal):
                    continue

                def free(c: Mapping[str, Any], r: str) -> int:
                    n = next((g.get(flavor, {}).get(r, 0) for g in _nominal(c) if flavor in g), 0)
                    return n - usage.get((str(c["metadata"]["name"]), flavor, r), (0, []))[0]

                in_tree = tree_available.get(str(cq_name), {})
                if all(free(cq, r) >= m and in_tree.get((flavor, r), 0) >= m for r, m in req.items()) and (
                        not members or all(sum(free(c, r) for c in members) >= m for r, m in req.items())):
                    hit = flavor
                    break
            if hit:
                out.append((checks.workload_key(wl), str(cq_name), hit))
                break
    return out


@register
class PendingFitsAdmitted:
    """No pending Workload that fits (module docstring) waits while nothing in the case moves (a progress step:
    harness/checkers/progress.py — a Workload seen, reserved, released, evicted or deleted, a write of Kueue's
    taking effect, a fault lifted, a plan step done) for longer than `bound` seconds counted in the run's pace.
    Violated when one does and Kueue ran its scheduling cycles meanwhile (a loop), or did nothing on a run of
    normal pace; `error` ("too slow to judge") when only time says so on a run far slower than an idle one;
    inconclusive while something still moves; held when none fits."""

    name: ClassVar[str] = "pending_fits_admitted"
    #: Its bound is counted in the run's pace (harness/checkers/progress.py): observe may wait up to GIVE_UP more.
    paced: ClassVar[bool] = True
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

    def __init__(self, bound: float = LIVENESS_BOUND) -> None:
        self.bound = float(bound)

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """Whether `check` has its answer now: no fitting pending Workload is still moving (a case
        observes until each one was admitted, or waited out the bound). "No Workload fits" decides at once,
        so a case waits, before observing, until the state it judges exists (kubernetes-sigs/kueue#10901's
        case: until Kueue saw the victim's quota released)."""
        return all(f.result != "inconclusive" for f in self.check(history, objects, names))

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        fits = fitting_pending(objects)
        if not fits and not subjects.workloads_seen(history, objects, names.ns):
            return [Finding(self.name, "error", "no Workload of the case was seen",
                            "No Workload of the case was seen during the case: pending_fits_admitted has "
                            "nothing to judge.")]
        if not fits:
            n = sum(1 for w in objects.get("workloads") or [] if conditions_of(w).get("QuotaReserved") != "True")
            return [Finding(self.name, "held", "no pending Workload fits",
                            f"No pending Workload fits in its ClusterQueue's free nominal quota at the verdict "
                            f"({n} Workload(s) without quota).")]
        end = observed_until(history)
        stall = progress.quiet_until(history, end)
        run_pace = progress.pace(history)
        how = progress.judge_stall(stall, self.bound, run_pace)
        t0 = case_t0(history)
        quiet = names.text(stall.text(t0))
        limit = progress.limit_words(self.bound, run_pace)
        out = []
        for key, cq, flavor in fits:
            who = names.wl(key.partition("/")[2])
            fits_text = f"{who} waits without quota although {names.text(cq)} has the nominal quota it asks for free " \
                        f"in flavor {flavor}"
            if how in ("stuck", "idle"):
                out.append(Finding(self.name, "violated", f"{who} fits but is not admitted",
                                   f"{fits_text}, and {quiet} ({limit})."))
            elif how == "too slow":
                out.append(progress.too_slow_finding(self.name, f"{who} fits, not admitted", fits_text, quiet, limit))
            else:
                out.append(Finding(self.name, "inconclusive", f"{who} fits, not admitted yet",
                                   f"{fits_text}; something moved only {stall.seconds:.2f}s before the end ({limit})."))
        return out
