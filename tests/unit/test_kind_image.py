"""harness/env/kind_image.py and kueue_image.py without a container engine: the kind cluster configuration of
the offline node image, the node image's recipe (what kubelet and containerd are told), the Kueue image tag,
and Kueue's rendered manifests pointed at the image made here."""

from __future__ import annotations

import yaml

from harness.env import kind_image, kueue_image


def test_offline_cluster_config_has_no_default_cni_and_no_coredns():
    cfg = yaml.safe_load(kind_image.kind_config(offline=True))
    assert cfg["kind"] == "Cluster" and cfg["networking"]["disableDefaultCNI"] is True
    patch = yaml.safe_load(cfg["kubeadmConfigPatches"][0])
    assert patch == {"kind": "InitConfiguration", "skipPhases": ["preflight", "addon/coredns"]}
    assert "networking" not in yaml.safe_load(kind_image.kind_config(offline=False))


def test_node_recipe_carries_the_sandbox_and_cgroup_v1_settings():
    assert "restrict_oom_score_adj = true" in kind_image.CONTAINERD_CONFIG
    assert "--fail-cgroupv1=false" in kind_image.KUBELET_DEFAULTS
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.1"' in kind_image.CONTAINERD_CONFIG
    assert "3.10" in kind_image.PAUSE_TAGS  # the case builders' Pod image
    assert "Before=kubelet.service" in kind_image.IMAGES_UNIT
    subnet = yaml.safe_load(kind_image.CNI_CONFLIST)["plugins"][0]["ipam"]["ranges"][0][0]["subnet"]
    assert subnet.startswith(kind_image.POD_SUBNET.split("/")[0].rsplit(".", 2)[0])


def test_component_refs_are_kubeadms_names():
    refs = kind_image.component_refs()
    assert refs["kube-apiserver"] == "registry.k8s.io/kube-apiserver:v1.35.4"
    assert refs["etcd"] == "registry.k8s.io/etcd:3.6.6-0"


def test_kueue_image_tag_is_a_valid_docker_tag():
    assert kueue_image.image_tag("v0.17.0", "ab" * 32) == "kueue-harness/kueue:v0.17.0-abababababab"
    assert kueue_image.image_tag("v0.17.0+patch.1234abcd", "cd" * 32) == \
        "kueue-harness/kueue:v0.17.0_patch.1234abcd-cdcdcdcdcdcd"


def test_set_image_points_the_manager_at_the_local_image():
    docs = [{"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
        {"name": "manager", "image": "registry.k8s.io/kueue/kueue:v0.17.0", "imagePullPolicy": "Always"},
        {"name": "sidecar", "image": "x"}]}}}}, {"kind": "Service"}]
    assert kueue_image.set_image(docs, "kueue-harness/kueue:v0.17.0-abc") == 1
    c = docs[0]["spec"]["template"]["spec"]["containers"]
    assert c[0] == {"name": "manager", "image": "kueue-harness/kueue:v0.17.0-abc", "imagePullPolicy": "IfNotPresent"}
    assert c[1]["image"] == "x"
