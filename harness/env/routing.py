"""How Kueue in a cluster is routed through the proxy on this machine: the kubeconfig Secret (the proxy as
server, its CA, tls-server-name, Kueue's own service-account token), the Deployment patch that mounts it and
adds --kubeconfig and the log level (and its undo, from annotations), rollout status, the upstream of a
kubeconfig, and the address Pods reach this machine on; `KueueRouting` applies and undoes it through the API.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.waiting import WaitTimeout, wait_progressing
from harness.env import routed_kueue
from harness.env.routed_kueue import (  # noqa: F401 - Kueue's ConfigMap names, importable from here too
    KUEUE_CONFIG_KEY,
    KUEUE_CONFIGMAP,
    KUEUE_LEASE,
    kueue_leader_election,
)

Say = Callable[[str], None]


KUEUE_NAMESPACE = "kueue-system"


KUEUE_DEPLOYMENT = "kueue-controller-manager"


KUEUE_CONTAINER = "manager"


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


#: The Pod template's own `tolerations` and `nodeSelector` before routing (JSON), restored by the undo.
ANN_ORIGINAL_PLACEMENT = "kueue-harness/original-placement"


#: The Deployment's own `strategy` before routing (JSON), restored by the undo: the routed Kueue rolls out with
#: Recreate (its leader election is off, so two Kueue Pods must never run side by side).
ANN_ORIGINAL_STRATEGY = "kueue-harness/original-strategy"


#: The label kube-scheduler's hostname topology uses; Kueue's routed Pod stays on the Node it ran on.
HOSTNAME_LABEL = "kubernetes.io/hostname"


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


def original_strategy(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's `strategy` before routing: from ANN_ORIGINAL_STRATEGY when routed already, else as it is
    ({} when it sets none: the API server's default, RollingUpdate)."""
    ann = (deployment["metadata"].get("annotations") or {}).get(ANN_ORIGINAL_STRATEGY)
    if ann is not None:
        return json.loads(ann)
    return dict((deployment.get("spec") or {}).get("strategy") or {})


def original_placement(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Pod template's `tolerations` and `nodeSelector` before routing: from ANN_ORIGINAL_PLACEMENT when
    the Deployment is routed already, else as the template has them now (each None when absent)."""
    ann = (deployment["metadata"].get("annotations") or {}).get(ANN_ORIGINAL_PLACEMENT)
    if ann is not None:
        return json.loads(ann)
    spec = deployment["spec"]["template"]["spec"]
    return {"tolerations": spec.get("tolerations"), "nodeSelector": spec.get("nodeSelector")}


def routed_placement(original: dict[str, Any], node: str | None) -> dict[str, Any]:
    """Where the routed Kueue Pod may run: its own tolerations plus one of the taint that keeps case Pods off
    the real Nodes (harness/env/pods.py CASE_PODS_TAINT), and, given the `node` it runs on now, that Node
    only (kubernetes.io/hostname added to its nodeSelector): a Kueue restarted during a case with kwok Nodes
    must neither wait for an untainted Node nor land on a kwok Node, where nothing would run it."""
    from harness.env.pods import CASE_PODS_TAINT

    ours = {"key": CASE_PODS_TAINT["key"], "operator": "Exists", "effect": CASE_PODS_TAINT["effect"]}
    tolerations = [t for t in original.get("tolerations") or [] if t.get("key") != ours["key"]] + [ours]
    out: dict[str, Any] = {"tolerations": tolerations}
    if node:
        out["nodeSelector"] = {HOSTNAME_LABEL: node}
    return out


def render_deployment_patch(original: list[str] | None, run_id: str,
                            container: str = KUEUE_CONTAINER,
                            placement: tuple[dict[str, Any], str | None] | None = None,
                            strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    """Strategic-merge patch that routes Kueue: mount the Secret, pass --kubeconfig and --zap-log-level;
    with `placement` (the template's original placement, the Node Kueue runs on) also `routed_placement`;
    with `strategy` (the Deployment's original one) the Recreate strategy (ANN_ORIGINAL_STRATEGY).

    Volumes merge by `name` and volumeMounts by `mountPath`, so applying it twice adds nothing twice;
    tolerations (no merge key) are replaced by the original ones plus ours.
    """
    spec: dict[str, Any] = {
        "containers": [{
            "name": container,
            "args": routed_args(original),
            "volumeMounts": [{"name": VOLUME_NAME, "mountPath": MOUNT_DIR, "readOnly": True}],
        }],
        "volumes": [{"name": VOLUME_NAME, "secret": {"secretName": SECRET_NAME, "defaultMode": 0o444}}],
    }
    annotations = {ANN_ROUTED_BY: run_id, ANN_ORIGINAL_ARGS: json.dumps(original)}
    if placement is not None:
        spec.update(routed_placement(*placement))
        annotations[ANN_ORIGINAL_PLACEMENT] = json.dumps(placement[0])
    out: dict[str, Any] = {
        "metadata": {"annotations": annotations},
        "spec": {"template": {"metadata": {"annotations": {ANN_RUN: run_id}}, "spec": spec}},
    }
    if strategy is not None:
        annotations[ANN_ORIGINAL_STRATEGY] = json.dumps(strategy)
        out["spec"]["strategy"] = {"type": "Recreate", "rollingUpdate": None}
    return out


def render_undo_patch(original: list[str] | None, container: str = KUEUE_CONTAINER,
                      placement: dict[str, Any] | None = None, strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    """Strategic-merge patch that reverts `render_deployment_patch`: original args back (or none), our
    volume and mount deleted, our annotations removed; with `placement` (original_placement) the original
    tolerations back (None deletes them) and the hostname key of the nodeSelector as it was; with `strategy`
    (ANN_ORIGINAL_STRATEGY) the Deployment's own strategy back."""
    spec: dict[str, Any] = {
        "containers": [{
            "name": container,
            "args": original,
            "volumeMounts": [{"$patch": "delete", "mountPath": MOUNT_DIR}],
        }],
        "volumes": [{"$patch": "delete", "name": VOLUME_NAME}],
    }
    if placement is not None:
        spec["tolerations"] = placement.get("tolerations")
        spec["nodeSelector"] = {HOSTNAME_LABEL: (placement.get("nodeSelector") or {}).get(HOSTNAME_LABEL)}
    out: dict[str, Any] = {
        "metadata": {"annotations": {ANN_ROUTED_BY: None, ANN_ORIGINAL_ARGS: None, ANN_ORIGINAL_PLACEMENT: None,
                                     ANN_ORIGINAL_STRATEGY: None}},
        "spec": {"template": {"metadata": {"annotations": {ANN_RUN: None}}, "spec": spec}},
    }
    if strategy is not None:
        out["spec"]["strategy"] = {"type": strategy.get("type") or "RollingUpdate",
                                   "rollingUpdate": strategy.get("rollingUpdate")}
    return out


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
        placement = (original_placement(dep), self._running_node())
        routed_kueue.route_config(self.core, self.namespace)
        patched = self.apps.patch_namespaced_deployment(
            self.deployment, self.namespace,
            render_deployment_patch(orig, run_id, self.container, placement, original_strategy(dep)),
            field_manager=FIELD_MANAGER,
        )
        return self.api.sanitize_for_serialization(patched)

    def _running_node(self) -> str | None:
        """The Node a running Kueue Pod of the Deployment is on (the newest), None when none runs."""
        for p in self.pods():
            if (p.get("status") or {}).get("phase") == "Running" and (p.get("spec") or {}).get("nodeName"):
                return p["spec"]["nodeName"]
        return None

    def undo(self) -> dict[str, Any] | None:
        """Revert the patch (if the Deployment carries it) and delete the Secret. Returns the Deployment
        after the revert, or None if there was nothing to revert."""
        dep = self.read()
        out = None
        anns = dep["metadata"].get("annotations") or {}
        routed_kueue.unroute_config(self.core, self.namespace)  # before the rollout back: Kueue as installed
        if ANN_ORIGINAL_ARGS in anns:
            placement = json.loads(anns[ANN_ORIGINAL_PLACEMENT]) if ANN_ORIGINAL_PLACEMENT in anns else None
            strategy = json.loads(anns[ANN_ORIGINAL_STRATEGY]) if ANN_ORIGINAL_STRATEGY in anns else None
            out = self.api.sanitize_for_serialization(self.apps.patch_namespaced_deployment(
                self.deployment, self.namespace, render_undo_patch(original_args(dep, self.container),
                                                                   self.container, placement, strategy),
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

        def state() -> str:
            d = self.read()
            pods = ", ".join(f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')}"
                             for p in self.pods()[:3])
            return f"{rollout_status(d)[1]}; Pods: {pods or 'none'}"

        try:
            # Bounded by progress (the rollout's message or a Pod's phase changing), `timeout` seconds of none:
            # a loaded runner's rollout is slow, not stuck; a line every 20 s says where it is.
            return wait_progressing(probe, state=state, stall=timeout, cap=max(timeout, 3 * timeout),
                                    what=f"{what} of {self.namespace}/{self.deployment}", interval=1.0, say=self.say)
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

    def routed_ips(self, run_id: str) -> set[str]:
        """The Pod IPs of this run's rollout (template annotation), its terminating Pods left out."""
        return {(p.get("status") or {}).get("podIP") for p in self.pods()
                if (p["metadata"].get("annotations") or {}).get(ANN_RUN) == run_id
                and not p["metadata"].get("deletionTimestamp") and (p.get("status") or {}).get("podIP")}

    def diagnose(self) -> str:
        """Pod states and the newest Pod's last log lines, for error messages."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        lines = []
        try:
            pods = self.pods()
        except (ApiException, HTTPError, OSError) as e:  # the diagnosis says so instead
            return f"(could not list Kueue's Pods: {type(e).__name__}: {e})"
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
            except (ApiException, HTTPError, OSError) as e:  # e.g. 400 while the container starts
                lines.append(f"  (no log: {type(e).__name__}: {getattr(e, 'reason', e)})")
        return "Kueue's Pods:\n" + "\n".join(lines) if lines else "Kueue has no Pods"
