"""The real components and their pinned versions (Kueue manager, kube-apiserver, kube-controller-manager,
etcd, kubectl; for Pods that run, kube-scheduler and kwok), each built from its Go module with the
machine's Go (harness/build/go.py) once per version into the cache; honours per-binary overrides.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.build import kueue as kueue_build
from harness.build.go import (  # noqa: F401 - the build machinery, used through this module too
    GoTarget,
    Progress,
    _default_progress,
    _module_dir,
    _run_go,
    _stale_packages,
    _tools_go,
    build,
    build_lock,
    go_binary,
    progress_line,
)
from harness.build.kueue import _kueue_target  # noqa: F401
from harness.common.errors import BuildError, HarnessError
from harness.common.paths import cache_root  # noqa: F401 - where builds and runs live
from harness.kueue import versions

# The staging modules k8s.io/kubernetes replaces with ./staging/src/... in its own go.mod; outside its
# repository each must be mapped to the tagged module at the matching v0.<minor>.<patch>.
KUBERNETES_STAGING = (
    "api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider "
    "cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api "
    "cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms "
    "kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics "
    "mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller"
).split()


def _kubernetes_target(cmd: str) -> GoTarget:
    kv, sv = versions.KUBERNETES_VERSION, versions.KUBERNETES_STAGING_VERSION
    replaces = "\n".join(f"\tk8s.io/{m} => k8s.io/{m} {sv}" for m in KUBERNETES_STAGING)
    go_mod = (
        "module kueueharness.local/build/kubernetes\n\ngo 1.25.0\n\n"
        f"require k8s.io/kubernetes {kv}\n\nreplace (\n{replaces}\n)\n"
    )
    major, minor = kv.lstrip("v").split(".")[:2]
    pkg = "k8s.io/component-base/version"
    ldflags = (
        f"-X '{pkg}.gitVersion={kv}' -X '{pkg}.gitMajor={major}' -X '{pkg}.gitMinor={minor}' "
        f"-X '{pkg}.gitTreeState=clean' -X '{pkg}.buildDate=1970-01-01T00:00:00Z'"
    )
    env = "KUEUE_HARNESS_" + cmd.upper().replace("-", "_")
    imports = ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager")
    if cmd not in ("kube-apiserver", "kube-controller-manager"):
        imports = (f"k8s.io/kubernetes/cmd/{cmd}",)  # (the first two keep their tools.go as it always was)
    return GoTarget(cmd, kv, go_mod, imports, f"k8s.io/kubernetes/cmd/{cmd}", None, ldflags, env)


_ETCD_MAIN = """// A few-line main around etcd's own entry point, so etcd builds from its Go module.
package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


def _etcd_target() -> GoTarget:
    ev = versions.ETCD_VERSION
    go_mod = (
        "module kueueharness.local/build/etcd\n\ngo 1.25.0\n\n"
        f"require go.etcd.io/etcd/server/v3 {ev}\n"
    )
    return GoTarget("etcd", ev, go_mod, (), None, _ETCD_MAIN, "", "KUEUE_HARNESS_ETCD")


def _kwok_target() -> GoTarget:
    """kwok's controller binary (sigs.k8s.io/kwok/cmd/kwok, not kwokctl) at versions.KWOK_VERSION, from the
    Go module proxy. Its version string is a constant of the module (pkg/consts.Version): no -X flags."""
    kv = versions.KWOK_VERSION
    go_mod = (
        "module kueueharness.local/build/kwok\n\ngo 1.26.0\n\n"
        f"require sigs.k8s.io/kwok {kv}\n"
    )
    return GoTarget("kwok", kv, go_mod, ("sigs.k8s.io/kwok/cmd/kwok",), "sigs.k8s.io/kwok/cmd/kwok", None, "",
                    "KUEUE_HARNESS_KWOK")


def kueue(version: str, progress: Progress = _default_progress) -> Path:
    """The Kueue manager binary for the tag `version` ("v0.17.0"), from the Go module proxy or the git
    repository (harness/build/kueue.py). Raises UnservedVersion, BuildError."""
    return kueue_build.build(kueue_build.KueueSpec(version=versions.check_tag(version)), progress).binary


def kueue_source(version: str) -> Path:
    """A folder holding config/components (CRDs, webhooks) of Kueue `version`: $KUEUE_HARNESS_KUEUE_SOURCE,
    else the Go module's folder in GOMODCACHE (read-only)."""
    override = os.environ.get("KUEUE_HARNESS_KUEUE_SOURCE")
    if override:
        return Path(override)
    return _module_dir(go_binary(), "sigs.k8s.io/kueue", version)


def _kubebuilder_asset(name: str) -> Path | None:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets and (Path(assets) / name).is_file():
        return Path(assets) / name
    return None


def kube_apiserver(progress: Progress = _default_progress) -> Path:
    """kube-apiserver: $KUEUE_HARNESS_KUBE_APISERVER, $KUBEBUILDER_ASSETS/kube-apiserver, or built."""
    if not os.environ.get("KUEUE_HARNESS_KUBE_APISERVER"):
        asset = _kubebuilder_asset("kube-apiserver")
        if asset:
            return asset
    return build(_kubernetes_target("kube-apiserver"), progress)


def _kubectl_target() -> GoTarget:
    kv = versions.KUBERNETES_VERSION
    base = _kubernetes_target("kube-apiserver")
    return GoTarget("kubectl", kv, base.go_mod.replace("build/kubernetes", "build/kubectl"),
                    ("k8s.io/kubernetes/cmd/kubectl",), "k8s.io/kubernetes/cmd/kubectl", None, base.ldflags,
                    "KUEUE_HARNESS_KUBECTL")


def kubectl(progress: Progress = _default_progress) -> Path:
    """kubectl of the pinned Kubernetes version (for manual sessions): $KUEUE_HARNESS_KUBECTL or built.
    Raises BuildError, HarnessError (no Go) as build() does."""
    return build(_kubectl_target(), progress)


def kubectl_if_buildable(progress: Progress = _default_progress) -> Path | None:
    """kubectl() when $KUEUE_HARNESS_KUBECTL names one, the cache has it, or `go` is on PATH to build it;
    None otherwise, without calling go_binary(): a run whose other binaries all come from KUEUE_HARNESS_*
    variables needs no Go. Raises what build() raises when it does build (BuildError, Go too old)."""
    target = _kubectl_target()
    cached = cache_root() / "bin" / f"{target.name}-{target.version}"
    if not os.environ.get(target.override_env) and not cached.is_file() and shutil.which("go") is None:
        return None
    return build(target, progress)


def kube_controller_manager(progress: Progress = _default_progress) -> Path:
    """kube-controller-manager: $KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER or built."""
    return build(_kubernetes_target("kube-controller-manager"), progress)


def kube_scheduler(progress: Progress = _default_progress) -> Path:
    """kube-scheduler of the pinned Kubernetes version (for Pods that run: harness/env/pods.py):
    $KUEUE_HARNESS_KUBE_SCHEDULER or built like kube-apiserver (the Go build cache of kube-apiserver's build
    makes it mostly incremental). Raises BuildError, HarnessError (no Go) as build() does."""
    return build(_kubernetes_target("kube-scheduler"), progress)


def kwok(progress: Progress = _default_progress) -> Path:
    """kwok (sigs.k8s.io/kwok/cmd/kwok) at versions.KWOK_VERSION: $KUEUE_HARNESS_KWOK or built from the Go
    module proxy. Raises BuildError, HarnessError (no Go) as build() does."""
    return build(_kwok_target(), progress)


def provisioning_request_crds(progress: Progress = _default_progress) -> tuple[Path, ...]:
    """The ProvisioningRequest CRD manifests (config/crd/*.yaml of versions.PROVISIONING_REQUEST_MODULE at
    PROVISIONING_REQUEST_VERSION, from the Go module proxy, read-only in GOMODCACHE), in a stable order.
    $KUEUE_HARNESS_PROVISIONING_REQUEST_CRD overrides: "0" (or false/no/off) gives (), a folder its *.yaml, a
    file itself. Without Go (every binary given by its override) it says so and gives (): Kueue then runs
    without its ProvisioningRequest controller, and a case that needs one ends in `error`, never `passed`
    (its ProvisioningRequest never appears). Raises BuildError when the proxy does not serve the module or no
    CRD is there."""
    override = os.environ.get("KUEUE_HARNESS_PROVISIONING_REQUEST_CRD", "").strip()
    if override.lower() in ("0", "false", "no", "off"):
        return ()
    if override:
        p = Path(override)
        files = (p,) if p.is_file() else tuple(sorted(p.glob("*.yaml")))
        if not files:
            raise BuildError(f"KUEUE_HARNESS_PROVISIONING_REQUEST_CRD={override} is neither a file nor a folder "
                             "with *.yaml: point it at the ProvisioningRequest CRD manifest, or set it to 0")
        return files
    try:
        go = go_binary()
    except HarnessError as e:
        progress(f"no ProvisioningRequest CRD ({e.__class__.__name__}: {str(e).split(':')[0]}); set "
                 "KUEUE_HARNESS_PROVISIONING_REQUEST_CRD to its manifest for cases with ProvisioningRequests")
        return ()
    d = _module_dir(go, versions.PROVISIONING_REQUEST_MODULE, versions.PROVISIONING_REQUEST_VERSION)
    files = tuple(sorted((d / "config" / "crd").glob("*.yaml")))
    if not files:
        raise BuildError(f"{d} has no config/crd/*.yaml: not the ProvisioningRequest API module; "
                                     "set KUEUE_HARNESS_PROVISIONING_REQUEST_CRD=0 to start without it")
    return files


def etcd(progress: Progress = _default_progress) -> Path:
    """etcd: $KUEUE_HARNESS_ETCD, $KUBEBUILDER_ASSETS/etcd, or built from go.etcd.io/etcd/server/v3."""
    if not os.environ.get("KUEUE_HARNESS_ETCD"):
        asset = _kubebuilder_asset("etcd")
        if asset:
            return asset
    return build(_etcd_target(), progress)


@dataclass(frozen=True)
class Binaries:
    """Paths of the real components for one Kueue build. `kueue_source` holds config/components of the
    same tree as `kueue`; `kueue_build` says what that build is (harness/env/kueue_build.KueueBuild)."""

    kueue: Path
    kueue_source: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    etcd: Path
    kueue_build: Any = None
    #: CRDs installed beside Kueue's (the ProvisioningRequest API: provisioning_request_crds()).
    extra_crds: tuple[Path, ...] = ()


def ensure_all(kueue_spec: Any, progress: Progress = _default_progress) -> Binaries:
    """Build (or find) every component for a Kueue build: a KueueSpec, or a tag string ("v0.17.0").
    Raises UnservedVersion, BuildError, HarnessError."""
    spec = kueue_spec if isinstance(kueue_spec, kueue_build.KueueSpec) else \
        kueue_build.KueueSpec(version=versions.check_tag(kueue_spec))
    kb = kueue_build.build(spec, progress)
    if kb.dir is None:
        if not spec.version:
            raise HarnessError("KUEUE_HARNESS_KUEUE_BINARY with --kueue-ref/--kueue-source needs KUEUE_HARNESS_KUEUE_SOURCE: "
                               "the Kueue tree the binary was built from (its config/components has the CRDs)")
        kb = dataclasses.replace(kb, dir=kueue_source(spec.version))
    return Binaries(
        kueue=kb.binary,
        kueue_source=kb.dir,
        kube_apiserver=kube_apiserver(progress),
        kube_controller_manager=kube_controller_manager(progress),
        etcd=etcd(progress),
        kueue_build=kb,
        extra_crds=provisioning_request_crds(progress),
    )
