"""Pods that run, on the real components (Kueue v0.17.0 by default): a Job admitted by Kueue gets its Pods
bound by kube-scheduler to a kwok Node, they turn Running and Ready, stay so until the case finishes them
on demand, and then the Job completes and its Workload is Finished; a Pod finished as Failed fails its Job. A case without the `pods` marker, run
first in the same session, starts neither kube-scheduler nor kwok. The cases run in a child pytest, the
way a user runs them, so their verdicts, summary.json and the logs can be read afterwards.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.integration.child import run_child_cases

CASES = textwrap.dedent('''
    import json
    import pytest
    from harness import objects as o, scenarios
    from harness.env import pods
    from harness.common.waiting import wait_for
    # A case with no invariant that applied is an error (harness/checkers/base.py compose): quota judges them all.
    pytestmark = pytest.mark.checkers("quota")

    def recorded_processes(case):
        return [p["name"] for p in json.loads(case.env.procs.file.read_text())["procs"]]

    def test_a_case_without_pods_starts_neither_scheduler_nor_kwok(case):
        scenarios.setup_queues(case)
        assert case.env.pods is None and case.env.pods_info() is None
        assert not {"kube-scheduler", "kwok"} & set(case.env.procs.procs)
        assert not {"kube-scheduler", "kwok"} & set(recorded_processes(case))
        assert not (case.env.artifacts / "kube-scheduler.log").exists()

    @pytest.mark.pods(nodes=[o.node("n1", cpu="4", memory="16Gi").topology(zone="z1", rack="r1")])
    def test_a_job_runs_on_a_kwok_node_and_finishes_on_demand(case):
        assert {"kube-scheduler", "kwok"} <= set(recorded_processes(case))
        node = case.node_name("n1")
        labels = case.cluster.node(node)["metadata"]["labels"]
        assert labels["topology.kubernetes.io/zone"] == "z1" and labels["kubernetes.io/hostname"] == node
        q = scenarios.preemption_queues(case, cpu="4")
        case.cluster.create(o.job("job1", case.ns).queue(q.local_queue).priority_class(q.low).requests(cpu="1")
                            .parallelism(2))
        case.record("job_created", job=f"{case.ns}/job1", priority=q.low, cpu="1")
        wl = wait_for(lambda: case.cluster.workload_for_job(case.ns, "job1"), timeout=30, what="job1's Workload")
        case.workload_keys.add(f"{case.ns}/{wl['metadata']['name']}")
        scenarios.wait_workload(case, wl, lambda w: o.is_true(w, "Admitted"), 30, "admitted")

        def running() -> list:
            ps = case.cluster.pods_of_job(case.ns, "job1")
            return ps if len(ps) == 2 and all(pods.pod_running_and_ready(p) for p in ps) else []

        ps = wait_for(running, timeout=30, what="job1's 2 Pods Running and Ready",
                      describe=lambda: [(p["spec"].get("nodeName"), p["status"].get("phase"))
                                        for p in case.cluster.pods_of_job(case.ns, "job1")])
        assert {p["spec"]["nodeName"] for p in ps} == {node}
        # They do not end by themselves (kwok's own pod-complete Stage is not loaded): still 2 active.
        status = case.cluster.job(case.ns, "job1").get("status") or {}
        assert status.get("active") == 2 and not status.get("succeeded"), status
        assert sorted(case.finish_pods("job1")) == sorted(p["metadata"]["name"] for p in ps)
        wait_for(lambda: o.is_true(case.cluster.job(case.ns, "job1"), "Complete"), timeout=30,
                 what="job1 Complete", describe=lambda: o.conditions_summary(case.cluster.job(case.ns, "job1")))
        scenarios.wait_workload(case, wl, lambda w: o.is_true(w, "Finished"), 30, "Finished")
        assert {p["status"]["phase"] for p in case.cluster.pods_of_job(case.ns, "job1")} == {"Succeeded"}

    @pytest.mark.pods
    def test_a_pod_finished_as_failed_fails_its_job(case):
        # kube-scheduler and kwok are running already (the case before started them): only the Node is new.
        q = scenarios.preemption_queues(case, cpu="2")
        wl = scenarios.submit_job(case, q, "job2", q.low)  # one Pod, backoffLimit 0
        wait_for(lambda: [p for p in case.cluster.pods_of_job(case.ns, "job2") if pods.pod_running_and_ready(p)],
                 timeout=30, what="job2's Pod Running and Ready")
        assert len(case.finish_pods("job2", "Failed")) == 1
        wait_for(lambda: o.is_true(case.cluster.job(case.ns, "job2"), "Failed"), timeout=30, what="job2 Failed",
                 describe=lambda: o.conditions_summary(case.cluster.job(case.ns, "job2")))
        w = scenarios.wait_workload(case, wl, lambda w: o.is_true(w, "Finished"), 30, "Finished")
        assert o.condition(w, "Finished")["reason"] == "Failed", o.conditions_summary(w)
        term = case.cluster.pods_of_job(case.ns, "job2")[0]["status"]["containerStatuses"][0]["state"]["terminated"]
        assert term["exitCode"] == 1 and term["reason"] == "Error", term
''')


def test_pods_run_on_kwok_nodes_only_when_a_case_asks(tmp_path: Path, kueue_version: str) -> None:
    run = run_child_cases(tmp_path, CASES, kueue_version)
    out, summary, verdicts, art = run.out, run.summary, run.verdicts, run.art
    assert [v["verdict"] for v in verdicts.values()] == ["passed", "passed", "passed"], out
    assert run.returncode == 0, out
    # What ran is recorded like the other components.
    assert summary["pods"]["kube_scheduler"] == "v1.35.4" and summary["pods"]["kwok"] == "v0.8.0", summary["pods"]
    bundle = Path(verdicts["test_a_job_runs_on_a_kwok_node_and_finishes_on_demand"]["bundle"])
    meta = json.loads((bundle.with_suffix("").with_suffix("") / "bundle.json").read_text())
    assert meta["pods"]["kube_scheduler"] == "v1.35.4" and meta["pods"]["kwok"] == "v0.8.0"
    # No file of the bundle held one of the run's secrets (kube-scheduler's and kwok's tokens among them).
    assert meta["redaction"]["found"] == [], meta["redaction"]
    # Their logs are in the run's artifacts; kube-scheduler bound both Pods to the case's Node.
    sched_log = (art / "env" / "kube-scheduler.log").read_text()
    assert sched_log.count("Successfully bound pod to node") >= 2, sched_log[-2000:]
    assert (art / "env" / "kwok.log").stat().st_size > 0
    # The history: Nodes created, Pods finished on demand, Nodes deleted after the Pods were gone.
    case_dir = Path(verdicts["test_a_job_runs_on_a_kwok_node_and_finishes_on_demand"]["evidence"])
    events = [json.loads(line) for line in (case_dir / "history.jsonl").read_text().splitlines()]
    by = {e["event"]: e for e in events if e["source"] == "harness"}
    assert len(by["nodes_created"]["nodes"]) == 1 and by["nodes_created"]["kwok"] == "v0.8.0"
    assert by["pods_finished"]["phase"] == "Succeeded" and len(by["pods_finished"]["pods"]) == 2
    assert by["case_nodes_deleted"]["nodes"] == by["nodes_created"]["nodes"]
    assert by["case_nodes_deleted"]["pods_left"] == [], by["case_nodes_deleted"]
