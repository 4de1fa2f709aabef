"""The shared set-up steps of harness/scenarios/setups.py on a fake cluster that records what it is asked to create
(the real steps run in every case against kube-apiserver): the cohort set-up of kubernetes-sigs/kueue#13662
(docs/kueue-notes.md §14), Jobs on a chosen LocalQueue with more requests, and admitted Jobs in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from harness import objects as o
from harness import scenarios as s


class FakeCluster:
    """Creates succeed; every ClusterQueue is Active; a Job's Workload exists and holds quota at once."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, obj):
        obj = obj.obj() if isinstance(obj, o._Builder) else obj  # noqa: SLF001 - the fake unwraps builders
        self.created.append(obj)
        return obj

    def get(self, kind, name, namespace=None):
        return {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Active" if kind == "ClusterQueue" else "QuotaReserved", "status": "True", "reason": "x"}]}}

    def workload_for_job(self, namespace, job):
        return {"metadata": {"name": f"job-{job}-abcde", "namespace": namespace}}

    def of(self, kind):
        return [c for c in self.created if c["kind"] == kind]


@dataclass
class FakeCase:
    prefix: str = "p"
    ns: str = "ns"
    cluster: FakeCluster = field(default_factory=FakeCluster)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    workload_keys: set[str] = field(default_factory=set)

    def record(self, event, **fields):
        self.events.append((event, fields))


def test_cohort_queues_makes_one_cohort_a_local_queue_each_and_the_priority_classes():
    case = FakeCase()
    q = s.cohort_queues(case, {"cq1": {"cpu": "4"}, "cq2": {"cpu": "0", "memory": "1Gi"}},
                        withinClusterQueue="LowerPriority", reclaimWithinCohort="Any")
    assert q == s.CohortQueues("p-rf", "p-cohort", {"cq1": "p-cq1", "cq2": "p-cq2"}, {"low": "p-low", "high": "p-high"})
    cqs = {c["metadata"]["name"]: c["spec"] for c in case.cluster.of("ClusterQueue")}
    assert cqs["p-cq1"]["cohortName"] == "p-cohort" and cqs["p-cq2"]["cohortName"] == "p-cohort"
    assert cqs["p-cq1"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    assert cqs["p-cq2"]["resourceGroups"][0]["flavors"][0] == {
        "name": "p-rf", "resources": [{"name": "cpu", "nominalQuota": "0"}, {"name": "memory", "nominalQuota": "1Gi"}]}
    assert [(lq["metadata"]["name"], lq["metadata"]["namespace"], lq["spec"]["clusterQueue"])
            for lq in case.cluster.of("LocalQueue")] == [("cq1", "ns", "p-cq1"), ("cq2", "ns", "p-cq2")]
    assert {p["metadata"]["name"]: p["value"] for p in case.cluster.of("WorkloadPriorityClass")} == {
        "p-low": 100, "p-high": 1000}
    assert case.events[-1][0] == "cohort_queues_created" and case.events[-1][1]["cohort"] == "p-cohort"
    assert not s.cohort_queues(FakeCase(), {"a": {"cpu": "1"}}, priorities={}).priorities


def test_submit_job_on_a_named_local_queue_with_more_requests_and_a_priority_by_its_short_name():
    case = FakeCase()
    q = s.cohort_queues(case, {"cq1": {"cpu": "4"}})
    wl = s.submit_job(case, q, "preemptor", "high", cpu="4", queue="cq1", memory="1Gi")
    (job,) = case.cluster.of("Job")
    assert job["metadata"]["labels"] == {o.QUEUE_LABEL: "cq1", o.PRIORITY_CLASS_LABEL: "p-high"}
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "1Gi"}
    assert case.events[-1] == ("job_created", {"job": "ns/preemptor", "priority": "p-high", "cpu": "4", "queue": "cq1",
                                               "requests": {"memory": "1Gi"}})
    assert wl["metadata"]["name"] == "job-preemptor-abcde" and "ns/job-preemptor-abcde" in case.workload_keys
    with pytest.raises(ValueError, match="say which LocalQueue.*cq1"):
        s.submit_job(case, q, "x", "low")


def test_admitted_jobs_submits_in_order_and_waits_for_each_quota_reservation():
    case = FakeCase()
    q = s.cohort_queues(case, {"cq1": {"cpu": "4"}, "cq2": {"cpu": "0"}})
    got = s.admitted_jobs(case, q, {"job-a": dict(queue="cq2", priority="low", cpu="1"),
                                    "job-b": dict(queue="cq1", priority="low", cpu="3")})
    assert list(got) == ["job-a", "job-b"] and all(o.is_true(w, "QuotaReserved") for w in got.values())
    assert [j["metadata"]["name"] for j in case.cluster.of("Job")] == ["job-a", "job-b"]


def test_wait_plan_of_a_perturbed_run_ends_when_the_run_went_quiet() -> None:
    """CaseContext.wait_plan: without plan_quiet it waits for the rule's end (here: the end is there); with
    plan_quiet saying the run is quiet, a step that never ended is not waited for its whole timeout."""
    import time
    from types import SimpleNamespace

    from harness.scenarios.case import CaseContext

    recorded: list[dict] = []
    events = [{"event": "signal_done", "rule": "s", "ts": 1.0, "why": "triggers: x"}]
    proxy = SimpleNamespace(case_events=lambda: events,
                            wait_event=lambda pred, timeout, what: next(e for e in events if pred(e)))
    ctx = SimpleNamespace(proxy=proxy, plan_quiet=None, record=lambda kind, **kw: recorded.append({"kind": kind, **kw}))
    CaseContext.wait_plan(ctx, ["s"], 30)  # type: ignore[arg-type]
    assert recorded[-1]["why"] == "triggers: x"
    quiet = iter([None, None, "nothing reached the proxy for 6.0s and the plan held nothing"])
    ctx.plan_quiet = lambda: next(quiet)
    t0 = time.monotonic()
    CaseContext.wait_plan(ctx, ["never"], 30)  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 5
    assert recorded[-1] == {"kind": "plan_step", "rule": "never", "label": "",
                            "why": "not ended: nothing reached the proxy for 6.0s and the plan held nothing"}
    ctx.plan_quiet = lambda: None
    CaseContext.wait_plan(ctx, ["s"], 30)  # type: ignore[arg-type]  # an ended rule is found at once
    assert recorded[-1]["why"] == "triggers: x"


def test_observe_in_a_perturbed_run_ends_once_the_run_was_quiet() -> None:
    """CaseContext.observe: a checker that decides only on a violation (log_count with `max`) kept every run
    observing for its whole bound; in a perturbed run a quiet of OBSERVE_QUIET seconds ends it (the run's
    settle observes after it). Without `plan_quiet` (a plain case) only the checkers or the timeout end it."""
    from types import SimpleNamespace

    from harness.scenarios import case as case_mod
    from harness.scenarios.case import CaseContext

    asked: list[float] = []
    looked: list[int] = []

    class Undecided:
        kind, name = "invariant", "log_count"

        def decided(self, h, objs, names) -> bool:
            looked.append(1)
            return False

    quiet = iter([None, None, "quiet"])
    ctx = SimpleNamespace(selection=SimpleNamespace(build=lambda: [Undecided()]), snapshot=lambda: [],
                          objects=lambda: {}, names=lambda h: None,
                          plan_quiet=lambda after: asked.append(after) or next(quiet))
    CaseContext.observe(ctx, timeout=60, interval=0.01)  # type: ignore[arg-type]
    assert asked == [case_mod.OBSERVE_QUIET] * 3 and len(looked) == 2
    ctx.plan_quiet = None
    looked.clear()
    CaseContext.observe(ctx, timeout=0.5, interval=0.01)  # type: ignore[arg-type]
    assert len(looked) >= 2  # it looked until its timeout: nothing else ends a plain case's observation
