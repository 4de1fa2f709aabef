"""Quota safety: no ClusterQueue (or cohort) holds more than its quotas allow, in the final objects
(harness/checkers/model/quota.py, Kueue's resource-node model) or at any moment the invariant monitor's watch saw during
the run (harness/checkers/monitor.py records when a violation starts and clears). Source: kubernetes-sigs/kueue#11480
scenario 2 (a late admission re-admits an evicted Workload without a quota check).
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, events, register, within_case
from harness.checkers.model import quota as checks
from harness.history.names import Names, case_t0


@register
class QuotaSafety:
    """Violated when the final state oversubscribes a ClusterQueue, or the monitor saw it happen (a
    transient violation counts: quota was handed out that did not exist)."""

    name: ClassVar[str] = "quota"
    kind: ClassVar[str] = "invariant"
    #: It decides on a violation alone: a case may stop observing once nothing of it moves (bounds.QUIET).
    settles_when_quiet: ClassVar[bool] = True

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """A violation seen by the monitor is final; "held" is only known at the end of the case."""
        return bool(events(history, "monitor", "quota_violation_started"))

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        wls, cqs = objects.get("workloads") or [], objects.get("clusterqueues") or []
        # The real tree: Cohort objects with their parents and own quotas (an objects.yaml from before they were
        # collected has none: every Cohort is then implicit, as check_quota documents).
        final = checks.check_quota(wls, cqs, objects.get("cohorts") or []) if cqs else []
        during = events(within_case(history), "monitor", "quota_violation_started")
        t0 = case_t0(history)
        if final:
            return [Finding(self.name, "violated", names.text(final[0].describe()).split(", held by")[0],
                            "Final state: " + "; ".join(names.text(f.describe()) for f in final)
                            + (f". The monitor first saw it at t={during[0]['ts'] - t0:.3f}s." if during else "."))]
        if during:
            return [Finding(self.name, "violated",
                            "transient: " + names.text(str(during[0].get("finding", ""))).split(", held by")[0],
                            f"The monitor saw a violation at t={during[0]['ts'] - t0:.3f}s: "
                            + names.text(str(during[0].get("finding", ""))) + "; it cleared before the end.")]
        gone = sorted({str(e.get("key")) for e in events(within_case(history), "monitor", "object_deleted")
                       if e.get("kind") == "ClusterQueue"})
        if not cqs and gone and not events(within_case(history), "monitor", "watch_error"):
            # The case deleted its ClusterQueues (cases/kueue_10759): the monitor watched them until then.
            return [Finding(self.name, "held", "no ClusterQueue over quota while it existed",
                            f"The case's ClusterQueues ({', '.join(names.text(g) for g in gone)}) were deleted during "
                            "the case; the monitor watched them until then and recorded no violation.")]
        if not cqs:
            return [Finding(self.name, "error", "no ClusterQueue of the case in the objects judged",
                            "The objects judged hold no ClusterQueue of the case and the monitor recorded no "
                            "violation: quota has nothing to judge.")]
        used = checks.usage_by_cluster_queue(wls)
        parts = [f"{names.text(cq)} {res} {milli / 1000:g} used" for (cq, _fl, res), (milli, _k) in used.items()]
        return [Finding(self.name, "held", "no ClusterQueue over quota",
                        "No ClusterQueue over its quota in the final state" + (f" ({', '.join(parts)})" if parts else "")
                        + ", and the monitor recorded no violation during the run.")]
