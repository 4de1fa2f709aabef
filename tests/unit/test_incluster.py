"""Unit tests of the kind / kubeconfig targets' pure parts: the kubeconfig Kueue gets, the Deployment
patch and its undo, rollout status as kubectl reads it, kubeconfig parsing for the proxy's upstream, the
kind CLI argv, the kind network's gateway, and the manifests' install order. The same rendering is applied
to a real kube-apiserver in tests/integration/test_incluster_routing.py.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.env import kind
from harness.env import routing as ic

RELEASE_ARGS = ["--config=/controller_manager_config.yaml", "--zap-log-level=2"]


def _deployment(args=RELEASE_ARGS, annotations=None, generation=1, status=None):
    return {
        "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system",
                     "annotations": annotations or {}, "generation": generation},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "manager", "image": "registry.k8s.io/kueue/kueue:v0.17.0", "args": list(args)}]}}},
        "status": status or {},
    }


# ---- kubeconfig and Secret ---------------------------------------------------------------------------
def test_kubeconfig_points_at_proxy_with_its_ca_name_and_the_pod_token_file():
    cfg = ic.render_kubeconfig("https://172.18.0.1:41234", b"-----BEGIN CERTIFICATE-----\nX\n")
    cluster = cfg["clusters"][0]["cluster"]
    assert cluster["server"] == "https://172.18.0.1:41234"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"-----BEGIN CERTIFICATE-----\nX\n"
    assert cluster["tls-server-name"] == "kueue-harness-proxy"
    assert cfg["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    ctx = {c["name"]: c["context"] for c in cfg["contexts"]}[cfg["current-context"]]
    assert ctx == {"cluster": cfg["clusters"][0]["name"], "user": cfg["users"][0]["name"]}


def test_secret_carries_the_kubeconfig_and_no_credential():
    cfg = ic.render_kubeconfig("https://10.0.0.1:1", b"ca")
    sec = ic.render_secret("kueue-system", cfg, "run-1")
    assert sec["metadata"]["name"] == "kueue-harness-kubeconfig"
    assert sec["metadata"]["namespace"] == "kueue-system"
    assert sec["metadata"]["annotations"][ic.ANN_ROUTED_BY] == "run-1"
    assert yaml.safe_load(sec["stringData"]["kubeconfig"]) == cfg
    assert "token:" not in sec["stringData"]["kubeconfig"]


# ---- args and patches --------------------------------------------------------------------------------
@pytest.mark.parametrize("original, expected", [
    (RELEASE_ARGS, ["--config=/controller_manager_config.yaml",
                    "--kubeconfig=/etc/kueue-harness/kubeconfig", "--zap-log-level=3"]),
    (["--zap-log-level", "2", "--kubeconfig", "/old", "--feature-gates=A=true"],
     ["--feature-gates=A=true", "--kubeconfig=/etc/kueue-harness/kubeconfig", "--zap-log-level=3"]),
    (None, ["--kubeconfig=/etc/kueue-harness/kubeconfig", "--zap-log-level=3"]),
    ([], ["--kubeconfig=/etc/kueue-harness/kubeconfig", "--zap-log-level=3"]),
])
def test_routed_args_set_kubeconfig_flag_and_log_level_once(original, expected):
    assert ic.routed_args(original) == expected
    assert ic.routed_args(ic.routed_args(original)) == expected  # idempotent


def test_patch_mounts_secret_and_records_original_args():
    p = ic.render_deployment_patch(RELEASE_ARGS, "run-7")
    assert json.loads(p["metadata"]["annotations"][ic.ANN_ORIGINAL_ARGS]) == RELEASE_ARGS
    assert p["metadata"]["annotations"][ic.ANN_ROUTED_BY] == "run-7"
    tmpl = p["spec"]["template"]
    assert tmpl["metadata"]["annotations"] == {ic.ANN_RUN: "run-7"}
    (c,) = tmpl["spec"]["containers"]
    assert c["name"] == "manager" and "--kubeconfig=/etc/kueue-harness/kubeconfig" in c["args"]
    assert c["volumeMounts"] == [{"name": "kueue-harness-kubeconfig", "mountPath": "/etc/kueue-harness",
                                  "readOnly": True}]
    assert tmpl["spec"]["volumes"] == [{"name": "kueue-harness-kubeconfig",
                                        "secret": {"secretName": "kueue-harness-kubeconfig", "defaultMode": 0o444}}]


def test_undo_patch_restores_args_and_deletes_by_merge_key():
    u = ic.render_undo_patch(RELEASE_ARGS)
    assert u["metadata"]["annotations"] == {ic.ANN_ROUTED_BY: None, ic.ANN_ORIGINAL_ARGS: None,
                                            ic.ANN_ORIGINAL_PLACEMENT: None, ic.ANN_ORIGINAL_STRATEGY: None}
    assert u["spec"]["template"]["metadata"]["annotations"] == {ic.ANN_RUN: None}
    (c,) = u["spec"]["template"]["spec"]["containers"]
    assert c["args"] == RELEASE_ARGS
    assert c["volumeMounts"] == [{"$patch": "delete", "mountPath": "/etc/kueue-harness"}]
    assert u["spec"]["template"]["spec"]["volumes"] == [{"$patch": "delete", "name": "kueue-harness-kubeconfig"}]
    assert ic.render_undo_patch(None)["spec"]["template"]["spec"]["containers"][0]["args"] is None


def test_routed_kueue_tolerates_the_case_pods_taint_and_stays_on_its_node_and_undo_restores_that():
    from harness.env.pods import CASE_PODS_TAINT

    own = {"key": "dedicated", "operator": "Equal", "value": "kueue", "effect": "NoSchedule"}
    original = {"tolerations": [own], "nodeSelector": {"pool": "system"}}
    p = ic.render_deployment_patch(RELEASE_ARGS, "run-7", placement=(original, "kind-control-plane"))
    spec = p["spec"]["template"]["spec"]
    assert spec["tolerations"] == [own, {"key": CASE_PODS_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "kind-control-plane"}  # merged with pool=system
    assert json.loads(p["metadata"]["annotations"][ic.ANN_ORIGINAL_PLACEMENT]) == original
    # Applied twice (an earlier run's routing kept): our toleration once.
    again = ic.routed_placement({"tolerations": spec["tolerations"]}, None)
    assert again["tolerations"] == spec["tolerations"] and "nodeSelector" not in again
    u = ic.render_undo_patch(RELEASE_ARGS, placement=original)["spec"]["template"]["spec"]
    assert u["tolerations"] == [own] and u["nodeSelector"] == {"kubernetes.io/hostname": None}
    u = ic.render_undo_patch(RELEASE_ARGS, placement={"tolerations": None, "nodeSelector": None})["spec"]["template"]["spec"]
    assert u["tolerations"] is None and u["nodeSelector"] == {"kubernetes.io/hostname": None}
    assert "tolerations" not in ic.render_undo_patch(RELEASE_ARGS)["spec"]["template"]["spec"]  # routed before this


def test_routed_kueue_runs_without_leader_election_and_rolls_out_recreate():
    """Kueue's Lease renewals went through the proxy (one kubeconfig for all its traffic) and timed out at load
    25-31: Kueue exited, "leader election lost". Routed, it runs with leaderElect false and Recreate (never two
    Kueue Pods side by side); the undo puts both back."""
    release = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nleaderElection:\n  leaderElect: true\n" \
              "  resourceName: c1f6bfd2.kueue.x-k8s.io\n"
    from harness.env.routed_kueue import routed_config

    routed = yaml.safe_load(routed_config(release))
    assert routed["leaderElection"] == {"leaderElect": False, "resourceName": "c1f6bfd2.kueue.x-k8s.io"}
    assert routed_config(routed_config(release)) is None  # off already: nothing to change
    assert yaml.safe_load(routed_config(""))["leaderElection"] == {"leaderElect": False}
    assert routed_config("- not a mapping") is None
    own = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    p = ic.render_deployment_patch(RELEASE_ARGS, "run-7", strategy=own)
    assert p["spec"]["strategy"] == {"type": "Recreate", "rollingUpdate": None}
    assert json.loads(p["metadata"]["annotations"][ic.ANN_ORIGINAL_STRATEGY]) == own
    assert ic.render_undo_patch(RELEASE_ARGS, strategy=own)["spec"]["strategy"] == own
    assert ic.render_undo_patch(RELEASE_ARGS, strategy={})["spec"]["strategy"] == {"type": "RollingUpdate",
                                                                                   "rollingUpdate": None}
    dep = _deployment()
    dep["spec"]["strategy"] = own
    assert ic.original_strategy(dep) == own
    dep["metadata"]["annotations"] = {ic.ANN_ORIGINAL_STRATEGY: json.dumps({"type": "Recreate"})}
    assert ic.original_strategy(dep) == {"type": "Recreate"}  # routed already: the annotation's


def test_original_args_come_from_the_annotation_of_a_routed_deployment():
    plain = _deployment()
    assert ic.original_args(plain) == RELEASE_ARGS
    routed = _deployment(args=ic.routed_args(RELEASE_ARGS),
                         annotations={ic.ANN_ORIGINAL_ARGS: json.dumps(RELEASE_ARGS)})
    assert ic.original_args(routed) == RELEASE_ARGS
    assert ic.original_args(_deployment(annotations={ic.ANN_ORIGINAL_ARGS: "null"})) is None


def test_container_of_names_the_missing_container():
    d = _deployment()
    d["spec"]["template"]["spec"]["containers"][0]["name"] = "kueue"
    with pytest.raises(HarnessError, match="no container 'manager'.*kueue"):
        ic.container_of(d)


# ---- rollout status ----------------------------------------------------------------------------------
@pytest.mark.parametrize("generation, status, done, words", [
    (2, {"observedGeneration": 1}, False, "spec update to be observed"),
    (2, {"observedGeneration": 2, "updatedReplicas": 0, "replicas": 1}, False, "0 out of 1 new replicas"),
    (2, {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 2, "availableReplicas": 1}, False,
     "1 old replicas are pending termination"),
    (2, {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 1, "availableReplicas": 0}, False,
     "0 of 1 updated replicas are available"),
    (2, {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 1, "availableReplicas": 1}, True,
     "successfully rolled out"),
])
def test_rollout_status_reads_like_kubectl(generation, status, done, words):
    got_done, msg = ic.rollout_status(_deployment(generation=generation, status=status))
    assert got_done is done and words in msg


def test_rollout_progress_deadline_is_an_error():
    st = {"observedGeneration": 1, "conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": 'ReplicaSet "x" has timed out progressing.'}]}
    with pytest.raises(EnvironmentNotReady, match="progress deadline"):
        ic.rollout_status(_deployment(status=st))


@pytest.mark.parametrize("image, version", [
    ("registry.k8s.io/kueue/kueue:v0.17.0", "v0.17.0"),
    ("registry.k8s.io/kueue/kueue:v0.17.4@sha256:" + "a" * 64, "v0.17.4"),
    ("us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue:main", None),
    ("localhost:5000/kueue", None),
])
def test_image_version(image, version):
    assert ic.image_version(image) == version


# ---- kubeconfig parsing (the proxy's upstream) -------------------------------------------------------
def _kubeconfig(tmp_path, cluster: dict, name="kind-x"):
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "clusters": [{"name": name, "cluster": cluster}],
           "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
           "users": [{"name": name, "user": {"token": "t"}}]}
    p = tmp_path / "config"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_upstream_from_kind_kubeconfig(tmp_path):
    p = _kubeconfig(tmp_path, {"server": "https://127.0.0.1:39211/",
                               "certificate-authority-data": base64.b64encode(b"CA").decode()})
    up = ic.upstream_from_kubeconfig(p)
    assert up == ic.Upstream("https://127.0.0.1:39211", b"CA")


def test_upstream_ca_file_relative_to_kubeconfig(tmp_path):
    (tmp_path / "ca.crt").write_bytes(b"FILECA")
    p = _kubeconfig(tmp_path, {"server": "https://h:6443", "certificate-authority": "ca.crt"})
    assert ic.upstream_from_kubeconfig(p).ca_pem == b"FILECA"
    p = _kubeconfig(tmp_path, {"server": "https://h:6443"})
    assert ic.upstream_from_kubeconfig(p).ca_pem is None  # system trust store


@pytest.mark.parametrize("cluster, words", [
    ({"server": "https://h", "insecure-skip-tls-verify": True}, "insecure-skip-tls-verify"),
    ({"server": "https://10.0.0.1", "tls-server-name": "kubernetes"}, "tls-server-name"),
    ({}, "no cluster with a server"),
])
def test_upstream_setups_the_proxy_cannot_verify(tmp_path, cluster, words):
    with pytest.raises(HarnessError, match=words):
        ic.upstream_from_kubeconfig(_kubeconfig(tmp_path, cluster))


def test_upstream_unknown_context(tmp_path):
    p = _kubeconfig(tmp_path, {"server": "https://h"})
    with pytest.raises(HarnessError, match="no context 'other'.*kind-x"):
        ic.upstream_from_kubeconfig(p, "other")


def test_listen_host_cannot_be_guessed_over_loopback():
    with pytest.raises(HarnessError, match="--proxy-listen-host"):
        ic.guess_listen_host("https://127.0.0.1:6443")


# ---- kind --------------------------------------------------------------------------------------------
def test_kind_create_never_writes_the_users_kubeconfig(tmp_path):
    argv = kind.kind_create_argv("kind", "kueue-harness", tmp_path / "k", image="kindest/node:v1.35.0")
    assert argv[:5] == ["kind", "create", "cluster", "--name", "kueue-harness"]
    assert argv[argv.index("--kubeconfig") + 1] == str(tmp_path / "k")
    assert argv[argv.index("--image") + 1] == "kindest/node:v1.35.0"
    assert "--image" not in kind.kind_create_argv("kind", "c", tmp_path / "k")


def test_gateway_of_docker_kind_network_prefers_ipv4():
    docker = json.dumps([{"Name": "kind", "IPAM": {"Driver": "default", "Config": [
        {"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"},
        {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}]}}])
    assert kind.gateway_from_inspect(docker) == "172.18.0.1"


def test_gateway_without_gateway_field_is_the_subnets_first_address():
    docker = json.dumps([{"Name": "kind", "IPAM": {"Config": [{"Subnet": "172.19.0.0/16"}]}}])
    assert kind.gateway_from_inspect(docker) == "172.19.0.1"


def test_gateway_of_podman_network():
    podman = json.dumps([{"name": "kind", "subnets": [{"subnet": "10.89.0.0/24", "gateway": "10.89.0.1"}]}])
    assert kind.gateway_from_inspect(podman) == "10.89.0.1"
    assert kind.gateway_from_inspect(json.dumps([{"name": "kind", "subnets": []}])) is None


def test_manifests_source():
    assert kind.manifests_source("v0.17.4") == \
        "https://github.com/kubernetes-sigs/kueue/releases/download/v0.17.4/manifests.yaml"
    assert kind.manifests_source("v0.17.4", "/tmp/m.yaml") == "/tmp/m.yaml"
    with pytest.raises(HarnessError, match="release tag"):
        kind.manifests_source("main")


def test_load_manifests_from_file_and_install_order(tmp_path):
    f = tmp_path / "manifests.yaml"
    f.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "kueue-system"}},
        None,
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "c"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "kueue-system"}},
    ]))
    docs = kind.load_manifests(str(f))
    assert [[d["kind"] for d in phase] for phase in kind.install_order(docs)] == [
        ["Namespace"], ["CustomResourceDefinition"], ["ServiceAccount", "Deployment"]]


def test_load_manifests_without_deployment_is_refused(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(HarnessError, match="no Deployment"):
        kind.load_manifests(str(f))
    with pytest.raises(HarnessError, match="cannot read"):
        kind.load_manifests(str(tmp_path / "absent.yaml"))


def test_kind_missing_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("KUEUE_HARNESS_KIND", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path))
    with pytest.raises(HarnessError, match="go install sigs.k8s.io/kind@v0.33.0"):
        kind.kind_binary()


def test_kind_installed_by_the_harness_is_found_in_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("KUEUE_HARNESS_KIND", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path))
    k = tmp_path / "bin" / f"kind-{kind.KIND_VERSION}" / "kind"
    k.parent.mkdir(parents=True)
    k.write_text("#!/bin/sh\n")
    assert kind.kind_binary() == str(k)


def test_kind_create_passes_the_cluster_config(tmp_path):
    argv = kind.kind_create_argv("kind", "c", tmp_path / "k", image="kueue-harness/node:x", config=tmp_path / "c.yaml")
    assert argv[argv.index("--config") + 1] == str(tmp_path / "c.yaml")
