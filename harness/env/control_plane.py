"""The local control plane's settings and helpers: free loopback ports, the flags etcd and kube-apiserver
start with (and the tunables bench/ready.py sets to measure candidates), kubeconfigs, HTTPS probes, Kueue's
CRDs, the helper threads children are spawned from, and the metrics certificate Kueue 0.17 insists on.
harness/env/local.py (LocalEnvironment) and harness/env/kueue_process.py use them.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import ssl
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common import pki
from harness.common.errors import HarnessError, PortInUse
from harness.common.waiting import wait_for

Say = Callable[[str], None]

KUEUE_NAMESPACE = "kueue-system"
#: Kueue v0.17 always loads the metrics serving pair from this path when internal cert management is
#: off, even with metrics disabled (cmd/kueue/main.go:205-218).
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")

#: Webhooks kept from config/components/webhook/manifests.yaml: Kueue's own kinds and batch/v1 Job.
#: Hooks of disabled integrations are dropped: with failurePolicy Fail, a hook such as mpod.kb.io would
#: block every Pod create while Kueue is down (docs/kueue-notes.md §3).
_WEBHOOK_PATH_MARKERS = ("-kueue-x-k8s-io-", "-batch-v1-job")

SERVICE_CIDR = "10.0.0.0/24"
#: kube-apiserver post-start hooks that sleep a fixed second before their first try (wait.Poll, not
#: PollImmediate: pkg/registry/rbac/rest/storage_rbac.go, pkg/registry/scheduling/rest/storage_scheduling.go
#: of v1.35.4) and only write what an etcd template already holds (RBAC roles, system priority classes).
#: A start from a template does not wait for them; they still run, and find nothing to do. (Without the
#: RBAC API, APISERVER_STORED_FLAGS, only the second exists; excluding a check that is not there is allowed.)
_TEMPLATE_READYZ_EXCLUDES = ("poststarthook/rbac/bootstrap-roles",
                             "poststarthook/scheduling/bootstrap-system-priority-classes")
#: The Accept header of client-go's aggregated discovery (what Kueue's REST mapper reads first).
_AGGREGATED_DISCOVERY = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _say(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


#: Ports are picked below Linux's default ephemeral range (32768-60999), which the kernel hands out to
#: outgoing connections: a port picked from it can be taken by any client between the pick and the
#: component's bind (seen: kube-controller-manager "bind: address already in use" under load).
_PORT_RANGE = (20000, 32767)
_picked: set[int] = set()


def free_port() -> int:
    """An unused loopback TCP port outside the ephemeral range, not handed out before by this process.

    Raises PortInUse if none of 200 random tries binds.
    """
    import random

    for _ in range(200):
        port = random.randint(*_PORT_RANGE)
        if port in _picked:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _picked.add(port)
        return port
    raise PortInUse(f"no free loopback port in {_PORT_RANGE[0]}-{_PORT_RANGE[1]} after 200 tries")


def check_port_free(port: int, what: str) -> None:
    """Raise PortInUse if 127.0.0.1:`port` is taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise PortInUse(
                f"port {port} ({what}) is in use on 127.0.0.1. Stop the process that holds it "
                f"(`ss -ltnp 'sport = :{port}'`) or choose another port."
            ) from None


def _kubeconfig(server: str, ca_file: Path, token: str, user: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }


#: libyaml when present: PyYAML's pure-Python parser spends ~2 s on Kueue's 1.6 MB of CRDs.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: Extra etcd flags (bench/ready.py --ab measures candidates by setting this).
ETCD_EXTRA_FLAGS: tuple[str, ...] = ()


def _etcd_argv(etcd: Path, data: Path, port: int, peer_port: int) -> list[str]:
    """etcd for one run: loopback only, no fsync (the data is thrown away), a data folder that may be a
    copy of an etcd template (its stored member keeps the template's peer URL: harmless for one member)."""
    return _override([
        str(etcd), "--name=kueue-harness", f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{port}", f"--advertise-client-urls=http://127.0.0.1:{port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=kueue-harness=http://127.0.0.1:{peer_port}",
        "--unsafe-no-fsync=true", "--log-level=warn",
        # One member: 10 ms ticks get it elected ~0.6 s sooner (bench/ready.py --ab etcd-default-election).
        "--heartbeat-interval=10", "--election-timeout=100",
    ], ETCD_EXTRA_FLAGS)


def _etcd_healthy(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
        return json.loads(r.read()).get("health") == "true"


#: kube-apiserver flags that shape what it stores (part of the etcd template's key). No RBAC: every
#: identity of the local environment (harness, Kueue, kube-controller-manager) is in system:masters, which
#: kube-apiserver allows before any authorizer, so RBAC never decided a request; without its API there is
#: no rbac/bootstrap-roles hook, whose ~150 reconcile calls came after a 1 s sleep and delayed /healthz,
#: which kube-controller-manager waits for (`bench/ready.py --ab rbac`). Anonymous requests are refused
#: (--anonymous-auth=false), so AlwaysAllow allows only holders of the run's tokens.
APISERVER_STORED_FLAGS = (f"--service-cluster-ip-range={SERVICE_CIDR}", "--authorization-mode=AlwaysAllow",
                          "--runtime-config=rbac.authorization.k8s.io/v1=false")
#: Extra kube-apiserver flags (bench/ready.py measures candidates by setting this; see docs/benchmarks.md).
APISERVER_EXTRA_FLAGS: tuple[str, ...] = ()
#: kube-controller-manager's controllers. node-lifecycle-controller lifts the node.kubernetes.io/not-ready
#: taint kube-apiserver's TaintNodesByCondition admission puts on every new Node, once the Node is Ready
#: (kwok's Nodes: harness/env/pods.py); idle while there is no Node (bench/ready.py --ab kcm-without-node-lifecycle).
KCM_CONTROLLERS: tuple[str, ...] = (
    "namespace-controller", "garbage-collector-controller", "job-controller", "serviceaccount-controller",
    "serviceaccount-token-controller", "ttl-after-finished-controller", "node-lifecycle-controller")
#: Start the proxy once kube-apiserver serves (True) rather than together with it (False). Measured with
#: `bench/ready.py --ab proxy-after-serving`: later, kube-apiserver starts faster but Kueue starts later and
#: the first ClusterQueue takes 0.8 s instead of 0.35 s to turn Active; together is 0.36 s faster overall.
PROXY_AFTER_SERVING = False


def _apiserver_argv(apiserver: Path, etcd_port: int, port: int, pki_dir: Path, ca_file: Path) -> list[str]:
    """kube-apiserver on 127.0.0.1:`port` with the serving pair, token file and service-account keys in
    `pki_dir` (apiserver.crt/.key, tokens.csv, sa.pub/sa.key) and clients verified against `ca_file`."""
    return _override([
        str(apiserver),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={port}",
        f"--tls-cert-file={pki_dir / 'apiserver.crt'}", f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
        f"--client-ca-file={ca_file}", f"--token-auth-file={pki_dir / 'tokens.csv'}",
        *APISERVER_STORED_FLAGS, "--anonymous-auth=false",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki_dir / 'sa.pub'}",
        f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
        "--allow-privileged=true",
        "--profiling=false", "--v=1",
    ], APISERVER_EXTRA_FLAGS)


def _override(argv: list[str], extra: tuple[str, ...]) -> list[str]:
    """`argv` + `extra`, where a flag in `extra` replaces the same flag in `argv` (not appended to it)."""
    names = {f.split("=", 1)[0] for f in extra if f.startswith("--")}
    return [a for a in argv if a.split("=", 1)[0] not in names] + list(extra)


def _https_get(url: str, ca_file: Path, token: str | None = None, timeout: float = 2,
               headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ssl.create_default_context(cafile=str(ca_file))) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _create_crds(api: Any, files: list[Path]) -> list[dict[str, Any]]:
    """Create the CRDs in `files`; returns [{"name", "group", "plural", "versions": [served]}]."""
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api)
    out = []
    for f in files:
        for doc in yaml.load_all(f.read_text(), Loader=_YAML_LOADER):
            if doc:
                ext.create_custom_resource_definition(doc)
                spec = doc["spec"]
                out.append({"name": doc["metadata"]["name"], "group": spec["group"], "plural": spec["names"]["plural"],
                            "versions": [v["name"] for v in spec.get("versions") or [] if v.get("served", True)]})
    return out


def _wait_established(api: Any, names: list[str]) -> None:
    from kubernetes import client

    ext = client.ApiextensionsV1Api(api)

    def established() -> bool:
        for n in names:
            crd = ext.read_custom_resource_definition(n)
            conds = {c.type: c.status for c in (crd.status.conditions or [])}
            if conds.get("Established") != "True":
                return False
        return True

    wait_for(established, timeout=30, what=f"{len(names)} Kueue CRDs to be Established")


_helper: concurrent.futures.ThreadPoolExecutor | None = None
_helper_lock = threading.Lock()


def _in_helper(fn: Callable[[], Any]) -> concurrent.futures.Future:
    """Run `fn` in one of this process's two helper threads, which live as long as the process: a
    child's PR_SET_PDEATHSIG fires when the *thread* that forked it ends, so children may only be spawned
    from threads that never end before the process does (these, or the main thread)."""
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="kueue-harness-start")
        return _helper.submit(fn)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def ensure_metrics_certs(ca: pki.CA, say: Say) -> None:
    """Make sure Kueue's hard-coded metrics cert pair exists (cmd/kueue/main.go:205-218).

    Writes a throwaway self-signed pair for 127.0.0.1 if absent. Raises HarnessError if it cannot.
    """
    crt, key = KUEUE_METRICS_CERT_DIR / "tls.crt", KUEUE_METRICS_CERT_DIR / "tls.key"
    if crt.is_file() and key.is_file():
        return
    try:
        KUEUE_METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        c, k = pki.issue(ca, "kueue-metrics", ips=("127.0.0.1",), days=3650)
        crt.write_bytes(c)
        pki.write_private(key, k)
    except OSError as e:
        raise HarnessError(
            f"Kueue v0.17 needs {crt} and {key} to start when internal cert management is off "
            f"(cmd/kueue/main.go), and the harness cannot create them ({e}). Create them once as root, "
            "e.g. `sudo mkdir -p /etc/kueue/metrics/certs && sudo openssl req -x509 -newkey ec "
            "-pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kueue-metrics -days 3650 "
            "-keyout /etc/kueue/metrics/certs/tls.key -out /etc/kueue/metrics/certs/tls.crt`."
        ) from None
    say(f"wrote a throwaway metrics certificate to {KUEUE_METRICS_CERT_DIR} (Kueue v0.17 requires it)")
