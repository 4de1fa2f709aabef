"""The embedded local environment: etcd + kube-apiserver + kube-controller-manager + the fault proxy +
the Kueue manager as local processes on loopback, all real binaries (harness/build/binaries.py); on demand
also kube-scheduler + kwok, for Pods that run (harness/env/pods.py).

Kueue's API traffic goes through the proxy (its kubeconfig points at mitmdump, bearer-token identity);
the harness's own reads and watches go to kube-apiserver directly with an admin token.
Kueue setup follows docs/kueue-notes.md §2-5 and Kueue's test/integration/framework.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.kueue import config as kconfig
from harness.kueue import log as kueue_log
from harness.common import pki
from harness.kueue import versions
from harness.env import etcd_template, pods as pods_part
from harness.build import binaries
from harness.env.runs import check_free_space, runs_root  # noqa: F401 - re-exported for callers
from harness.common.errors import EnvironmentNotReady, HarnessError, PortInUse
from harness.objects import webhooks_answer
from harness.common.procs import ProcessGroup, reap_stale
from harness.proxy.client import Proxy
from harness.common.waiting import WaitTimeout, wait_for

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


@dataclass
class LocalEnvironment:
    """One running local environment. Build with `LocalEnvironment.start(...)`; stop with `stop()`.

    `artifacts`: folder for logs that may be shared (no secrets); `state`: folder for keys and tokens.
    `api_url`: kube-apiserver (direct); `proxy_url`: where Kueue talks to; `admin_kubeconfig`: for kubectl.
    """

    kueue_version: str
    artifacts: Path
    state: Path
    bins: binaries.Binaries
    procs: ProcessGroup
    ports: dict[str, int]
    admin_token: str
    ca_file: Path
    admin_kubeconfig: Path
    proxy: Proxy | None = None
    say: Say = _say
    started: dict[str, float] = field(default_factory=dict)
    #: Top-level keys merged over the generated Kueue Configuration (e.g. {"clientConnection": {"qps": 500}}).
    kueue_config_overrides: dict[str, Any] = field(default_factory=dict)
    #: The declared configuration laid over the generated one (harness/kueue/config.py; DEFAULT: none):
    #: what a case, a plan's `kueue:` or `up --kueue-config` asked for (configure_kueue()).
    kueue_config: kconfig.KueueConfig = kconfig.DEFAULT
    #: The feature gates Kueue reported in its last "Loaded feature gates" line (V(2), cmd/kueue/main.go:174).
    kueue_reported_gates: dict[str, bool] = field(default_factory=dict)
    _api: Any = None
    #: {"gitVersion", "gitCommit", "buildDate"} from Kueue's own "Initializing" log line (what ran).
    kueue_reported: dict[str, str] = field(default_factory=dict)
    #: (mitmweb UI port, intercept filter) for `kueue-harness up --ui`, else None.
    ui: tuple[int, str | None] | None = None
    #: The etcd template this run's etcd data was copied from (harness/env/etcd_template.py), else None.
    template: etcd_template.Template | None = None
    _spawn_times: dict[str, float] = field(default_factory=dict)
    _t0: float = 0.0
    _abandon: bool = False
    #: kube-scheduler + kwok once started (start_pods(); harness/env/pods.PodsPart), else None.
    pods: Any = None
    _pods_lock: Any = field(default_factory=threading.Lock)

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def kueue_log(self) -> Path:
        return self.artifacts / "kueue.log"

    # ---- start -----------------------------------------------------------------------------------
    @classmethod
    def start(
        cls, kueue_version: Any = versions.DEFAULT_KUEUE_VERSION, artifacts: Path | None = None,
        say: Say = _say, with_proxy: bool = True, proxy_port: int | None = None,
        control_port: int | None = None, kueue_config_overrides: dict[str, Any] | None = None,
        kueue_config: "kconfig.KueueConfig | None" = None,
        ui: bool = False, intercept: str | None = None, pods: bool = False,
    ) -> "LocalEnvironment":
        """Build what is missing, start every component, and wait until Kueue's webhooks answer.
        With `pods`, kube-scheduler and kwok start with the rest (else later, if ever: start_pods()).

        `kueue_version`: a tag ("v0.17.0") or a harness.build.kueue.KueueSpec (any tag, ref or source
        tree). Afterwards `kueue_version` is what the running binary reported in its "Initializing" log
        line (cmd/kueue/main.go), and `kueue_reported` holds its gitVersion and gitCommit.
        `kueue_config`: a declared Kueue configuration (harness/kueue/config.py), its feature gates checked
        against this build before anything starts.
        Raises UnservedVersion, BuildError, PortInUse, EnvironmentNotReady (with the log tail of the
        component that failed), KueueConfigError. On failure everything started so far is stopped again.
        """
        reap_stale(runs_root(), say)
        for port, what in ((proxy_port, "proxy"), (control_port, "proxy control channel")):
            if port:
                check_port_free(port, what)
        bins = binaries.ensure_all(kueue_version, say)
        if pods:
            binaries.kube_scheduler(say), binaries.kwok(say)
        run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(2)}"
        state = runs_root() / run_id
        state.mkdir(mode=0o700)
        artifacts = artifacts or Path("artifacts") / run_id
        artifacts.mkdir(parents=True, exist_ok=True)
        check_free_space(artifacts)
        procs = ProcessGroup(state)
        ports = {
            "etcd": free_port(), "etcd_peer": free_port(), "apiserver": free_port(), "kcm": free_port(),
            "webhook": free_port(), "kueue_health": free_port(),
            "proxy": proxy_port or free_port(), "control": control_port or free_port(),
        }
        admin_token = secrets.token_urlsafe(24)
        env = cls(
            kueue_version=bins.kueue_build.version, artifacts=artifacts, state=state, bins=bins, procs=procs,
            ports=ports, admin_token=admin_token, ca_file=state / "ca.crt",
            admin_kubeconfig=state / "admin.kubeconfig", say=say,
            kueue_config_overrides=dict(kueue_config_overrides or {}),
            kueue_config=kueue_config or kconfig.DEFAULT,
        )
        try:
            env.kueue_config = env.resolve_kueue_config(env.kueue_config)
            env.check_kueue_config(env.kueue_config)
        except BaseException:
            env.stop()
            raise
        env.ui = (free_port(), intercept) if ui else None
        try:
            env._start_all(with_proxy, pods)
        except BaseException:
            env.stop()
            raise
        return env

    def _start_all(self, with_proxy: bool, pods: bool = False) -> None:
        """Start every component, with the waits overlapping.

        etcd starts from a copy of the etcd template (Kueue's CRDs already in it; made on the first start
        for this Kueue build, see harness/env/etcd_template.py), kube-apiserver as soon as etcd listens.
        Two helper threads (_in_helper) start kube-controller-manager once kube-apiserver's /healthz is OK
        (it polls /healthz once a second before it starts its controllers: k8s.io/controller-manager
        app.WaitForAPIServer; /healthz is OK only when the two post-start hooks that first sleep a second
        are done, _TEMPLATE_READYZ_EXCLUDES, so started earlier it would wait up to a second longer), and
        the proxy right away (PROXY_AFTER_SERVING). Once kube-apiserver is ready (without those hooks) the
        webhooks are installed, and Kueue starts when the proxy is up (it needs neither
        kube-controller-manager nor its ServiceAccounts). The start ends when Kueue's webhooks answer and
        kube-controller-manager is ready. With `pods`, kube-scheduler and kwok are spawned once kube-apiserver
        is ready and waited for at the end.
        Durations per component (spawn to ready) go to `started["<name>_seconds"]`, the moment each was
        ready (from the start of the call) to `started["<name>_ready_at"]`.
        """
        t0 = self._t0 = time.monotonic()
        self.template = self._step("etcd_template", self._etcd_template)
        self._step("pki", self._pki)
        self._spawn_etcd()
        self._wait_process("etcd", self._etcd_listening, 30, "etcd to listen", interval=0.01)
        self._spawn_apiserver()
        helpers = [_in_helper(self._spawn_controller_manager_when_healthy)]
        if with_proxy and not PROXY_AFTER_SERVING:
            helpers.append(_in_helper(self._start_proxy))
        try:
            self._wait_etcd()
            self._wait_process("kube-apiserver", self._apiserver_answers, 90, "kube-apiserver to serve TLS")
            self.started["kube_apiserver_serving_at"] = time.monotonic() - t0
            if with_proxy and PROXY_AFTER_SERVING:
                helpers.append(_in_helper(self._start_proxy))
            self._wait_apiserver()
            if pods:
                self._spawn_pods()
            self._step("kueue_manifests", self._install_kueue_manifests)
            self._ready_at("kueue_manifests")
            if with_proxy:
                self.proxy = helpers[-1].result()
            self._step("kueue", self._start_kueue)
            self._ready_at("kueue")
            helpers[0].result()
        except BaseException:
            self._abandon = True
            concurrent.futures.wait(helpers)  # no process may be spawned after stop(): let them end first
            raise
        self._wait_controller_manager()
        if pods:
            self.pods = self._wait_pods()
        self.started["ready_seconds"] = time.monotonic() - t0

    def _start_proxy(self) -> Proxy:
        proxy = self._step("proxy", lambda: Proxy.start(
            upstream=self.api_url, upstream_ca=self.ca_file, state=self.state,
            artifacts=self.artifacts, procs=self.procs, port=self.ports["proxy"],
            control_port=self.ports["control"], say=self.say,
            web_port=self.ui[0] if self.ui else None, intercept=self.ui[1] if self.ui else None,
        ))
        self._ready_at("proxy")
        return proxy

    def _step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run one start step; its duration goes to `started["<name>_seconds"]` (read by bench/ready.py)."""
        t = time.monotonic()
        try:
            return fn()
        finally:
            self.started[f"{name}_seconds"] = time.monotonic() - t

    def _spawned(self, name: str) -> None:
        self._spawn_times[name] = time.monotonic()

    def _ready_at(self, name: str) -> None:
        """Record that `name` is ready: seconds since its spawn (when spawned) and since the start call."""
        now = time.monotonic()
        if name in self._spawn_times:
            self.started[f"{name}_seconds"] = now - self._spawn_times[name]
        self.started[f"{name}_ready_at"] = now - self._t0

    def _pki(self) -> None:
        s = self.state
        self.ca = pki.make_ca()
        self.ca_file.write_bytes(self.ca.cert_pem)
        crt, key = pki.issue(self.ca, "kube-apiserver", ips=("127.0.0.1",), dns=("localhost", "kubernetes"))
        (s / "apiserver.crt").write_bytes(crt)
        pki.write_private(s / "apiserver.key", key)
        wdir = s / "webhook-certs"
        wdir.mkdir(mode=0o700)
        crt, key = pki.issue(self.ca, "kueue-webhook", ips=("127.0.0.1",), dns=("localhost",))
        (wdir / "tls.crt").write_bytes(crt)
        pki.write_private(wdir / "tls.key", key)
        priv, pub = pki.rsa_keypair()
        pki.write_private(s / "sa.key", priv)
        (s / "sa.pub").write_bytes(pub)
        self.kueue_token = secrets.token_urlsafe(24)
        self.kcm_token = secrets.token_urlsafe(24)
        # kube-scheduler's and kwok's, in the token file from the start: they may start later (start_pods()).
        self.scheduler_token = secrets.token_urlsafe(24)
        self.kwok_token = secrets.token_urlsafe(24)
        # Static token file: token,user,uid,"groups". system:masters covers every Kueue ClusterRole
        # (config/components/rbac) so RBAC is not what a case tests.
        pki.write_private(
            s / "tokens.csv",
            (
                f'{self.admin_token},kueue-harness-admin,1,"system:masters"\n'
                f'{self.kueue_token},kueue-manager,2,"system:masters"\n'
                f'{self.kcm_token},system:kube-controller-manager,3,"system:masters"\n'
                f'{self.scheduler_token},system:kube-scheduler,4,"system:masters"\n'
                f'{self.kwok_token},kwok-controller,5,"system:masters"\n'
            ).encode(),
        )
        pki.write_private(
            self.admin_kubeconfig,
            yaml.safe_dump(_kubeconfig(self.api_url, self.ca_file, self.admin_token, "admin")).encode(),
        )
        pki.write_private(
            s / "kcm.kubeconfig",
            yaml.safe_dump(_kubeconfig(self.api_url, self.ca_file, self.kcm_token, "kcm")).encode(),
        )
        ensure_metrics_certs(self.ca, self.say)

    def _wait_process(self, name: str, probe: Callable[[], Any], timeout: float, what: str,
                      interval: float = 0.05) -> None:
        log = Path(self.procs.procs[name][1].log)

        def check() -> Any:
            if not self.procs.alive(name):
                raise EnvironmentNotReady(
                    f"{name} exited during start-up (exit {self.procs.procs[name][0].returncode}). "
                    f"Last lines of {log}:\n{_tail(log)}"
                )
            return probe()

        try:
            wait_for(check, timeout=timeout, what=what, interval=interval, fatal=(EnvironmentNotReady,))
        except WaitTimeout as e:
            raise EnvironmentNotReady(f"{e}. Last lines of {log}:\n{_tail(log)}") from None

    # ---- etcd ------------------------------------------------------------------------------------
    def _spawn_etcd(self) -> None:
        data = self.state / "etcd-data"
        if self.template is not None:
            etcd_template.copy_data(self.template.data, data)
        self._spawned("etcd")
        self.procs.start("etcd", _etcd_argv(self.bins.etcd, data, self.ports["etcd"], self.ports["etcd_peer"]),
                         self.artifacts / "etcd.log")

    def _etcd_listening(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.ports["etcd"]), timeout=1):
            return True

    def _wait_etcd(self) -> None:
        try:
            self._wait_process("etcd", lambda: _etcd_healthy(self.ports["etcd"]), 30, "etcd /health")
        except EnvironmentNotReady:
            if self.template is not None:
                # A template etcd cannot start from is dropped, so the next start makes a new one.
                etcd_template.remove(self.template.key)
                self.say(f"etcd did not start from etcd template {self.template.key}; removed it "
                         "(the next start makes a new one)")
            raise
        self._ready_at("etcd")

    def _etcd_template(self) -> etcd_template.Template | None:
        """The etcd template for this Kueue build, made now when there is none (None: templates are off)."""
        if not etcd_template.enabled():
            return None
        crds = etcd_template.crd_files(self.bins.kueue_source)
        if not crds:  # nothing to install ahead (a stand-in Kueue tree in tests): start as without templates
            return None
        # What shapes the stored data besides the binaries: the service CIDR and any extra flags.
        settings = " ".join([*APISERVER_STORED_FLAGS, *APISERVER_EXTRA_FLAGS, *ETCD_EXTRA_FLAGS])
        k = etcd_template.key(crds, self.bins.kube_apiserver, self.bins.etcd, versions.KUBERNETES_VERSION,
                              versions.ETCD_VERSION, settings)
        found = etcd_template.find(k)
        if found is not None:
            return found
        with binaries.build_lock(f"etcd-template-{k}"):
            found = etcd_template.find(k)  # made by another process while this one waited
            if found is not None:
                return found
            t = time.monotonic()
            made = self._make_etcd_template(k, crds, settings)
            self.started["etcd_template_made_seconds"] = time.monotonic() - t
            return made

    def _make_etcd_template(self, k: str, crds: list[Path], settings: str) -> etcd_template.Template:
        """Make etcd template `k`: a fresh etcd and a kube-apiserver with a throwaway CA, keys and token
        (not this run's), Kueue's CRDs (Established) and its namespace installed, no kube-controller-manager
        (so no ServiceAccount, no token Secret); kube-apiserver stopped cleanly, the ConfigMap naming the
        throwaway CA deleted from etcd and every key checked (etcd_template.leaks: no Secret, no
        ServiceAccount); etcd stopped, the data stored, the throwaway folder deleted."""
        t0 = time.monotonic()
        self.say(f"making the etcd template for these CRDs, kube-apiserver {versions.KUBERNETES_VERSION} and "
                 f"etcd {versions.ETCD_VERSION} (once, a few seconds): {etcd_template.root() / k}")
        tdir = self.state / "etcd-template"
        tdir.mkdir(mode=0o700)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        ca = pki.make_ca("kueue-harness-template-ca", days=1)
        ca_file = tdir / "ca.crt"
        ca_file.write_bytes(ca.cert_pem)
        crt, key = pki.issue(ca, "kube-apiserver", ips=("127.0.0.1",), dns=("localhost",), days=1)
        (tdir / "apiserver.crt").write_bytes(crt)
        pki.write_private(tdir / "apiserver.key", key)
        priv, pub = pki.rsa_keypair()
        pki.write_private(tdir / "sa.key", priv)
        (tdir / "sa.pub").write_bytes(pub)
        token = secrets.token_urlsafe(24)
        pki.write_private(tdir / "tokens.csv", f'{token},kueue-harness-template,1,"system:masters"\n'.encode())
        names = ("template-etcd", "template-kube-apiserver")
        try:
            self.procs.start(names[0], _etcd_argv(self.bins.etcd, tdir / "data", etcd_port, peer_port),
                             self.artifacts / "etcd-template.log")
            self._wait_process(names[0], lambda: _etcd_healthy(etcd_port), 30, "template etcd /health")
            self.procs.start(names[1], _apiserver_argv(self.bins.kube_apiserver, etcd_port, api_port, tdir, ca_file),
                             self.artifacts / "kube-apiserver-template.log")
            url = f"https://127.0.0.1:{api_port}"
            self._wait_process(names[1], lambda: _https_get(f"{url}/readyz", ca_file, token)[0] == 200, 90,
                               "template kube-apiserver /readyz")
            from kubernetes import client

            cfg = client.Configuration()
            cfg.host, cfg.ssl_ca_cert = url, str(ca_file)
            cfg.api_key = {"authorization": f"Bearer {token}"}
            with client.ApiClient(cfg) as api:
                specs = _create_crds(api, crds)
                _wait_established(api, [c["name"] for c in specs])
                client.CoreV1Api(api).create_namespace({"metadata": {"name": KUEUE_NAMESPACE}})
            # SIGTERM: kube-apiserver removes its own lease and endpoints, etcd closes its database.
            for name in reversed(names):
                if name == names[0]:
                    # kube-apiserver is gone: drop what names the throwaway CA, then check every key.
                    etcd_template.scrub(etcd_port)
                    leaked = etcd_template.leaks(etcd_template.keys(etcd_port))
                    if leaked:
                        raise HarnessError(f"the etcd template would hold {', '.join(leaked)}; not stored")
                code = self.procs.stop(name, timeout=30)
                if code not in (0, -15, None):
                    raise HarnessError(f"{name} exited with {code} while the etcd template was made; not stored "
                                       f"(log: {self.artifacts})")
            inputs = {"crds": [f.name for f in crds], "kueue_source": str(self.bins.kueue_source),
                      "kube_apiserver": str(self.bins.kube_apiserver), "kubernetes_version": versions.KUBERNETES_VERSION,
                      "etcd": str(self.bins.etcd), "etcd_version": versions.ETCD_VERSION,
                      "settings": settings}
            return etcd_template.store(k, tdir / "data", specs, inputs, time.monotonic() - t0)
        finally:
            for name in names:
                self.procs.stop(name)
            shutil.rmtree(tdir, ignore_errors=True)

    # ---- kube-apiserver, kube-controller-manager -------------------------------------------------
    def _ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _get(self, url: str, token: str | None = None, timeout: float = 2,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        return _https_get(url, self.ca_file, token, timeout, headers)

    def _spawn_apiserver(self) -> None:
        self._spawned("kube_apiserver")
        self.procs.start(
            "kube-apiserver",
            _apiserver_argv(self.bins.kube_apiserver, self.ports["etcd"], self.ports["apiserver"], self.state,
                            self.ca_file),
            self.artifacts / "kube-apiserver.log",
        )

    def _apiserver_answers(self) -> bool:
        """True once kube-apiserver completes a TLS handshake and answers /readyz (with any status)."""
        return self._get(f"{self.api_url}/readyz", self.admin_token)[0] > 0

    def _spawn_controller_manager_when_healthy(self) -> None:
        """(In a helper thread.) Spawn kube-controller-manager once kube-apiserver's /healthz is OK."""
        def healthy() -> bool:
            if self._abandon:
                raise EnvironmentNotReady("the start was abandoned")
            return self._get(f"{self.api_url}/healthz", self.admin_token)[0] == 200

        self._wait_process("kube-apiserver", healthy, 90, "kube-apiserver /healthz", interval=0.02)
        self.started["kube_apiserver_healthz_at"] = time.monotonic() - self._t0
        self._spawn_controller_manager()

    def _wait_apiserver(self) -> None:
        # From a template the hooks that only (re)write what it holds are not waited for.
        query = ("?" + "&".join(f"exclude={x}" for x in _TEMPLATE_READYZ_EXCLUDES)) if self.template else ""
        self._wait_process(
            "kube-apiserver",
            lambda: self._get(f"{self.api_url}/readyz{query}", self.admin_token)[0] == 200,
            90, "kube-apiserver /readyz",
        )
        self._ready_at("kube_apiserver")

    def _spawn_controller_manager(self) -> None:
        s = self.state
        self._spawned("kube_controller_manager")
        self.procs.start(
            "kube-controller-manager",
            [
                str(self.bins.kube_controller_manager), f"--kubeconfig={s / 'kcm.kubeconfig'}",
                "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={self.ports['kcm']}",
                f"--service-account-private-key-file={s / 'sa.key'}", f"--root-ca-file={self.ca_file}",
                "--use-service-account-credentials=false",
                f"--controllers={','.join(KCM_CONTROLLERS)}",
                "--v=1",
            ],
            self.artifacts / "kube-controller-manager.log",
        )

    def _wait_controller_manager(self) -> None:
        # Ready when the serviceaccount controller has created "default" in the default namespace.
        self._wait_process(
            "kube-controller-manager",
            lambda: self._get(f"{self.api_url}/api/v1/namespaces/default/serviceaccounts/default",
                              self.admin_token)[0] == 200,
            60, "kube-controller-manager to create the default ServiceAccount",
        )
        self._ready_at("kube_controller_manager")

    # ---- Pods that run: kube-scheduler + kwok (harness/env/pods.py) ----------------------------------
    def start_pods(self) -> "pods_part.PodsPart":
        """Start kube-scheduler and kwok if they are not running yet (building them first if needed), and
        wait until both are ready; then Pods bound to kwok's Nodes run. Kept for the environment's life.
        Safe from any thread; the processes are spawned from a long-lived helper thread (_in_helper).
        Raises BuildError, HarnessError (no Go), EnvironmentNotReady (with the component's log tail)."""
        with self._pods_lock:
            if self.pods is None:
                t = time.monotonic()
                binaries.kube_scheduler(self.say), binaries.kwok(self.say)
                try:
                    _in_helper(self._spawn_pods).result()
                    self.pods = self._wait_pods()
                except BaseException:
                    for name in ("kwok", "kube-scheduler"):  # a later call starts both afresh
                        self.procs.stop(name)
                    raise
                self.started["pods_started_seconds"] = time.monotonic() - t
                self.say(f"Pods run: kube-scheduler {self.pods.versions.get('kube_scheduler')} and kwok "
                         f"{self.pods.versions.get('kwok')} started in {self.started['pods_started_seconds']:.1f}s "
                         f"(logs: {self.artifacts})")
            return self.pods

    def pods_info(self) -> dict[str, Any] | None:
        """What ran for Pods (kube-scheduler's and kwok's versions, as the binaries report them), or None
        when they never started (summary.json, bundle.json)."""
        return self.pods.info() if self.pods is not None else None

    def _spawn_pods(self) -> None:
        s = self.state
        self.ports["scheduler"], self.ports["kwok"] = free_port(), free_port()
        for name, token in (("scheduler", self.scheduler_token), ("kwok", self.kwok_token)):
            pki.write_private(s / f"{name}.kubeconfig",
                              yaml.safe_dump(_kubeconfig(self.api_url, self.ca_file, token, name)).encode())
        crt, key = pki.issue(self.ca, "kube-scheduler", ips=("127.0.0.1",), dns=("localhost",))
        (s / "scheduler.crt").write_bytes(crt)
        pki.write_private(s / "scheduler.key", key)
        source = pods_part.kwok_source()
        (s / "kwok-config.yaml").write_text(pods_part.kwok_config())
        configs = [*pods_part.kwok_stage_files(source), s / "kwok-config.yaml"]
        self._spawned("kube_scheduler")
        self.procs.start("kube-scheduler", pods_part.scheduler_argv(
            binaries.kube_scheduler(self.say), s / "scheduler.kubeconfig", self.ports["scheduler"],
            s / "scheduler.crt", s / "scheduler.key"), self.artifacts / "kube-scheduler.log")
        self._spawned("kwok")
        # KWOK_WORKDIR: kwok also reads <workdir>/kwok.yaml (default ~/.kwok); a user's must not leak in.
        self.procs.start("kwok", pods_part.kwok_argv(binaries.kwok(self.say), s / "kwok.kubeconfig", configs,
                                                    self.ports["kwok"]),
                         self.artifacts / "kwok.log", env={**os.environ, "KWOK_WORKDIR": str(s / "kwok")})

    def _wait_pods(self) -> "pods_part.PodsPart":
        ctx = self._ssl_context()
        self._wait_process("kube-scheduler", lambda: pods_part.http_ok(
            f"https://127.0.0.1:{self.ports['scheduler']}/readyz", ctx), 60, "kube-scheduler /readyz")
        self._ready_at("kube_scheduler")
        self._wait_process("kwok", lambda: pods_part.http_ok(f"http://127.0.0.1:{self.ports['kwok']}/healthz"),
                           60, "kwok /healthz")
        self._ready_at("kwok")
        sched, kwok = binaries.kube_scheduler(self.say), binaries.kwok(self.say)
        return pods_part.PodsPart(sched, kwok, {"kube_scheduler": pods_part.reported_version(sched),
                                                "kwok": pods_part.reported_version(kwok)})

    # ---- Kueue -----------------------------------------------------------------------------------
    def api_client(self):
        """A `kubernetes.client.ApiClient` with the admin identity, direct to kube-apiserver."""
        if self._api is None:
            from kubernetes import client

            cfg = client.Configuration()
            cfg.host = self.api_url
            cfg.ssl_ca_cert = str(self.ca_file)
            cfg.api_key = {"authorization": f"Bearer {self.admin_token}"}
            self._api = client.ApiClient(cfg)
        return self._api

    def _install_kueue_manifests(self) -> None:
        """Kueue's CRDs and namespace, then its webhook configurations.

        Without an etcd template: create the CRDs, wait until they are Established, create kueue-system.
        From a template both are in etcd already: wait until this kube-apiserver serves every CRD version
        in its aggregated discovery (what Kueue's REST mapper reads when it starts). The webhook
        configurations are never in a template: their caBundle is this run's CA.
        """
        from kubernetes import client

        api = self.api_client()
        if self.template is None:
            names = [c["name"] for c in _create_crds(api, etcd_template.crd_files(self.bins.kueue_source))]
            _wait_established(api, names)
            client.CoreV1Api(api).create_namespace({"metadata": {"name": KUEUE_NAMESPACE}})
        else:
            missing: list[str] = []
            wait_for(lambda: self._crds_served(self.template.crds, missing), timeout=30, interval=0.02,
                     what=f"kube-apiserver to serve the {len(self.template.crds)} Kueue CRDs of the etcd template",
                     describe=lambda: f"not in discovery: {', '.join(missing) or '(discovery not answered)'}")
        self._install_webhooks()

    def _crds_served(self, crds: list[dict[str, Any]], missing: list[str]) -> bool:
        """True when discovery lists every served version of every CRD in `crds`; `missing` gets the rest."""
        st, body = self._get(f"{self.api_url}/apis", self.admin_token, headers={"Accept": _AGGREGATED_DISCOVERY})
        if st != 200:
            return False
        doc = json.loads(body)
        served: dict[tuple[str, str], set[str]] = {}
        if doc.get("kind") == "APIGroupDiscoveryList":
            for g in doc.get("items") or []:
                for v in g.get("versions") or []:
                    served[(g["metadata"]["name"], v["version"])] = {r["resource"] for r in v.get("resources") or []}
        else:  # a kube-apiserver without aggregated discovery: one request per group version
            for gv in {(c["group"], v) for c in crds for v in c["versions"]}:
                st, body = self._get(f"{self.api_url}/apis/{gv[0]}/{gv[1]}", self.admin_token)
                if st == 200:
                    served[gv] = {r["name"] for r in json.loads(body).get("resources") or []}
        missing[:] = [f"{c['plural']}.{c['group']}/{v}" for c in crds for v in c["versions"]
                      if c["plural"] not in served.get((c["group"], v), set())]
        return not missing

    def _install_webhooks(self) -> None:
        from kubernetes import client

        adm = client.AdmissionregistrationV1Api(self.api_client())
        from kubernetes.client.exceptions import ApiException

        path = self.bins.kueue_source / "config" / "components" / "webhook" / "manifests.yaml"
        ca_b64 = base64.b64encode(self.ca.cert_pem).decode()
        # Kueue's own kinds and the enabled integrations (batch/job, plus what a declared configuration adds).
        frameworks = list(self._kueue_config().get("integrations", {}).get("frameworks") or [])
        for doc in yaml.load_all(path.read_text(), Loader=_YAML_LOADER):
            if not doc:
                continue
            kept = []
            for hook in doc.get("webhooks", []):
                svc_path = hook["clientConfig"]["service"]["path"]
                if not kconfig.webhook_wanted(svc_path, frameworks):
                    continue
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.ports['webhook']}{svc_path}", "caBundle": ca_b64,
                }
                kept.append(hook)
            doc["webhooks"] = kept
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            kind = "mutating" if doc["kind"] == "MutatingWebhookConfiguration" else "validating"
            try:
                getattr(adm, f"create_{kind}_webhook_configuration")(doc)
            except ApiException as e:  # installed before: the integrations changed (configure_kueue)
                if e.status != 409:
                    raise
                old = getattr(adm, f"read_{kind}_webhook_configuration")(doc["metadata"]["name"])
                doc["metadata"]["resourceVersion"] = old.metadata.resource_version
                getattr(adm, f"replace_{kind}_webhook_configuration")(doc["metadata"]["name"], doc)

    def _kueue_config(self) -> dict[str, Any]:
        """The Configuration Kueue is given: the harness's own (docs/kueue-notes.md §2), the overrides, then
        the declared `kueue_config` (harness/kueue/config.py KueueConfig.apply)."""
        return self.kueue_config.apply({
            "apiVersion": versions.kueue_profile(self.bins.kueue_build.base_tag).config_api,
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['kueue_health']}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.ports["webhook"],
                        "certDir": str(self.state / "webhook-certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["batch/job"]},
            "featureGates": {"VisibilityOnDemand": False},
            **self.kueue_config_overrides,
        })

    def _start_kueue(self) -> None:
        s = self.state
        t_kueue = time.monotonic()
        (s / "kueue-config.yaml").write_text(yaml.safe_dump(self._kueue_config()))
        if self.proxy is not None:
            server, ca = self.proxy.url, self.proxy.ca_file
        else:
            server, ca = self.api_url, self.ca_file
        pki.write_private(s / "kueue.kubeconfig",
                          yaml.safe_dump(_kubeconfig(server, ca, self.kueue_token, "kueue")).encode())
        self.procs.start(
            "kueue",
            [
                str(self.bins.kueue), f"--config={s / 'kueue-config.yaml'}",
                f"--kubeconfig={s / 'kueue.kubeconfig'}", "--zap-log-level=3",
            ],
            self.kueue_log,
            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        )
        self._wait_process(
            "kueue",
            lambda: urllib.request.urlopen(
                f"http://127.0.0.1:{self.ports['kueue_health']}/readyz", timeout=2).status == 200,
            90, "Kueue /readyz",
        )
        self.started["kueue_readyz_seconds"] = time.monotonic() - t_kueue
        self._read_reported_version()
        self._wait_process("kueue", self._webhooks_answer, 60, "Kueue's webhooks to answer (dry-run create)")

    def _read_reported_version(self) -> None:
        """What the binary says it is: the last "Initializing" line of its log (gitVersion, gitCommit)."""
        for line in kueue_log.lines(self.kueue_log):
            if line.get("msg") == "Initializing" and "gitVersion" in line:
                self.kueue_reported = {k: str(line.get(k, "")) for k in ("gitVersion", "gitCommit", "buildDate")}
            elif line.get("msg") == "Loaded feature gates" and isinstance(line.get("featureGates"), dict):
                self.kueue_reported_gates = dict(line["featureGates"])
        if self.kueue_reported.get("gitVersion"):
            self.kueue_version = self.kueue_reported["gitVersion"]

    def kueue_identity(self) -> versions.BuildIdentity:
        """The running Kueue as known bugs judge it (reported version and commit, ancestry in its repo)."""
        return self.bins.kueue_build.identity(self.kueue_reported.get("gitVersion"),
                                              self.kueue_reported.get("gitCommit"))

    def kueue_build_info(self) -> dict[str, Any]:
        """For summary.json / bundle.json: what ran (reported) and how it was built."""
        reported = self.kueue_reported.get("gitCommit", "")
        commit = reported if re.fullmatch(r"[0-9a-f]{7,40}", reported) else self.bins.kueue_build.commit
        return {"version": self.kueue_version, "commit": commit,
                "reported": dict(self.kueue_reported), "build": self.bins.kueue_build.to_json()}

    def _webhooks_answer(self) -> bool:
        return webhooks_answer(self.api_client())

    def kueue_alive(self) -> bool:
        return "kueue" in self.procs.procs and self.procs.alive("kueue")

    def kueue_starts(self) -> int:
        """How many times Kueue was started in this environment (1 unless restart_kueue() was used)."""
        return self.started.get("kueue_starts", 1)

    def restart_kueue(self, kill: bool = False) -> None:
        """A process fault: stop Kueue (SIGTERM, or SIGKILL with `kill`), start it again with the same
        configuration, and wait until its webhooks answer. Its log continues in the same kueue.log."""
        import signal as _signal

        if "kueue" in self.procs.procs:
            if kill and self.procs.alive("kueue"):
                os.killpg(self.procs.procs["kueue"][1].pgid, _signal.SIGKILL)
            self.procs.stop("kueue")
        self._start_kueue()
        self.started["kueue_starts"] = self.kueue_starts() + 1

    # ---- per-case Kueue configuration (harness/kueue/config.py, docs/kueue-config.md) --------------
    def resolve_kueue_config(self, cfg: kconfig.KueueConfig) -> kconfig.KueueConfig:
        """`cfg` with its "if-known" feature gates (kconfig.IF_KNOWN) resolved for this build: on where its
        pkg/features/kube_features.go has the gate, else (no copy of that file at hand) where the running
        Kueue reported it in its "Loaded feature gates" line; left out otherwise. `cfg` itself when it has
        none. Raises KueueConfigError when neither source is at hand."""
        if not cfg.if_known:
            return cfg
        found = kconfig.features_text(self.bins.kueue_build)
        if found is not None:
            return cfg.resolve(kconfig.parse_gates(found[0]))
        if self.kueue_reported_gates:
            return cfg.resolve(self.kueue_reported_gates)
        raise kconfig.KueueConfigError(
            f"cannot tell whether Kueue {self.kueue_version} knows {', '.join(cfg.if_known)} (declared "
            f"{kconfig.IF_KNOWN!r}): no copy of its {kconfig.FEATURES_FILE} is at hand and Kueue has not reported "
            "its gates yet. Give the Kueue repository (--kueue-repo / KUEUE_HARNESS_KUEUE_REPO) or say true/false")

    def check_kueue_config(self, cfg: kconfig.KueueConfig) -> None:
        """Refuse `cfg` (resolved: resolve_kueue_config) before Kueue sees it: the feature gates it gives must
        be in this build's pkg/features/kube_features.go and not set against a locked default. Raises
        KueueConfigError. Without a copy of that file at hand the gates are left to Kueue (which exits on an
        unknown one)."""
        gates = cfg.effective_gates()
        if not gates:
            return
        found = kconfig.features_text(self.bins.kueue_build)
        if found is None:
            self.say(f"cannot check feature gates {', '.join(gates)}: no copy of Kueue's "
                     f"{kconfig.FEATURES_FILE} of this build is at hand; Kueue itself will refuse an unknown one")
            return
        kconfig.check_gates(gates, kconfig.parse_gates(found[0]), self.kueue_version)

    def configure_kueue(self, cfg: "kconfig.KueueConfig | None") -> dict[str, Any]:
        """Give Kueue the configuration `cfg` declares (None: the harness's default). Kueue is restarted
        only when the Configuration file this makes differs from the one the running Kueue was started with;
        the webhooks follow the integrations. Returns {"restarted": bool, "seconds": restart seconds (0 when
        not restarted)}, plus "if_known": {gate: given (bool)} when `cfg` declares "if-known" gates (resolved
        for this build: resolve_kueue_config). Raises KueueConfigError before touching Kueue for a bad gate;
        when Kueue does not start with the new file, it is started again with the previous one and
        KueueConfigError says why."""
        cfg = self.resolve_kueue_config(cfg or kconfig.DEFAULT)
        extra = {"if_known": cfg.if_known_given()} if cfg.if_known else {}
        previous = self.kueue_config
        written = self.state / "kueue-config.yaml"
        running = yaml.safe_load(written.read_text()) if written.is_file() else None
        self.kueue_config = cfg
        wanted = self._kueue_config()
        if running == wanted and self.kueue_alive():
            return {"restarted": False, "seconds": 0.0, **extra}
        try:
            self.check_kueue_config(cfg)
        except BaseException:
            self.kueue_config = previous
            raise
        t = time.monotonic()
        hooks = (running or {}).get("integrations") != wanted.get("integrations")
        try:
            if hooks:
                self._install_webhooks()
            self.restart_kueue()
        except EnvironmentNotReady as e:
            self.kueue_config = previous
            if hooks:
                self._install_webhooks()
            self.restart_kueue()
            raise kconfig.KueueConfigError(
                f"Kueue did not start with {cfg.summary()}: {str(e).splitlines()[0]}\n(its log: {self.kueue_log}). "
                "Kueue runs again with the previous configuration; fix the declaration") from None
        self.started["kueue_config_changes"] = self.started.get("kueue_config_changes", 0) + 1
        return {"restarted": True, "seconds": round(time.monotonic() - t, 3), **extra}

    def kueue_config_info(self) -> dict[str, Any]:
        """For summary.json, bundle.json and report.md: what was declared, the Configuration file the running
        Kueue was started with (no secrets: ports and paths), and the feature gates Kueue reported."""
        written = self.state / "kueue-config.yaml"
        try:
            configuration = yaml.safe_load(written.read_text())
        except OSError:
            configuration = None
        info = {"declared": self.kueue_config.to_json(), "summary": self.kueue_config.summary(),
                "configuration": configuration, "feature_gates_reported": dict(self.kueue_reported_gates)}
        if self.kueue_config.if_known:
            info["if_known"] = self.kueue_config.if_known_given()  # "if-known" gate -> given (on) to this build
        return info

    # ---- stop ------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every process (Kueue first), keep logs in `artifacts`, delete secrets from `state`."""
        if self._api is not None:
            self._api.close()
            self._api = None
        self.procs.stop_all()
        # Keys, tokens, kubeconfigs and etcd's data go; only the (secret-free) process record stays, for
        # the next start's reap_stale(), which then removes the folder.
        for child in self.state.iterdir():
            if child.name != "processes.json":
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
