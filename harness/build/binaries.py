"""Builds the real components (Kueue manager, kube-apiserver, kube-controller-manager, etcd; for Pods that
run, kube-scheduler and kwok) from their Go modules with the machine's Go, once per version, into a cache;
honours per-binary overrides.

Cache layout (root: $KUEUE_HARNESS_CACHE or ~/.cache/kueue-harness):
  build/<name>-<version>/   our own small Go module (go.mod + tools.go) that requires the upstream module
  bin/<name>-<version>      the built binary, renamed into place only after a successful build
  logs/<name>-<version>.log Go's full output of the last build
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.kueue import versions
from harness.common.errors import BuildError, HarnessError
from harness.common.procs import _die_with_parent

Progress = Callable[[str], None]


def _default_progress(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    """The cache folder: $KUEUE_HARNESS_CACHE, else ~/.cache/kueue-harness."""
    env = os.environ.get("KUEUE_HARNESS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kueue-harness"


def go_binary() -> str:
    """Path of a Go toolchain >= versions.MIN_GO.

    Raises HarnessError when Go is missing or too old, saying how to fix it.
    """
    go = shutil.which("go")
    need = ".".join(map(str, versions.MIN_GO))
    if go is None:
        raise HarnessError(
            f"Go is not on PATH: install Go >= {need} (the real components are built from their Go "
            "modules), or point KUEUE_HARNESS_KUEUE_BINARY, KUEUE_HARNESS_KUBE_APISERVER, "
            "KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER and KUEUE_HARNESS_ETCD at binaries you have (for Pods that run "
            "also KUEUE_HARNESS_KUBE_SCHEDULER and KUEUE_HARNESS_KWOK)."
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    if not m or (int(m.group(1)), int(m.group(2))) < versions.MIN_GO:
        raise HarnessError(
            f"{go} reports {out or 'no version'}; the builds need Go >= {need} "
            "(Kueue 0.17's go.mod says go 1.25.0). Install a newer Go or put it first on PATH."
        )
    return go


@dataclass(frozen=True)
class GoTarget:
    """One binary built from a Go module.

    `name`: cache name ("kueue"); `version`: pinned version; `go_mod`: our module's go.mod text;
    `main_pkg`: package path to build, or None when `main_go` (a wrapper main package) is given;
    `ldflags`: -X flags; `override_env`: variable that names a prebuilt binary instead.
    """

    name: str
    version: str
    go_mod: str
    imports: tuple[str, ...]
    main_pkg: str | None
    main_go: str | None
    ldflags: str
    override_env: str


def _tools_go(imports: tuple[str, ...]) -> str:
    lines = "\n".join(f'\t_ "{i}"' for i in imports)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{lines}\n)\n"


def _module_dir(go: str, module: str, version: str) -> Path:
    """Download `module@version` through the module proxy and return its folder in GOMODCACHE."""
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True
    )
    info = json.loads(proc.stdout or "{}") if proc.stdout.strip().startswith("{") else {}
    if proc.returncode != 0 or "Dir" not in info:
        raise BuildError(
            f"could not download {module}@{version} from the Go module proxy: "
            f"{info.get('Error') or proc.stderr.strip()[-600:]}. Check GOPROXY "
            f"(`go env GOPROXY`) and that {version} is served (`go list -m {module}@{version}`)."
        )
    return Path(info["Dir"])


def _kueue_target(version: str, commit: str = "module-proxy") -> GoTarget:
    go_mod = (
        "module kueueharness.local/build/kueue\n\ngo 1.25.0\n\n"
        f"require sigs.k8s.io/kueue {version}\n"
    )
    pkg = "sigs.k8s.io/kueue/pkg/version"
    ldflags = f"-X '{pkg}.GitVersion={version}' -X '{pkg}.GitCommit={commit}'"
    return GoTarget(
        "kueue", version, go_mod, ("sigs.k8s.io/kueue/cmd/kueue",), "sigs.k8s.io/kueue/cmd/kueue",
        None, ldflags, "KUEUE_HARNESS_KUEUE_BINARY",
    )


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


@contextmanager
def build_lock(name: str) -> Iterator[None]:
    """An exclusive lock between harness processes, so two of them never build the same binary into the
    same temp file or check out the same worktree at once (the second waits, then finds the cache)."""
    d = cache_root() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _packages(lines: list[str]) -> int:
    """How many of `go build -v`'s output lines name a package it compiled (not "go: downloading …",
    "# pkg" headers or compiler messages)."""
    return sum(1 for line in lines if line.strip() and not line.startswith(("go: ", "#")) and " " not in line.strip())


def _stale_packages(cmd: list[str], cwd: Path, timeout: float = 120) -> int | None:
    """For a `go build [flags] PKG` command: how many packages it will compile, i.e. the dependencies of
    PKG that `go list -deps` with the same flags reports as stale (not in Go's build cache). That is
    what `go build -v` prints, one line each. None when it cannot be told (not a build, go list failed
    or took longer than `timeout` seconds)."""
    if len(cmd) < 3 or cmd[1] != "build":
        return None
    flags: list[str] = []
    rest = cmd[2:-1]
    i = 0
    while i < len(rest):
        if rest[i] == "-o":
            i += 2
            continue
        if rest[i] != "-v":
            flags.append(rest[i])
        i += 1
    try:
        out = subprocess.run([cmd[0], "list", "-deps", "-f", "{{if .Stale}}{{.ImportPath}}{{end}}", *flags, cmd[-1]],
                             cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return sum(1 for line in out.stdout.splitlines() if line.strip())


def _duration(seconds: float) -> str:
    """"45s", "3 min 20 s"."""
    s = int(round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def progress_line(what: str, done: int, total: int | None, elapsed: float) -> str:
    """One build progress line: packages compiled so far, of `total` when known (with the share done
    and, once a few packages are in, the time left at the rate so far, linking not included), and the
    elapsed time. `elapsed` in seconds."""
    if not total or done > total:
        return f"{what}: {done} packages compiled, {_duration(elapsed)} elapsed"
    line = f"{what}: {done}/{total} packages ({100 * done // total}%), {_duration(elapsed)} elapsed"
    if done >= 10 and elapsed > 0:
        line += f", about {_duration(elapsed / done * (total - done))} left (then linking)"
    return line


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_go(cmd: list[str], cwd: Path, log, what: str, progress: Progress, interval: float = 20.0) -> None:
    """Run a Go command in its own process group, teeing its output to `log`.

    Every `interval` seconds a progress line (progress_line): for `go build`, packages compiled of how
    many need compiling (_stale_packages) with an estimate of the time left; for `go mod`, the modules
    downloaded so far. Go and its compilers are killed when this is interrupted (Ctrl-C, a signal
    handler's exception) or when the calling process dies (PR_SET_PDEATHSIG), so a stopped `up` or
    `build` leaves no compiler running. Raises BuildError with the tail of Go's output when it fails.
    """
    start = time.monotonic()
    lines: list[str] = []
    total = _stale_packages(cmd, cwd)
    if total is not None:
        progress(f"{what}: {total} packages to compile")
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    done = threading.Event()
    modules = len(cmd) > 1 and cmd[1] == "mod"

    def ticker() -> None:
        while not done.wait(interval):
            elapsed = time.monotonic() - start
            if modules:
                got = sum(1 for line in lines if line.startswith("go: downloading"))
                progress(f"{what}: {got} modules downloaded, {_duration(elapsed)} elapsed")
            else:
                progress(progress_line(what, _packages(lines), total, elapsed))

    t = threading.Thread(target=ticker, daemon=True)
    t.start()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            log.write(line)
        rc = proc.wait()
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        done.set()
    if rc != 0:
        tail = "".join(l for l in lines if not l.startswith("go: downloading"))[-1500:]
        raise BuildError(
            f"{what} failed (exit {rc}) after {time.monotonic() - start:.0f}s. Read the full log, {log.name}; "
            "a module that cannot be downloaded points at the Go module proxy (`go env GOPROXY`). Last output:\n"
            f"{tail}"
        )


def build(target: GoTarget, progress: Progress = _default_progress) -> Path:
    """Return the path of `target`'s binary, building it if the cache lacks it.

    Honours `target.override_env` (a path to an existing binary). Raises BuildError with Go's output
    when a step fails, HarnessError when Go is missing.
    """
    override = os.environ.get(target.override_env)
    if override:
        p = Path(override)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise HarnessError(f"{target.override_env}={override} is not an executable file: point it at the "
                               f"{target.name} binary (`chmod +x` it), or unset it to have it built")
        return p
    root = cache_root()
    out = root / "bin" / f"{target.name}-{target.version}"
    if out.is_file():
        return out
    with build_lock(f"{target.name}-{target.version}"):
        if out.is_file():  # another process built it while this one waited
            return out
        return _build_locked(target, root, out, progress)


def _build_locked(target: GoTarget, root: Path, out: Path, progress: Progress) -> Path:
    go = go_binary()
    bdir = root / "build" / f"{target.name}-{target.version}"
    bdir.mkdir(parents=True, exist_ok=True)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(parents=True, exist_ok=True)
    (bdir / "go.mod").write_text(target.go_mod)
    if target.main_go:
        (bdir / "main.go").write_text(target.main_go)
    else:
        (bdir / "tools.go").write_text(_tools_go(target.imports))
    what = f"building {target.name} {target.version}"
    progress(f"{what} with {go} (cold builds take minutes; log: {root / 'logs'})")
    start = time.monotonic()
    with open(root / "logs" / f"{target.name}-{target.version}.log", "w") as log:
        _run_go([go, "mod", "tidy"], bdir, log, f"{what}: resolving modules", progress)
        # Not out.with_suffix(): "kueue-v0.16.6" and "kueue-v0.16.9" would share "kueue-v0.16.tmp".
        tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
        pkg = target.main_pkg or "."
        _run_go(
            [go, "build", "-v", "-trimpath", "-ldflags", target.ldflags, "-o", str(tmp), pkg],
            bdir, log, what, progress,
        )
    tmp.rename(out)
    progress(f"built {out} in {time.monotonic() - start:.0f}s")
    return out


def kueue(version: str, progress: Progress = _default_progress) -> Path:
    """The Kueue manager binary for the tag `version` ("v0.17.0"), from the Go module proxy or the git
    repository (harness/build/kueue.py). Raises UnservedVersion, BuildError."""
    from harness.build import kueue as kueue_build

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


def ensure_all(kueue_spec: Any, progress: Progress = _default_progress) -> Binaries:
    """Build (or find) every component for a Kueue build: a KueueSpec, or a tag string ("v0.17.0").
    Raises UnservedVersion, BuildError, HarnessError."""
    from harness.build import kueue as kueue_build

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
    )
