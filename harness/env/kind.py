"""The `kind` target: a kind cluster made (or reused) with the kind CLI, Kueue installed there from its
release manifests by server-side apply, and Kueue's API traffic routed through the proxy on this machine
(harness/env/incluster.py). Nothing is built: the cluster runs the release image of Kueue.

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

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common import pki
from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.waiting import wait_for
from harness.env import incluster

Say = Callable[[str], None]

#: The kind release ci/ installs (`go install sigs.k8s.io/kind@v0.31.0`); its default node image is
#: Kubernetes v1.35.0, the minor Kueue 0.17 is built and tested against. Other kind versions work as well.
KIND_VERSION = "v0.31.0"
DEFAULT_CLUSTER = "kueue-harness"
MANIFESTS_URL = "https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml"
FIELD_MANAGER = "kueue-harness"
_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")


def _say(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


# ---- the kind CLI ------------------------------------------------------------------------------------
def kind_binary() -> str:
    """The kind CLI: $KUEUE_HARNESS_KIND or `kind` on PATH. Raises HarnessError saying how to install it."""
    override = os.environ.get("KUEUE_HARNESS_KIND")
    if override:
        if not (Path(override).is_file() and os.access(override, os.X_OK)):
            raise HarnessError(f"KUEUE_HARNESS_KIND={override} is not an executable file.")
        return override
    found = shutil.which("kind")
    if not found:
        raise HarnessError(
            f"the kind CLI is not on PATH: install it (`go install sigs.k8s.io/kind@{KIND_VERSION}`, see "
            "https://kind.sigs.k8s.io/docs/user/quick-start/) and a container engine (Docker, or Podman "
            "with KIND_EXPERIMENTAL_PROVIDER=podman), or use --target local."
        )
    return found


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
                     wait: str = "120s") -> list[str]:
    """`kind create cluster` writing its kubeconfig to `kubeconfig` (never to the user's ~/.kube/config)."""
    argv = [kind, "create", "cluster", "--name", name, "--wait", wait, "--kubeconfig", str(kubeconfig)]
    if image:
        argv += ["--image", image]
    return argv


def cluster_exists(name: str) -> bool:
    out = _run([kind_binary(), "get", "clusters"], "listing kind clusters", 60)
    return name in out.split()


def create_cluster(name: str, kubeconfig: Path, image: str | None, say: Say) -> None:
    say(f"creating kind cluster {name}{f' ({image})' if image else ''}: `kind create cluster --name {name}`")
    t = time.monotonic()
    _run(kind_create_argv(kind_binary(), name, kubeconfig, image), f"creating kind cluster {name}", 600)
    say(f"kind cluster {name} created in {time.monotonic() - t:.0f}s")


def delete_cluster(name: str, kubeconfig: Path, say: Say) -> None:
    _run([kind_binary(), "delete", "cluster", "--name", name, "--kubeconfig", str(kubeconfig)],
         f"deleting kind cluster {name}", 300)
    say(f"deleted kind cluster {name}")


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
            _wait_crds(api_client, crds)
            dyn.resources.invalidate_cache()
    say(f"applied {len(applied)} objects of Kueue's manifests (server-side, field manager {field_manager})")
    return applied


def _wait_crds(api_client, names: list[str], timeout: float = 60) -> None:
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api_client)

    def established() -> bool:
        for n in names:
            conds = {c.type: c.status for c in (ext.read_custom_resource_definition(n).status.conditions or [])}
            if conds.get("Established") != "True":
                return False
        return True

    wait_for(established, timeout=timeout, what=f"{len(names)} CRDs to be Established")


# ---- the target --------------------------------------------------------------------------------------
def start(
    kueue_version: str, artifacts: Path | None = None, *, cluster: str = DEFAULT_CLUSTER,
    node_image: str | None = None, manifests: str | None = None, keep_cluster: bool = False,
    proxy_listen_host: str | None = None, proxy_server_host: str | None = None, say: Say = _say,
) -> incluster.InClusterEnvironment:
    """Create (or reuse) kind cluster `cluster`, install Kueue `kueue_version` from its release manifests,
    and route it through the proxy. A cluster created here is deleted on stop() unless `keep_cluster`.

    Raises HarnessError / EnvironmentNotReady saying what failed; on failure a cluster created here is
    deleted again (unless `keep_cluster`).
    """
    from harness.env.runs import runs_root

    if not _VERSION.match(kueue_version):
        raise HarnessError(f"--kueue-version {kueue_version!r} is not a Kueue release tag (vX.Y.Z)")
    source = manifests_source(kueue_version, manifests)
    kind_binary()
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-kind"
    state = runs_root() / run_id
    state.mkdir(mode=0o700)
    artifacts = artifacts or Path("artifacts") / run_id
    artifacts.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    created = False
    create_kubeconfig = state / "kind-create.kubeconfig"
    cleanups: list[Callable[[], None]] = []
    if cluster_exists(cluster):
        say(f"reusing kind cluster {cluster}")
    else:
        create_cluster(cluster, create_kubeconfig, node_image, say)
        created = True
        if not keep_cluster:
            cleanups.append(lambda: delete_cluster(cluster, create_kubeconfig, say))
    try:
        admin = state / "admin.kubeconfig"
        pki.write_private(admin, get_kubeconfig(cluster).encode())
        api = incluster.api_client_from_kubeconfig(admin)
        routing = incluster.KueueRouting(api, say=say)
        try:
            if routing.routed_by():
                say("Kueue in this cluster is still routed by an earlier run; undoing that first")
                routing.undo()
        except HarnessError:
            pass  # Kueue is not installed yet
        docs = load_manifests(source)
        say(f"installing Kueue {kueue_version} from {source}")
        apply_manifests(api, docs, say)
        routing.wait_rollout(300, f"Kueue {kueue_version}'s start")
        api.close()
        listen = proxy_listen_host or network_gateway()
        started = time.monotonic() - t0
        env = incluster.InClusterEnvironment.start(
            kueue_version, artifacts, admin, target="kind", proxy_listen_host=listen,
            proxy_server_host=proxy_server_host, state=state, run_id=run_id, say=say,
        )
    except BaseException:
        for fn in reversed(cleanups):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the original error matters more
                say(f"cleanup failed: {e}")
        raise
    env.cleanups.extend(cleanups)  # run by env.stop(), after the routing is undone
    env.started["kind_and_install_seconds"] = started
    env.started["kind_cluster_created"] = float(created)
    env.started["ready_seconds"] = time.monotonic() - t0
    return env

