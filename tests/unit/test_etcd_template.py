"""Unit tests for harness.env.etcd_template (keys, lookup, atomic store, sparse copies, pruning) and the
pure parts of the local environment's start from a template (discovery check, kube-apiserver flags).
No process is started here."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.env import etcd_template as et


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KUEUE_HARNESS_ETCD_TEMPLATE", raising=False)
    return tmp_path / "cache"


def _inputs(tmp_path: Path) -> dict:
    bases = tmp_path / "kueue" / "config" / "components" / "crd" / "bases"
    bases.mkdir(parents=True, exist_ok=True)
    (bases / "a.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: as.x}\n")
    (bases / "b.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: bs.x}\n")
    for name in ("kube-apiserver", "etcd"):
        (tmp_path / name).write_bytes(b"binary")
    return {"crds": et.crd_files(tmp_path / "kueue"), "kube_apiserver": tmp_path / "kube-apiserver",
            "etcd": tmp_path / "etcd", "kubernetes_version": "v1.35.4", "etcd_version": "v3.6.5",
            "settings": "--service-cluster-ip-range=10.0.0.0/24"}


def test_key_is_stable_and_changes_with_every_input(tmp_path: Path) -> None:
    i = _inputs(tmp_path)
    k = et.key(**i)
    assert k == et.key(**i) and len(k) == 24
    assert [f.name for f in i["crds"]] == ["a.yaml", "b.yaml"]
    assert et.key(**{**i, "kubernetes_version": "v1.35.5"}) != k
    assert et.key(**{**i, "etcd_version": "v3.6.6"}) != k
    assert et.key(**{**i, "settings": "--service-cluster-ip-range=10.0.1.0/24"}) != k
    i["crds"][0].write_text(i["crds"][0].read_text() + "# changed\n")  # another Kueue build's CRDs
    k2 = et.key(**i)
    assert k2 != k
    os.utime(i["kube_apiserver"], ns=(1, 1))  # a rebuilt kube-apiserver binary
    assert et.key(**i) != k2
    os.utime(i["etcd"], ns=(2, 2))
    assert et.key(**i) != k2


def test_enabled_by_default_and_off_by_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert et.enabled()
    for off in ("0", "false", "No", "off"):
        monkeypatch.setenv("KUEUE_HARNESS_ETCD_TEMPLATE", off)
        assert not et.enabled()
    monkeypatch.setenv("KUEUE_HARNESS_ETCD_TEMPLATE", "1")
    assert et.enabled()


def _fake_etcd_data(d: Path) -> Path:
    (d / "member" / "wal").mkdir(parents=True)
    (d / "member" / "snap").mkdir(parents=True)
    with open(d / "member" / "wal" / "0.wal", "wb") as f:
        f.write(b"records" * 1000)
        f.truncate(8 * 1024 * 1024)  # preallocated tail: zeros
    (d / "member" / "snap" / "db").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    return d


def _same_tree(a: Path, b: Path) -> None:
    fa = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert fa == sorted(p.relative_to(b) for p in b.rglob("*"))
    for rel in fa:
        if (a / rel).is_file():
            assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_store_find_and_copy_keep_content_and_holes(tmp_path: Path) -> None:
    src = _fake_etcd_data(tmp_path / "src")
    crds = [{"name": "as.x", "group": "x", "plural": "as", "versions": ["v1"]}]
    assert et.find("k1") is None
    t = et.store("k1", src, crds, {"why": "test"}, 1.5)
    assert t == et.find("k1") and t.crds == crds and t.data == et.root() / "k1" / "data"
    _same_tree(src, t.data)
    wal = t.data / "member" / "wal" / "0.wal"
    assert wal.stat().st_size == 8 * 1024 * 1024
    assert wal.stat().st_blocks * 512 < 2 * 1024 * 1024, "the zero tail was stored as data, not as a hole"
    run = tmp_path / "run" / "etcd-data"
    run.parent.mkdir()
    written = et.copy_data(t.data, run)
    _same_tree(src, run)
    assert written < 4 * 1024 * 1024  # the db and the WAL's records, not the 8 MB tail
    assert (run.stat().st_mode & 0o777) == 0o700 and (run / "member").stat().st_mode & 0o777 == 0o700
    assert (run / "member" / "snap" / "db").stat().st_mode & 0o777 == 0o600
    (run / "member" / "snap" / "db").write_bytes(b"run's own")  # a copy, not the template
    assert (t.data / "member" / "snap" / "db").read_bytes() == (src / "member" / "snap" / "db").read_bytes()
    with pytest.raises(FileExistsError):
        et.copy_data(t.data, run)


def test_incomplete_or_other_format_templates_are_not_found(tmp_path: Path) -> None:
    src = _fake_etcd_data(tmp_path / "src")
    et.store("k2", src, [], {}, 1.0)
    meta = et.root() / "k2" / "template.json"
    info = json.loads(meta.read_text())
    meta.write_text(json.dumps({**info, "format": et.FORMAT + 1}))
    assert et.find("k2") is None
    meta.write_text(json.dumps({**info, "key": "other"}))
    assert et.find("k2") is None
    meta.write_text("{not json")
    assert et.find("k2") is None
    (et.root() / "k3" / "data").mkdir(parents=True)  # no template.json: an interrupted store by hand
    assert et.find("k3") is None


def test_a_second_store_keeps_the_first_and_remove_drops_it(tmp_path: Path) -> None:
    a = _fake_etcd_data(tmp_path / "a")
    b = _fake_etcd_data(tmp_path / "b")
    first = et.store("k4", a, [{"name": "first"}], {}, 1.0)
    second = et.store("k4", b, [{"name": "second"}], {}, 1.0)
    assert second.crds == first.crds == [{"name": "first"}]
    assert not [p for p in et.root().iterdir() if p.name.startswith(".")], "temporary folders left behind"
    et.remove("k4")
    assert et.find("k4") is None and not (et.root() / "k4").exists()


def test_prune_drops_unused_templates_only(tmp_path: Path) -> None:
    src = _fake_etcd_data(tmp_path / "src")
    et.store("old", src, [], {}, 1.0)
    et.store("used", src, [], {}, 1.0)
    long_ago = time.time() - (et.PRUNE_DAYS + 1) * 86400
    os.utime(et.root() / "old" / "template.json", (long_ago, long_ago))
    os.utime(et.root() / "used" / "template.json", (long_ago, long_ago))
    assert et.find("used") is not None  # a lookup counts as a use
    et.store("new", src, [], {}, 1.0)
    assert et.find("old") is None and et.find("used") is not None and et.find("new") is not None


# ---- the local environment's side --------------------------------------------------------------------

def _env_with_discovery(monkeypatch: pytest.MonkeyPatch, answer: dict, legacy: dict | None = None):
    from harness.env import local

    env = object.__new__(local.LocalEnvironment)
    env.ports, env.admin_token, env.ca_file = {"apiserver": 1}, "t", Path("/nonexistent")
    calls = []

    def fake_get(url: str, token=None, timeout: float = 2, headers=None):
        calls.append((url, headers))
        if url.endswith("/apis"):
            return 200, json.dumps(answer).encode()
        gv = url.split("/apis/", 1)[1]
        return (200, json.dumps(legacy[gv]).encode()) if legacy and gv in legacy else (404, b"")

    monkeypatch.setattr(env, "_get", fake_get, raising=False)
    return env, calls


CRDS = [{"name": "clusterqueues.kueue.x-k8s.io", "group": "kueue.x-k8s.io", "plural": "clusterqueues",
         "versions": ["v1beta1", "v1beta2"]},
        {"name": "workloads.kueue.x-k8s.io", "group": "kueue.x-k8s.io", "plural": "workloads", "versions": ["v1beta2"]}]


def test_crds_served_reads_aggregated_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.env import local

    def agg(resources_by_version: dict[str, list[str]]) -> dict:
        return {"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [{"resource": "deployments"}]}]},
            {"metadata": {"name": "kueue.x-k8s.io"}, "versions": [
                {"version": v, "resources": [{"resource": r} for r in rs]} for v, rs in resources_by_version.items()]}]}

    env, calls = _env_with_discovery(monkeypatch, agg({"v1beta2": ["clusterqueues"], "v1beta1": ["clusterqueues"]}))
    missing: list[str] = []
    assert not env._crds_served(CRDS, missing)
    assert missing == ["workloads.kueue.x-k8s.io/v1beta2"]
    assert calls[0][1] == {"Accept": local._AGGREGATED_DISCOVERY}
    env, _ = _env_with_discovery(monkeypatch, agg({"v1beta2": ["clusterqueues", "workloads"], "v1beta1": ["clusterqueues"]}))
    assert env._crds_served(CRDS, missing) and missing == []


def test_crds_served_falls_back_to_per_group_version_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = {"kueue.x-k8s.io/v1beta2": {"resources": [{"name": "clusterqueues"}, {"name": "workloads"},
                                                       {"name": "workloads/status"}]}}
    env, calls = _env_with_discovery(monkeypatch, {"kind": "APIGroupList", "groups": []}, legacy)
    missing: list[str] = []
    assert not env._crds_served(CRDS, missing)
    assert missing == ["clusterqueues.kueue.x-k8s.io/v1beta1"]
    legacy["kueue.x-k8s.io/v1beta1"] = {"resources": [{"name": "clusterqueues"}]}
    assert env._crds_served(CRDS, missing)


def test_apiserver_flags_take_the_pki_folder_and_extra_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.env import control_plane, local

    argv = local._apiserver_argv(Path("/bin/kas"), 2379, 6443, tmp_path, tmp_path / "ca.crt")
    assert argv[0] == "/bin/kas" and "--etcd-servers=http://127.0.0.1:2379" in argv and "--secure-port=6443" in argv
    assert f"--token-auth-file={tmp_path / 'tokens.csv'}" in argv
    assert f"--service-cluster-ip-range={local.SERVICE_CIDR}" in argv
    monkeypatch.setattr(control_plane, "APISERVER_EXTRA_FLAGS", ("--enable-priority-and-fairness=false", "--authorization-mode=AlwaysAllow"))
    argv = local._apiserver_argv(Path("/bin/kas"), 1, 2, tmp_path, tmp_path)
    assert argv[-2:] == ["--enable-priority-and-fairness=false", "--authorization-mode=AlwaysAllow"]
    assert "--authorization-mode=RBAC" not in argv  # an extra flag replaces, not appends to, the same flag
    monkeypatch.setattr(control_plane, "ETCD_EXTRA_FLAGS", ("--election-timeout=1000",))
    etcd = local._etcd_argv(Path("/bin/etcd"), tmp_path, 1, 2)
    assert etcd[-1] == "--election-timeout=1000" and "--election-timeout=100" not in etcd


def test_leaks_names_secrets_service_accounts_and_the_ca_configmap() -> None:
    stored = ["/registry/namespaces/default", "/registry/configmaps/kube-system/kube-apiserver-legacy-service-account-token-tracking",
              "/registry/apiextensions.k8s.io/customresourcedefinitions/workloads.kueue.x-k8s.io",
              "/registry/clusterroles/admin", "/registry/priorityclasses/system-node-critical"]
    assert et.leaks(stored) == []
    bad = ["/registry/secrets/kueue-system/webhook", "/registry/serviceaccounts/default/default",
           "/registry/configmaps/kube-system/extension-apiserver-authentication"]
    assert et.leaks(stored + bad) == bad


def test_prune_drops_templates_of_another_format(tmp_path: Path) -> None:
    src = _fake_etcd_data(tmp_path / "src")
    et.store("older", src, [], {}, 1.0)
    meta = et.root() / "older" / "template.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": et.FORMAT - 1}))
    et.store("current", src, [], {}, 1.0)
    assert not (et.root() / "older").exists() and et.find("current") is not None


def test_crd_files_add_the_extra_crds_after_kueues_and_none_without_kueues(tmp_path: Path) -> None:
    extra = (tmp_path / "autoscaling.x-k8s.io_provisioningrequests.yaml",)
    extra[0].write_text("kind: CustomResourceDefinition\nmetadata: {name: provisioningrequests.autoscaling.x-k8s.io}\n")
    assert et.crd_files(tmp_path / "empty", extra) == []  # a stand-in Kueue tree: nothing installed ahead
    i = _inputs(tmp_path)
    files = et.crd_files(tmp_path / "kueue", extra)
    assert [f.name for f in files] == ["a.yaml", "b.yaml", extra[0].name]
    assert et.key(**{**i, "crds": files}) != et.key(**i)  # the ProvisioningRequest CRD is part of the key


def test_provisioning_request_crds_from_the_module_folder(tmp_path: Path, monkeypatch) -> None:
    from harness.build import binaries
    from harness.common.errors import BuildError, HarnessError
    from harness.kueue import versions

    asked = []
    monkeypatch.setattr(binaries, "go_binary", lambda: "go")
    monkeypatch.setattr(binaries, "_module_dir", lambda go, m, v: asked.append((m, v)) or tmp_path)
    monkeypatch.delenv("KUEUE_HARNESS_PROVISIONING_REQUEST_CRD", raising=False)
    with pytest.raises(BuildError, match="no config/crd"):
        binaries.provisioning_request_crds()
    (tmp_path / "config" / "crd").mkdir(parents=True)
    (tmp_path / "config" / "crd" / "autoscaling.x-k8s.io_provisioningrequests.yaml").write_text("kind: x\n")
    assert [f.name for f in binaries.provisioning_request_crds()] == ["autoscaling.x-k8s.io_provisioningrequests.yaml"]
    assert asked[-1] == (versions.PROVISIONING_REQUEST_MODULE, versions.PROVISIONING_REQUEST_VERSION)
    def no_go():
        raise HarnessError("Go is not on PATH: install Go")

    said = []
    monkeypatch.setattr(binaries, "go_binary", no_go)
    assert binaries.provisioning_request_crds(said.append) == () and "no ProvisioningRequest CRD" in said[0]
    monkeypatch.setenv("KUEUE_HARNESS_PROVISIONING_REQUEST_CRD", "0")
    assert binaries.provisioning_request_crds() == ()
    monkeypatch.setenv("KUEUE_HARNESS_PROVISIONING_REQUEST_CRD", str(tmp_path / "nothing"))
    with pytest.raises(BuildError, match="neither a file nor a folder"):
        binaries.provisioning_request_crds()
