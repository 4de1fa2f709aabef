"""Deletion completes: an object whose deletion started (metadata.deletionTimestamp set) — a ClusterQueue,
LocalQueue, Cohort, Workload or Pod of the case — is gone within a bound. Stuck Terminating is a violation:
a finalizer nobody removes, e.g. a ClusterQueue whose kueue.x-k8s.io/resource-in-use finalizer stays after
its Workloads are gone (kubernetes-sigs/kueue#10759). Judged on the invariant monitor's `object_deleting` /
`object_deleted` facts, and its `object_still_deleting` reads (a stuck deletion is quiet: they are what
shows the object was still there); the plugin's own clean-up after the verdict is not judged.
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, observed_until, register, within_case
from harness.checkers.bounds import DELETION_BOUND
from harness.history.names import Names, case_t0

KINDS = ("ClusterQueue", "LocalQueue", "Cohort", "Workload", "Pod")


@register
class DeletionCompletes:
    """Every object of `kinds` whose deletion started during the case is gone within `bound` seconds.
    Violated when one is still there `bound` seconds after its deletion started (the finalizers it still
    had are named); inconclusive when the case ended sooner; `error` when nothing was deleted (no subject)."""

    name: ClassVar[str] = "deletion_completes"
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
        return bool(found) and all(f.result in ("held", "violated") for f in found)

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
        for d in deleting:
            what = f"{d['kind']} {names.text(str(d.get('key')))}"
            gone = next((e for e in history if e.get("source") == "monitor" and e.get("event") == "object_deleted"
                         and e.get("kind") == d["kind"] and e.get("key") == d.get("key") and e["ts"] >= d["ts"]), None)
            if gone is not None and gone["ts"] - d["ts"] <= self.bound:
                out.append(Finding(self.name, "held", f"{what} deleted",
                                   f"{what} was gone {gone['ts'] - d['ts']:.2f}s after its deletion started "
                                   f"(t={d['ts'] - t0:.3f}s; bound {self.bound:g}s)."))
                continue
            # The finalizers it still had: the last lifecycle fact of it that names them.
            last = [e for e in history if e.get("source") == "monitor" and e.get("key") == d.get("key")
                    and e.get("kind") == d["kind"] and "finalizers" in e]
            fins = ", ".join(last[-1].get("finalizers") or []) or "none"
            if gone is not None:
                out.append(Finding(self.name, "violated", f"{what} deleted only after {gone['ts'] - d['ts']:.2f}s",
                                   f"{what} was gone {gone['ts'] - d['ts']:.2f}s after its deletion started, more than "
                                   f"the bound of {self.bound:g}s (finalizers: {fins})."))
            elif end - d["ts"] >= self.bound:
                out.append(Finding(self.name, "violated", f"{what} stuck Terminating",
                                   f"{what} started its deletion at t={d['ts'] - t0:.3f}s and was still there "
                                   f"{end - d['ts']:.2f}s later (bound {self.bound:g}s), with finalizers: {fins}."))
            else:
                out.append(Finding(self.name, "inconclusive", f"{what}: history too short",
                                   f"{what} was still being deleted when the case ended, {end - d['ts']:.2f}s after "
                                   f"its deletion started (bound {self.bound:g}s; finalizers: {fins})."))
        return out
