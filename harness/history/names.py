"""Short, human names for a case's objects in reports and checker evidence ("job1" for the Workload
ns/job-job1-2e273), and small readers of history events shared by the checkers and the report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any


def case_t0(history: Sequence[Mapping[str, Any]]) -> float:
    """When the case started (its case_started event), else the first event's time (epoch seconds)."""
    return next((e["ts"] for e in history if e.get("event") == "case_started"),
                min((e["ts"] for e in history), default=0.0))


def kobj_key(v: Any) -> str | None:
    """A klog KObj value ({"name", "namespace"}) or "ns/name" string as "ns/name" (None if empty)."""
    if isinstance(v, Mapping) and v.get("name"):
        return f"{v.get('namespace', '')}/{v['name']}" if v.get("namespace") else str(v["name"])
    return str(v) if isinstance(v, str) and v else None


class Names:
    """Maps the case's long names to short ones: Workload `job-<job>-<hash>` -> `<job>`, and drops the
    case's namespace / cluster-scoped prefix from free text."""

    def __init__(self, history: Sequence[Mapping[str, Any]], namespace: str = "", prefix: str = "") -> None:
        self.ns = namespace or next((e.get("namespace", "") for e in history if e.get("event") == "case_started"), "")
        self.prefix = prefix or self.ns
        self.jobs: dict[str, dict[str, Any]] = {}
        for e in history:
            if e.get("event") == "job_created" and e.get("source") == "harness":
                name = str(e.get("job", "")).split("/")[-1]
                self.jobs[name] = e
        self.workloads: dict[str, str] = {}
        for e in history:
            for name in _workload_names(e):
                self.workloads.setdefault(name, self._short(name))

    def _short(self, wl: str) -> str:
        """A Job's Workload `job-<job>-<hash>` -> `<job>`: the Jobs the history created first, else any
        name of that form (a manual session's Jobs are created by hand, so its history names none)."""
        for job in sorted(self.jobs, key=len, reverse=True):
            if re.fullmatch(rf"job-{re.escape(job)}-[0-9a-z]{{5}}", wl):
                return job
        m = re.fullmatch(r"job-(.+)-[0-9a-z]{5}", wl)
        return m.group(1) if m else wl

    def wl(self, name: str | None) -> str:
        if not name:
            return "?"
        name = name.split("/")[-1]
        return self.workloads.get(name) or self._short(name)

    def kobj(self, v: Any) -> str:
        """A klog KObj value ({"name", "namespace"}) or "ns/name" string, shortened."""
        if isinstance(v, Mapping):
            return self.wl(str(v.get("name", "")))
        return self.wl(str(v)) if v else "?"

    def priority(self, job: str) -> str:
        p = str(self.jobs.get(job, {}).get("priority", ""))
        return p[len(self.prefix) + 1:] if self.prefix and p.startswith(self.prefix + "-") else p

    def text(self, s: str) -> str:
        if self.ns:
            s = s.replace(f"{self.ns}/", "")
        for long, short in sorted(self.workloads.items(), key=lambda kv: -len(kv[0])):
            s = s.replace(long, short)
        for job in sorted(self.jobs, key=len, reverse=True):  # Workloads only the final objects name
            s = re.sub(rf"\bjob-{re.escape(job)}-[0-9a-z]{{5}}\b", job, s)
        if self.prefix:
            s = s.replace(f"{self.prefix}-", "")
        return s

    def legend(self) -> list[str]:
        """"job1 = ns/job-job1-2e273 (priority low)" per Workload, in creation order."""
        out = []
        for long, short in self.workloads.items():
            pr = self.priority(short)
            out.append(f"{short} = {self.ns}/{long}" + (f" (priority {pr})" if pr else ""))
        return out


def _workload_names(e: Mapping[str, Any]) -> list[str]:
    if e.get("source") == "proxy":
        w = e.get("write")
        if isinstance(w, Mapping) and w.get("kind") == "Workload" and w.get("name"):
            return [str(w["name"])]
        if e.get("event") in ("response", "watch_event", "watch_event_dropped") and e.get("name"):
            return [str(e["name"])]
    return []
