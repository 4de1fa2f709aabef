"""A run's abstract history, the generator's input: Kueue's writes in the case's namespace, each classified
into a `Target` (write kind × object role), with its answer; and Kueue's Workload watch deliveries.

Built from the proxy's events (docs/history.md, source `proxy`): `request` (with `write`, the
classification of harness/kueue/api.py), `response`, `watch_event`. Roles come from the Jobs the case
created (harness/history/names.py: the Workload `job-job1-2e273` plays `job1`). Writes of no interest to a
perturbation (Events, queue status updates, Workload finalizer updates at deletion) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.explore.model import Target
from harness.kueue.api import WRITE_CLASSES

_JOB_WORKLOAD = re.compile(r"job-(.+)-[0-9a-z]{5}")


def workload_role(name: str, jobs: Iterable[str] = ()) -> tuple[str, str]:
    """(role, name glob) of a Workload: ("job1", "job-job1-*") for the Workload of Job job1 (the longest
    Job name of `jobs` that fits, else any `job-<x>-<5 chars>`), else (name, name)."""
    for job in sorted(jobs, key=len, reverse=True):
        if re.fullmatch(rf"job-{re.escape(job)}-[0-9a-z]{{5}}", name):
            return job, f"job-{job}-*"
    m = _JOB_WORKLOAD.fullmatch(name)
    if m:
        return m.group(1), f"job-{m.group(1)}-*"
    return name, name


def target_of(write: Mapping[str, Any], jobs: Iterable[str] = ()) -> Target | None:
    """The Target of a `request` event's `write` (harness/kueue_api.KueueWrite.to_dict), or None for
    writes no perturbation acts on: Events, queue and flavor updates, Workload finalizer updates, Job
    writes other than spec.suspend (status, annotations)."""
    kind, name = write.get("kind"), write.get("name")
    if not name:
        return None
    if kind == "Workload":
        role, glob = workload_role(str(name), jobs)
        if write.get("subresource") == "status" and write.get("write") in WRITE_CLASSES:
            return Target(str(write["write"]), role, glob)
        if write.get("method") == "POST":
            return Target("create", role, glob, "post")
        return None
    if kind == "Job" and write.get("subresource") in (None, "") and write.get("suspend") is not None:
        return Target("job_suspend" if write["suspend"] else "job_unsuspend", str(name), str(name),
                      str(write.get("write") or "patch"))
    return None


@dataclass(frozen=True)
class WriteStep:
    """One classified write: `ts` when the proxy saw the request, `answered` when its answer went to Kueue
    (None: never), `status` of that answer, `rv` the resourceVersion it carried, `loose`: no
    resourceVersion in the body (kube-apiserver applies it whatever the object's version)."""

    target: Target
    flow: int
    ts: float
    answered: float | None = None
    status: int | None = None
    rv: str | None = None
    loose: bool = True


@dataclass(frozen=True)
class Delivery:
    """One Workload watch event Kueue received: its object's role, type, resourceVersion, and the
    conditions that were True (plus "admission" when status.admission was set)."""

    role: str
    glob: str
    ts: float
    type: str
    rv: str | None
    state: tuple[str, ...]


@dataclass
class Trace:
    """The abstract history of one run (see module docstring)."""

    writes: list[WriteStep]
    deliveries: list[Delivery]

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]], namespace: str, jobs: Iterable[str] = ()) -> Trace:
        """From proxy events (any order; other namespaces ignored). `jobs`: the Job names the case created."""
        jobs = list(jobs)
        evs = sorted((e for e in events if e.get("source", "proxy") == "proxy"), key=lambda e: e.get("ts", 0.0))
        answers = {e.get("flow"): e for e in evs if e.get("event") == "response"}
        writes: list[WriteStep] = []
        deliveries: list[Delivery] = []
        for e in evs:
            if e.get("event") == "request" and isinstance(e.get("write"), Mapping):
                w = e["write"]
                if w.get("namespace") != namespace:
                    continue
                t = target_of(w, jobs)
                if t is None:
                    continue
                a = answers.get(e.get("flow"))
                writes.append(WriteStep(t, int(e.get("flow") or 0), float(e["ts"]),
                                        float(a["ts"]) if a else None, a.get("status") if a else None,
                                        str(a.get("resource_version")) if a and a.get("resource_version") else None,
                                        not w.get("strict")))
            elif e.get("event") == "watch_event" and e.get("namespace") == namespace and e.get("name"):
                role, glob = workload_role(str(e["name"]), jobs)
                conds = e.get("conditions") or {}
                state = tuple(sorted([k for k, v in conds.items() if v == "True"]
                                     + (["admission"] if e.get("admission") else [])))
                deliveries.append(Delivery(role, glob, float(e["ts"]), str(e.get("type")),
                                           str(e.get("resource_version")) if e.get("resource_version") else None, state))
        return cls(writes, deliveries)

    def first_writes(self) -> list[WriteStep]:
        """The first write of each target, in request order: what a rule with `times: 1` acts on."""
        seen: set[str] = set()
        out = []
        for w in self.writes:
            if w.target.rule_id not in seen:
                seen.add(w.target.rule_id)
                out.append(w)
        return out

    def delivered_at(self, w: WriteStep) -> float | None:
        """When Kueue's watch first delivered `w`'s object at a resourceVersion >= its answer's (the
        `delivered` trigger), or None."""
        if w.rv is None or w.status != 200 or w.target.cls in ("job_suspend", "job_unsuspend"):
            return None
        for d in self.deliveries:
            if d.role == w.target.role and d.rv is not None and d.ts >= (w.answered or w.ts) and _rv_ge(d.rv, w.rv):
                return d.ts
        return None

    def modified(self, role: str) -> list[Delivery]:
        """The MODIFIED deliveries of `role`'s Workload, in order."""
        return [d for d in self.deliveries if d.role == role and d.type == "MODIFIED"]

    def facts(self) -> set[tuple]:
        """What this run covered, for novelty: each (write kind, role, answer status), each object state
        Kueue's watch delivered (role, True conditions), and each change between two consecutive states of
        one object. A run whose facts are not all in earlier runs' reached a state no earlier run did."""
        out: set[tuple] = set()
        for w in self.writes:
            out.add(("write", w.target.cls, w.target.role, w.status))
        last: dict[str, tuple[str, ...]] = {}
        for d in self.deliveries:
            if d.type == "DELETED":
                continue
            out.add(("state", d.role, d.state))
            if d.role in last and last[d.role] != d.state:
                out.add(("change", d.role, last[d.role], d.state))
            last[d.role] = d.state
        return out

    def signature(self) -> tuple:
        """The order of first writes and their answers, as (rule id, status) pairs."""
        return tuple((w.target.rule_id, w.status) for w in self.first_writes())


def _rv_ge(a: str, b: str) -> bool:
    try:
        return int(a) >= int(b)
    except ValueError:
        return False
