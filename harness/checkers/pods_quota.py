"""Running Pods within quota: the running Pods of a ClusterQueue never request more than its admitted
Workloads hold (a Workload's Pods keep running after its eviction, or run before its admission, while
another Workload holds the quota). Judged on the invariant monitor's `pods_over_quota_started` facts (it
re-evaluates on every Pod and Workload event: harness/checkers/model/lifecycle.py pods_over_quota) and on the objects
judged when they include Pods. Not applicable when the case has no Pods (Pods run only with kube-scheduler
and kwok).
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.checkers.model import lifecycle
from harness.history.names import Names, case_t0


@register
class RunningPodsWithinQuota:
    name: ClassVar[str] = "running_pods_within_quota"
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

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
        out = []
        for e in started:
            cleared = next((c for c in history if c.get("source") == "monitor" and c.get("event") == "pods_over_quota_cleared"
                            and c.get("cluster_queue") == e.get("cluster_queue") and c.get("resource") == e.get("resource")
                            and c["ts"] >= e["ts"]), None)
            lasted = f"for {cleared['ts'] - e['ts']:.2f}s" if cleared else "until the end of the case"
            out.append(Finding(self.name, "violated",
                               f"running Pods over quota in {names.text(str(e.get('cluster_queue')))}",
                               f"From t={e['ts'] - t0:.3f}s {lasted}: {names.text(str(e.get('finding')))}."))
        if not started:
            for f in final:
                out.append(Finding(self.name, "violated", f"running Pods over quota in {names.text(f.cluster_queue)}",
                                   f"At the verdict: {names.text(f.describe())}."))
        if not out:
            running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
            out.append(Finding(self.name, "held", "running Pods within quota",
                               f"No ClusterQueue's running Pods requested more than its admitted Workloads held "
                               f"({running} Pod(s) running at the verdict)."))
        return out
