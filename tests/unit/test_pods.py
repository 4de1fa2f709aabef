"""Unit tests for Pods that run (harness/env/pods.py, the Node builder, the `pods` marker): kwok's Stages and
arguments, the finish-on-demand annotation, Node readiness, on synthetic objects. No process starts here."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import objects as o
from harness.common.errors import HarnessError
from harness.common.waiting import WaitTimeout
from harness.env import pods
from harness.scenarios.markers import _pods_nodes

# --- the Node builder -------------------------------------------------------------------------------------


def test_node_defaults_kwok_annotation_hostname_and_capacity() -> None:
    n = o.node("n1").obj()
    assert n["kind"] == "Node" and n["apiVersion"] == "v1"
    assert n["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert n["metadata"]["labels"] == {"kubernetes.io/hostname": "n1"}
    assert n["status"]["capacity"] == n["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}


def test_node_capacity_allocatable_labels_topology_taints() -> None:
    n = (o.node("n1", cpu="4").capacity({"nvidia.com/gpu": "2"}, memory="8Gi").allocatable(cpu="3500m")
         .topology(zone="z1", block="b1", rack="r1").labels({"instance-type": "big"})
         .taint("dedicated", "team-a").unschedulable()).obj()
    assert n["status"]["capacity"] == {"cpu": "4", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2"}
    assert n["status"]["allocatable"] == {"cpu": "3500m", "memory": "8Gi", "pods": "110", "nvidia.com/gpu": "2"}
    assert n["metadata"]["labels"] == {
        "kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z1",
        "cloud.provider.com/topology-block": "b1", "cloud.provider.com/topology-rack": "r1", "instance-type": "big"}
    assert n["spec"] == {"taints": [{"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}],
                         "unschedulable": True}


def test_node_unknown_topology_level_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown topology level.*region.*zone, block, rack, hostname"):
        o.node("n1").topology(region="eu")


def test_node_unmanaged_and_renamed_are_copies() -> None:
    b = o.node("n1").topology(zone="z1")
    r = b.renamed("case-7-n1")
    assert r.name == "case-7-n1" and r.obj()["metadata"]["labels"]["kubernetes.io/hostname"] == "case-7-n1"
    assert r.obj()["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z1"
    assert b.name == "n1" and b.obj()["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"  # untouched
    assert o.KWOK_NODE_ANNOTATION[0] not in o.node("x").unmanaged().obj()["metadata"]["annotations"]


# --- kwok's Stages and arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(("phase", "code", "reason"), [("Succeeded", 0, "Completed"), ("Failed", 1, "Error")])
def test_finish_stage_selects_running_pods_annotated_with_the_phase(phase: str, code: int, reason: str) -> None:
    st = pods.finish_stage(phase)
    assert st["kind"] == "Stage" and st["apiVersion"] == "kwok.x-k8s.io/v1alpha1"
    assert st["spec"]["resourceRef"] == {"apiGroup": "v1", "kind": "Pod"}
    sel = st["spec"]["selector"]
    assert sel["matchAnnotations"] == {o.FINISH_ANNOTATION: phase}
    assert {"key": ".status.phase", "operator": "In", "values": ["Running"]} in sel["matchExpressions"]
    assert {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"} in sel["matchExpressions"]
    tpl = st["spec"]["next"]["statusTemplate"]
    assert f"phase: {phase}\n" in tpl and f"exitCode: {code}\n" in tpl and f"reason: {reason}\n" in tpl
    # Once the Go template actions are rendered (one container), the status is YAML of the right shape.
    rendered = (tpl.replace("{{ $now := Now }}", "").replace("{{ $now | Quote }}", '"2026-01-01T00:00:00Z"')
                .replace("{{ range .spec.containers }}", "").replace("{{ end }}", "")
                .replace("{{ .name | Quote }}", '"main"').replace("{{ .image | Quote }}", '"pause"'))
    status = yaml.safe_load(rendered)
    assert status["phase"] == phase
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == code
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Ready": "False", "ContainersReady": "False"}


def test_finish_stage_refuses_other_phases() -> None:
    with pytest.raises(ValueError, match="Succeeded or Failed"):
        pods.finish_stage("Running")


def test_kwok_config_is_the_two_finish_stages_and_no_kwok_configuration() -> None:
    docs = list(yaml.safe_load_all(pods.kwok_config()))
    assert [d["metadata"]["name"] for d in docs] == ["kueue-harness-pod-succeeded", "kueue-harness-pod-failed"]
    assert all(d["kind"] == "Stage" for d in docs)  # a KwokConfiguration would switch kwok's defaults off


def test_kwok_stage_files(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="pod-ready.yaml.*KUEUE_HARNESS_KWOK_SOURCE"):
        pods.kwok_stage_files(tmp_path)
    for rel in pods.KWOK_STAGES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("kind: Stage\n")
    files = pods.kwok_stage_files(tmp_path)
    assert [f.name for f in files] == ["node-initialize.yaml", "node-heartbeat.yaml", "pod-ready.yaml", "pod-delete.yaml"]
    # kwok's own pod-complete (every Job Pod ends at once) is not loaded: Pods end on demand only.
    assert not any("pod-complete" in str(f) for f in files)


def test_kwok_source_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_HARNESS_KWOK_SOURCE", str(tmp_path))
    assert pods.kwok_source() == tmp_path


def test_kwok_and_scheduler_argv_stay_on_loopback(tmp_path: Path) -> None:
    a = pods.kwok_argv(Path("/bin/kwok"), tmp_path / "k.kubeconfig", [tmp_path / "a.yaml", tmp_path / "b.yaml"], 2345)
    assert a[0] == "/bin/kwok"
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in a
    assert "--server-address=127.0.0.1:2345" in a
    assert [x for x in a if x.startswith("--config=")] == [f"--config={tmp_path / 'a.yaml'}", f"--config={tmp_path / 'b.yaml'}"]
    assert f"--cidr={pods.POD_CIDR}" in a
    s = pods.scheduler_argv(Path("/bin/ks"), tmp_path / "s.kubeconfig", 3456, tmp_path / "c", tmp_path / "k")
    assert "--bind-address=127.0.0.1" in s and "--secure-port=3456" in s and "--leader-elect=false" in s
    assert f"--tls-cert-file={tmp_path / 'c'}" in s


@pytest.mark.parametrize(("line", "version"), [
    ("Kubernetes v1.35.4", "v1.35.4"), ("kwok version v0.8.0 go1.26.8 (linux/amd64)", "v0.8.0"),
    ("kwok 0.8.0", "v0.8.0"), ("something else", "something else")])
def test_version_word(line: str, version: str) -> None:
    assert pods._version_word(line) == version


# --- readiness and finishing on demand -------------------------------------------------------------------


def _pod(name: str, phase: str, ready: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pod_running_and_ready() -> None:
    assert pods.pod_running_and_ready(_pod("p", "Running", ready=True))
    assert not pods.pod_running_and_ready(_pod("p", "Running", ready=False))
    assert not pods.pod_running_and_ready(_pod("p", "Pending", ready=True))
    assert not pods.pod_running_and_ready({})


def _node(ready: bool, taints: list[str] = ()) -> dict[str, Any]:
    return {"spec": {"taints": [{"key": t, "effect": "NoSchedule"} for t in taints]},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_node_schedulable_needs_ready_and_no_not_ready_taint() -> None:
    assert pods.node_schedulable(_node(True))
    assert pods.node_schedulable(_node(True, ["dedicated"]))  # the Node's own taints are the scheduler's business
    assert not pods.node_schedulable(_node(True, [pods.NOT_READY_TAINT]))
    assert not pods.node_schedulable(_node(False))


class FakeCluster:
    """Stands in for harness.objects.Cluster: Pods of one Job, Nodes by name, and the patches it got."""

    def __init__(self, pod_list: list[dict[str, Any]] = (), nodes: dict[str, list[dict[str, Any]]] | None = None):
        self.pod_list, self.patches, self.created = list(pod_list), [], []
        self.node_states = nodes or {}
        self.core = types.SimpleNamespace(patch_namespaced_pod=lambda name, ns, body: self.patches.append((name, ns, body)))

    def pods_of_job(self, namespace: str, job: str) -> list[dict[str, Any]]:
        return self.pod_list

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.created.append(obj)
        return obj

    def node(self, name: str) -> dict[str, Any]:
        states = self.node_states[name]
        return states.pop(0) if len(states) > 1 else states[0]


def test_finish_job_pods_annotates_the_unfinished_pods_only() -> None:
    c = FakeCluster([_pod("a", "Running", True), _pod("b", "Pending"), _pod("c", "Succeeded"), _pod("d", "Failed")])
    assert pods.finish_job_pods(c, "ns", "job1", "Failed") == ["a", "b"]
    assert c.patches == [(n, "ns", {"metadata": {"annotations": {o.FINISH_ANNOTATION: "Failed"}}}) for n in ("a", "b")]
    c.patches.clear()
    assert pods.finish_job_pods(c, "ns", "job1", only=lambda p: p["metadata"]["name"] == "b") == ["b"]
    with pytest.raises(ValueError):
        pods.finish_job_pods(c, "ns", "job1", "Done")


def test_create_nodes_waits_for_managed_nodes_only() -> None:
    c = FakeCluster(nodes={"a": [_node(False), _node(True, [pods.NOT_READY_TAINT]), _node(True)]})
    out = pods.create_nodes(c, [o.node("a"), o.node("u").unmanaged()], timeout=5)
    assert [n["metadata"]["name"] for n in c.created] == ["a", "u"]
    assert pods.node_schedulable(out[0])


def test_create_nodes_timeout_says_what_the_node_showed() -> None:
    c = FakeCluster(nodes={"a": [_node(True, [pods.NOT_READY_TAINT])]})
    with pytest.raises(WaitTimeout, match=r"a: ready=True, taints=\['node.kubernetes.io/not-ready'\]"):
        pods.create_nodes(c, [o.node("a")], timeout=0.3)


# --- the pods marker ---------------------------------------------------------------------------------------


def _item(*args: Any, **kwargs: Any) -> Any:
    marker = types.SimpleNamespace(args=args, kwargs=kwargs)
    return types.SimpleNamespace(nodeid="t.py::test_x", get_closest_marker=lambda name: marker if name == "pods" else None)


def test_pods_marker() -> None:
    assert _pods_nodes(types.SimpleNamespace(nodeid="x", get_closest_marker=lambda name: None)) is None
    assert [n.name for n in _pods_nodes(_item())] == ["node-1"]
    assert [n.name for n in _pods_nodes(_item(nodes=[o.node("a"), o.node("b")]))] == ["a", "b"]
    assert _pods_nodes(_item(nodes=[])) == []
    for bad, msg in ((_item(o.node("a")), "one keyword"), (_item(nodes=["a"]), "list of harness.objects.node"),
                     (_item(nodes=[o.node("a"), o.node("a")]), "named alike"), (_item(node=[]), "one keyword")):
        with pytest.raises(pytest.UsageError, match=msg):
            _pods_nodes(bad)


def test_reported_version_and_info(tmp_path: Path) -> None:
    sched, kwok = tmp_path / "ks", tmp_path / "kwok"
    sched.write_text("#!/bin/sh\necho 'Kubernetes v1.35.4'\n")
    kwok.write_text("#!/bin/sh\necho 'kwok version v0.8.0 go1.26.8 (linux/amd64)'\n")
    for b in (sched, kwok):
        b.chmod(0o755)
    part = pods.PodsPart(sched, kwok, {"kube_scheduler": pods.reported_version(sched),
                                       "kwok": pods.reported_version(kwok)})
    assert part.info() == {"kube_scheduler": "v1.35.4", "kwok": "v0.8.0",
                           "binaries": {"kube_scheduler": str(sched), "kwok": str(kwok)}}
    assert pods.reported_version(tmp_path / "missing") == ""


def test_report_names_kube_scheduler_and_kwok_only_when_pods_ran() -> None:
    from harness import report

    meta = {"case": "c::t", "verdict": "passed", "namespace": "ns", "prefix": "ns", "kubernetes_version": "v1.35.4"}
    history = [{"ts": 1.0, "source": "harness", "event": "case_started", "case": "c::t", "namespace": "ns"}]
    with_pods, _, _ = report.render_report({**meta, "pods": {"kube_scheduler": "v1.35.4", "kwok": "v0.8.0"}}, history, {})
    without, _, _ = report.render_report({**meta, "pods": None}, history, {})
    assert "| Pods that run | kube-scheduler v1.35.4, kwok v0.8.0 |" in with_pods
    assert "Pods that run" not in without


def test_the_case_pods_taint_is_added_once_and_removed_alone() -> None:
    from harness.env.pods import CASE_PODS_TAINT, tainted

    other = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    on = tainted([other], True)
    assert on == [other, CASE_PODS_TAINT]
    assert tainted(on, True) is None  # already there: no patch
    assert tainted(on, False) == [other]
    assert tainted([other], False) is None and tainted(None, False) is None
    assert tainted(None, True) == [CASE_PODS_TAINT]


def test_kwok_takes_the_pod_cidr_it_is_given() -> None:
    from pathlib import Path

    from harness.env.pods import POD_CIDR, kwok_argv

    assert f"--cidr={POD_CIDR}" in kwok_argv(Path("kwok"), Path("k"), [], 1)
    assert "--cidr=10.250.0.0/16" in kwok_argv(Path("kwok"), Path("k"), [], 1, cidr="10.250.0.0/16")
