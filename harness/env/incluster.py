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

import base64
import ipaddress
import json
import os
import re
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.procs import ProcessGroup, reap_stale
from harness.common.waiting import WaitTimeout, wait_for
from harness.objects import webhooks_answer
from harness.proxy.client import Proxy

Say = Callable[[str], None]

KUEUE_NAMESPACE = "kueue-system"
KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_CONTAINER = "manager"
#: ConfigMap of the release manifests holding Kueue's Configuration (config/components/manager).
KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
#: leaderElection.resourceName of the release configuration.
KUEUE_LEASE = "c1f6bfd2.kueue.x-k8s.io"

SECRET_NAME = "kueue-harness-kubeconfig"
SECRET_KEY = "kubeconfig"
VOLUME_NAME = "kueue-harness-kubeconfig"
MOUNT_DIR = "/etc/kueue-harness"
KUBECONFIG_PATH = f"{MOUNT_DIR}/{SECRET_KEY}"
#: Where the kubelet puts the Pod's projected service-account token (kube-api-access-* volume).
SA_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
#: The name Kueue's client asks for (SNI) and checks in the proxy's certificate.
TLS_SERVER_NAME = "kueue-harness-proxy"
KUEUE_LOG_LEVEL = 3

ANN_ROUTED_BY = "kueue-harness/routed-by"
ANN_ORIGINAL_ARGS = "kueue-harness/original-args"
#: On the Pod template: forces a new rollout on every run (like `kubectl rollout restart`).
ANN_RUN = "kueue-harness/run"
FIELD_MANAGER = "kueue-harness"


def _say(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


# ---- pure rendering ----------------------------------------------------------------------------------
def render_kubeconfig(server: str, ca_pem: bytes, tls_server_name: str = TLS_SERVER_NAME,
                      token_file: str = SA_TOKEN_FILE) -> dict[str, Any]:
    """The kubeconfig Kueue gets: server = the proxy, CA = the proxy's CA, SNI/name check =
    `tls_server_name`, credential = the Pod's own service-account token file."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kueue-harness-proxy", "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode(),
            "tls-server-name": tls_server_name,
        }}],
        "users": [{"name": "kueue", "user": {"tokenFile": token_file}}],
        "contexts": [{"name": "kueue-harness", "context": {"cluster": "kueue-harness-proxy", "user": "kueue"}}],
        "current-context": "kueue-harness",
    }


def render_secret(namespace: str, kubeconfig: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The Secret that carries Kueue's kubeconfig (no credential inside: the token stays a file)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": SECRET_NAME, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "kueue-harness"},
                     "annotations": {ANN_ROUTED_BY: run_id}},
        "stringData": {SECRET_KEY: yaml.safe_dump(kubeconfig, sort_keys=False)},
    }


def _drop_flag(args: list[str], flag: str) -> list[str]:
    """`args` without `flag` in either form (`--flag=v` or `--flag v`)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == flag:
            skip = True
            continue
        if a.startswith(flag + "="):
            continue
        out.append(a)
    return out


def routed_args(original: list[str] | None, kubeconfig_path: str = KUBECONFIG_PATH,
                log_level: int = KUEUE_LOG_LEVEL) -> list[str]:
    """Kueue's args with `--kubeconfig` and `--zap-log-level` set (any earlier value replaced)."""
    args = _drop_flag(_drop_flag(list(original or []), "--kubeconfig"), "--zap-log-level")
    return args + [f"--kubeconfig={kubeconfig_path}", f"--zap-log-level={log_level}"]


def container_of(deployment: dict[str, Any], name: str = KUEUE_CONTAINER) -> dict[str, Any]:
    """The container `name` of a Deployment dict. Raises HarnessError if it has none of that name."""
    containers = deployment["spec"]["template"]["spec"].get("containers") or []
    for c in containers:
        if c.get("name") == name:
            return c
    raise HarnessError(
        f"Deployment {deployment['metadata'].get('namespace')}/{deployment['metadata']['name']} has no "
        f"container {name!r} (it has: {', '.join(c.get('name', '?') for c in containers)}). Kueue's release "
        "manifests name it `manager`."
    )


def original_args(deployment: dict[str, Any], container: str = KUEUE_CONTAINER) -> list[str] | None:
    """Kueue's args before any routing: from the annotation a routed Deployment carries, else as they are."""
    ann = (deployment["metadata"].get("annotations") or {}).get(ANN_ORIGINAL_ARGS)
    if ann is not None:
        return json.loads(ann)
    args = container_of(deployment, container).get("args")
    return list(args) if args is not None else None


def render_deployment_patch(original: list[str] | None, run_id: str,
                            container: str = KUEUE_CONTAINER) -> dict[str, Any]:
    """Strategic-merge patch that routes Kueue: mount the Secret, pass --kubeconfig and --zap-log-level.

    Volumes merge by `name` and volumeMounts by `mountPath`, so applying it twice adds nothing twice.
    """
    return {
        "metadata": {"annotations": {ANN_ROUTED_BY: run_id, ANN_ORIGINAL_ARGS: json.dumps(original)}},
        "spec": {"template": {
            "metadata": {"annotations": {ANN_RUN: run_id}},
            "spec": {
                "containers": [{
                    "name": container,
                    "args": routed_args(original),
                    "volumeMounts": [{"name": VOLUME_NAME, "mountPath": MOUNT_DIR, "readOnly": True}],
                }],
                "volumes": [{"name": VOLUME_NAME, "secret": {"secretName": SECRET_NAME, "defaultMode": 0o444}}],
            },
        }},
    }


def render_undo_patch(original: list[str] | None, container: str = KUEUE_CONTAINER) -> dict[str, Any]:
    """Strategic-merge patch that reverts `render_deployment_patch`: original args back (or none), our
    volume and mount deleted, our annotations removed."""
    return {
        "metadata": {"annotations": {ANN_ROUTED_BY: None, ANN_ORIGINAL_ARGS: None}},
        "spec": {"template": {
            "metadata": {"annotations": {ANN_RUN: None}},
            "spec": {
                "containers": [{
                    "name": container,
                    "args": original,
                    "volumeMounts": [{"$patch": "delete", "mountPath": MOUNT_DIR}],
                }],
                "volumes": [{"$patch": "delete", "name": VOLUME_NAME}],
            },
        }},
    }


def rollout_status(deployment: dict[str, Any]) -> tuple[bool, str]:
    """(done, message) the way `kubectl rollout status` reads a Deployment.

    Raises EnvironmentNotReady when the Deployment reports ProgressDeadlineExceeded.
    """
    meta, spec, st = deployment["metadata"], deployment.get("spec") or {}, deployment.get("status") or {}
    name = meta["name"]
    if meta.get("generation", 0) > st.get("observedGeneration", 0):
        return False, f"waiting for deployment {name} spec update to be observed"
    for c in st.get("conditions") or []:
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            raise EnvironmentNotReady(f"deployment {name} exceeded its progress deadline: {c.get('message', '')}")
    want = spec.get("replicas", 1)
    updated, replicas, available = (st.get("updatedReplicas", 0), st.get("replicas", 0),
                                    st.get("availableReplicas", 0))
    if updated < want:
        return False, f"{updated} out of {want} new replicas have been updated"
    if replicas > updated:
        return False, f"{replicas - updated} old replicas are pending termination"
    if available < updated:
        return False, f"{available} of {updated} updated replicas are available"
    return True, f"deployment {name} successfully rolled out"


_VERSION_TAG = re.compile(r":(v\d+\.\d+\.\d+)(?:@sha256:[0-9a-f]+)?$")


def image_version(image: str) -> str | None:
    """"v0.17.0" from "registry.k8s.io/kueue/kueue:v0.17.0" (digest allowed), None for other tags."""
    m = _VERSION_TAG.search(image or "")
    return m.group(1) if m else None


@dataclass(frozen=True)
class Upstream:
    """Where the proxy forwards to, read from the admin kubeconfig: server URL and CA (PEM, or None for
    the system's trust store)."""

    server: str
    ca_pem: bytes | None


def upstream_from_kubeconfig(path: Path, context: str | None = None) -> Upstream:
    """The current (or `context`'s) cluster of kubeconfig `path`. Raises HarnessError for setups the
    proxy cannot verify the same way (insecure-skip-tls-verify, tls-server-name)."""
    try:
        cfg = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as e:
        raise HarnessError(f"cannot read kubeconfig {path}: {e}") from None
    ctx_name = context or cfg.get("current-context")
    ctxs = {c["name"]: c.get("context") or {} for c in cfg.get("contexts") or []}
    if ctx_name not in ctxs:
        raise HarnessError(f"kubeconfig {path} has no context {ctx_name!r} (it has: {', '.join(ctxs) or 'none'})")
    clusters = {c["name"]: c.get("cluster") or {} for c in cfg.get("clusters") or []}
    cl = clusters.get(ctxs[ctx_name].get("cluster"))
    if not cl or not cl.get("server"):
        raise HarnessError(f"kubeconfig {path}: context {ctx_name!r} names no cluster with a server")
    if cl.get("insecure-skip-tls-verify"):
        raise HarnessError(
            f"kubeconfig {path}: cluster of context {ctx_name!r} sets insecure-skip-tls-verify; the proxy "
            "verifies kube-apiserver's certificate and needs its CA (certificate-authority[-data])."
        )
    if cl.get("tls-server-name"):
        raise HarnessError(
            f"kubeconfig {path}: cluster of context {ctx_name!r} sets tls-server-name; the proxy checks "
            "kube-apiserver's certificate against the host of `server`. Use a server address the "
            "certificate names."
        )
    ca: bytes | None = None
    if cl.get("certificate-authority-data"):
        ca = base64.b64decode(cl["certificate-authority-data"])
    elif cl.get("certificate-authority"):
        ca_path = Path(cl["certificate-authority"])
        if not ca_path.is_absolute():
            ca_path = Path(path).parent / ca_path
        ca = ca_path.read_bytes()
    return Upstream(cl["server"].rstrip("/"), ca)


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        try:
            s.bind((host, 0))
        except OSError as e:
            raise HarnessError(
                f"cannot listen on {host} ({e}): the proxy must listen on an address of this machine that "
                "the cluster's Pods can reach (--proxy-listen-host)."
            ) from None
        return s.getsockname()[1]


def guess_listen_host(server: str) -> str:
    """This machine's address on the route towards `server` (kube-apiserver). Raises HarnessError when that
    is a loopback address (Pods could not reach it): then --proxy-listen-host is needed."""
    from urllib.parse import urlsplit

    u = urlsplit(server)
    host = u.hostname or "127.0.0.1"
    try:
        infos = socket.getaddrinfo(host, u.port or 443, type=socket.SOCK_DGRAM)
        family, _, _, _, addr = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(addr)  # UDP: no packet is sent; the kernel picks the source address
            local = s.getsockname()[0]
    except OSError as e:
        raise HarnessError(f"cannot find a local address towards {server} ({e}); pass --proxy-listen-host") from None
    if ipaddress.ip_address(local).is_loopback:
        raise HarnessError(
            f"kube-apiserver is reached at {server} over loopback, so the address Pods use to reach this "
            "machine cannot be guessed. Pass --proxy-listen-host (an address of this machine the Pods can "
            "reach) and, if they reach it under another name, --proxy-server-host."
        )
    return local


# ---- the API side ------------------------------------------------------------------------------------
def api_client_from_kubeconfig(path: Path, context: str | None = None):
    """A `kubernetes.client.ApiClient` for kubeconfig `path` (direct to kube-apiserver, admin identity)."""
    from kubernetes import config as kconfig

    return kconfig.new_client_from_config(config_file=str(path), context=context)


class KueueRouting:
    """Installs and undoes the routing of one Kueue Deployment through the proxy, through the API."""

    def __init__(self, api_client, namespace: str = KUEUE_NAMESPACE, deployment: str = KUEUE_DEPLOYMENT,
                 container: str = KUEUE_CONTAINER, say: Say = _say) -> None:
        from kubernetes import client

        self.api = api_client
        self.apps = client.AppsV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace, self.deployment, self.container, self.say = namespace, deployment, container, say

    def read(self) -> dict[str, Any]:
        """The Deployment as a dict. Raises HarnessError if it is absent."""
        from kubernetes.client.exceptions import ApiException

        try:
            d = self.apps.read_namespaced_deployment(self.deployment, self.namespace)
        except ApiException as e:
            if e.status == 404:
                raise HarnessError(
                    f"Deployment {self.namespace}/{self.deployment} not found: is Kueue installed in this "
                    "cluster (its release manifests create it)?"
                ) from None
            raise
        return self.api.sanitize_for_serialization(d)

    def routed_by(self) -> str | None:
        """The run id that routed this Deployment (annotation), None when it is not routed."""
        return (self.read()["metadata"].get("annotations") or {}).get(ANN_ROUTED_BY)

    def install(self, kubeconfig: dict[str, Any], run_id: str) -> dict[str, Any]:
        """Create (or replace) the Secret and patch the Deployment. Returns the patched Deployment."""
        from kubernetes.client.exceptions import ApiException

        dep = self.read()
        container_of(dep, self.container)
        orig = original_args(dep, self.container)
        secret = render_secret(self.namespace, kubeconfig, run_id)
        try:
            self.core.create_namespaced_secret(self.namespace, secret)
        except ApiException as e:
            if e.status != 409:
                raise
            self.core.replace_namespaced_secret(SECRET_NAME, self.namespace, secret)
        patched = self.apps.patch_namespaced_deployment(
            self.deployment, self.namespace, render_deployment_patch(orig, run_id, self.container),
            field_manager=FIELD_MANAGER,
        )
        return self.api.sanitize_for_serialization(patched)

    def undo(self) -> dict[str, Any] | None:
        """Revert the patch (if the Deployment carries it) and delete the Secret. Returns the Deployment
        after the revert, or None if there was nothing to revert."""
        dep = self.read()
        out = None
        if ANN_ORIGINAL_ARGS in (dep["metadata"].get("annotations") or {}):
            out = self.api.sanitize_for_serialization(self.apps.patch_namespaced_deployment(
                self.deployment, self.namespace, render_undo_patch(original_args(dep, self.container),
                                                                   self.container),
                field_manager=FIELD_MANAGER,
            ))
        self.delete_secret()
        return out

    def delete_secret(self, run_id: str | None = None) -> None:
        """Delete the kubeconfig Secret (only if run `run_id` made it, when given)."""
        from kubernetes.client.exceptions import ApiException

        try:
            if run_id is not None:
                sec = self.core.read_namespaced_secret(SECRET_NAME, self.namespace)
                if (sec.metadata.annotations or {}).get(ANN_ROUTED_BY) != run_id:
                    return
            self.core.delete_namespaced_secret(SECRET_NAME, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise

    def wait_rollout(self, timeout: float, what: str = "the rollout") -> dict[str, Any]:
        """Wait like `kubectl rollout status`. Raises EnvironmentNotReady with the Pods' states and the
        newest Pod's log tail."""
        def probe() -> dict[str, Any] | None:
            d = self.read()
            done, _ = rollout_status(d)
            return d if done else None

        try:
            return wait_for(probe, timeout=timeout, what=f"{what} of {self.namespace}/{self.deployment}",
                            interval=1.0, describe=lambda: rollout_status(self.read())[1])
        except (WaitTimeout, EnvironmentNotReady) as e:
            raise EnvironmentNotReady(f"{e}\n{self.diagnose()}") from None

    def pods(self) -> list[dict[str, Any]]:
        """The Deployment's Pods (by its selector), newest first."""
        dep = self.read()
        sel = ",".join(f"{k}={v}" for k, v in (dep["spec"]["selector"].get("matchLabels") or {}).items())
        pods = self.api.sanitize_for_serialization(
            self.core.list_namespaced_pod(self.namespace, label_selector=sel)).get("items", [])
        return sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)

    def routed_pod(self, run_id: str, exclude: str | None = None) -> dict[str, Any] | None:
        """The running, ready, not terminating Pod of this run's rollout (template annotation), if any
        (other than `exclude`)."""
        for p in self.pods():
            if (p["metadata"].get("annotations") or {}).get(ANN_RUN) != run_id or p["metadata"]["name"] == exclude:
                continue
            if p["metadata"].get("deletionTimestamp") or (p.get("status") or {}).get("phase") != "Running":
                continue
            conds = {c["type"]: c["status"] for c in (p.get("status") or {}).get("conditions") or []}
            if conds.get("Ready") == "True":
                return p
        return None

    def diagnose(self) -> str:
        """Pod states and the newest Pod's last log lines, for error messages."""
        lines = []
        try:
            pods = self.pods()
        except Exception as e:  # noqa: BLE001 - diagnostics are best effort
            return f"(could not list Kueue's Pods: {e})"
        for p in pods[:4]:
            st = p.get("status") or {}
            cs = [f"{c['name']}: ready={c.get('ready')} restarts={c.get('restartCount')} "
                  f"state={next(iter(c.get('state') or {}), '?')}"
                  f"({((c.get('state') or {}).get('waiting') or {}).get('reason', '')})"
                  for c in st.get("containerStatuses") or []]
            lines.append(f"  pod {p['metadata']['name']}: phase={st.get('phase')} {'; '.join(cs)}")
        if pods:
            try:
                log = self.core.read_namespaced_pod_log(pods[0]["metadata"]["name"], self.namespace,
                                                        container=self.container, tail_lines=15)
                lines.append(f"  last lines of {pods[0]['metadata']['name']}/{self.container}:\n{log}")
            except Exception as e:  # noqa: BLE001
                lines.append(f"  (no log: {getattr(e, 'reason', e)})")
        return "Kueue's Pods:\n" + "\n".join(lines) if lines else "Kueue has no Pods"


def kueue_leader_election(api_client, namespace: str) -> tuple[bool, str, str]:
    """(enabled, lease namespace, lease name) from Kueue's Configuration in ConfigMap kueue-manager-config
    (release defaults when it is absent or silent)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    le: dict[str, Any] = {}
    try:
        cm = client.CoreV1Api(api_client).read_namespaced_config_map(KUEUE_CONFIGMAP, namespace)
        le = (yaml.safe_load((cm.data or {}).get(KUEUE_CONFIG_KEY) or "") or {}).get("leaderElection") or {}
    except ApiException as e:
        if e.status != 404:
            raise
    return (le.get("leaderElect", True) is not False, le.get("resourceNamespace") or namespace,
            le.get("resourceName") or KUEUE_LEASE)


class PodLogFollower:
    """Follows one container's log through the API (`pods/log?follow=true`) into a file, in a thread.

    When the stream ends: a restarted container is followed from its start; the same container is followed
    again from a second before the last bytes received (lines of that second may appear twice). Marker
    lines (not JSON, so log readers skip them) say so in the file.
    """

    def __init__(self, api_client, namespace: str, pod: str, container: str, path: Path,
                 restarts: int = 0, poll: float = 1.0) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.namespace, self.pod, self.container, self.path = namespace, pod, container, path
        self.restarts, self.poll = restarts, poll
        self._stop = threading.Event()
        self._resp = None
        self._thread = threading.Thread(target=self._run, name=f"log-{pod}", daemon=True)

    def start(self) -> "PodLogFollower":
        self._thread.start()
        return self

    def _container_state(self) -> tuple[int, str] | None:
        """(restartCount, "running"/"waiting"/"terminated") of the container, None if the Pod is gone."""
        try:
            pod = self.core.read_namespaced_pod(self.pod, self.namespace)
        except Exception:  # noqa: BLE001 - gone (or unreachable): nothing more to follow
            return None
        if pod.metadata.deletion_timestamp is not None:
            return None
        for c in pod.status.container_statuses or []:
            if c.name == self.container:
                st = c.state
                state = "running" if st and st.running else "terminated" if st and st.terminated else "waiting"
                return c.restart_count or 0, state
        return None

    def _run(self) -> None:
        last: float | None = None
        with open(self.path, "ab", buffering=0) as fh:
            while not self._stop.is_set():
                kwargs: dict[str, Any] = {}
                if last is not None:
                    kwargs["since_seconds"] = max(1, int(time.time() - last) + 1)
                try:
                    self._resp = self.core.read_namespaced_pod_log(
                        self.pod, self.namespace, container=self.container, follow=True,
                        _preload_content=False, _request_timeout=(10, None), **kwargs)
                    for chunk in self._resp.stream(65536, decode_content=False):
                        fh.write(chunk)
                        last = time.time()
                        if self._stop.is_set():
                            break
                except Exception:  # noqa: BLE001 - stream cut; decided below
                    pass
                finally:
                    resp, self._resp = self._resp, None
                    if resp is not None:
                        try:
                            resp.release_conn()
                        except Exception:  # noqa: BLE001
                            pass
                while not self._stop.wait(self.poll):
                    st = self._container_state()
                    if st is None:
                        return
                    restarts, state = st
                    if state != "running":
                        continue
                    if restarts != self.restarts:
                        self.restarts, last = restarts, None
                        fh.write(f"# kueue-harness: container {self.pod}/{self.container} restarted "
                                 f"(restartCount {restarts}); following its new log\n".encode())
                    else:
                        fh.write(f"# kueue-harness: log stream of {self.pod}/{self.container} ended; "
                                 "following again\n".encode())
                    break

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # noqa: BLE001
                pass
        self._thread.join(timeout)


# ---- the environment ---------------------------------------------------------------------------------
@dataclass
class InClusterEnvironment:
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
    #: Called at the end of stop(), last first (the kind target deletes a cluster it created here).
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    _api: Any = None
    _log: PodLogFollower | None = None
    _stopped: bool = False
    _installed: bool = False

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
                  cleanups=list(cleanups or []), _api=api)
        try:
            env._start(proxy_listen_host, proxy_server_host, check_version, rollout_timeout)
        except BaseException:
            try:
                env.stop()
            except Exception as e:  # noqa: BLE001 - the start failure is the error to report
                say(f"clean-up after the failed start: {e}")
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
        self._save_config()

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
        pod = wait_for(lambda: r.routed_pod(self.run_id, exclude), timeout=timeout,
                       what="the routed Kueue Pod to be Ready", describe=r.diagnose)
        self.pod = pod["metadata"]["name"]
        self.pod_restarts = self._restarts(pod)
        self._log = PodLogFollower(self.api_client(), r.namespace, self.pod, r.container, self.kueue_log,
                                   restarts=self.pod_restarts).start()
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
        wait_for(self._webhooks_answer, timeout=60, what="Kueue's webhooks to answer (dry-run create)")

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
        self._attach(exclude=old, timeout=180)
        self.starts += 1

    @staticmethod
    def _restarts(pod: dict[str, Any]) -> int:
        return sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])

    def _webhooks_answer(self) -> bool:
        return webhooks_answer(self.api_client())

    def _save_config(self) -> None:
        """Kueue's Configuration from its ConfigMap, to state/kueue-config.yaml (the report reads feature
        gates there) and to the artifacts."""
        from kubernetes import client

        try:
            cm = client.CoreV1Api(self.api_client()).read_namespaced_config_map(KUEUE_CONFIGMAP, self.routing.namespace)
            text = (cm.data or {}).get(KUEUE_CONFIG_KEY)
        except Exception:  # noqa: BLE001 - a cluster may configure Kueue otherwise
            text = None
        if text:
            (self.state / "kueue-config.yaml").write_text(text)
            (self.artifacts / "kueue-config.yaml").write_text(text)

    def _save_objects(self) -> None:
        """The routed Deployment and Pod as evidence (no secret in them: the token is a file in the Pod)."""
        try:
            dep = self.routing.read()
            pod = next((p for p in self.routing.pods() if p["metadata"]["name"] == self.pod), None)
            for o in (dep, pod):
                if o:
                    (o.get("metadata") or {}).pop("managedFields", None)
            (self.artifacts / "kueue-objects.yaml").write_text(
                yaml.safe_dump({"deployment": dep, "pod": pod}, sort_keys=False))
        except Exception as e:  # noqa: BLE001 - evidence is best effort
            self.say(f"could not save Kueue's Deployment and Pod: {e}")

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
            by = self.routing.routed_by() if self._installed else None
            if by == self.run_id:
                self.routing.undo()
                self.routing.wait_rollout(240, "the rollout back to the original Kueue")
                self.say(f"restored {self.routing.namespace}/{self.routing.deployment}")
            elif self._installed and by is None:
                self.routing.delete_secret(self.run_id)
        except Exception as e:  # noqa: BLE001 - keep undoing the rest
            errors.append(f"undoing the routing of {self.routing.namespace}/{self.routing.deployment}: {e}")
        self.procs.stop_all()
        if self._api is not None:
            try:
                self._api.close()
            except Exception:  # noqa: BLE001
                pass
            self._api = None
        for fn in reversed(self.cleanups):
            try:
                fn()
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
        if errors:
            raise HarnessError("; ".join(errors) + " — undo by hand with `python -m harness.env.incluster undo "
                               f"--kubeconfig {self.admin_kubeconfig}` if the cluster is kept")


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
