"""A kind node image made on this machine, offline: no image registry is contacted, every binary in it is
one the harness builds, the Kubernetes version is the local target's (versions.KUBERNETES_VERSION).

What the image is (assembled the way kind's own base and node images are laid out, from parts made here):
- A Debian bookworm root filesystem from `mmdebstrap --variant=minbase` (ROOTFS_PACKAGES: systemd, iptables,
  Debian's containerd 1.6 and runc, the CNI plugins), imported with `docker import`. It is also the base of
  the component images (their binaries link glibc).
- kind's node files (entrypoint, systemd units for kubelet, sysctl, mount fixes) read from kind's own Go module
  (sigs.k8s.io/kind@KIND_VERSION, `images/base/files`), except its containerd unit and configuration (they
  are for containerd 2.x): ours is a containerd 1.6 configuration with `restrict_oom_score_adj = true` (a
  negative oom_score_adj needs CAP_SYS_RESOURCE, which sandboxes lack) and the CNI plugins of Debian.
- kubelet, kubeadm, kubectl at /usr/bin from one `go build` of k8s.io/kubernetes (node_binaries), kubelet run
  with `--fail-cgroupv1=false` (kubelet 1.35 refuses cgroup v1 hosts by default).
- The images kubeadm runs (registry.k8s.io/kube-apiserver, -controller-manager, -scheduler, -proxy at the
  Kubernetes version, etcd at kubeadm's default tag with the harness's etcd build, pause as a small static
  program) as `docker save` tars in /kind/images, imported into containerd by a oneshot unit before kubelet
  starts (`ctr -n k8s.io images import --no-unpack`).
- A static bridge CNI configuration instead of kindnetd (one node: its Pod CIDR is kind's default first /24);
  clusters from this image are created with `disableDefaultCNI` and kubeadm's coredns addon skipped
  (kind_config()): Kueue and the cases need no cluster DNS.
The image is tagged `kueue-harness/node:<kubernetes version>-<content hash>`: the hash covers every input
(the recipe text here, the binaries' bytes, kind's files), so a changed input makes a new image and an
unchanged one is reused. Progress lines at least every 20 s.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from harness.common.errors import BuildError, HarnessError
from harness.common.paths import cache_root
from harness.kueue import versions

Say = Callable[[str], None]

#: The kind release whose CLI creates clusters and whose node files go into the image (Go module proxy).
KIND_VERSION = "v0.33.0"
#: kubeadm v1.35's defaults (cmd/kubeadm/app/constants: DefaultEtcdVersion, PauseVersion).
ETCD_TAG = "3.6.6-0"
PAUSE_TAGS = ("3.10.1", "3.10")  # kubeadm's sandbox image, and kind's / the case builders' Pod image
NODE_REPO = "kueue-harness/node"
ROOTFS_REPO = "kueue-harness/rootfs"
POD_SUBNET = "10.244.0.0/16"
ROOTFS_PACKAGES = (
    "systemd", "dbus", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount",
    "kmod", "libseccomp2", "bash", "ca-certificates", "procps", "containerd", "runc",
    "containernetworking-plugins",
)
NODE_BINARIES = ("kubelet", "kubeadm", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                 "kube-proxy")
#: kind's base files not taken (they are for kind's containerd 2.x and fuse-overlayfs builds).
KIND_FILES_SKIPPED = ("etc/systemd/system/containerd.service", "etc/systemd/system/containerd-fuse-overlayfs.service",
                      "etc/containerd/config.toml")

CONTAINERD_CONFIG = """# kueue-harness node image (harness/env/kind_image.py): containerd 1.6, configuration version 2.
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.1"
  tolerate_missing_hugepages_controller = true
  # a negative oom_score_adj needs CAP_SYS_RESOURCE (absent in sandboxes): what kind sets rootless
  restrict_oom_score_adj = true
[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "/etc/cni/net.d"
"""

CNI_CONFLIST = """{
  "cniVersion": "0.4.0",
  "name": "kueue-harness-bridge",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
"""

IMAGES_UNIT = """[Unit]
Description=kueue-harness: import the Kubernetes component images made offline into containerd
After=containerd.service
Requires=containerd.service
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -euc 'for f in /kind/images/*.tar; do ctr -n k8s.io images import --no-unpack "$f"; done'

[Install]
WantedBy=multi-user.target
"""

KUBELET_DROPIN = """[Unit]
After=kueue-harness-images.service
Wants=kueue-harness-images.service
"""

# kubelet 1.35 refuses cgroup v1 unless told (failCgroupV1); the runtime cgroup is kind's.
KUBELET_DEFAULTS = "KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service --fail-cgroupv1=false\n"

NODE_DOCKERFILE = """FROM {rootfs}
COPY kind-files/ /
COPY node-files/ /
COPY bin/ /usr/bin/
RUN chmod 0755 /usr/local/bin/* /kind/bin/* /usr/bin/kubelet /usr/bin/kubeadm /usr/bin/kubectl \\
 && find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
          /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
          /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
 && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service kueue-harness-images.service \\
 && systemctl mask systemd-binfmt.service \\
 && mkdir -p /etc/kubernetes/manifests /opt/cni \\
 && ln -sfn /usr/lib/cni /opt/cni/bin
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
"""

COMPONENT_DOCKERFILE = """FROM {base}
COPY {name} /usr/local/bin/{name}
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
"""

SCRATCH_DOCKERFILE = """FROM scratch
COPY {name} /{name}
{user}ENTRYPOINT ["/{name}"]
"""

PAUSE_GO = r'''// pause: the sandbox's first process (and the cases' Job containers' program on the kind target): waits for
// SIGINT or SIGTERM and exits 0; reaps children it inherits. kueue-harness (harness/env/kind_image.py).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
'''


def _say(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


def docker_env() -> dict[str, str]:
    """The environment for `docker build`: the classic builder (DOCKER_BUILDKIT=0): it works offline
    against Docker 20.10 without the buildx plugin."""
    return {**os.environ, "DOCKER_BUILDKIT": "0"}


def run_logged(argv: list[str], what: str, say: Say, log: Path, cwd: Path | None = None, timeout: float = 3600,
               interval: float = 20.0, stdin=None, env: dict[str, str] | None = None) -> None:
    """Run a command, its output to `log`, a progress line every `interval` s (elapsed, last output line).
    Raises BuildError with the output's tail when it fails or takes longer than `timeout` s."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    done = threading.Event()
    with open(log, "w") as fh:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, stdin=stdin or subprocess.DEVNULL,
                                env=env or docker_env(), start_new_session=True)

        def ticker() -> None:
            while not done.wait(interval):
                last = _last_line(log)
                say(f"{what}: {time.monotonic() - t0:.0f}s elapsed{f' ({last[:100]})' if last else ''}")

        threading.Thread(target=ticker, daemon=True).start()
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            rc = None
        except BaseException:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise
        finally:
            done.set()
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        why = f"did not finish in {timeout:g}s" if rc is None else f"exited {rc}"
        raise BuildError(f"{what}: `{' '.join(argv[:4])} …` {why} (log: {log}). Last output:\n{tail}")


def _last_line(log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log) - 400))
            lines = [x for x in fh.read().decode(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def docker(*args: str, timeout: float = 600, input: bytes | None = None) -> str:
    """`docker ARGS` (DOCKER_HOST as set by harness/env/engine.py); returns stdout. Raises BuildError."""
    try:
        p = subprocess.run(["docker", *args], capture_output=True, timeout=timeout, input=input, env=docker_env())
    except FileNotFoundError:
        raise HarnessError("the docker CLI is not on PATH (Debian's docker.io has it)") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"`docker {' '.join(args[:3])}` did not finish in {timeout:g}s") from None
    if p.returncode != 0:
        raise BuildError(f"`docker {' '.join(args[:4])}` exited {p.returncode}: {p.stderr.decode(errors='replace')[-800:]}")
    return p.stdout.decode(errors="replace")


def image_exists(ref: str) -> bool:
    try:
        docker("image", "inspect", "--format", "{{.Id}}", ref, timeout=60)
    except BuildError:
        return False
    return True


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


# ---- the parts ---------------------------------------------------------------------------------------
def node_binaries(say: Say = _say) -> Path:
    """A folder with NODE_BINARIES at versions.KUBERNETES_VERSION: one `go build` of k8s.io/kubernetes (our
    small module requiring it, as harness/build/binaries.py builds kube-apiserver), cached in
    <cache>/bin/kind-node-<version>/. Raises BuildError, HarnessError (no Go)."""
    from harness.build import binaries
    from harness.build.go import _run_go, build_lock, go_binary

    kv = versions.KUBERNETES_VERSION
    out = cache_root() / "bin" / f"kind-node-{kv}"
    if all((out / n).is_file() for n in NODE_BINARIES):
        return out
    with build_lock(f"kind-node-{kv}"):
        if all((out / n).is_file() for n in NODE_BINARIES):
            return out
        base = binaries._kubernetes_target("kube-apiserver")
        bdir = cache_root() / "build" / f"kind-node-{kv}"
        bdir.mkdir(parents=True, exist_ok=True)
        (bdir / "go.mod").write_text(base.go_mod.replace("build/kubernetes", "build/kind-node"))
        (bdir / "tools.go").write_text(binaries._tools_go(tuple(f"k8s.io/kubernetes/cmd/{n}" for n in NODE_BINARIES)))
        go = go_binary()
        tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        what = f"building {', '.join(NODE_BINARIES)} {kv} for the kind node"
        say(f"{what} (one go build; about 7 min with a warm Go cache, longer cold)")
        t0 = time.monotonic()
        (cache_root() / "logs").mkdir(parents=True, exist_ok=True)
        with open(cache_root() / "logs" / f"kind-node-{kv}.log", "w") as log:
            _run_go([go, "mod", "tidy"], bdir, log, f"{what}: resolving modules", say)
            _run_go([go, "build", "-v", "-trimpath", "-ldflags", base.ldflags, "-o", str(tmp) + "/",
                     *(f"k8s.io/kubernetes/cmd/{n}" for n in NODE_BINARIES)], bdir, log, what, say)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        say(f"built the kind node's Kubernetes binaries in {time.monotonic() - t0:.0f}s: {out}")
    return out


def static_program(name: str, source: str, say: Say = _say) -> Path:
    """A static Go program (CGO_ENABLED=0, standard library only) built from `source`, cached by its hash."""
    from harness.build.go import _run_go, build_lock, go_binary

    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    out = cache_root() / "bin" / f"{name}-{digest}"
    if out.is_file():
        return out
    with build_lock(f"{name}-{digest}"):
        if out.is_file():
            return out
        d = cache_root() / "build" / f"{name}-{digest}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "go.mod").write_text(f"module kueueharness.local/build/{name}\n\ngo 1.22\n")
        (d / "main.go").write_text(source)
        (cache_root() / "logs").mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
        with open(cache_root() / "logs" / f"{name}.log", "w") as log:
            env_cgo = os.environ.get("CGO_ENABLED")
            os.environ["CGO_ENABLED"] = "0"
            try:
                _run_go([go_binary(), "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp), "."], d, log,
                        f"building {name}", say)
            finally:
                if env_cgo is None:
                    os.environ.pop("CGO_ENABLED", None)
                else:
                    os.environ["CGO_ENABLED"] = env_cgo
        tmp.rename(out)
    return out


def kind_files() -> Path:
    """kind's `images/base/files` from its Go module (downloaded through the module proxy)."""
    from harness.build.go import _module_dir, go_binary

    d = _module_dir(go_binary(), "sigs.k8s.io/kind", KIND_VERSION) / "images" / "base" / "files"
    if not (d / "usr" / "local" / "bin" / "entrypoint").is_file():
        raise BuildError(f"{d} has no usr/local/bin/entrypoint: is sigs.k8s.io/kind@{KIND_VERSION} complete?")
    return d


def rootfs_image(say: Say = _say) -> str:
    """The Debian bookworm root filesystem (ROOTFS_PACKAGES) as a local image, made with mmdebstrap once
    (installed from Debian when missing) and `docker import`ed. Returns its tag."""
    from harness.env.engine import install_packages

    key = hashlib.sha256(("bookworm minbase " + " ".join(ROOTFS_PACKAGES)).encode()).hexdigest()[:12]
    ref = f"{ROOTFS_REPO}:bookworm-{key}"
    if image_exists(ref):
        return ref
    if shutil.which("mmdebstrap") is None:
        install_packages(("mmdebstrap",), say, "mmdebstrap (the node image's Debian root filesystem)")
    work = cache_root() / "kind" / "work"
    work.mkdir(parents=True, exist_ok=True)
    tar = work / f"rootfs-{key}.tar"
    t0 = time.monotonic()
    say(f"making the node's Debian bookworm root filesystem with mmdebstrap (about 2–3 min): {ref}")
    run_logged(["mmdebstrap", "--variant=minbase", "--include=" + ",".join(ROOTFS_PACKAGES), "bookworm",
                str(tar)], "mmdebstrap bookworm", say, cache_root() / "logs" / "kind-rootfs.log", timeout=1800)
    try:
        run_logged(["docker", "import", str(tar), ref], "docker import of the root filesystem", say,
                   cache_root() / "logs" / "kind-rootfs-import.log")
    finally:
        tar.unlink(missing_ok=True)
    say(f"root filesystem image {ref} in {time.monotonic() - t0:.0f}s")
    return ref


def build_image(ref: str, dockerfile: str, files: dict[str, Path | str], what: str, say: Say) -> str:
    """`docker build -t ref` of a context holding `files` (name -> a file to hard-link or text)."""
    with tempfile.TemporaryDirectory(dir=cache_root() / "kind" / "work", prefix="ctx-") as tmp:
        ctx = Path(tmp)
        for name, src in files.items():
            if isinstance(src, Path):
                if src.is_dir():
                    shutil.copytree(src, ctx / name, symlinks=True, copy_function=_link_copy)
                else:
                    _link(src, ctx / name)
            else:
                (ctx / name).parent.mkdir(parents=True, exist_ok=True)
                (ctx / name).write_text(src)
        (ctx / "Dockerfile").write_text(dockerfile)
        run_logged(["docker", "build", "-q", "-t", ref, "."], what, say,
                   cache_root() / "logs" / f"image-{ref.replace('/', '_').replace(':', '_')}.log", cwd=ctx)
    return ref


def _link_copy(src: str, dst: str) -> str:
    _link(Path(src), Path(dst))
    return dst


def component_refs() -> dict[str, str]:
    """The image each kubeadm component runs, as kubeadm names them (registry.k8s.io, the Kubernetes version)."""
    kv = versions.KUBERNETES_VERSION
    refs = {n: f"registry.k8s.io/{n}:{kv}" for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                                     "kube-proxy")}
    refs["etcd"] = f"registry.k8s.io/etcd:{ETCD_TAG}"
    return refs


def node_image(say: Say = _say) -> str:
    """The offline node image (module docstring), built when this content's tag is missing. Needs a container
    engine that answers (harness/env/engine.py). Returns its tag. Raises BuildError, HarnessError."""
    from harness.build import binaries

    t0 = time.monotonic()
    bins = node_binaries(say)
    etcd = binaries.etcd(say)
    pause = static_program("pause", PAUSE_GO, say)
    files = kind_files()
    node_files = {
        "etc/containerd/config.toml": CONTAINERD_CONFIG,
        "etc/cni/net.d/10-kueue-harness-bridge.conflist": CNI_CONFLIST,
        "etc/systemd/system/kueue-harness-images.service": IMAGES_UNIT,
        "etc/systemd/system/kubelet.service.d/20-kueue-harness.conf": KUBELET_DROPIN,
        "etc/default/kubelet": KUBELET_DEFAULTS,
        "kind/version": versions.KUBERNETES_VERSION + "\n",
    }
    h = hashlib.sha256()
    for text in (NODE_DOCKERFILE, COMPONENT_DOCKERFILE, SCRATCH_DOCKERFILE, KIND_VERSION, ETCD_TAG, *PAUSE_TAGS,
                 *ROOTFS_PACKAGES, *(f"{k}={v}" for k, v in sorted(node_files.items()))):
        h.update(text.encode() + b"\0")
    for p in [*(bins / n for n in NODE_BINARIES), etcd, pause,
              *sorted(q for q in files.rglob("*") if q.is_file())]:
        h.update(p.name.encode() + file_digest(p).encode())
    ref = f"{NODE_REPO}:{versions.KUBERNETES_VERSION}-{h.hexdigest()[:12]}"
    if image_exists(ref):
        say(f"node image {ref} (cached)")
        return ref
    say(f"making the offline kind node image {ref}")
    rootfs = rootfs_image(say)
    refs = component_refs()
    for name, cref in refs.items():
        binary = etcd if name == "etcd" else bins / name
        build_image(cref, COMPONENT_DOCKERFILE.format(base=rootfs, name=name), {name: binary},
                    f"image {cref}", say)
    pause_refs = [f"registry.k8s.io/pause:{t}" for t in PAUSE_TAGS]
    build_image(pause_refs[0], SCRATCH_DOCKERFILE.format(name="pause", user=""), {"pause": pause}, "image pause", say)
    for r in pause_refs[1:]:
        docker("tag", pause_refs[0], r)
    work = cache_root() / "kind" / "work"
    with tempfile.TemporaryDirectory(dir=work, prefix="node-") as tmp:
        images = Path(tmp) / "images.tar"
        run_logged(["docker", "save", "-o", str(images), *refs.values(), *pause_refs], "docker save of the component "
                   "images", say, cache_root() / "logs" / "kind-node-save.log")
        kind = {str(p.relative_to(files)): p for p in files.rglob("*") if p.is_file()
                and str(p.relative_to(files)) not in KIND_FILES_SKIPPED}
        ctx: dict[str, Path | str] = {f"kind-files/{k}": v for k, v in kind.items()}
        ctx.update({f"node-files/{k}": v for k, v in node_files.items()})
        ctx["node-files/kind/images/components.tar"] = images
        ctx.update({f"bin/{n}": bins / n for n in ("kubelet", "kubeadm", "kubectl")})
        build_image(ref, NODE_DOCKERFILE.format(rootfs=rootfs), ctx, f"node image {ref}", say)
    for cref in [*refs.values(), *pause_refs]:
        docker("rmi", cref)  # they live in the node image now
    say(f"made node image {ref} in {time.monotonic() - t0:.0f}s")
    return ref


def kind_config(offline: bool) -> str:
    """The kind Cluster configuration for `kind create cluster --config`: for the offline image, no
    default CNI (the image has its own) and kubeadm's coredns addon skipped (there is no coredns image);
    preflight stays skipped as kind skips it."""
    if not offline:
        return "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"
    return (
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"
        f"networking:\n  disableDefaultCNI: true\n  podSubnet: {POD_SUBNET}\n"
        "kubeadmConfigPatches:\n- |\n  kind: InitConfiguration\n  skipPhases:\n  - preflight\n  - addon/coredns\n"
    )


def load_image(ref: str, node: str, say: Say = _say) -> None:
    """Put the local image `ref` into the containerd of kind node container `node` (what `kind load
    docker-image` does; done here because kind's checks use crictl, which Debian's containerd lacks)."""
    t0 = time.monotonic()
    save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE, env=docker_env())
    try:
        p = subprocess.run(["docker", "exec", "-i", node, "ctr", "-n", "k8s.io", "images", "import",
                            "--all-platforms", "-"], stdin=save.stdout, capture_output=True, timeout=600,
                           env=docker_env())
    finally:
        assert save.stdout is not None
        save.stdout.close()
        save.wait(60)
    if p.returncode != 0 or save.returncode != 0:
        raise BuildError(f"loading {ref} into node {node} failed: {p.stderr.decode(errors='replace')[-600:]}")
    say(f"loaded {ref} into node {node} in {time.monotonic() - t0:.1f}s")
