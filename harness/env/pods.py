"""Pods that run, optional per environment: kube-scheduler (k8s.io/kubernetes, the pinned version) binds
Pods to fake Nodes that kwok (sigs.k8s.io/kwok, its controller binary) manages; kwok marks the Pods on its
Nodes Running and Ready, and finishes them on demand.

Started lazily, the first time a case asks (`@pytest.mark.pods`) or with `kueue-harness up --pods`, and
kept for the environment's life: cases without Pods start exactly as before. Both talk to kube-apiserver
directly (never through the fault proxy), each with its own static token.

What kwok does, by Stage (kwok.x-k8s.io/v1alpha1, read from kwok's own module at the version built):
  node-initialize, node-heartbeat  a Node annotated `kwok.x-k8s.io/node: fake` turns Ready and stays so
  pod-ready                        a Pod bound to such a Node turns Running, Ready and ContainersReady
  pod-delete                       a Pod being deleted is removed (there is no kubelet to finish it)
and two Stages of the harness's own instead of kwok's pod-complete (which ends every Job Pod at once):
  a Running Pod annotated `kueue-harness.x-k8s.io/finish: Succeeded` (or `Failed`) ends in that phase,
  its containers terminated with exit code 0 (or 1). The annotation may be set any time; a Pending Pod
  first turns Running, then finishes. `finish_job_pods()` sets it on a Job's Pods.
"""

from __future__ import annotations

import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common.errors import HarnessError
from harness.kueue import versions
from harness.objects import FINISH_ANNOTATION, KWOK_NODE_ANNOTATION

#: kwok's own Stages the harness loads, as paths in kwok's module (kustomize/stage/, kwok v0.8.0).
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat/node-heartbeat.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
#: Phases a Pod can be finished in, with the exit code and reason its containers end with (what a kubelet
#: reports for a container that exited: pkg/kubelet/kuberuntime; "Completed" for 0, "Error" otherwise).
FINISH_PHASES = {"Succeeded": (0, "Completed"), "Failed": (1, "Error")}
#: Pod IPs kwok hands out (not the Service CIDR 10.0.0.0/24 of harness/env/local.py, which is kwok's default).
POD_CIDR = "10.244.0.0/16"


def kwok_source(version: str = versions.KWOK_VERSION) -> Path:
    """A folder holding kwok's `kustomize/stage/`: $KUEUE_HARNESS_KWOK_SOURCE, else kwok's Go module at
    `version` in GOMODCACHE (downloaded through the module proxy when absent). Raises HarnessError (no Go),
    BuildError (not downloadable)."""
    override = os.environ.get("KUEUE_HARNESS_KWOK_SOURCE")
    if override:
        return Path(override)
    from harness.build import binaries

    return binaries._module_dir(binaries.go_binary(), "sigs.k8s.io/kwok", version)


def kwok_stage_files(source: Path) -> list[Path]:
    """kwok's own Stage files (KWOK_STAGES) under `source`. Raises HarnessError naming the missing ones."""
    files = [source / rel for rel in KWOK_STAGES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise HarnessError(f"kwok's Stage files are missing: {', '.join(missing)}. Point KUEUE_HARNESS_KWOK_SOURCE "
                           f"at a kwok {versions.KWOK_VERSION} tree, or unset it to use kwok's Go module")
    return files


def finish_stage(phase: str) -> dict[str, Any]:
    """The harness's Stage that ends a Running Pod annotated FINISH_ANNOTATION=`phase` ("Succeeded" or
    "Failed") in that phase: every container terminated (exit code and reason of FINISH_PHASES), Ready and
    ContainersReady False with reason PodCompleted (as a kubelet reports a finished Pod). Raises ValueError
    for another phase."""
    if phase not in FINISH_PHASES:
        raise ValueError(f"a Pod can be finished as {' or '.join(FINISH_PHASES)}, not {phase!r}")
    code, reason = FINISH_PHASES[phase]
    # kwok's template language is Go's text/template with sprig (kwok pkg/utils/gotpl); `.` is the Pod.
    template = (
        "{{ $now := Now }}\n"
        "conditions:\n"
        "- type: Ready\n  status: \"False\"\n  reason: PodCompleted\n  lastTransitionTime: {{ $now | Quote }}\n"
        "- type: ContainersReady\n  status: \"False\"\n  reason: PodCompleted\n"
        "  lastTransitionTime: {{ $now | Quote }}\n"
        "containerStatuses:\n"
        "{{ range .spec.containers }}\n"
        "- name: {{ .name | Quote }}\n  image: {{ .image | Quote }}\n  ready: false\n  started: false\n"
        "  restartCount: 0\n  state:\n    terminated:\n"
        f"      exitCode: {code}\n      reason: {reason}\n"
        "      startedAt: {{ $now | Quote }}\n      finishedAt: {{ $now | Quote }}\n"
        "{{ end }}\n"
        f"phase: {phase}\n"
    )
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": f"kueue-harness-pod-{phase.lower()}"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchAnnotations": {FINISH_ANNOTATION: phase},
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                ],
            },
            "next": {"statusTemplate": template},
        },
    }


def kwok_config() -> str:
    """The harness's kwok config file: its finish Stages (finish_stage), as multi-document YAML. No
    KwokConfiguration: kwok applies its defaults only when none is given (pkg/config/vars.go
    GetKwokConfiguration; a partial one leaves e.g. podPlayStageParallelism 0, which kwok refuses), so its
    options are flags (kwok_argv)."""
    return yaml.safe_dump_all([finish_stage(p) for p in FINISH_PHASES], sort_keys=False)


def kwok_argv(kwok: Path, kubeconfig: Path, configs: list[Path], port: int, cidr: str = POD_CIDR) -> list[str]:
    """kwok managing the Nodes annotated KWOK_NODE_ANNOTATION=fake, /healthz on 127.0.0.1:`port` (plain
    HTTP), its Stages from `configs` (each a file of Stage documents or a KwokConfiguration), handing out
    Pod IPs from `cidr`. kwok (v0.8.0) has no --context: it uses the kubeconfig's current context."""
    key, value = KWOK_NODE_ANNOTATION
    return [str(kwok), f"--kubeconfig={kubeconfig}", f"--manage-nodes-with-annotation-selector={key}={value}",
            f"--server-address=127.0.0.1:{port}", f"--cidr={cidr}", "--node-ip=10.240.0.1",
            *[f"--config={c}" for c in configs]]


#: The taint that keeps the Pods of a case with Nodes off a cluster's real Nodes while the case runs
#: (InClusterEnvironment.keep_pods_on_case_nodes): kwok's Nodes then take them, as on the local target.
CASE_PODS_TAINT = {"key": "kueue-harness.x-k8s.io/case-pods-on-kwok", "value": "true", "effect": "NoSchedule"}


def tainted(taints: list[dict[str, Any]] | None, on: bool) -> list[dict[str, Any]] | None:
    """A Node's `spec.taints` with CASE_PODS_TAINT added (`on`) or removed; None when nothing changes."""
    taints = list(taints or [])
    has = any(t.get("key") == CASE_PODS_TAINT["key"] for t in taints)
    if on and not has:
        return [*taints, dict(CASE_PODS_TAINT)]
    if not on and has:
        return [t for t in taints if t.get("key") != CASE_PODS_TAINT["key"]]
    return None


def scheduler_argv(scheduler: Path, kubeconfig: Path, port: int, cert: Path, key: Path) -> list[str]:
    """kube-scheduler with its default profile, no leader election, serving /readyz on 127.0.0.1:`port`
    with the pair `cert`/`key` (issued by the run's CA, so the harness verifies it)."""
    return [str(scheduler), f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--bind-address=127.0.0.1",
            f"--secure-port={port}", f"--tls-cert-file={cert}", f"--tls-private-key-file={key}",
            "--profiling=false", "--v=2"]


@dataclass
class PodsPart:
    """The running Pods part of one environment: what ran (`versions`: component → version string, as
    each binary reports it) and how long its start took (`seconds`)."""

    scheduler: Path
    kwok: Path
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def info(self) -> dict[str, Any]:
        """For summary.json / bundle.json: {"kube_scheduler": version, "kwok": version, "binaries": {...}}."""
        return {**self.versions, "binaries": {"kube_scheduler": str(self.scheduler), "kwok": str(self.kwok)}}


def reported_version(binary: Path, timeout: float = 10) -> str:
    """The version `binary --version` prints ("Kubernetes v1.35.4" → "v1.35.4"; kwok's own line as is, its
    last word when that looks like a version); "" when it prints nothing usable."""
    import subprocess

    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).strip().splitlines()
    return _version_word(text[0]) if text else ""


def _version_word(line: str) -> str:
    """The first word of `line` that looks like a version ("v1.35.4", "0.8.0" → "v0.8.0"), else `line`."""
    for word in line.replace(",", " ").split():
        w = word.strip()
        if w[:1] == "v" and w[1:2].isdigit():
            return w
        if w[:1].isdigit() and w.count(".") >= 2:
            return "v" + w
    return line.strip()


def http_ok(url: str, context: ssl.SSLContext | None = None, timeout: float = 2) -> bool:
    """True when GET `url` answers 200 (False on a refused connection or any other status)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def finish_job_pods(cluster: Any, namespace: str, job: str, phase: str = "Succeeded",
                    only: Callable[[dict[str, Any]], bool] | None = None) -> list[str]:
    """Finish the Pods of batch/v1 Job `namespace`/`job` on demand: annotate each Pod that is not finished
    yet with FINISH_ANNOTATION=`phase` ("Succeeded" or "Failed"); kwok's finish Stage then ends it (a Pending
    Pod when it runs). `cluster`: harness.objects.Cluster; `only`: a filter on the Pod (dict). Returns the
    names of the Pods annotated. Pods are found by the label the Job controller sets,
    `batch.kubernetes.io/job-name` (k8s pkg/controller/job). Raises ValueError for another phase."""
    if phase not in FINISH_PHASES:
        raise ValueError(f"a Pod can be finished as {' or '.join(FINISH_PHASES)}, not {phase!r}")
    done = []
    for pod in cluster.pods_of_job(namespace, job):
        if (pod.get("status") or {}).get("phase") in FINISH_PHASES or (only and not only(pod)):
            continue
        cluster.core.patch_namespaced_pod(pod["metadata"]["name"], namespace,
                                          {"metadata": {"annotations": {FINISH_ANNOTATION: phase}}})
        done.append(pod["metadata"]["name"])
    return done


def pod_running_and_ready(pod: dict[str, Any]) -> bool:
    """phase Running and condition Ready=True."""
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def node_ready(node: dict[str, Any]) -> bool:
    """condition Ready=True (kwok's node-initialize Stage sets it)."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


#: The taint kube-apiserver's TaintNodesByCondition admission puts on every new Node and kube-controller-
#: manager's node-lifecycle-controller lifts once the Node is Ready (k8s pkg/controller/nodelifecycle).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def node_schedulable(node: dict[str, Any]) -> bool:
    """Ready, and without the not-ready taint: kube-scheduler would place a Pod on it now (resources,
    the Node's own taints and spec.unschedulable aside)."""
    taints = (node.get("spec") or {}).get("taints") or []
    return node_ready(node) and not any(t.get("key") == NOT_READY_TAINT for t in taints)


def create_nodes(cluster: Any, nodes: list[Any], timeout: float = 30) -> list[dict[str, Any]]:
    """Create each Node (harness.objects.NodeBuilder or dict) and wait until every kwok-managed one is
    schedulable (node_schedulable; a Node built `.unmanaged()` is only created). `timeout` in seconds, for
    all of them. Returns the Nodes as read last. Raises WaitTimeout naming the Nodes not ready yet and
    what they showed (kwok and kube-controller-manager must be running: LocalEnvironment.start_pods())."""
    from harness.common.waiting import wait_for
    from harness.objects import _Builder

    docs = [n.obj() if isinstance(n, _Builder) else n for n in nodes]
    for d in docs:
        cluster.create(d)
    managed = [d["metadata"]["name"] for d in docs
               if (d["metadata"].get("annotations") or {}).get(KWOK_NODE_ANNOTATION[0]) == KWOK_NODE_ANNOTATION[1]]
    seen: dict[str, dict[str, Any]] = {}

    def all_schedulable() -> bool:
        for name in managed:
            seen[name] = cluster.node(name)
        return all(node_schedulable(seen[n]) for n in managed)

    def describe() -> str:
        def taints(n: str) -> list[str]:
            return [t.get("key", "") for t in (seen[n].get("spec") or {}).get("taints") or []]

        return "; ".join(f"{n}: ready={node_ready(seen[n])}, taints={taints(n)}"
                         for n in managed if n in seen and not node_schedulable(seen[n]))

    wait_for(all_schedulable, timeout=timeout, interval=0.05, describe=describe,
             what=f"Node(s) {', '.join(managed)} to be Ready and without the {NOT_READY_TAINT} taint")
    return [seen.get(d["metadata"]["name"], d) for d in docs]
