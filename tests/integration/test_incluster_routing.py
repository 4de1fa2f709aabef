"""Integration tests of the kind / kubeconfig routing, run where no container engine exists:

1. The rendered Secret and Deployment patch are applied to the local environment's real kube-apiserver,
   to a stand-in Deployment shaped like the one in Kueue's release manifests (an object only: nothing
   runs it, no deployment controller runs here), and the result is read back through the API; then the
   undo is applied and the Deployment must be what it was.
2. The proxy listens on a non-loopback address (a veth pair into a second network namespace, addresses of
   our own), its control channel on 127.0.0.1 only. From the second namespace, clients use the
   kubeconfig read back from the Secret, with a real service-account token at the in-cluster path: a
   Python TLS client that checks the proxy's certificate as the kubeconfig says (CA data + tls-server-name)
   and controller-runtime's own config loading (client-go, as Kueue's main does) build a client and ask
   kube-apiserver who they are (SelfSubjectReview) through the proxy.

What is NOT exercised here (no container engine): kind itself, a kubelet running Kueue's Pod, the rollout,
the leader Lease, Kueue's log through the API. See docs/kind.md.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.build import binaries
from harness.common.procs import ProcessGroup, is_alive
from harness.env import kind
from harness.env import routing as ic
from harness.env.local import runs_root
from harness.proxy.client import Proxy

ROOT = Path(__file__).resolve().parents[2]

#: ServiceAccount and Deployment exactly as `kustomize build config/default` of sigs.k8s.io/kueue@v0.17.0
#: renders them with the release image (Makefile target `artifacts`: prepare-manifests sets the image;
#: that is the release's manifests.yaml). test_standin_matches_kueue_release_render checks it against the
#: module when kubectl is installed.
STANDIN = """
apiVersion: v1
kind: ServiceAccount
metadata:
  labels:
    app.kubernetes.io/name: kueue
    control-plane: controller-manager
  name: kueue-controller-manager
  namespace: kueue-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app.kubernetes.io/component: controller
    app.kubernetes.io/name: kueue
    control-plane: controller-manager
  name: kueue-controller-manager
  namespace: kueue-system
spec:
  replicas: 1
  selector:
    matchLabels:
      control-plane: controller-manager
  template:
    metadata:
      annotations:
        kubectl.kubernetes.io/default-container: manager
      labels:
        app.kubernetes.io/name: kueue
        control-plane: controller-manager
    spec:
      containers:
      - args:
        - --config=/controller_manager_config.yaml
        - --zap-log-level=2
        command:
        - /manager
        image: registry.k8s.io/kueue/kueue:v0.17.0
        imagePullPolicy: Always
        livenessProbe:
          httpGet:
            path: /healthz
            port: 8081
          initialDelaySeconds: 15
          periodSeconds: 20
        name: manager
        ports:
        - containerPort: 8443
          name: metrics
          protocol: TCP
        - containerPort: 8082
          name: visibility
          protocol: TCP
        - containerPort: 9443
          name: webhook-server
          protocol: TCP
        readinessProbe:
          httpGet:
            path: /readyz
            port: 8081
          initialDelaySeconds: 5
          periodSeconds: 10
        resources:
          limits:
            cpu: '2'
            memory: 512Mi
          requests:
            cpu: 500m
            memory: 512Mi
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop:
            - ALL
          readOnlyRootFilesystem: true
        volumeMounts:
        - mountPath: /visibility
          name: visibility
        - mountPath: /tmp/k8s-webhook-server/serving-certs
          name: cert
          readOnly: true
        - mountPath: /controller_manager_config.yaml
          name: manager-config
          subPath: controller_manager_config.yaml
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      serviceAccountName: kueue-controller-manager
      terminationGracePeriodSeconds: 10
      volumes:
      - emptyDir: {}
        name: visibility
      - name: cert
        secret:
          defaultMode: 420
          secretName: kueue-webhook-server-cert
      - configMap:
          name: kueue-manager-config
        name: manager-config
"""

#: A throwaway CRD in the stand-in file, so the install's CRD phase (apply, wait Established) runs too.
PROBE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "routingprobes.test.kueue-harness.io"},
    "spec": {"group": "test.kueue-harness.io", "scope": "Namespaced",
             "names": {"plural": "routingprobes", "singular": "routingprobe", "kind": "RoutingProbe"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}

SA_NAME, NS = "kueue-controller-manager", "kueue-system"


def _local_env(kueue_env):
    from harness.env.local import LocalEnvironment

    if not isinstance(kueue_env, LocalEnvironment):
        pytest.skip("needs --target local: these tests use the local kube-apiserver")
    return kueue_env


@pytest.fixture
def standin(kueue_env, tmp_path):
    """The stand-in SA + Deployment (+ a throwaway CRD) installed with the kind target's own manifest
    code (file path, server-side apply). Yields (api_client, routing, the Deployment as created)."""
    env = _local_env(kueue_env)
    api = env.api_client()
    routing = ic.KueueRouting(api)
    f = tmp_path / "manifests.yaml"
    f.write_text(STANDIN + "---\n" + yaml.safe_dump(PROBE_CRD))
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    try:
        applied = kind.apply_manifests(api, kind.load_manifests(str(f)), say=lambda s: None)
        assert applied == ["CustomResourceDefinition/routingprobes.test.kueue-harness.io",
                           f"ServiceAccount/{NS}/{SA_NAME}", f"Deployment/{NS}/kueue-controller-manager"]
        yield api, routing, routing.read()
    finally:
        for call in (lambda: apps.delete_namespaced_deployment("kueue-controller-manager", NS),
                     lambda: core.delete_namespaced_service_account(SA_NAME, NS),
                     lambda: core.delete_namespaced_secret(ic.SECRET_NAME, NS),
                     lambda: client.ApiextensionsV1Api(api).delete_custom_resource_definition(
                         PROBE_CRD["metadata"]["name"])):
            try:
                call()
            except ApiException as e:
                if e.status != 404:
                    raise


def _manager(dep):
    return ic.container_of(dep)


def test_secret_and_patch_applied_to_real_apiserver_and_undone(standin):
    api, routing, before = standin
    # Installed by server-side apply under our field manager, as `kubectl apply --server-side` would.
    assert any(m["manager"] == "kueue-harness" and m["operation"] == "Apply"
               for m in before["metadata"]["managedFields"])
    ca = b"-----BEGIN CERTIFICATE-----\nnot-parsed-by-the-api\n-----END CERTIFICATE-----\n"
    kubeconfig = ic.render_kubeconfig("https://10.213.0.1:41234", ca)

    routing.install(kubeconfig, "run-a")
    after = routing.read()  # a fresh GET: what kube-apiserver stored
    m = _manager(after)
    assert m["args"] == ["--config=/controller_manager_config.yaml",
                         "--kubeconfig=/etc/kueue-harness/kubeconfig", "--zap-log-level=3"]
    # The strategic merge puts new list items first; the release's own mounts stay as they were.
    mounts = {v["mountPath"]: v for v in m["volumeMounts"]}
    assert len(mounts) == len(m["volumeMounts"]) == 4
    assert [v for v in m["volumeMounts"] if v["mountPath"] != "/etc/kueue-harness"] == _manager(before)["volumeMounts"]
    assert mounts["/etc/kueue-harness"] == {"name": "kueue-harness-kubeconfig", "mountPath": "/etc/kueue-harness",
                                            "readOnly": True}
    vols = {v["name"]: v for v in after["spec"]["template"]["spec"]["volumes"]}
    assert set(vols) == {"visibility", "cert", "manager-config", "kueue-harness-kubeconfig"}
    assert vols["kueue-harness-kubeconfig"]["secret"] == {"secretName": "kueue-harness-kubeconfig",
                                                          "defaultMode": 0o444}
    # Everything else of the container (image, probes, ports, securityContext) is untouched.
    keep = {k: v for k, v in _manager(before).items() if k not in ("args", "volumeMounts")}
    assert {k: v for k, v in m.items() if k not in ("args", "volumeMounts")} == keep
    ann = after["metadata"]["annotations"]
    assert json.loads(ann[ic.ANN_ORIGINAL_ARGS]) == _manager(before)["args"] and ann[ic.ANN_ROUTED_BY] == "run-a"
    assert after["spec"]["template"]["metadata"]["annotations"][ic.ANN_RUN] == "run-a"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1  # a new rollout
    done, msg = ic.rollout_status(after)
    assert not done, "no deployment controller runs here, so the rollout must not look done"

    # The Secret, read back through the API, holds the kubeconfig as rendered.
    from kubernetes import client

    sec = client.CoreV1Api(api).read_namespaced_secret(ic.SECRET_NAME, NS)
    stored = yaml.safe_load(base64.b64decode(sec.data["kubeconfig"]))
    assert stored == kubeconfig
    cluster = stored["clusters"][0]["cluster"]
    assert base64.b64decode(cluster["certificate-authority-data"]) == ca
    assert cluster["tls-server-name"] == "kueue-harness-proxy"
    assert stored["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}

    # A later run on a Deployment a killed run left routed: nothing doubles, the original args survive.
    routing.install(kubeconfig, "run-b")
    again = routing.read()
    assert _manager(again)["args"] == m["args"]
    assert len(_manager(again)["volumeMounts"]) == 4 and len(again["spec"]["template"]["spec"]["volumes"]) == 4
    assert json.loads(again["metadata"]["annotations"][ic.ANN_ORIGINAL_ARGS]) == _manager(before)["args"]
    assert routing.routed_by() == "run-b"

    # Undo: the Pod template is what the release manifests made, our annotations and Secret are gone.
    routing.undo()
    undone = routing.read()
    assert undone["spec"]["template"] == before["spec"]["template"]
    assert not {ic.ANN_ROUTED_BY, ic.ANN_ORIGINAL_ARGS} & set(undone["metadata"].get("annotations") or {})
    assert routing.routed_by() is None
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as e:
        client.CoreV1Api(api).read_namespaced_secret(ic.SECRET_NAME, NS)
    assert e.value.status == 404
    assert routing.undo() is None  # nothing left to undo


def test_standin_matches_kueue_release_render(kueue_version, tmp_path):
    """The stand-in is the release's Deployment: render config/default of the Kueue module the way the
    release does (`kustomize build`, image set to registry.k8s.io/kueue/kueue:<version>)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (for its built-in kustomize) is not installed")
    if kueue_version != "v0.17.0":
        pytest.skip("the stand-in is v0.17.0's")
    src = binaries.kueue_source("v0.17.0") / "config"
    cfg = tmp_path / "config"
    shutil.copytree(src, cfg)
    for p in cfg.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    kust = cfg / "components" / "manager" / "kustomization.yaml"
    k = yaml.safe_load(kust.read_text())
    k["images"] = [{"name": "controller", "newName": "registry.k8s.io/kueue/kueue", "newTag": "v0.17.0"}]
    kust.write_text(yaml.safe_dump(k))
    out = subprocess.run([kubectl, "kustomize", str(cfg / "default")], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    rendered = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    for doc in yaml.safe_load_all(STANDIN):
        assert rendered[(doc["kind"], doc["metadata"]["name"])] == doc


# ---- the proxy on a bridge address, seen from another network namespace -------------------------------
def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def _used_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for link in json.loads(_ip("-j", "-4", "addr").stdout or "[]"):
        for a in link.get("addr_info", []):
            nets.append(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for r in json.loads(_ip("-j", "-4", "route").stdout or "[]"):
        if r.get("dst") not in (None, "default"):
            nets.append(ipaddress.ip_network(r["dst"] if "/" in r["dst"] else r["dst"] + "/32", strict=False))
    return nets


def _reap_stale_netns() -> None:
    """Delete test namespaces of earlier test processes that died (named kh-test-<pid>-<tag>)."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        parts = name.split("-")
        if len(parts) == 4 and parts[:2] == ["kh", "test"] and parts[2].isdigit() and not is_alive(int(parts[2]), None):
            _ip("netns", "del", name, check=False)
            _ip("link", "del", f"khv{parts[3]}h", check=False)


@pytest.fixture
def netns():
    """A second network namespace joined to this one by a veth pair on a /30 of 10.213.x.y (ours only).
    Yields (name, host address, namespace address). Removed afterwards, whatever happens."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns, veth)")
    _reap_stale_netns()
    used = _used_networks()
    candidates = list(ipaddress.ip_network("10.213.0.0/24").subnets(new_prefix=30))
    start = secrets.randbelow(len(candidates))  # concurrent test runs rarely pick the same /30
    net = next(n for n in candidates[start:] + candidates[:start] if not any(n.overlaps(u) for u in used))
    host_addr, ns_addr = (str(a) for a in list(net.hosts())[:2])
    tag = secrets.token_hex(2)
    name, host_if, ns_if = f"kh-test-{os.getpid()}-{tag}", f"khv{tag}h", f"khv{tag}n"
    try:
        _ip("netns", "add", name)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", name)
        _ip("addr", "add", f"{host_addr}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", f"{ns_addr}/30", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        yield name, host_addr, ns_addr
    finally:
        _ip("netns", "del", name, check=False)  # takes the namespace's end of the pair, hence the pair
        _ip("link", "del", host_if, check=False)
    assert name not in _ip("netns", "list", check=False).stdout
    assert _ip("link", "show", host_if, check=False).returncode != 0


def _listeners(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp has them) listening on TCP `port`."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sorted(r.split()[1].split(":")[0] for r in rows
                  if r.split()[3] == "0A" and r.split()[1].endswith(f":{port:04X}"))


def _hex_ip(addr: str) -> str:
    return ipaddress.ip_address(addr).packed[::-1].hex().upper()


#: Runs in the second namespace. Reads the kubeconfig as Kueue's would be read: server, CA data,
#: tls-server-name, tokenFile (at the in-cluster path). Prints one JSON object.
_PY_CLIENT = textwrap.dedent(r"""
    import base64, json, socket, ssl, sys
    from urllib.parse import urlsplit
    import yaml
    a = json.loads(sys.argv[1])
    cfg = yaml.safe_load(open(a["kubeconfig"]))
    cl, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    u = urlsplit(cl["server"])
    token = open(user["tokenFile"]).read().strip()
    out = {}

    def review(cadata, name):
        ctx = ssl.create_default_context(cadata=cadata)
        with socket.create_connection((u.hostname, u.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=name) as s:
                sans = [v for _, v in s.getpeercert().get("subjectAltName", ())]
                body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
                s.sendall(b"POST /apis/authentication.k8s.io/v1/selfsubjectreviews HTTP/1.1\r\nHost: "
                          + name.encode() + b"\r\nAuthorization: Bearer " + token.encode()
                          + b"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
                          + str(len(body)).encode() + b"\r\n\r\n" + body)
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
        head, _, payload = data.partition(b"\r\n\r\n")
        status = int(head.split()[1])
        if b"chunked" in head.lower():
            parts, rest = [], payload
            while rest:
                size, _, rest = rest.partition(b"\r\n")
                n = int(size, 16)
                if n == 0:
                    break
                parts.append(rest[:n]); rest = rest[n + 2:]
            payload = b"".join(parts)
        return status, sans, json.loads(payload)

    status, sans, r = review(base64.b64decode(cl["certificate-authority-data"]).decode(), cl["tls-server-name"])
    out["status"], out["sans"] = status, sans
    out["username"] = r.get("status", {}).get("userInfo", {}).get("username")
    try:
        review(open(a["other_ca"]).read(), cl["tls-server-name"])
        out["other_ca"] = "accepted"
    except ssl.SSLCertVerificationError as e:
        out["other_ca"] = "rejected: " + e.verify_message
    for host in (u.hostname, "127.0.0.1"):
        try:
            socket.create_connection((host, a["control_port"]), timeout=5).close()
            out["control@" + host] = "open"
        except OSError as e:
            out["control@" + host] = type(e).__name__
    print(json.dumps(out))
""")

#: controller-runtime's config loading, as Kueue's main does it (the --kubeconfig flag registered by
#: sigs.k8s.io/controller-runtime/pkg/client/config, then ctrl.GetConfigOrDie), with the versions Kueue
#: v0.17.0 requires. Asks kube-apiserver who it is.
_GO_PROBE = """// Loads a kubeconfig the way Kueue v0.17's main does and asks kube-apiserver who it is.
package main

import (
\t"context"
\t"encoding/json"
\t"flag"
\t"fmt"
\t"os"

\tauthv1 "k8s.io/api/authentication/v1"
\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
\tauthclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
\tctrl "sigs.k8s.io/controller-runtime/pkg/client/config"
)

func main() {
\tflag.Parse() // --kubeconfig, registered by controller-runtime's init as in Kueue
\tcfg, err := ctrl.GetConfig()
\tif err != nil {
\t\tfmt.Fprintln(os.Stderr, "config:", err)
\t\tos.Exit(2)
\t}
\tc, err := authclient.NewForConfig(cfg)
\tif err != nil {
\t\tfmt.Fprintln(os.Stderr, "client:", err)
\t\tos.Exit(2)
\t}
\tr, err := c.SelfSubjectReviews().Create(context.Background(), &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
\tif err != nil {
\t\tfmt.Fprintln(os.Stderr, "request:", err)
\t\tos.Exit(1)
\t}
\t_ = json.NewEncoder(os.Stdout).Encode(map[string]string{
\t\t"host": cfg.Host, "serverName": cfg.TLSClientConfig.ServerName, "tokenFile": cfg.BearerTokenFile,
\t\t"username": r.Status.UserInfo.Username,
\t})
}
"""


def _go_probe() -> Path:
    """The probe binary, built once with the machine's Go into the harness cache."""
    go_mod = (
        "module kueueharness.local/build/kubeconfigprobe\n\ngo 1.25.0\n\n"
        "require (\n\tk8s.io/api v0.35.3\n\tk8s.io/apimachinery v0.35.3\n\tk8s.io/client-go v0.35.3\n"
        "\tsigs.k8s.io/controller-runtime v0.23.3\n)\n"
    )
    target = binaries.GoTarget("kubeconfig-probe", "crt-v0.23.3", go_mod, (), None, _GO_PROBE, "",
                               "KUEUE_HARNESS_KUBECONFIG_PROBE")
    return binaries.build(target)


def test_proxy_on_bridge_address_verified_like_kueues_kubeconfig(standin, kueue_env, netns, tmp_path):
    api, routing, _ = standin
    env = _local_env(kueue_env)
    ns_name, host_addr, _ = netns
    probe = _go_probe()
    from kubernetes import client

    from harness.plan.rules import Match, Rule

    tag = secrets.token_hex(2)
    state = runs_root() / f"test-netns-{os.getpid()}-{tag}"
    state.mkdir(mode=0o700)
    procs = ProcessGroup(state)
    try:
        # Upstream and admin access read from the admin kubeconfig, as the cluster targets do.
        up = ic.upstream_from_kubeconfig(env.admin_kubeconfig)
        assert up.server == env.api_url and up.ca_pem == env.ca_file.read_bytes()
        (state / "upstream-ca.crt").write_bytes(up.ca_pem)
        api = ic.api_client_from_kubeconfig(env.admin_kubeconfig)
        proxy = Proxy.start(upstream=up.server, upstream_ca=state / "upstream-ca.crt", state=state,
                            artifacts=tmp_path, procs=procs, port=ic._free_port(host_addr),
                            control_port=ic._free_port("127.0.0.1"), say=lambda s: None, listen_host=host_addr)
        recs = [rec for _, rec in procs.procs.values()]
        port = int(proxy.url.rsplit(":", 1)[1])
        assert proxy.url == f"https://{host_addr}:{port}"
        # The proxy listens on the bridge address only; the control channel on loopback only.
        assert _listeners(port) == [_hex_ip(host_addr)]
        assert _listeners(proxy.control_port) == [_hex_ip("127.0.0.1")]

        # Kueue's kubeconfig, installed as the Secret and read back through the API.
        routing.install(ic.render_kubeconfig(proxy.url, proxy.ca_file.read_bytes()), "run-netns")
        sec = client.CoreV1Api(api).read_namespaced_secret(ic.SECRET_NAME, NS)
        kubeconfig = tmp_path / "kueue-kubeconfig"
        kubeconfig.write_bytes(base64.b64decode(sec.data["kubeconfig"]))
        token = client.CoreV1Api(api).create_namespaced_service_account_token(
            SA_NAME, NS, {"spec": {"expirationSeconds": 600}}).status.token
        seen = proxy.add_rule(Rule(id="ssr", match=Match(path_regex="selfsubjectreviews"), action="observe",
                                   times=None))

        # In the second namespace, with a private /run holding the token at the in-cluster path.
        args = json.dumps({"kubeconfig": str(kubeconfig), "other_ca": str(env.ca_file),
                           "control_port": proxy.control_port})
        script = ('set -e; mount -t tmpfs kh-token /run; d=/run/secrets/kubernetes.io/serviceaccount; '
                  'mkdir -p "$d"; cat > "$d/token"; "$1" -c "$2" "$3"; "$4" --kubeconfig="$5"')
        r = subprocess.run(
            ["ip", "netns", "exec", ns_name, "sh", "-c", script, "sh", sys.executable, _PY_CLIENT, args,
             str(probe), str(kubeconfig)],
            input=token, capture_output=True, text=True, timeout=90, cwd=ROOT,
        )
        assert r.returncode == 0, r.stderr
        py, go = (json.loads(line) for line in r.stdout.strip().splitlines())
        sa_user = f"system:serviceaccount:{NS}:{SA_NAME}"
        assert py["status"] == 201 and py["username"] == sa_user, py
        assert "kueue-harness-proxy" in py["sans"]
        assert py["other_ca"].startswith("rejected"), py  # the name alone is not enough: the CA must match
        assert py["control@" + host_addr] == "ConnectionRefusedError"
        assert py["control@127.0.0.1"] == "ConnectionRefusedError"  # the namespace's own loopback
        assert go == {"host": proxy.url, "serverName": "kueue-harness-proxy",
                      "tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token", "username": sa_user}
        assert seen.hits() == 2, "both requests must have gone through the proxy"
    finally:
        procs.stop_all()
        shutil.rmtree(state, ignore_errors=True)
    assert recs and not any(is_alive(rec.pid, rec.start) for rec in recs)


# ---- the CI workflow ---------------------------------------------------------------------------------
def test_ci_workflow_passes_actionlint():
    """.github/workflows/kind.yml is a valid GitHub Actions workflow (actionlint, built from its Go module;
    with shellcheck on PATH it also checks the `run:` scripts), and the script it calls passes shellcheck."""
    go_mod = ("module kueueharness.local/build/actionlint\n\ngo 1.25.0\n\n"
              "require github.com/rhysd/actionlint v1.7.12\n")
    try:
        actionlint = binaries.build(binaries.GoTarget(
            "actionlint", "v1.7.12", go_mod, ("github.com/rhysd/actionlint/cmd/actionlint",),
            "github.com/rhysd/actionlint/cmd/actionlint", None, "", "KUEUE_HARNESS_ACTIONLINT"))
    except Exception as e:  # noqa: BLE001 - no Go / no module proxy: say so instead of failing
        pytest.skip(f"actionlint could not be built: {e}")
    r = subprocess.run([str(actionlint), "-no-color", str(ROOT / ".github" / "workflows" / "kind.yml")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    if shutil.which("shellcheck"):
        r = subprocess.run(["shellcheck", str(ROOT / "ci" / "kind-seed-cases.sh")], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout
