"""A control (no bug, no fault): ClusterQueue cq borrows through a 3-level Cohort tree root -> child -> cq.

root holds 10 cpu of its own (Cohort spec.resourceGroups), child none, cq 5, idle cq-side 2 directly under
root: root's subtree quota is 17 (pkg/cache/scheduler/resource_node.go, updateCohortResourceNode). Job a
(10 cpu) then Job b (5 cpu) are both admitted to cq, 15 cpu, legitimately borrowed through child from root.
A quota checker that took every Cohort as implicit would see child's subtree as 5 and report 15 of 5.
"""

import pytest

from harness import objects as o
from harness.checkers.bounds import SETTLE, STEP
from harness.common.waiting import wait_for
from harness.scenarios import submit_job, wait_workload


@pytest.mark.checkers("quota", liveness={"jobs": ["a", "b"]})
def test_hierarchical_borrowing_control(case):
    p, c = case.prefix, case.cluster
    rf = f"{p}-rf"
    c.create(o.resource_flavor(rf))
    c.create(o.cohort(f"{p}-root").flavor(rf, cpu="10"))
    c.create(o.cohort(f"{p}-child").parent(f"{p}-root"))
    c.create(o.cluster_queue(f"{p}-cq").flavor(rf, cpu="5").cohort(f"{p}-child"))
    c.create(o.cluster_queue(f"{p}-cq-side").flavor(rf, cpu="2").cohort(f"{p}-root"))
    c.create(o.local_queue("lq", case.ns, f"{p}-cq"))
    c.create(o.workload_priority_class(f"{p}-low", 100))
    wait_for(lambda: o.is_true(c.get("ClusterQueue", f"{p}-cq"), "Active"), timeout=30,
             what=f"ClusterQueue {p}-cq to be Active", describe=lambda: o.conditions_summary(c.get("ClusterQueue", f"{p}-cq")))
    with case.monitor(f"{p}-"):
        for name, cpu in (("a", "10"), ("b", "5")):
            wl = submit_job(case, None, name, f"{p}-low", cpu=cpu, queue="lq")
            wait_workload(case, wl, lambda w: o.is_true(w, "QuotaReserved"), STEP, f"{name} admitted")
        case.observe(timeout=SETTLE)  # a transient oversubscription would show meanwhile
