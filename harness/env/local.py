"""The embedded local environment: etcd + kube-apiserver + kube-controller-manager + the fault proxy +
the Kueue manager as local processes on loopback, all real binaries (harness/build/binaries.py); on demand
also kube-scheduler + kwok, for Pods that run (harness/env/pods.py).

Kueue's API traffic goes through the proxy (its kubeconfig points at mitmdump, bearer-token identity);
the harness's own reads and watches go to kube-apiserver directly with an admin token.
Kueue setup follows docs/kueue-notes.md §2-5 and Kueue's test/integration/framework.
"""

from __future__ import annotations

import concurrent.futures
import os
import secrets
import shutil
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.build import binaries
from harness.common import pki
from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.procs import ProcessGroup, cpu_ticks, exit_words, reap_stale
from harness.common.waiting import WaitTimeout, wait_progressing
from harness.env import control_plane as cp
from harness.env import etcd_template
from harness.env import pods as pods_part
from harness.env.control_plane import (  # noqa: F401 - importable from here as before
    _AGGREGATED_DISCOVERY,
    KUEUE_NAMESPACE,
    SERVICE_CIDR,
    Say,
    _apiserver_argv,
    _etcd_argv,
    _in_helper,
    check_port_free,
    ensure_metrics_certs,
    free_port,
)
from harness.env.kueue_process import KueueProcess
from harness.env.runs import check_free_space, runs_root  # noqa: F401 - re-exported for callers
from harness.kueue import config as kconfig
from harness.kueue import versions
from harness.proxy.client import Proxy


@dataclass
class LocalEnvironment(KueueProcess):
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
    say: Say = cp._say
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
        say: Say = cp._say, with_proxy: bool = True, proxy_port: int | None = None,
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
                cp.check_port_free(port, what)
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
            "etcd": cp.free_port(), "etcd_peer": cp.free_port(), "apiserver": cp.free_port(), "kcm": cp.free_port(),
            "webhook": cp.free_port(), "kueue_health": cp.free_port(), "kueue_pprof": cp.free_port(),
            "kueue_visibility": cp.free_port(),
            "proxy": proxy_port or cp.free_port(), "control": control_port or cp.free_port(),
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
        env.ui = (cp.free_port(), intercept) if ui else None
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
        Two helper threads (cp._in_helper) start kube-controller-manager once kube-apiserver's /healthz is OK
        (it polls /healthz once a second before it starts its controllers: k8s.io/controller-manager
        app.WaitForAPIServer; /healthz is OK only when the two post-start hooks that first sleep a second
        are done, cp._TEMPLATE_READYZ_EXCLUDES, so started earlier it would wait up to a second longer), and
        the proxy right away (cp.PROXY_AFTER_SERVING). Once kube-apiserver is ready (without those hooks) the
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
        helpers = [cp._in_helper(self._spawn_controller_manager_when_healthy)]
        if with_proxy and not cp.PROXY_AFTER_SERVING:
            helpers.append(cp._in_helper(self._start_proxy))
        try:
            self._wait_etcd()
            self._wait_process("kube-apiserver", self._apiserver_answers, 90, "kube-apiserver to serve TLS")
            self.started["kube_apiserver_serving_at"] = time.monotonic() - t0
            if with_proxy and cp.PROXY_AFTER_SERVING:
                helpers.append(cp._in_helper(self._start_proxy))
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
            yaml.safe_dump(cp._kubeconfig(self.api_url, self.ca_file, self.admin_token, "admin")).encode(),
        )
        pki.write_private(
            s / "kcm.kubeconfig",
            yaml.safe_dump(cp._kubeconfig(self.api_url, self.ca_file, self.kcm_token, "kcm")).encode(),
        )
        cp.ensure_metrics_certs(self.ca, self.say)

    def _wait_process(self, name: str, probe: Callable[[], Any], timeout: float, what: str,
                      interval: float = 0.05) -> None:
        log = Path(self.procs.procs[name][1].log)

        def check() -> Any:
            if not self.procs.alive(name):
                proc, rec = self.procs.procs[name]
                raise EnvironmentNotReady(
                    f"{name} exited during start-up ({exit_words(proc.returncode)}). {_damage_note(rec.argv0)}"
                    f"Last lines of {log}:\n{cp._tail(log) or '(the log is empty: it died before writing a line)'}"
                )
            return probe()

        pid = self.procs.procs[name][0].pid

        def state() -> tuple[Any, int]:
            # Starting is progress while the process uses CPU or writes its log: on a slow machine (a cgroup
            # with 10 % of a core) kube-apiserver took minutes, and a fixed budget failed a start still under way.
            return cpu_ticks(pid), log.stat().st_size if log.exists() else 0

        try:
            wait_progressing(check, state=state, stall=timeout, cap=20 * timeout, what=what, interval=interval,
                             say=self.say, fatal=(EnvironmentNotReady,))
        except WaitTimeout as e:
            raise EnvironmentNotReady(f"{e}. Last lines of {log}:\n{cp._tail(log)}") from None

    # ---- etcd ------------------------------------------------------------------------------------
    def _spawn_etcd(self) -> None:
        data = self.state / "etcd-data"
        if self.template is not None:
            etcd_template.copy_data(self.template.data, data)
        self._spawned("etcd")
        self.procs.start("etcd", cp._etcd_argv(self.bins.etcd, data, self.ports["etcd"], self.ports["etcd_peer"]),
                         self.artifacts / "etcd.log")

    def _etcd_listening(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.ports["etcd"]), timeout=1):
            return True

    def _wait_etcd(self) -> None:
        try:
            self._wait_process("etcd", lambda: cp._etcd_healthy(self.ports["etcd"]), 30, "etcd /health")
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
        crds = etcd_template.crd_files(self.bins.kueue_source, self.bins.extra_crds)
        if not crds:  # nothing to install ahead (a stand-in Kueue tree in tests): start as without templates
            return None
        # What shapes the stored data besides the binaries: the service CIDR and any extra flags.
        settings = " ".join([*cp.APISERVER_STORED_FLAGS, *cp.APISERVER_EXTRA_FLAGS, *cp.ETCD_EXTRA_FLAGS])
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
        etcd_port, peer_port, api_port = cp.free_port(), cp.free_port(), cp.free_port()
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
            self.procs.start(names[0], cp._etcd_argv(self.bins.etcd, tdir / "data", etcd_port, peer_port),
                             self.artifacts / "etcd-template.log")
            self._wait_process(names[0], lambda: cp._etcd_healthy(etcd_port), 30, "template etcd /health")
            self.procs.start(names[1], cp._apiserver_argv(self.bins.kube_apiserver, etcd_port, api_port, tdir, ca_file),
                             self.artifacts / "kube-apiserver-template.log")
            url = f"https://127.0.0.1:{api_port}"
            self._wait_process(names[1], lambda: cp._https_get(f"{url}/readyz", ca_file, token)[0] == 200, 90,
                               "template kube-apiserver /readyz")
            from kubernetes import client

            cfg = client.Configuration()
            cfg.host, cfg.ssl_ca_cert = url, str(ca_file)
            cfg.api_key = {"authorization": f"Bearer {token}"}
            with client.ApiClient(cfg) as api:
                specs = cp._create_crds(api, crds)
                cp._wait_established(api, [c["name"] for c in specs])
                client.CoreV1Api(api).create_namespace({"metadata": {"name": cp.KUEUE_NAMESPACE}})
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
        return cp._https_get(url, self.ca_file, token, timeout, headers)

    def _spawn_apiserver(self) -> None:
        self._spawned("kube_apiserver")
        self.procs.start(
            "kube-apiserver",
            cp._apiserver_argv(self.bins.kube_apiserver, self.ports["etcd"], self.ports["apiserver"], self.state,
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
        query = ("?" + "&".join(f"exclude={x}" for x in cp._TEMPLATE_READYZ_EXCLUDES)) if self.template else ""
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
                f"--controllers={','.join(cp.KCM_CONTROLLERS)}",
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
        Safe from any thread; the processes are spawned from a long-lived helper thread (cp._in_helper).
        Raises BuildError, HarnessError (no Go), EnvironmentNotReady (with the component's log tail)."""
        with self._pods_lock:
            if self.pods is None:
                t = time.monotonic()
                binaries.kube_scheduler(self.say), binaries.kwok(self.say)
                try:
                    cp._in_helper(self._spawn_pods).result()
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
        self.ports["scheduler"], self.ports["kwok"] = cp.free_port(), cp.free_port()
        for name, token in (("scheduler", self.scheduler_token), ("kwok", self.kwok_token)):
            pki.write_private(s / f"{name}.kubeconfig",
                              yaml.safe_dump(cp._kubeconfig(self.api_url, self.ca_file, token, name)).encode())
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

    # ---- stop ------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every process (Kueue first), keep logs in `artifacts`, delete secrets from `state`."""
        if self._api is not None:
            self._api.close()
            self._api = None
        self.procs.stop_all()
        from harness.env.runs import forget_secrets

        forget_secrets(self.state)


def _damage_note(binary: str) -> str:
    """After a component died at start-up: whether its binary is damaged (its checksum differs from the
    record written when the harness built it: harness/build/integrity.py). A damaged one is removed, so
    the next run builds it again; "" when it is intact or not the harness's."""
    from harness.build import integrity

    path = Path(binary)
    why = integrity.damaged(path) if path.is_file() else None
    if why is None:
        return ""
    path.unlink(missing_ok=True)
    integrity.record_path(path).unlink(missing_ok=True)
    return (f"Its binary {path} is damaged ({why}): removed it, so the next run builds it again "
            "(`kueue-harness build`). ")

