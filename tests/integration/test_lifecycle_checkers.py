"""The lifecycle checkers on the real components: the invariant monitor records a plain Workload's life
(seen, quota reserved, deactivated, evicted with reason Deactivated, deleted) and the checkers named in the case
(liveness of the named Workload, inactive_never_scheduled, bounded_evictions, deletion_completes) pass on
Kueue v0.17.0; a Workload held by a finalizer nobody removes for longer than the bound is reported
(reproduced).
The cases run in a child pytest, as a user runs them.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.integration.child import run_child_cases

CASES = textwrap.dedent('''
    import pytest
    from harness import objects as o, scenarios
    from harness.common.waiting import wait_for
    # A case with no invariant that applied is an error (harness/checkers/base.py compose): quota judges them all.
    pytestmark = pytest.mark.checkers("quota")

    def small(case, q, **kw):
        b = o.workload("small", case.ns).queue(q.local_queue).pod_set("main", 1, cpu="1")
        for f in kw.get("finalizers", ()):
            b.finalizer(f)
        return case.cluster.create(b)

    def get(case):
        try:
            return case.cluster.get("Workload", "small", case.ns)
        except Exception:
            return None

    @pytest.mark.checkers("inactive_never_scheduled", "bounded_evictions", "deletion_completes",
                          liveness={"workloads": ["small"]})
    def test_plain_workload_life(case):
        q = scenarios.preemption_queues(case)
        small(case, q)
        wait_for(lambda: o.is_true(get(case), "QuotaReserved"), timeout=30, what="small admitted")
        case.cluster.custom.patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", case.ns, "workloads", "small",
                                                           {"spec": {"active": False}})
        wait_for(lambda: o.is_true(get(case), "Evicted"), timeout=30, what="small evicted as inactive")
        case.cluster.custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", case.ns, "workloads", "small")
        wait_for(lambda: get(case) is None, timeout=30, what="small gone")
        case.observe(timeout=2)

    @pytest.mark.checkers(deletion_completes={"bound": 2, "kinds": ["Workload"]})
    def test_stuck_terminating(case):
        q = scenarios.preemption_queues(case)
        small(case, q, finalizers=["example.com/keep"])
        case.cluster.custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", case.ns, "workloads", "small")
        case.observe(timeout=5)
        # Let the teardown delete it.
        case.cluster.custom.patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", case.ns, "workloads", "small",
                                                           {"metadata": {"finalizers": None}})
''')


def test_lifecycle_checkers_on_real_kueue(tmp_path: Path, kueue_version: str) -> None:
    run = run_child_cases(tmp_path, CASES, kueue_version)
    out, v = run.out, run.verdicts
    for name, want in (("test_plain_workload_life", "passed"), ("test_stuck_terminating", "reproduced")):
        assert v[name]["verdict"] == want, f"{name}: {v[name]['verdict']}: {v[name]['detail']}\n{out[-3000:]}"
    # Violated while it is stuck; the case then removes the finalizer itself, so the detail is either form.
    assert "deletion_completes: Workload small" in v["test_stuck_terminating"]["detail"], v

    life = tmp_path / "art" / "cases" / "test-plain-workload-life"
    h = [json.loads(x) for x in (life / "history.jsonl").read_text().splitlines()]
    mon = [(e["event"], e.get("key")) for e in h if e["source"] == "monitor" and str(e.get("key", "")).endswith("/small")]
    events = [e for e, _ in mon]
    # No object_deleting here: once evicted the Workload has no finalizer left, so it goes at once.
    assert events == ["workload_seen", "workload_quota_reserved", "workload_active_changed", "workload_quota_released",
                      "workload_evicted", "object_deleted"] or set(events) >= {
        "workload_seen", "workload_quota_reserved", "workload_active_changed", "workload_evicted", "object_deleted"}, mon
    evicted = next(e for e in h if e["event"] == "workload_evicted")
    assert evicted["reason"] == "Deactivated" and evicted["count"] == 1 and evicted["evictions_total"] == 1, evicted
    stuck = tmp_path / "art" / "cases" / "test-stuck-terminating"
    deleting = [json.loads(x) for x in (stuck / "history.jsonl").read_text().splitlines() if '"object_deleting"' in x]
    assert deleting and deleting[0]["finalizers"] == ["example.com/keep"], deleting
    bundle = json.loads((life / "bundle.json").read_text())
    assert {"inactive_never_scheduled", "bounded_evictions", "deletion_completes", "liveness"} <= set(bundle["checkers"])
