"""Unit tests for harness.build.binaries: generated Go build targets, overrides, Go discovery, version checks.

No real Go build runs here: the cache is a tmp dir, PATH holds only what a test puts there, and `_run_go`
fails the test if anything tries to invoke Go.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from harness.build import binaries
from harness.build import go as go_build
from harness.build import kueue as kueue_build
from harness.common.errors import HarnessError, UnservedVersion
from harness.kueue import versions

OVERRIDE_VARS = (
    "KUEUE_HARNESS_KUEUE_BINARY",
    "KUEUE_HARNESS_KUBE_APISERVER",
    "KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER",
    "KUEUE_HARNESS_ETCD",
    "KUEUE_HARNESS_KUBE_SCHEDULER",
    "KUEUE_HARNESS_KWOK",
)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cache in tmp, no overrides, no kubebuilder assets, an empty PATH, and no way to run Go."""
    for var in OVERRIDE_VARS + ("KUBEBUILDER_ASSETS", "KUEUE_HARNESS_KUEUE_SOURCE"):
        monkeypatch.delenv(var, raising=False)
    cache = tmp_path / "cache"
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(cache))
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    def no_go(*a, **kw):
        raise AssertionError("unit tests must not run Go")

    for mod in (go_build, binaries, kueue_build):
        monkeypatch.setattr(mod, "_run_go", no_go, raising=False)
        monkeypatch.setattr(mod, "_module_dir", no_go)
    return cache


def _script(path: Path, body: str = "exit 0", mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(mode)
    return path


def _fake_go(tmp_path: Path, goversion: str) -> Path:
    """A `go` on its own PATH dir that answers `go env GOVERSION`."""
    return _script(tmp_path / "fakego" / "go", f'[ "$1 $2" = "env GOVERSION" ] && echo {goversion}')


# --- target generation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["kube-apiserver", "kube-controller-manager", "kube-scheduler"])
def test_kubernetes_target_replaces_every_staging_module(cmd: str) -> None:
    t = binaries._kubernetes_target(cmd)
    kv, sv = versions.KUBERNETES_VERSION, versions.KUBERNETES_STAGING_VERSION
    assert t.name == cmd and t.version == kv
    assert re.search(rf"^require k8s\.io/kubernetes {re.escape(kv)}$", t.go_mod, re.M)
    block = re.search(r"^replace \(\n(.*?)\n\)", t.go_mod, re.S | re.M)
    assert block, t.go_mod
    replaces = re.findall(r"^\s*(\S+) => (\S+) (\S+)\s*$", block.group(1), re.M)
    assert len(replaces) == len(binaries.KUBERNETES_STAGING)
    assert {lhs for lhs, _, _ in replaces} == {f"k8s.io/{m}" for m in binaries.KUBERNETES_STAGING}
    for lhs, rhs, ver in replaces:
        assert rhs == lhs  # mapped to the tagged module itself, not a local path
        assert ver == sv
    assert t.go_mod.startswith("module ")
    assert "\ngo 1.25.0\n" in t.go_mod


def test_staging_list_has_core_modules_and_no_duplicates() -> None:
    staging = binaries.KUBERNETES_STAGING
    assert len(staging) == len(set(staging))
    for m in ("api", "apimachinery", "apiserver", "client-go", "component-base", "kube-aggregator",
              "controller-manager", "kms", "externaljwt"):
        assert m in staging


@pytest.mark.parametrize("cmd", ["kube-apiserver", "kube-controller-manager", "kube-scheduler"])
def test_kubernetes_target_ldflags_and_package(cmd: str) -> None:
    t = binaries._kubernetes_target(cmd)
    kv = versions.KUBERNETES_VERSION
    major, minor = kv.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    assert f"-X '{pkg}.gitVersion={kv}'" in t.ldflags
    assert f"-X '{pkg}.gitMajor={major}'" in t.ldflags
    assert f"-X '{pkg}.gitMinor={minor}'" in t.ldflags
    assert t.main_pkg == f"k8s.io/kubernetes/cmd/{cmd}"
    assert t.main_go is None
    assert t.main_pkg in t.imports


@pytest.mark.parametrize(
    ("target", "env"),
    [
        (lambda: binaries._kueue_target("v0.17.0"), "KUEUE_HARNESS_KUEUE_BINARY"),
        (lambda: binaries._kubernetes_target("kube-apiserver"), "KUEUE_HARNESS_KUBE_APISERVER"),
        (lambda: binaries._kubernetes_target("kube-controller-manager"), "KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER"),
        (lambda: binaries._etcd_target(), "KUEUE_HARNESS_ETCD"),
        (lambda: binaries._kubernetes_target("kube-scheduler"), "KUEUE_HARNESS_KUBE_SCHEDULER"),
        (lambda: binaries._kwok_target(), "KUEUE_HARNESS_KWOK"),
    ],
)
def test_override_env_names(target, env: str) -> None:
    assert target().override_env == env


@pytest.mark.parametrize("version", ["v0.17.0", "v0.17.1"])
def test_kueue_target(version: str) -> None:
    t = binaries._kueue_target(version)
    assert t.name == "kueue" and t.version == version
    assert re.search(rf"^require sigs\.k8s\.io/kueue {re.escape(version)}$", t.go_mod, re.M)
    assert f"-X 'sigs.k8s.io/kueue/pkg/version.GitVersion={version}'" in t.ldflags
    assert t.main_pkg == "sigs.k8s.io/kueue/cmd/kueue"
    assert t.main_pkg in t.imports


def test_kube_scheduler_shares_kube_apiservers_module_but_imports_only_itself() -> None:
    # The same go.mod (so the same module graph and Go build cache entries as kube-apiserver's build), while
    # kube-apiserver's and kube-controller-manager's tools.go stay as they were (their cached builds match).
    sched, api = binaries._kubernetes_target("kube-scheduler"), binaries._kubernetes_target("kube-apiserver")
    assert sched.go_mod == api.go_mod and sched.ldflags == api.ldflags
    assert sched.imports == ("k8s.io/kubernetes/cmd/kube-scheduler",)
    assert api.imports == ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager")


def test_kwok_target() -> None:
    t = binaries._kwok_target()
    assert t.name == "kwok" and t.version == versions.KWOK_VERSION
    assert re.search(rf"^require sigs\.k8s\.io/kwok {re.escape(versions.KWOK_VERSION)}$", t.go_mod, re.M)
    assert "\ngo 1.26.0\n" in t.go_mod  # kwok v0.8.0's own go.mod says go 1.26.0
    assert t.main_pkg == "sigs.k8s.io/kwok/cmd/kwok" and t.main_pkg in t.imports  # the controller, not kwokctl
    assert t.ldflags == ""


def test_pod_binaries_cached_are_reused_without_go(isolated: Path) -> None:
    for target, fn in ((binaries._kubernetes_target("kube-scheduler"), binaries.kube_scheduler),
                       (binaries._kwok_target(), binaries.kwok)):
        b = isolated / "bin" / f"{target.name}-{target.version}"
        b.parent.mkdir(parents=True, exist_ok=True)
        _script(b, "exit 0")
        assert fn() == b


def test_etcd_target() -> None:
    t = binaries._etcd_target()
    assert t.version == versions.ETCD_VERSION
    assert re.search(rf"^require go\.etcd\.io/etcd/server/v3 {re.escape(versions.ETCD_VERSION)}$", t.go_mod, re.M)
    assert t.main_pkg is None and t.main_go
    assert "package main" in t.main_go and "etcdmain.Main(os.Args)" in t.main_go


def test_tools_go() -> None:
    src = go_build._tools_go(("a.example/x", "b.example/y"))
    assert src.startswith("//go:build tools\n\npackage tools\n")
    assert '\t_ "a.example/x"\n' in src and '\t_ "b.example/y"\n' in src


# --- overrides and cache ----------------------------------------------------------------------------------


def test_override_executable_is_used_without_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                isolated: Path) -> None:
    exe = _script(tmp_path / "bin" / "my-kueue")
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_BINARY", str(exe))
    assert binaries.kueue("v0.17.0") == exe
    assert not isolated.exists()  # nothing built, nothing cached


@pytest.mark.parametrize("kind", ["not-executable", "missing", "directory"])
def test_override_not_executable_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    if kind == "not-executable":
        p = _script(tmp_path / "etcd", mode=0o644)
    elif kind == "missing":
        p = tmp_path / "nope"
    else:
        p = tmp_path / "adir"
        p.mkdir()
        p.chmod(0o755)
    monkeypatch.setenv("KUEUE_HARNESS_ETCD", str(p))
    with pytest.raises(HarnessError) as exc:
        binaries.etcd(progress=lambda s: None)
    assert "KUEUE_HARNESS_ETCD" in str(exc.value) and str(p) in str(exc.value)
    assert "not an executable" in str(exc.value)


def test_override_beats_kubebuilder_assets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assets = tmp_path / "assets"
    asset = _script(assets / "kube-apiserver")
    _script(assets / "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert binaries.kube_apiserver(lambda s: None) == asset
    assert binaries.etcd(lambda s: None) == assets / "etcd"
    mine = _script(tmp_path / "mine" / "kube-apiserver")
    monkeypatch.setenv("KUEUE_HARNESS_KUBE_APISERVER", str(mine))
    assert binaries.kube_apiserver(lambda s: None) == mine


def test_cached_binary_is_reused_without_go(isolated: Path) -> None:
    cached = _script(isolated / "bin" / f"kube-controller-manager-{versions.KUBERNETES_VERSION}")
    assert binaries.kube_controller_manager(lambda s: None) == cached


def test_build_without_go_raises_before_touching_cache(isolated: Path) -> None:
    with pytest.raises(HarnessError) as exc:
        binaries.kueue("v0.17.0", progress=lambda s: None)
    assert "Go is not on PATH" in str(exc.value)
    assert not (isolated / "build").exists() and not (isolated / "bin").exists()


def test_cache_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert binaries.cache_root() == tmp_path / "cache"
    monkeypatch.delenv("KUEUE_HARNESS_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert binaries.cache_root() == tmp_path / "home" / ".cache" / "kueue-harness"


def test_kueue_source_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_SOURCE", str(tmp_path / "src"))
    assert binaries.kueue_source("v0.17.0") == tmp_path / "src"


# --- Go discovery -----------------------------------------------------------------------------------------


def test_go_binary_missing_mentions_every_override() -> None:
    with pytest.raises(HarnessError) as exc:
        binaries.go_binary()
    msg = str(exc.value)
    assert "Go is not on PATH" in msg
    assert ".".join(map(str, versions.MIN_GO)) in msg
    for var in OVERRIDE_VARS:
        assert var in msg
    # ... and those are exactly the variables the targets honour.
    targets = [binaries._kueue_target("v0.17.0"), binaries._kubernetes_target("kube-apiserver"),
               binaries._kubernetes_target("kube-controller-manager"), binaries._etcd_target(),
               binaries._kubernetes_target("kube-scheduler"), binaries._kwok_target()]
    assert {t.override_env for t in targets} == set(OVERRIDE_VARS)


def test_go_binary_too_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = _fake_go(tmp_path, "go1.24.9")
    monkeypatch.setenv("PATH", str(go.parent))
    with pytest.raises(HarnessError) as exc:
        binaries.go_binary()
    assert "go1.24.9" in str(exc.value) and "1.25" in str(exc.value)


@pytest.mark.parametrize("goversion", ["go1.25.0", "go1.25.3", "go1.26rc1", "go2.0.0"])
def test_go_binary_new_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, goversion: str) -> None:
    go = _fake_go(tmp_path, goversion)
    monkeypatch.setenv("PATH", str(go.parent))
    assert binaries.go_binary() == str(go)


def test_go_binary_unparseable_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = _script(tmp_path / "fakego" / "go", "echo devel")
    monkeypatch.setenv("PATH", str(go.parent))
    with pytest.raises(HarnessError):
        binaries.go_binary()


# --- version checks ---------------------------------------------------------------------------------------


def test_kueue_unserved_version_raises_before_any_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        isolated: Path) -> None:
    go = _fake_go(tmp_path, "go1.25.0")
    monkeypatch.setenv("PATH", str(go.parent))
    calls = []
    monkeypatch.setattr(binaries, "build", lambda *a, **kw: calls.append(a) or Path("/nonexistent"))
    monkeypatch.setattr(binaries, "go_binary", lambda: calls.append("go") or str(go))
    with pytest.raises(UnservedVersion) as exc:
        binaries.kueue("v0.15.0", progress=lambda s: None)  # older than the oldest profile
    assert exc.value.exit_code == 3
    assert calls == []
    assert not isolated.exists()


def test_kueue_unserved_even_with_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_BINARY", str(_script(tmp_path / "k")))
    with pytest.raises(UnservedVersion):
        binaries.kueue("v0.15.0")


def test_ensure_all_unserved_raises_before_any_build(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("kueue", "kueue_source", "kube_apiserver", "kube_controller_manager", "etcd", "build"):
        monkeypatch.setattr(binaries, name, lambda *a, **kw: pytest.fail("built before the version check"))
    with pytest.raises(UnservedVersion):
        binaries.ensure_all("0.15.0")


def test_ensure_all_with_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = {}
    for var in OVERRIDE_VARS:
        paths[var] = _script(tmp_path / "bins" / var.lower())
        monkeypatch.setenv(var, str(paths[var]))
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_SOURCE", str(tmp_path / "src"))
    crd = tmp_path / "crd" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
    crd.parent.mkdir()
    crd.write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setenv("KUEUE_HARNESS_PROVISIONING_REQUEST_CRD", str(crd.parent))
    b = binaries.ensure_all("v0.17.1", progress=lambda s: None)
    assert b.extra_crds == (crd,)
    assert b.kueue == paths["KUEUE_HARNESS_KUEUE_BINARY"]
    assert b.kube_apiserver == paths["KUEUE_HARNESS_KUBE_APISERVER"]
    assert b.kube_controller_manager == paths["KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER"]
    assert b.etcd == paths["KUEUE_HARNESS_ETCD"]
    assert b.kueue_source == tmp_path / "src"
    for p in paths.values():
        assert os.stat(p).st_mode & stat.S_IXUSR
