"""Deletion completes: an object whose deletion started (metadata.deletionTimestamp set) — a ClusterQueue,
LocalQueue, Cohort, Workload or Pod of the case — is gone within a bound. Stuck Terminating is a violation:
a finalizer nobody removes, e.g. a ClusterQueue whose kueue.x-k8s.io/resource-in-use finalizer stays after
its Workloads are gone (kubernetes-sigs/kueue#10759). Judged on the invariant monitor's `object_deleting` /
`object_deleted` facts, and its `object_still_deleting` reads (a stuck deletion is quiet: they are what
shows the object was still there); the plugin's own clean-up after the verdict is not judged.
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers import progress
from harness.checkers.base import Finding, History, Objects, observed_until, register, within_case
from harness.checkers.bounds import DELETION_BOUND
from harness.history.names import Names, case_t0

KINDS = ("ClusterQueue", "LocalQueue", "Cohort", "Workload", "Pod")


@register
class DeletionCompletes:
    """Every object of `kinds` whose deletion started during the case is gone with no stretch longer than `bound`
    seconds (counted in the run's pace) in which nothing of the case moved (harness/checkers/progress.py).
    Violated when one is still there (the finalizers it still had are named), or went only later, after such a
    stretch on a run of normal pace or while Kueue looped; `error` ("too slow to judge") when only time says so on
    a run far slower than an idle one, and when nothing was deleted (no subject); inconclusive while something
    still moves."""

    name: ClassVar[str] = "deletion_completes"
    #: Its bound is counted in the run's pace (harness/checkers/progress.py): observe may wait up to GIVE_UP more.
    paced: ClassVar[bool] = True
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

    def __init__(self, bound: float = DELETION_BOUND, kinds: tuple[str, ...] | list[str] = KINDS) -> None:
        bad = sorted(set(kinds) - set(KINDS))
        if bad:
            raise ValueError(f"deletion_completes: unknown kind(s) {', '.join(bad)}; known: {', '.join(KINDS)}")
        self.bound = float(bound)
        self.kinds = tuple(kinds)

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        found = self.check(history, objects, names)
        return bool(found) and all(f.result in ("held", "violated") or progress.too_slow(f) for f in found)

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        deleting = [e for e in history if e.get("source") == "monitor" and e.get("event") == "object_deleting"
                    and e.get("kind") in self.kinds]
        # An object with no finalizers goes at once: the monitor sees it gone without ever seeing it deleting.
        started = {(e.get("kind"), e.get("key")) for e in deleting}
        at_once = [e for e in history if e.get("source") == "monitor" and e.get("event") == "object_deleted"
                   and e.get("kind") in self.kinds and (e.get("kind"), e.get("key")) not in started]
        if not deleting and not at_once:
            return [Finding(self.name, "error", "nothing was deleted",
                            f"No {'/'.join(self.kinds)} of the case started its deletion during the case: "
                            "deletion_completes has no subject (did the deleting step run?).")]
        end, t0 = observed_until(history), case_t0(history)
        out = [Finding(self.name, "held", f"{e['kind']} {names.text(str(e.get('key')))} deleted",
                       f"{e['kind']} {names.text(str(e.get('key')))} was gone at t={e['ts'] - t0:.3f}s with no "
                       "deletion in progress seen before (no finalizer held it).") for e in at_once]
        run_pace = progress.pace(history)
        limit = progress.limit_words(self.bound, run_pace)
        for d in deleting:
            what = f"{d['kind']} {names.text(str(d.get('key')))}"
            gone = next((e for e in history if e.get("source") == "monitor" and e.get("event") == "object_deleted"
                         and e.get("kind") == d["kind"] and e.get("key") == d.get("key") and e["ts"] >= d["ts"]), None)
            # The finalizers it still had: the last lifecycle fact of it that names them.
            last = [e for e in history if e.get("source") == "monitor" and e.get("key") == d.get("key")
                    and e.get("kind") == d["kind"] and "finalizers" in e]
            fins = ", ".join(last[-1].get("finalizers") or []) or "none"
            started = "its deletion started"
            stall = (progress.longest_stall(history, d["ts"], gone["ts"], started) if gone is not None
                     else progress.quiet_until(history, end, after=d["ts"]))
            how = progress.judge_stall(stall, self.bound, run_pace)
            quiet = names.text(stall.text(t0))
            if gone is not None:
                took = f"{what} was gone {gone['ts'] - d['ts']:.2f}s after its deletion started (t={d['ts'] - t0:.3f}s)"
                if how == "moving":
                    out.append(Finding(self.name, "held", f"{what} deleted",
                                       f"{took}; the longest stretch without progress was {stall.seconds:.2f}s ({limit})."))
                elif how == "too slow":
                    out.append(progress.too_slow_finding(self.name, f"{what} deleted after {gone['ts'] - d['ts']:.2f}s",
                                                         took, quiet, f"{limit}; finalizers: {fins}"))
                else:
                    out.append(Finding(self.name, "violated", f"{what} deleted only after {gone['ts'] - d['ts']:.2f}s",
                                       f"{took}; {quiet} ({limit}; finalizers: {fins})."))
            elif how in ("stuck", "idle"):
                out.append(Finding(self.name, "violated", f"{what} stuck Terminating",
                                   f"{what} started its deletion at t={d['ts'] - t0:.3f}s and was still there "
                                   f"{end - d['ts']:.2f}s later, with finalizers: {fins}; {quiet} ({limit})."))
            elif how == "too slow":
                out.append(progress.too_slow_finding(
                    self.name, f"{what} still Terminating", f"{what} started its deletion at t={d['ts'] - t0:.3f}s and "
                    f"was still there {end - d['ts']:.2f}s later", quiet, f"{limit}; finalizers: {fins}"))
            else:
                out.append(Finding(self.name, "inconclusive", f"{what}: still moving",
                                   f"{what} was still being deleted when the case ended, {end - d['ts']:.2f}s after "
                                   f"its deletion started; something moved {stall.seconds:.2f}s or less before the end "
                                   f"({limit}; finalizers: {fins})."))
        return out
