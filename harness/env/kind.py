"""The `kind` target: a kind cluster made (or reused) with the kind CLI, Kueue installed there by server-side
apply, and Kueue's API traffic routed through the proxy on this machine (harness/env/incluster.py).

Two ways, one code path:
- **Offline** (the default): the container engine started here when none runs (harness/env/engine.py), the
  node image made here from harness-built Kubernetes binaries (harness/env/kind_image.py), the Kueue of the
  build under test (the local target's KueueSpec: tag, ref, source tree, patches) as an image made here and
  loaded into the node, its manifests rendered from that build's config/ (harness/env/kueue_image.py).
- **A registry reachable** (GitHub Actions): `--kind-image kindest/node:…` takes a published node image; the
  Kueue image is still the build under test, made here. `--kueue-manifests URL|FILE` instead installs
  Kueue's published manifests as they are (its release image, pulled by the node).

kind conventions used: `kind create cluster --name N --wait 120s [--image kindest/node:…]`,
`kind get clusters`, `kind get kubeconfig --name N`, `kind delete cluster --name N`; the nodes sit on the
container network `kind`, whose gateway is this machine as the Pods see it (traffic from a Pod to an
address outside the cluster is masqueraded to its node's address on that network). The container engine
is Docker, or Podman when kind's own `KIND_EXPERIMENTAL_PROVIDER=podman` is set.

Kueue conventions used: `https://github.com/kubernetes-sigs/kueue/releases/download/<version>/manifests.yaml`
(or a local file), applied server-side as Kueue's installation guide does (`kubectl apply --server-side`),
namespace `kueue-system`, Deployment `kueue-controller-manager`, container `manager`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common import pki
from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.waiting import wait_progressing
from harness.env import incluster

Say = Callable[[str], None]

#: The kind release the harness installs when none is on PATH (`go install sigs.k8s.io/kind@…`, served by the
#: Go module proxy); its own node image is Kubernetes v1.35.x. Other kind versions work as well.
KIND_VERSION = "v0.33.0"
DEFAULT_CLUSTER = "kueue-harness"
MANIFESTS_URL = "https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml"
FIELD_MANAGER = "kueue-harness"
_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


def _say(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


# ---- the kind CLI ------------------------------------------------------------------------------------
def kind_binary(say: Say = _say, install: bool = False) -> str:
    """The kind CLI: $KUEUE_HARNESS_KIND, `kind` on PATH, or the one the harness installed into its cache;
    with `install`, `go install sigs.k8s.io/kind@KIND_VERSION` there when there is none (about 1 min).
    Raises HarnessError saying how to get it."""
    override = os.environ.get("KUEUE_HARNESS_KIND")
    if override:
        if not (Path(override).is_file() and os.access(override, os.X_OK)):
            raise HarnessError(f"KUEUE_HARNESS_KIND={override} is not an executable file.")
        return override
    found = shutil.which("kind")
    if found:
        return found
    from harness.common.paths import cache_root

    cached = cache_root() / "bin" / f"kind-{KIND_VERSION}" / "kind"
    if cached.is_file():
        return str(cached)
    if not install:
        raise HarnessError(
            f"the kind CLI is not on PATH: install it (`go install sigs.k8s.io/kind@{KIND_VERSION}`, see "
            "https://kind.sigs.k8s.io/docs/user/quick-start/), or let the kind target install it, or use "
            "--target local.")
    from harness.build.go import _run_go, build_lock, go_binary

    with build_lock(f"kind-{KIND_VERSION}"):
        if not cached.is_file():
            say(f"installing kind {KIND_VERSION} from the Go module proxy (`go install`, about 1 min)")
            (cache_root() / "logs").mkdir(parents=True, exist_ok=True)
            env_gobin = os.environ.get("GOBIN")
            os.environ["GOBIN"] = str(cached.parent)
            try:
                with open(cache_root() / "logs" / f"kind-{KIND_VERSION}.log", "w") as log:
                    _run_go([go_binary(), "install", f"sigs.k8s.io/kind@{KIND_VERSION}"], cache_root(), log,
                            f"installing kind {KIND_VERSION}", say)
            finally:
                if env_gobin is None:
                    os.environ.pop("GOBIN", None)
                else:
                    os.environ["GOBIN"] = env_gobin
    return str(cached)


def provider() -> str:
    """The container engine kind uses: kind's own KIND_EXPERIMENTAL_PROVIDER, else docker."""
    return os.environ.get("KIND_EXPERIMENTAL_PROVIDER") or "docker"


def _run(argv: list[str], what: str, timeout: float = 600) -> str:
    """Run a CLI command; return stdout. Raises HarnessError (or EnvironmentNotReady for cluster
    creation) with the command's stderr tail."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise HarnessError(f"{what}: {argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentNotReady(f"{what}: `{' '.join(argv)}` did not finish in {timeout:g}s") from None
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise EnvironmentNotReady(f"{what} failed: `{' '.join(argv)}` exited {p.returncode}:\n{tail}")
    return p.stdout


def kind_create_argv(kind: str, name: str, kubeconfig: Path, image: str | None = None,
                     wait: str = "180s", config: Path | None = None) -> list[str]:
    """`kind create cluster` writing its kubeconfig to `kubeconfig` (never to the user's ~/.kube/config)."""
    argv = [kind, "create", "cluster", "--name", name, "--wait", wait, "--kubeconfig", str(kubeconfig)]
    if image:
        argv += ["--image", image]
    if config:
        argv += ["--config", str(config)]
    return argv


def cluster_exists(name: str) -> bool:
    out = _run([kind_binary(), "get", "clusters"], "listing kind clusters", 60)
    return name in out.split()


def create_cluster(name: str, kubeconfig: Path, image: str | None, say: Say, config: Path | None = None) -> float:
    """`kind create cluster`; returns the seconds it took."""
    say(f"creating kind cluster {name}{f' ({image})' if image else ''}: `kind create cluster --name {name}`")
    t = time.monotonic()
    with _ticking(say, f"creating kind cluster {name}"):
        _run(kind_create_argv(kind_binary(), name, kubeconfig, image, config=config), f"creating kind cluster {name}",
             600)
    took = time.monotonic() - t
    say(f"kind cluster {name} created in {took:.0f}s")
    return took


@contextlib.contextmanager
def _ticking(say: Say, what: str, every: float = 20.0):
    """A line every `every` seconds while the block runs (kind prints nothing we capture until it ends): no
    silent minute, at start or at teardown."""
    t = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(every):
            say(f"{what}: {time.monotonic() - t:.0f}s elapsed")

    threading.Thread(target=tick, daemon=True).start()
    try:
        yield
    finally:
        done.set()


def network_exists(network: str = "kind") -> bool:
    p = subprocess.run([provider(), "network", "inspect", network], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return p.returncode == 0


def remove_network(network: str, say: Say) -> None:
    """Remove the container network kind made (kind leaves it behind after `kind delete cluster`)."""
    _run([provider(), "network", "rm", network], f"removing the {network!r} network", 60)
    say(f"removed the container network {network!r}")


def delete_cluster(name: str, kubeconfig: Path, say: Say) -> None:
    say(f"deleting kind cluster {name}")
    t = time.monotonic()
    with _ticking(say, f"deleting kind cluster {name}"):
        _run([kind_binary(), "delete", "cluster", "--name", name, "--kubeconfig", str(kubeconfig)],
             f"deleting kind cluster {name}", 300)
    say(f"deleted kind cluster {name} in {time.monotonic() - t:.0f}s")


def get_kubeconfig(name: str) -> str:
    """`kind get kubeconfig --name N`: the admin kubeconfig (server https://127.0.0.1:<port>)."""
    return _run([kind_binary(), "get", "kubeconfig", "--name", name], f"reading the kubeconfig of kind cluster {name}", 60)


def gateway_from_inspect(inspect_json: str) -> str | None:
    """The IPv4 gateway of a network from `docker network inspect` or `podman network inspect` output."""
    import ipaddress

    data = json.loads(inspect_json)
    nets = data if isinstance(data, list) else [data]
    for net in nets:
        configs = ((net.get("IPAM") or {}).get("Config") or []) + (net.get("subnets") or [])
        for c in configs:
            gw = c.get("Gateway") or c.get("gateway")
            subnet = c.get("Subnet") or c.get("subnet")
            if gw and ipaddress.ip_address(gw).version == 4:
                return gw
            if not gw and subnet and ipaddress.ip_network(subnet).version == 4:
                # Docker leaves Gateway out in some versions; its bridge takes the subnet's first address.
                return str(next(ipaddress.ip_network(subnet).hosts()))
    return None


def network_gateway(network: str = "kind") -> str:
    """This machine's address on kind's container network: where Pods reach the proxy."""
    out = _run([provider(), "network", "inspect", network], f"inspecting the {network!r} network", 60)
    gw = gateway_from_inspect(out)
    if not gw:
        raise HarnessError(
            f"the {provider()} network {network!r} has no IPv4 gateway, so the proxy has no address the "
            "Pods can reach. Pass --proxy-listen-host (and --proxy-server-host if the Pods reach this "
            "machine under another address, e.g. host.docker.internal with Docker Desktop)."
        )
    return gw


# ---- Kueue's release manifests -----------------------------------------------------------------------
def manifests_source(kueue_version: str, override: str | None = None) -> str:
    """Where Kueue's manifests come from: `override` (URL or file path), else the release URL."""
    if override:
        return override
    if not _VERSION.match(kueue_version):
        raise HarnessError(f"{kueue_version!r} is not a Kueue release tag (vX.Y.Z); pass --kueue-manifests")
    return MANIFESTS_URL.format(version=kueue_version)


def load_manifests(source: str, cache_dir: Path | None = None) -> list[dict[str, Any]]:
    """The YAML documents of `source` (an http(s) URL, downloaded once into `cache_dir`, or a file)."""
    if re.match(r"^https?://", source):
        from harness.build import binaries

        cache_dir = cache_dir or binaries.cache_root() / "manifests"
        cache_dir.mkdir(parents=True, exist_ok=True)
        cached = cache_dir / re.sub(r"[^A-Za-z0-9._-]+", "_", source.split("://", 1)[1])
        if not cached.is_file():
            try:
                with urllib.request.urlopen(source, timeout=60) as r:
                    data = r.read()
            except OSError as e:
                raise HarnessError(
                    f"could not download Kueue's manifests from {source}: {e}. Download the file yourself "
                    "and pass its path with --kueue-manifests."
                ) from None
            tmp = cached.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(cached)
        text = cached.read_text()
    else:
        try:
            text = Path(source).read_text()
        except OSError as e:
            raise HarnessError(f"cannot read Kueue's manifests {source}: {e}") from None
    docs = [d for d in yaml.safe_load_all(text) if d]
    if not any(d.get("kind") == "Deployment" for d in docs):
        raise HarnessError(f"{source} holds no Deployment: not Kueue's release manifests?")
    return docs


def install_order(docs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Apply phases: Namespaces, then CustomResourceDefinitions (awaited Established), then the rest in
    file order."""
    first = [d for d in docs if d["kind"] == "Namespace"]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] not in ("Namespace", "CustomResourceDefinition")]
    return [first, crds, rest]


def apply_manifests(api_client, docs: list[dict[str, Any]], say: Say = _say,
                    field_manager: str = FIELD_MANAGER) -> list[str]:
    """Server-side apply every document (force: this run's manifests win), CRDs awaited Established.
    Returns "Kind/namespace/name" of what was applied."""
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api_client)
    applied: list[str] = []
    for phase in install_order(docs):
        crds = []
        for d in phase:
            res = dyn.resources.get(api_version=d["apiVersion"], kind=d["kind"])
            ns = d["metadata"].get("namespace") if res.namespaced else None
            dyn.server_side_apply(res, body=d, namespace=ns, field_manager=field_manager, force_conflicts=True)
            applied.append(f"{d['kind']}/{ns + '/' if ns else ''}{d['metadata']['name']}")
            if d["kind"] == "CustomResourceDefinition":
                crds.append(d["metadata"]["name"])
        if crds:
            _wait_crds(api_client, crds, say=say)
            dyn.resources.invalidate_cache()
    say(f"applied {len(applied)} objects of Kueue's manifests (server-side, field manager {field_manager})")
    return applied


def _wait_crds(api_client, names: list[str], stall: float = 60, say: Say = _say) -> None:
    """Until every CRD of `names` is Established: as long as more of them become so (a loaded cluster took over
    60 s for 12 CRDs, and a fixed 60 s voided the whole run), failing only when none did for `stall` seconds;
    a line every 20 s says how many are."""
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)

    def count() -> str:
        done = sum(1 for n in names if {c.type: c.status for c in (
            ext.read_custom_resource_definition(n).status.conditions or [])}.get("Established") == "True")
        return f"{done} of {len(names)} CRDs Established"

    wait_progressing(lambda: count().startswith(f"{len(names)} of"), state=count, stall=stall,
                     what=f"{len(names)} CRDs to be Established", say=say)




# ---- the target --------------------------------------------------------------------------------------
def _cleanup_all(cleanups: list[Callable[[], None]], say: Say) -> None:
    for fn in reversed(cleanups):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - said; the error that made us clean up is the one raised
            say(f"cleanup failed: {type(e).__name__}: {e}")


def start(
    kueue_spec: Any, artifacts: Path | None = None, *, cluster: str = DEFAULT_CLUSTER,
    node_image: str | None = None, manifests: str | None = None, keep_cluster: bool = False,
    proxy_listen_host: str | None = None, proxy_server_host: str | None = None, say: Say = _say,
) -> incluster.InClusterEnvironment:
    """Create (or reuse) kind cluster `cluster` with Kueue and route it through the proxy (module docstring).

    `kueue_spec`: a harness.build.kueue.KueueSpec (or a tag string). `node_image`: a node image to use as it
    is (e.g. kindest/node:v1.35.0 where a registry is reachable); None makes the offline one. `manifests`:
    Kueue's published manifests (URL or file) instead of the build under test. A cluster, network and
    container engine created here are removed on stop() (the cluster and engine kept with `keep_cluster`).
    Raises HarnessError / BuildError / EnvironmentNotReady saying what failed; on failure what was made here
    is removed again.
    """
    from harness.build import kueue as kueue_build
    from harness.env import engine, kind_image, kueue_image
    from harness.env.runs import runs_root
    from harness.kueue import versions

    spec = kueue_spec if isinstance(kueue_spec, kueue_build.KueueSpec) else \
        kueue_build.KueueSpec(version=versions.check_tag(kueue_spec))
    if manifests and not spec.version:
        raise HarnessError("--kueue-manifests installs a published Kueue release: give its --kueue-version vX.Y.Z")
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-kind"
    state = runs_root() / run_id
    state.mkdir(mode=0o700, parents=True)
    artifacts = artifacts or Path("artifacts") / run_id
    artifacts.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    cleanups: list[Callable[[], None]] = []
    try:
        eng = engine.ensure(say, keep=keep_cluster)
        if not keep_cluster and (eng.started_here or eng.host == engine.own_host()):
            # The harness's own daemon is stopped by the last run out, not under another run's cluster.
            cleanups.append(lambda: engine.release(say))
        timings["engine_seconds"] = time.monotonic() - t0
        kind_binary(say, install=True)
        kb = None
        if manifests:
            docs = load_manifests(manifests_source(spec.version, manifests))
            kueue_version, image = spec.version, None
        else:
            t = time.monotonic()
            kb = kueue_build.build(spec, say)
            image = kueue_image.kueue_image(kb, say)
            docs = kueue_image.render_manifests(kb, image, kind_image.node_binaries(say) / "kubectl", say)
            kueue_version = kb.version
            timings["kueue_image_seconds"] = time.monotonic() - t
        offline = node_image is None
        if offline:
            t = time.monotonic()
            node_image = kind_image.node_image(say)
            timings["node_image_seconds"] = time.monotonic() - t
        created = False
        if cluster_exists(cluster):
            say(f"reusing kind cluster {cluster}")
        else:
            had_network = network_exists("kind")
            config = state / "kind-config.yaml"
            config.write_text(kind_image.kind_config(offline))
            create_kubeconfig = state / "kind-create.kubeconfig"
            if not keep_cluster:
                if not had_network:
                    cleanups.append(lambda: network_exists("kind") and remove_network("kind", say))
                cleanups.append(lambda: delete_cluster(cluster, create_kubeconfig, say))
            timings["cluster_create_seconds"] = create_cluster(cluster, create_kubeconfig, node_image, say, config)
            created = True
        if image:
            kind_image.load_image(image, f"{cluster}-control-plane", say)
        admin = state / "admin.kubeconfig"
        pki.write_private(admin, get_kubeconfig(cluster).encode())
        api = incluster.api_client_from_kubeconfig(admin)
        from harness.env.cluster_lock import ClusterLock

        lock = ClusterLock(incluster.api_client_from_kubeconfig(admin), run_id, say)  # its own client: kept open
        lock.acquire()  # before anything is touched: a live run's routing is never undone (ClusterInUse)
        cleanups.append(lock.release)
        routing = incluster.KueueRouting(api, say=say)
        if _kueue_installed(routing) and routing.routed_by():
            say("Kueue in this cluster is still routed by an earlier run; undoing that first")
            routing.undo()
        say(f"installing Kueue {kueue_version} ({'published manifests ' + manifests if manifests else image})")
        t = time.monotonic()
        apply_manifests(api, [*provisioning_request_crds(say), *docs], say)
        routing.wait_rollout(300, f"Kueue {kueue_version}'s start")
        timings["kueue_install_seconds"] = time.monotonic() - t
        api.close()
        listen = proxy_listen_host or network_gateway()
        started = time.monotonic() - t0
        env = incluster.InClusterEnvironment.start(
            kueue_version, artifacts, admin, target="kind", proxy_listen_host=listen,
            proxy_server_host=proxy_server_host, state=state, run_id=run_id, say=say,
            check_version=kb is None, kueue_build=kb, lock=lock,
        )
    except BaseException:
        _cleanup_all(cleanups, say)
        from harness.env.runs import forget_secrets

        forget_secrets(state)  # a failed start never leaves the cluster's admin key behind
        raise
    env.cleanups.extend(cleanups)  # run by env.stop(), after the routing is undone
    env.started.update(timings)
    env.started["kind_and_install_seconds"] = started
    env.started["kind_cluster_created"] = float(created)
    env.started["ready_seconds"] = time.monotonic() - t0
    return env


def provisioning_request_crds(say: Say = _say) -> list[dict[str, Any]]:
    """The ProvisioningRequest CRD (autoscaling.x-k8s.io), as the local target installs it
    (harness/build/binaries.py provisioning_request_crds, with its KUEUE_HARNESS_PROVISIONING_REQUEST_CRD
    override): Kueue sets up its provisioning admission check controller only when the server serves that
    API (cmd/kueue/main.go, provisioning.ServerSupportsProvisioningRequest), so without it a case's ProvisioningRequest AdmissionCheck
    stays inactive ("AdmissionCheckInactive", kueue_9889 on kind, 2026-12-02). Applied before Kueue starts."""
    from harness.build import binaries

    docs = [d for f in binaries.provisioning_request_crds(say) for d in yaml.safe_load_all(f.read_text()) if d]
    return [d for d in docs if d.get("kind") == "CustomResourceDefinition"]


def _kueue_installed(routing: incluster.KueueRouting) -> bool:
    """Whether Kueue's Deployment exists (routing.read() raises HarnessError for a 404 only)."""
    try:
        routing.read()
    except HarnessError:
        return False
    return True
