"""Kueue running inside a cluster (a kind cluster, or any cluster where Kueue is installed), with its API
traffic routed through the fault proxy on this machine. Used by the `kind` and `kubeconfig` targets.

How the traffic is routed (nothing is rebuilt; the Kueue image stays the release image):
1. The proxy (mitmdump + proxy_addons/kueue_faults.py) runs on this machine, listening on an address the
   cluster's Pods can reach (for kind: the gateway of the `kind` Docker network) and forwarding to the
   cluster's kube-apiserver, whose certificate it verifies against the CA of the admin kubeconfig. Its
   control channel stays on 127.0.0.1.
2. A Secret `kueue-harness-kubeconfig` in Kueue's namespace holds a kubeconfig whose server is the proxy,
   whose CA is the proxy's CA, with `tls-server-name: kueue-harness-proxy` (mitmproxy mints a certificate
   for the name the client sends as SNI, so the name does not depend on which address the cluster uses to
   reach this machine), and whose credential is Kueue's own projected service-account token
   (`tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token`, re-read by client-go as it rotates).
3. A strategic-merge patch of Deployment `kueue-controller-manager` mounts the Secret and passes
   `--kubeconfig=/etc/kueue-harness/kubeconfig` (a flag: Kueue's visibility server reads only the flag,
   docs/kueue-notes.md §4) and `--zap-log-level=3` (the V(3) lines the cases count). The original args
   are kept in an annotation on the Deployment, so a later run can undo what a killed run left
   (`undo_leftover`).
4. The rollout is awaited like `kubectl rollout status`, then until the new Pod holds Kueue's leader Lease
   and the proxy has seen the new Pod's traffic. Kueue's log is followed through the API
   (`pods/log?follow=true`) into `<artifacts>/kueue.log`.
On stop everything is undone: the patch is reverted (original args restored, volume and mount removed),
the rollout awaited, the Secret deleted, the proxy stopped.

Names follow Kueue's release manifests (config/default of sigs.k8s.io/kueue: namespace `kueue-system`,
namePrefix `kueue-`, container `manager`, Lease `c1f6bfd2.kueue.x-k8s.io`).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.procs import ProcessGroup, reap_stale
from harness.common.waiting import WaitTimeout, wait_for, wait_progressing
from harness.env.incluster_config import InClusterKueueConfig
from harness.env import webhook_ready
from harness.env.pod_logs import PodLogFollower
from harness.env.routing import (
    ANN_ROUTED_BY,
    KUEUE_DEPLOYMENT,
    KUEUE_NAMESPACE,
    SECRET_NAME,
    KueueRouting,
    Say,
    _free_port,
    _say,
    api_client_from_kubeconfig,
    container_of,
    guess_listen_host,
    image_version,
    kueue_leader_election,
    render_kubeconfig,
    upstream_from_kubeconfig,
)
from harness.objects import webhooks_answer
from harness.proxy.client import Proxy


# ---- the environment ---------------------------------------------------------------------------------
@dataclass
class InClusterEnvironment(InClusterKueueConfig):
    """A cluster where Kueue runs from its release manifests, routed through the proxy on this machine.

    Same surface as LocalEnvironment for the plugin and the cases: `proxy`, `kueue_log`, `api_client()`,
    `kueue_alive()`, `started`, `admin_kubeconfig`, `stop()`.
    """

    target: str
    kueue_version: str
    artifacts: Path
    state: Path
    admin_kubeconfig: Path
    context: str | None
    procs: ProcessGroup
    routing: KueueRouting
    run_id: str
    say: Say = _say
    proxy: Proxy | None = None
    kubernetes_version: str = ""
    pod: str = ""
    pod_restarts: int = 0
    #: Kueue starts before the current Pod's container restarts: 1, plus one per restart_kueue().
    starts: int = 1
    started: dict[str, float] = field(default_factory=dict)
    #: The harness.build.kueue.KueueBuild whose image runs (the kind target's own build), None for a
    #: published image: known bugs are then judged on the build, not on the image's tag.
    kueue_build: Any = None
    #: Called at the end of stop(), last first (the kind target deletes a cluster it created here).
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    #: The cluster's one-run lock (harness/env/cluster_lock.py), released by stop() after the routing's undo.
    lock: Any = None
    _api: Any = None
    _log: PodLogFollower | None = None
    #: Problems of the log followers of earlier Pods (restart_kueue replaces the follower).
    _log_problems: int = 0
    _stopped: bool = False
    _installed: bool = False
    #: harness.env.pods.PodsPart once start_pods() ran (kwok on this machine, the cluster's kube-scheduler).
    pods: Any = None
    _pods_lock: Any = field(default_factory=threading.Lock)
    #: The real Nodes keep_pods_on_case_nodes() tainted (untainted again by it, or by stop()).
    _tainted_nodes: list[str] = field(default_factory=list)

    @property
    def kueue_log(self) -> Path:
        return self.artifacts / "kueue.log"

    def api_client(self):
        """Admin access, direct to kube-apiserver (never through the proxy)."""
        if self._api is None:
            self._api = api_client_from_kubeconfig(self.admin_kubeconfig, self.context)
        return self._api

    @classmethod
    def start(
        cls, kueue_version: str, artifacts: Path | None, admin_kubeconfig: Path, *, target: str = "kubeconfig",
        context: str | None = None, proxy_listen_host: str | None = None, proxy_server_host: str | None = None,
        namespace: str = KUEUE_NAMESPACE, deployment: str = KUEUE_DEPLOYMENT, check_version: bool = True,
        state: Path | None = None, procs: ProcessGroup | None = None, run_id: str | None = None,
        cleanups: list[Callable[[], None]] | None = None, rollout_timeout: float = 240.0, say: Say = _say,
        kueue_build: Any = None, lock: Any = None,
    ) -> "InClusterEnvironment":
        """Route the cluster's Kueue through a proxy on this machine and wait until it runs that way.

        Raises HarnessError (bad kubeconfig, Kueue absent or another version), EnvironmentNotReady (rollout
        failed: the message has the Pods' states and log tail). On failure everything done is undone.
        """
        from harness.env.runs import runs_root

        t0 = time.monotonic()
        reap_stale(runs_root(), say)
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(2)}"
        if state is None:
            state = runs_root() / run_id
            state.mkdir(mode=0o700)
        artifacts = artifacts or Path("artifacts") / run_id
        artifacts.mkdir(parents=True, exist_ok=True)
        procs = procs or ProcessGroup(state)
        api = api_client_from_kubeconfig(admin_kubeconfig, context)
        env = cls(target=target, kueue_version=kueue_version, artifacts=artifacts, state=state,
                  admin_kubeconfig=admin_kubeconfig, context=context, procs=procs,
                  routing=KueueRouting(api, namespace, deployment, say=say), run_id=run_id, say=say,
                  cleanups=list(cleanups or []), _api=api, kueue_build=kueue_build)
        try:
            # One run at a time on a cluster (harness/env/cluster_lock.py): taken before anything is touched, so a
            # second run never undoes a live run's routing.
            if lock is None:
                from harness.env.cluster_lock import ClusterLock

                lock = ClusterLock(api, run_id, say)
            env.lock = lock
            if not lock.held:
                lock.acquire()
            env._start(proxy_listen_host, proxy_server_host, check_version, rollout_timeout)
        except BaseException:
            try:
                env.stop()
            except Exception as e:  # noqa: BLE001 - said; the start failure is the error to raise
                say(f"clean-up after the failed start failed too: {type(e).__name__}: {e}")
            raise
        env.started["ready_seconds"] = time.monotonic() - t0
        say(f"environment ready in {env.started['ready_seconds']:.1f}s (target {target}, Kueue {kueue_version} "
            f"in pod {namespace}/{env.pod}, kube-apiserver {env.kubernetes_version}); artifacts: {artifacts}")
        return env

    def _start(self, listen_host: str | None, server_host: str | None, check_version: bool,
               rollout_timeout: float) -> None:
        from kubernetes import client

        r = self.routing
        self.kubernetes_version = client.VersionApi(self.api_client()).get_code().git_version
        dep = r.read()
        image = container_of(dep, r.container).get("image", "")
        found = image_version(image)
        if check_version and found and found != self.kueue_version:
            raise HarnessError(
                f"Kueue in {r.namespace}/{r.deployment} is {found} (image {image}), but this run expects "
                f"{self.kueue_version}: pass --kueue-version {found}, or install {self.kueue_version}."
            )
        leftover = (dep["metadata"].get("annotations") or {}).get(ANN_ROUTED_BY)
        if leftover:
            self.say(f"Deployment {r.namespace}/{r.deployment} is still routed by an earlier run ({leftover}); "
                     "undoing that first")
            r.undo()
        r.wait_rollout(rollout_timeout, "Kueue's rollout before routing")

        upstream = upstream_from_kubeconfig(self.admin_kubeconfig, self.context)
        upstream_ca = None
        if upstream.ca_pem:
            upstream_ca = self.state / "upstream-ca.crt"
            upstream_ca.write_bytes(upstream.ca_pem)
        listen_host = listen_host or guess_listen_host(upstream.server)
        if not server_host and ipaddress.ip_address(listen_host).is_unspecified:
            raise HarnessError(f"--proxy-listen-host {listen_host} listens everywhere: say with --proxy-server-host "
                               "which address the Pods use to reach this machine")
        server_host = server_host or listen_host
        self.proxy = Proxy.start(
            upstream=upstream.server, upstream_ca=upstream_ca, state=self.state, artifacts=self.artifacts,
            procs=self.procs, port=_free_port(listen_host), control_port=_free_port("127.0.0.1"),
            say=self.say, listen_host=listen_host,
        )
        port = self.proxy.url.rsplit(":", 1)[1]
        host = f"[{server_host}]" if ":" in server_host else server_host
        kubeconfig = render_kubeconfig(f"https://{host}:{port}", self.proxy.ca_file.read_bytes())
        (self.artifacts / "kueue-kubeconfig.yaml").write_text(yaml.safe_dump(kubeconfig, sort_keys=False))

        # The first request through the proxy can only come from the routed Kueue: the harness itself
        # never uses the proxy, and the Pods before this rollout talk to kube-apiserver directly.
        from harness.plan.rules import Match, Rule

        seen = self.proxy.add_rule(Rule(id="kueue-harness-routing-check", match=Match(path_regex="^/"),
                                        action="observe", times=1))
        t = time.monotonic()
        self._installed = True
        r.install(kubeconfig, self.run_id)
        self.say(f"routed {r.namespace}/{r.deployment} through the proxy at https://{host}:{port} "
                 f"(listening on {listen_host}); waiting for the rollout")
        r.wait_rollout(rollout_timeout)
        self._save_config()  # what the routed Kueue runs with (leader election off: routing.ANN_ORIGINAL_CONFIG)
        self._attach()
        self.started["rollout_seconds"] = time.monotonic() - t
        try:
            wait_for(lambda: seen.hits() >= 1, timeout=30, what="the routed Kueue's first request at the proxy")
        except WaitTimeout as e:
            raise EnvironmentNotReady(
                f"{e}: Kueue runs, but not through the proxy (does the Deployment pass --kubeconfig to the "
                f"manager?)\n{r.diagnose()}") from None
        self.proxy.remove_rule(seen.id)
        self._save_objects()

    def _attach(self, exclude: str | None = None, timeout: float = 90) -> None:
        """Find the routed Pod (other than `exclude`), follow its log, wait until it leads and its
        webhooks answer."""
        from kubernetes import client

        r = self.routing

        def pods_state() -> str:
            return "; ".join(f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')} "
                             f"{[c.get('ready') for c in (p.get('status') or {}).get('containerStatuses') or []]}"
                             for p in r.pods()[:3]) or "no Pod"

        try:
            # Bounded by progress (a Pod created, scheduled, started, ready), `timeout` s of none; said every 20 s.
            pod = wait_progressing(lambda: r.routed_pod(self.run_id, exclude), state=pods_state, stall=timeout,
                                   what="the routed Kueue Pod to be Ready", interval=0.5, say=self.say)
        except WaitTimeout as e:
            raise EnvironmentNotReady(f"{e}\n{r.diagnose()}") from None
        self.pod = pod["metadata"]["name"]
        self.pod_restarts = self._restarts(pod)
        self._log = PodLogFollower(self.api_client(), r.namespace, self.pod, r.container, self.kueue_log,
                                   restarts=self.pod_restarts, say=self.say).start()
        enabled, lease_ns, lease = kueue_leader_election(self.api_client(), r.namespace)
        if enabled:
            coord = client.CoordinationV1Api(self.api_client())

            def leader() -> bool:
                holder = coord.read_namespaced_lease(lease, lease_ns).spec.holder_identity or ""
                return holder.startswith(self.pod + "_")

            try:
                wait_for(leader, timeout=timeout, interval=0.5,
                         what=f"pod {self.pod} to hold Kueue's leader Lease {lease_ns}/{lease}")
            except WaitTimeout as e:
                raise EnvironmentNotReady(f"{e}\n{r.diagnose()}") from None
        wait_for(lambda: webhook_ready.only_routed_serve(self.api_client(), r.namespace, r.routed_ips(self.run_id)),
                 timeout=60, interval=0.5, what="the Services of Kueue's webhooks to list this run's routed Pods alone",
                 describe=r.diagnose)
        wait_for(webhook_ready.streak(self._webhooks_answer), timeout=60, interval=0.3,
                 what=f"Kueue's webhooks to answer {webhook_ready.STREAK} dry-run creates in a row")

    def kueue_identity(self):
        """The running Kueue as known bugs judge it: the build's identity when this run built its image,
        else the version of the image's tag."""
        from harness.kueue import versions

        if self.kueue_build is not None:
            return self.kueue_build.identity()
        return versions.BuildIdentity(self.kueue_version)

    def kueue_build_info(self) -> dict[str, Any]:
        """For summary.json / bundle.json: what ran and, when built here, how."""
        out: dict[str, Any] = {"version": self.kueue_version, "target": self.target}
        if self.kueue_build is not None:
            out.update({"commit": self.kueue_build.commit, "build": self.kueue_build.to_json()})
        return out

    def kueue_log_health(self) -> dict[str, Any]:
        """How Kueue's log reaches kueue.log (PodLogFollower.health(), problems summed over the followers of
        every Pod this environment followed): recorded with Kueue's state, judged by `kueue_log_followed`."""
        if self._log is None:
            return {"problems": self._log_problems, "last": None, "bytes": 0, "alive": False}
        h = self._log.health()
        h["problems"] += self._log_problems
        return h

    def kueue_starts(self) -> int:
        """How many times Kueue started in this environment: one, plus container restarts of the routed
        Pod, plus restart_kueue() calls."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            p = self.api_client().sanitize_for_serialization(
                client.CoreV1Api(self.api_client()).read_namespaced_pod(self.pod, self.routing.namespace))
        except ApiException:
            return self.starts
        return self.starts + max(0, self._restarts(p) - self.pod_restarts)

    def restart_kueue(self, kill: bool = False) -> None:
        """A process fault: delete Kueue's Pod (grace period 0 with `kill`); the Deployment makes a new one,
        still routed. Waits until the new Pod is Ready, leads and answers webhooks. The log continues in
        the same kueue.log."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        old = self.pod
        try:
            client.CoreV1Api(self.api_client()).delete_namespaced_pod(
                old, self.routing.namespace, grace_period_seconds=0 if kill else None)
        except ApiException as e:
            if e.status != 404:
                raise
        if self._log is not None:
            self._log.stop()
            self._log_problems += self._log.health()["problems"]
        self._attach(exclude=old, timeout=180)
        self.starts += 1

    # ---- Pods that run (the pods marker) -------------------------------------------------------
    #: Pod IPs kwok hands out here: not kind's own podSubnet (10.244.0.0/16, the local target's kwok CIDR).
    KWOK_CIDR = "10.250.0.0/16"

    def start_pods(self) -> Any:
        """Pods on the case's Nodes, as on the local target (harness/env/pods.py): kwok runs on this machine
        against the cluster (the admin kubeconfig, never the proxy) and manages the Nodes annotated
        kwok.x-k8s.io/node=fake; the cluster's own kube-scheduler binds Pods to them. Started once, kept for
        the environment's life. Returns a harness.env.pods.PodsPart whose versions are what ran (kwok's
        `--version`; kube-scheduler's image tag from its Pod in kube-system). Raises BuildError (kwok),
        EnvironmentNotReady (kwok died or /healthz never answered: with its log tail)."""
        from harness.build import binaries
        from harness.env import control_plane as cp
        from harness.env import pods as pods_part

        with self._pods_lock:
            if self.pods is not None:
                return self.pods
            t = time.monotonic()
            kwok = binaries.kwok(self.say)
            source = pods_part.kwok_source()
            kubeconfig = self._kwok_kubeconfig()
            (self.state / "kwok-config.yaml").write_text(pods_part.kwok_config())
            configs = [*pods_part.kwok_stage_files(source), self.state / "kwok-config.yaml"]
            port = _free_port("127.0.0.1")
            log = self.artifacts / "kwok.log"
            workdir = self.state / "kwok"
            workdir.mkdir(exist_ok=True)
            # Spawned from a helper thread that lives as long as the process (a child's PR_SET_PDEATHSIG).
            cp._in_helper(lambda: self.procs.start(
                "kwok", pods_part.kwok_argv(kwok, kubeconfig, configs, port, cidr=self.KWOK_CIDR), log,
                env={**os.environ, "KWOK_WORKDIR": str(workdir)})).result()

            def healthy() -> bool:
                if not self.procs.alive("kwok"):
                    raise EnvironmentNotReady(f"kwok exited during start-up; last lines of {log}:\n{cp._tail(log)}")
                return pods_part.http_ok(f"http://127.0.0.1:{port}/healthz")

            try:
                wait_for(healthy, timeout=60, interval=0.1, what="kwok /healthz", fatal=(EnvironmentNotReady,))
            except WaitTimeout as e:
                self.procs.stop("kwok")
                raise EnvironmentNotReady(f"{e}. Last lines of {log}:\n{cp._tail(log)}") from None
            except BaseException:
                self.procs.stop("kwok")
                raise
            self.pods = pods_part.PodsPart(Path("(the cluster's own kube-scheduler)"), kwok, {
                "kube_scheduler": self._scheduler_version(), "kwok": pods_part.reported_version(kwok)},
                seconds=time.monotonic() - t)
            self.started["pods_started_seconds"] = self.pods.seconds
            self.say(f"Pods run: kwok {self.pods.versions['kwok']} on this machine manages the case Nodes of the "
                     f"cluster; its kube-scheduler ({self.pods.versions['kube_scheduler']}) binds Pods to them "
                     f"(kwok log: {log})")
            return self.pods

    def pods_info(self) -> dict[str, Any] | None:
        """What ran for Pods (summary.json, bundle.json), or None when start_pods() never ran."""
        return self.pods.info() if self.pods is not None else None

    def _kwok_kubeconfig(self) -> Path:
        """The admin kubeconfig for kwok, with `context` as its current context (kwok takes no --context);
        written private to the state folder, which stop() clears."""
        from harness.common import pki

        doc = yaml.safe_load(self.admin_kubeconfig.read_text())
        if self.context:
            doc["current-context"] = self.context
        path = self.state / "kwok.kubeconfig"
        pki.write_private(path, yaml.safe_dump(doc).encode())
        return path

    def _scheduler_version(self) -> str:
        """The cluster's kube-scheduler as its static Pod's image says ("v1.35.4"), else the cluster's version
        with "(kube-apiserver's)" (a managed cluster may show no scheduler Pod)."""
        from kubernetes import client

        try:
            items = client.CoreV1Api(self.api_client()).list_namespaced_pod(
                "kube-system", label_selector="component=kube-scheduler").items
        except Exception as e:  # noqa: BLE001 - a version line, not worth failing the start: said instead
            self.say(f"could not read the kube-scheduler Pod's image: {type(e).__name__}: {e}")
            items = []
        for p in items:
            for c in p.spec.containers or []:
                if c.image and ":" in c.image:
                    return c.image.rsplit(":", 1)[1]
        return f"{self.kubernetes_version} (kube-apiserver's)"

    def keep_pods_on_case_nodes(self, on: bool) -> list[str]:
        """While a case with Nodes runs (`on`), taint every real Node of the cluster (those kwok does not
        manage) with harness.env.pods.CASE_PODS_TAINT (NoSchedule), so the case's Pods go to its kwok Nodes
        as on the local target, where no other Node exists; running Pods (Kueue's) stay. `on=False` removes
        the taint again. Returns the Nodes changed. Raises ApiException when a Node cannot be patched."""
        from kubernetes import client

        from harness.env import pods as pods_part
        from harness.objects import KWOK_NODE_ANNOTATION

        core = client.CoreV1Api(self.api_client())
        changed = []
        names = None if on else set(self._tainted_nodes)
        for node in core.list_node().items:
            ann = node.metadata.annotations or {}
            if ann.get(KWOK_NODE_ANNOTATION[0]) == KWOK_NODE_ANNOTATION[1]:
                continue
            if names is not None and node.metadata.name not in names:
                continue
            taints = [t.to_dict() for t in node.spec.taints or []]
            taints = [{k: v for k, v in t.items() if v is not None} for t in taints]
            new = pods_part.tainted(taints, on)
            if new is None:
                continue
            core.patch_node(node.metadata.name, {"spec": {"taints": new}})
            changed.append(node.metadata.name)
        if on:
            self._tainted_nodes = sorted(set(self._tainted_nodes) | set(changed))
        else:
            self._tainted_nodes = []
        return changed

    @staticmethod
    def _restarts(pod: dict[str, Any]) -> int:
        return sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])

    def _webhooks_answer(self) -> bool:
        return webhooks_answer(self.api_client())

    def _save_objects(self) -> None:
        """The routed Deployment and Pod as evidence (no secret in them: the token is a file in the Pod)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            dep = self.routing.read()
            pod = next((p for p in self.routing.pods() if p["metadata"]["name"] == self.pod), None)
            for o in (dep, pod):
                if o:
                    (o.get("metadata") or {}).pop("managedFields", None)
            (self.artifacts / "kueue-objects.yaml").write_text(
                yaml.safe_dump({"deployment": dep, "pod": pod}, sort_keys=False))
        except (ApiException, HTTPError, HarnessError, OSError) as e:  # evidence is best effort: said, not fatal
            self.say(f"could not save Kueue's Deployment and Pod: {type(e).__name__}: {e}")

    def kueue_alive(self) -> bool:
        """True while the routed Pod runs, without a container restart since it became ready."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        if not self.pod or self._stopped:
            return False
        try:
            p = self.api_client().sanitize_for_serialization(
                client.CoreV1Api(self.api_client()).read_namespaced_pod(self.pod, self.routing.namespace))
        except ApiException:
            return False
        if p["metadata"].get("deletionTimestamp") or (p.get("status") or {}).get("phase") != "Running":
            return False
        return self._restarts(p) == self.pod_restarts

    def stop(self) -> None:
        """Undo the routing (revert the patch, wait for the rollout, delete the Secret), stop the proxy and
        the log follower, then run the target's cleanups. Never raises for one failed step: every step is
        tried, and the first error is raised at the end."""
        if self._stopped:
            return
        self._stopped = True
        errors: list[str] = []
        if self._log is not None:
            self._log.stop()
        try:
            self.restore_kueue_config()
        except Exception as e:  # noqa: BLE001 - reported at the end (raised), after the rest is undone
            errors.append(f"restoring Kueue's ConfigMap: {type(e).__name__}: {e}")
        try:
            by = self.routing.routed_by() if self._installed else None
            if by == self.run_id:
                self.routing.undo()
                self.routing.wait_rollout(240, "the rollout back to the original Kueue")
                self.say(f"restored {self.routing.namespace}/{self.routing.deployment}")
            elif self._installed and by is None:
                self.routing.delete_secret(self.run_id)
        except Exception as e:  # noqa: BLE001 - reported at the end (raised), after the rest is undone
            errors.append(f"undoing the routing of {self.routing.namespace}/{self.routing.deployment}: "
                          f"{type(e).__name__}: {e}")
        if self.lock is not None:
            self.lock.release()  # the routing is undone: another run may have the cluster
        if self._tainted_nodes:
            try:
                self.keep_pods_on_case_nodes(False)
            except Exception as e:  # noqa: BLE001 - reported at the end (raised), after the rest is undone
                errors.append(f"removing the case-Pods taint from Nodes {', '.join(self._tainted_nodes)}: "
                              f"{type(e).__name__}: {e}")
        self.procs.stop_all()
        if self._api is not None:
            try:
                self._api.close()
            except OSError as e:  # closing the connection pool: said, the rest goes on
                self.say(f"closing the API client: {e}")
            self._api = None
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - reported at the end (raised), after every cleanup ran
                errors.append(f"{type(e).__name__}: {e}")
        from harness.env.runs import forget_secrets, runs_root

        ours = self.state.resolve().parent == runs_root().resolve()
        if ours:
            forget_secrets(self.state)  # a kind cluster's admin key never outlives the run
        if errors:
            given = "" if ours and self.admin_kubeconfig.resolve().parent == self.state.resolve() else \
                f" --kubeconfig {self.admin_kubeconfig}"
            raise HarnessError("; ".join(errors) + " — undo by hand with `python -m harness.env.incluster undo"
                               f"{given or ' --kubeconfig KUBECONFIG'}` if the cluster is kept (`kind get kubeconfig "
                               "--name NAME > KUBECONFIG` gives a kind cluster's)")


def default_kubeconfig() -> Path:
    """$KUBECONFIG (its first file) or ~/.kube/config, as kubectl picks it."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0])
    return Path.home() / ".kube" / "config"


def undo_main(argv: list[str] | None = None) -> int:
    """`python -m harness.env.incluster undo --kubeconfig F [--context C]`: revert a routing that a killed
    run left in a cluster (patch reverted, Secret deleted), and wait for the rollout."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m harness.env.incluster")
    p.add_argument("cmd", choices=["undo"])
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config")))
    p.add_argument("--context")
    p.add_argument("--namespace", default=KUEUE_NAMESPACE)
    p.add_argument("--deployment", default=KUEUE_DEPLOYMENT)
    a = p.parse_args(argv)
    r = KueueRouting(api_client_from_kubeconfig(Path(a.kubeconfig), a.context), a.namespace, a.deployment)
    before = r.routed_by()
    if r.undo() is None:
        print(f"{a.namespace}/{a.deployment} was not routed; Secret {SECRET_NAME} removed if present")
        return 0
    r.wait_rollout(240, "the rollout back to the original Kueue")
    print(f"{a.namespace}/{a.deployment}: routing of run {before} undone, rollout complete")
    return 0


if __name__ == "__main__":
    sys.exit(undo_main())
