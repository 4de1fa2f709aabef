"""Running Pods within quota: the running Pods of a ClusterQueue never request more than its admitted
Workloads hold (a Workload's Pods keep running after its eviction, or run before its admission, while
another Workload holds the quota). Judged on the invariant monitor's `pods_over_quota_started` facts (it
re-evaluates on every Pod and Workload event: harness/checkers/model/lifecycle.py pods_over_quota) and on the objects
judged when they include Pods. Not applicable when the case has no Pods (Pods run only with kube-scheduler
and kwok).

With `persist` (seconds at an idle machine's pace; counted in the run's own pace, harness/checkers/progress.py, and
without the time a Pod of the case was stopping) only a violation that lasted at least that long, or that still
holds at the verdict (reaches the final state), counts; a shorter one is reported, not bearing. One the monitor saw start but not
end, while the objects read at the verdict (Pods included) are within quota, ended by the verdict: it lasted
at most until the last event of the case. Kubernetes' garbage collector
deletes an evicted or deleted Job's Pods one by one a second or two after Kueue released the quota
(kubernetes-sigs/kueue#12820's control: a 1–2 s window with no fault), which without `persist` reads as
a violation.
"""

from __future__ import annotations

import time
from typing import ClassVar

from harness.checkers import progress
from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.checkers.model import lifecycle
from harness.history.names import Names, case_t0


def _cleared(history: History, started: dict) -> dict | None:
    """The monitor's `pods_over_quota_cleared` event that ended window `started` (its ClusterQueue and
    resource, at or after it), or None while it is open."""
    return next((c for c in history if c.get("source") == "monitor" and c.get("event") == "pods_over_quota_cleared"
                 and c.get("cluster_queue") == started.get("cluster_queue")
                 and c.get("resource") == started.get("resource") and c["ts"] >= started["ts"]), None)


@register
class RunningPodsWithinQuota:
    name: ClassVar[str] = "running_pods_within_quota"
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True
    #: A violation it reports may still clear while `decided` is False (explore's settle waits for it).
    may_clear: ClassVar[bool] = True

    def __init__(self, persist: float | None = None) -> None:
        if persist is not None and (isinstance(persist, bool) or not isinstance(persist, (int, float)) or persist <= 0):
            raise ValueError(f"running_pods_within_quota: persist must be seconds > 0 (or absent), got {persist!r}")
        self.persist = float(persist) if persist is not None else None

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """False while a window of running Pods over quota is open and younger than `persist` (it may still
        close: the garbage collector orphans or deletes a gone Job's Pods a second after its Workload
        finished — an explore run of #12820's control ended 0.2 s after such a window opened and judged it
        "until the end of the case"); True otherwise, and always without `persist`. A case waits on it
        before its verdict (CaseContext.observe; explore's settle). Wall-clock now: only waits use it."""
        if self.persist is None:
            return True
        history = within_case(history)
        now = time.time()
        persist = self.persist * progress.pace(history).factor
        return not any(_cleared(history, e) is None and now - float(e["ts"]) < persist
                       for e in history if e.get("source") == "monitor" and e.get("event") == "pods_over_quota_started")

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        started = [e for e in history if e.get("source") == "monitor" and e.get("event") == "pods_over_quota_started"]
        pods = list(objects.get("pods") or [])
        final = lifecycle.pods_over_quota(pods, objects.get("workloads") or [], objects.get("localqueues") or [])
        if not started and not final and not pods and not any(
                e.get("source") == "monitor" and e.get("event") == "pods_over_quota_cleared" for e in history):
            return [Finding(self.name, "error", "no Pods",
                            "The case had no Pods to judge (Pods run only when kube-scheduler and kwok do): "
                            "running_pods_within_quota has no subject.")]
        t0 = case_t0(history)
        over_at_end = {(f.cluster_queue, f.resource) for f in final}
        end = max((float(x["ts"]) for x in history if isinstance(x.get("ts"), (int, float))), default=None)
        out = []
        run_pace = progress.pace(history)
        persist = self.persist * run_pace.factor if self.persist is not None else None
        for e in started:
            cleared = _cleared(history, e)
            lasted = f"for {cleared['ts'] - e['ts']:.2f}s" if cleared else "until the end of the case"
            if cleared is None and pods and end is not None and (e.get("cluster_queue"), e.get("resource")) not in over_at_end:
                # The monitor saw no end, but the objects read at the verdict are within quota: it ended by then
                # (a snapshot mid-way through the garbage collector orphaning a Job's Pods, 0.1 s before the
                # verdict, read as "until the end of the case" in a 2026-12-06 exploration of #12820's control).
                cleared = {"ts": end}
                lasted = f"for at most {end - e['ts']:.2f}s (within quota in the objects read at the verdict)"
            if persist is not None and cleared is not None:
                # Counted in the run's pace, and without the time a Pod of the case was stopping (kubelet's or
                # kwok's step, not Kueue's): the garbage collector's deletions a second after a release.
                waits = progress.external_waits(history, cleared["ts"])
                counted = progress.outside(e["ts"], cleared["ts"], waits)
                if counted < persist:
                    stopping = f", {cleared['ts'] - e['ts'] - counted:.2f}s of it while a Pod was stopping" \
                        if counted < cleared["ts"] - e["ts"] - 1e-6 else ""
                    out.append(Finding(self.name, "held", f"transient: running Pods over quota {lasted}",
                                       f"From t={e['ts'] - t0:.3f}s {lasted}{stopping} (< {self.persist:g}s × the run's "
                                       f"pace factor {run_pace.factor:.1f}, not counted): "
                                       f"{names.text(str(e.get('finding')))}.", bearing=False))
                    continue
            out.append(Finding(self.name, "violated",
                               f"running Pods over quota in {names.text(str(e.get('cluster_queue')))}",
                               f"From t={e['ts'] - t0:.3f}s {lasted}: {names.text(str(e.get('finding')))}."))
        if not any(f.result == "violated" for f in out):
            for f in final:
                out.append(Finding(self.name, "violated", f"running Pods over quota in {names.text(f.cluster_queue)}",
                                   f"At the verdict: {names.text(f.describe())}."))
        if not any(f.result == "violated" for f in out):
            running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
            out.append(Finding(self.name, "held", "running Pods within quota",
                               f"No ClusterQueue's running Pods requested more than its admitted Workloads held "
                               f"({running} Pod(s) running at the verdict)."))
        return out
