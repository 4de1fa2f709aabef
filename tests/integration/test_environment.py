"""Integration tests of the harness itself against the real components (etcd, kube-apiserver,
kube-controller-manager, mitmdump, Kueue): proxy transparency, watches streaming, the control channel's
guard, process clean-up, and CLI errors for bad input.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from harness.common.procs import is_alive
from harness.common.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def _request(base: str, ca: Path, token: str, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    ctx = ssl.create_default_context(cafile=str(ca))
    host, port = base.removeprefix("https://").split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Authorization": f"Bearer {token}", **(headers or {})})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_unmatched_requests_pass_through_unchanged(kueue_env, cluster):
    """A GET and a PATCH that match no rule get the same answer through the proxy as direct."""
    env, proxy = kueue_env, kueue_env.proxy
    ns = f"transparent-{int(time.time() * 1000) % 100000}"
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    path = f"/api/v1/namespaces/{ns}/configmaps/cm"
    direct = _request(env.api_url, env.ca_file, env.admin_token, "GET", path)
    proxied = _request(proxy.url, proxy.ca_file, env.admin_token, "GET", path)
    assert proxied[0] == direct[0] == 200
    assert proxied[2] == direct[2], "the proxy changed an unmatched response body"
    assert proxied[1]["content-type"] == direct[1]["content-type"]
    patch = json.dumps({"data": {"b": "2"}}).encode()
    st, _, body = _request(proxy.url, proxy.ca_file, env.admin_token, "PATCH", path, patch,
                           {"Content-Type": "application/merge-patch+json"})
    assert st == 200 and json.loads(body)["data"] == {"a": "1", "b": "2"}
    after = _request(env.api_url, env.ca_file, env.admin_token, "GET", path)[2]
    assert json.loads(after)["data"] == {"a": "1", "b": "2"}


def test_watch_through_proxy_streams_events(kueue_env, cluster):
    """A watch through the proxy delivers an event while the watch is still open (not buffered)."""
    env, proxy = kueue_env, kueue_env.proxy
    ns = f"watch-{int(time.time() * 1000) % 100000}"
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    ctx = ssl.create_default_context(cafile=str(proxy.ca_file))
    req = urllib.request.Request(
        f"{proxy.url}/api/v1/namespaces/{ns}/configmaps?watch=true&timeoutSeconds=30",
        headers={"Authorization": f"Bearer {env.admin_token}"})
    resp = urllib.request.urlopen(req, context=ctx, timeout=20)
    try:
        created = time.monotonic()
        cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "streamed"}})
        line = resp.readline()  # blocks until the first event arrives; the watch stays open 30 s
        lag = time.monotonic() - created
    finally:
        resp.close()
    ev = json.loads(line)
    assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "streamed"
    assert lag < 5, f"watch event took {lag:.1f}s through the proxy: the stream is buffered"


def test_control_channel_needs_token_and_listens_on_loopback(kueue_env):
    proxy = kueue_env.proxy
    conn = http.client.HTTPConnection("127.0.0.1", proxy.control_port, timeout=5)
    conn.request("GET", "/state", headers={"Authorization": "Bearer wrong"})
    r = conn.getresponse()
    assert r.status == 401
    conn.close()
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    port_hex = f"{proxy.control_port:04X}"
    local = [l.split()[1] for l in listening if l.split()[1].endswith(":" + port_hex) and l.split()[3] == "0A"]
    assert local == ["0100007F:" + port_hex], f"control channel listens on {local}, not only 127.0.0.1"


def test_keys_and_tokens_are_private(kueue_env):
    for name in ("tokens.csv", "apiserver.key", "sa.key", "admin.kubeconfig", "kueue.kubeconfig", "control.token"):
        mode = (kueue_env.state / name).stat().st_mode & 0o777
        assert mode == 0o600, f"{name} has mode {oct(mode)}"
    for f in kueue_env.artifacts.rglob("*"):
        if f.is_file():
            text = f.read_text(errors="replace")
            assert kueue_env.admin_token not in text and kueue_env.kueue_token not in text, f"token in {f}"


def test_kube_apiserver_refuses_anonymous_requests(kueue_env):
    """Authorization is AlwaysAllow (every identity is system:masters anyway), so only the run's tokens
    may get in: a request without one is refused, even for discovery and health."""
    for path in ("/api/v1/namespaces", "/readyz", "/apis"):
        st, _, _ = _request(kueue_env.api_url, kueue_env.ca_file, "", "GET", path)
        assert st == 401, f"anonymous GET {path} answered {st}"
    st, _, _ = _request(kueue_env.api_url, kueue_env.ca_file, "nope", "GET", "/api/v1/namespaces")
    assert st == 401


def test_started_from_an_etcd_template_with_nothing_of_another_run(kueue_env):
    """The environment's etcd is a copy of the etcd template: Kueue's CRDs were there before Kueue, and the
    client-CA bundle, the service-account tokens and Secrets are this run's only."""
    from kubernetes import client

    if kueue_env.template is None:
        pytest.skip("etcd templates are off (KUEUE_HARNESS_ETCD_TEMPLATE=0)")
    core = client.CoreV1Api(kueue_env.api_client())
    cm = core.read_namespaced_config_map("extension-apiserver-authentication", "kube-system")
    assert cm.data["client-ca-file"].strip() == kueue_env.ca_file.read_text().strip()
    assert core.list_secret_for_all_namespaces().items == []
    names = {c["name"] for c in kueue_env.template.crds}
    assert "workloads.kueue.x-k8s.io" in names and "clusterqueues.kueue.x-k8s.io" in names
    assert not (kueue_env.template.data / "member" / "snap" / "db").samefile(kueue_env.state / "etcd-data" / "member" / "snap" / "db")


def test_killed_run_leaves_no_process(tmp_path, kueue_version):
    """SIGKILL of a process that started an environment: its children die with it (PR_SET_PDEATHSIG),
    and a later start finds nothing left to reap."""
    script = tmp_path / "start.py"
    script.write_text(textwrap.dedent(f"""
        import json, sys, time
        from pathlib import Path
        from harness.env.local import LocalEnvironment
        env = LocalEnvironment.start({kueue_version!r}, artifacts=Path({str(tmp_path / 'art')!r}))
        print(json.dumps(str(env.state)), flush=True)
        time.sleep(600)
    """))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, cwd=ROOT, text=True)
    try:
        state = Path(json.loads(p.stdout.readline()))
        recs = json.loads((state / "processes.json").read_text())["procs"]
        assert {r["name"] for r in recs} >= {"etcd", "kube-apiserver", "kueue", "proxy"}
        assert all(is_alive(r["pid"], r["start"]) for r in recs)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    wait_for(lambda: not any(is_alive(r["pid"], r["start"]) for r in recs), timeout=20,
             what="every process of the killed run to exit",
             describe=lambda: [r["name"] for r in recs if is_alive(r["pid"], r["start"])])


def test_unserved_kueue_version_is_a_clear_error():
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--kueue-version", "v0.99.0"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 3
    assert "v0.99.0" in r.stderr and "v0.17.0" in r.stderr and "Traceback" not in r.stderr


def test_port_in_use_is_a_clear_error(kueue_version):
    from harness.common.errors import PortInUse
    from harness.env.local import LocalEnvironment

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(PortInUse, match=str(port)):
            LocalEnvironment.start(kueue_version, proxy_port=port)


def _curl(url: str, ca: Path, token: str, path: str) -> tuple[str, dict[str, str], bytes]:
    import shutil
    import tempfile

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (it speaks HTTP/2 here; apt-get install curl)")
    with tempfile.TemporaryDirectory() as d:
        hdr, body = Path(d) / "h", Path(d) / "b"
        r = subprocess.run(["curl", "-sS", "--http2", "--cacert", str(ca), "-H", f"Authorization: Bearer {token}",
                            "-D", str(hdr), "-o", str(body), "-w", "%{http_version}", url + path],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        lines = hdr.read_text().splitlines()[1:]
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines if ":" in l)}
        return r.stdout, headers, body.read_bytes()


def test_http2_responses_pass_unchanged(kueue_env, cluster):
    """Over HTTP/2 (as client-go talks), an unmatched GET gets the same status line, headers (but the
    per-response date and audit id) and body through the proxy as direct."""
    env, proxy = kueue_env, kueue_env.proxy
    ns = f"h2-{int(time.time() * 1000) % 100000}"
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"k": "v" * 3000}})
    path = f"/api/v1/namespaces/{ns}/configmaps/cm"
    dv, dh, db = _curl(env.api_url, env.ca_file, env.admin_token, path)
    pv, ph, pb = _curl(proxy.url, proxy.ca_file, env.admin_token, path)
    assert dv == pv == "2", f"HTTP versions: direct {dv}, proxied {pv}"
    assert pb == db
    varying = {"date", "audit-id"}
    assert {k: v for k, v in ph.items() if k not in varying} == {k: v for k, v in dh.items() if k not in varying}
