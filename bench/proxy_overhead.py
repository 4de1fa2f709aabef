"""Proxy overhead, as ratios against a direct connection to kube-apiserver, on real components:

1. added latency per request (p50, p99) for GET and PATCH of a Workload: the same requests, interleaved,
   through `env.proxy.url` (trusting mitmproxy's CA) and to `env.api_url`, admin token, keep-alive; and,
   as a floor, through a second mitmdump with the same options but without the addon;
2. watch-event delivery lag (p50, p99): Workloads created directly; arrival of their ADDED events on a
   watch through the proxy vs on a direct watch, both against the time the create was sent;
3. Kueue's admission throughput with Kueue's traffic through the proxy vs direct (`with_proxy=False`):
   time from the first create to all N Workloads QuotaReserved=True (seen by a direct watch), N small
   Jobs (cpu 10m) in one ClusterQueue with a large nominal quota. One environment per mode and round,
   modes alternating; started and stopped one at a time.

    .venv/bin/python bench/proxy_overhead.py [--kueue-version TAG | --kueue-ref REF [--kueue-repo REPO]]
        [--requests 500] [--watch-events 200] [--jobs 300] [--rounds 1] [--kueue-qps N] [--profile]
        [--skip-throughput]

Any Kueue build (harness.build.kueue.KueueSpec): a tag (built from the Go module proxy, or from
KUEUE_HARNESS_KUEUE_REPO / --kueue-repo where the proxy does not serve it) or a git ref. Kueue runs with
that build's own defaults unless told otherwise; the results record its client rate limit as read from its
source (apis/config/v1beta2/defaults.go: qps 20, burst 30 up to v0.18.x; qps 300, burst 500 from v0.19.0).
`--kueue-qps N` sets Kueue's clientConnection qps=N, burst=2N.
`--release-config` runs Kueue with the clientConnection (qps 50, burst 100) and controller.groupKindConcurrency
(Job.batch 5, Workload 5, ...) of the Configuration in Kueue's release manifests; the harness's own config
leaves both at Kueue's built-in defaults (qps 20, burst 30, one worker per controller).
`--profile` adds, after the measured part in the proxy environment, an unmeasured pass (latency loop,
watch and one admission run) under py-spy attached to mitmdump: the proxy's hot path.

Writes bench/results/<date>-proxy-overhead[-<kueue>][-release-config][-qpsN][-<tag>].json (<kueue>: the
tag or "ref-<ref>", left out for the default version). Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    ROOT,
    Profiler,
    categorize,
    load,
    print_profile,
    quiet_say,
    read_stacks,
    summary,
    top_frames,
    write_result,
)

from harness import objects as o  # noqa: E402
from harness.common.waiting import wait_for  # noqa: E402
from harness.env.local import LocalEnvironment  # noqa: E402
from harness.kueue import versions  # noqa: E402

WL_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"


# ---- HTTP clients (stdlib: nothing between us and the socket but TLS) -------------------------------
class Client:
    """One keep-alive HTTPS connection to `base` with a bearer token; reconnects if the server closes."""

    def __init__(self, base: str, cafile: Path, token: str, timeout: float = 30) -> None:
        u = urlsplit(base)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=str(cafile))
        self.token, self.timeout = token, timeout
        self.conn: http.client.HTTPSConnection | None = None

    def _connect(self) -> http.client.HTTPSConnection:
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
        return self.conn

    def request(self, method: str, path: str, body: Any = None, ctype: str = "application/json") -> tuple[int, bytes, float]:
        """Send one request; returns (status, body, seconds from send to the last byte read)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = ctype
        for attempt in (0, 1):
            conn = self._connect()
            try:
                t = time.perf_counter()
                conn.request(method, path, body=data, headers=headers)
                r = conn.getresponse()
                out = r.read()
                dt = time.perf_counter() - t
                return r.status, out, dt
            except (http.client.HTTPException, ConnectionError, OSError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class RawWatch(threading.Thread):
    """A watch read line by line in a thread; `on_line(bytes, arrival_epoch)` per event. Stop with stop()."""

    def __init__(self, base: str, cafile: Path, token: str, path: str, on_line: Callable[[bytes, float], None],
                 name: str) -> None:
        super().__init__(daemon=True, name=name)
        u = urlsplit(base)
        self.conn = http.client.HTTPSConnection(u.hostname, u.port, context=ssl.create_default_context(cafile=str(cafile)),
                                                timeout=900)
        self.path, self.token, self.on_line = path, token, on_line
        self.opened = threading.Event()
        self.error: str | None = None
        self._stopping = False

    def run(self) -> None:
        try:
            self.conn.request("GET", self.path, headers={"Authorization": f"Bearer {self.token}",
                                                         "Accept": "application/json"})
            r = self.conn.getresponse()
            if r.status != 200:
                self.error = f"watch answered {r.status}: {r.read()[:300]!r}"
                return
            self.opened.set()
            while True:
                line = r.readline()
                if not line:
                    break
                self.on_line(line, time.time())
        except Exception as e:  # noqa: BLE001 - reported by the caller
            if not self._stopping:
                self.error = f"{type(e).__name__}: {e}"
        finally:
            self.opened.set()

    def stop(self) -> None:
        self._stopping = True
        try:
            if self.conn.sock is not None:
                import socket
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.join(timeout=10)


def list_rv(c: Client, path: str) -> str:
    st, body, _ = c.request("GET", path + "?limit=1")
    if st != 200:
        raise RuntimeError(f"list {path}: {st} {body[:200]!r}")
    return json.loads(body)["metadata"]["resourceVersion"]


# ---- setup ---------------------------------------------------------------------------------------
def queues(cluster: o.Cluster, ns: str, cq: str, flavor: str = "bench-rf") -> None:
    """Namespace `ns`, ResourceFlavor (once), ClusterQueue `cq` with a large quota, LocalQueue "lq"."""
    try:
        cluster.create(o.resource_flavor(flavor))
    except Exception as e:  # noqa: BLE001 - already there from an earlier trial
        if "AlreadyExists" not in str(e) and "409" not in str(e):
            raise
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.create(o.cluster_queue(cq).flavor_quota(flavor, cpu="10000", memory="100Ti"))
    cluster.create(o.local_queue("lq", ns, cq))
    wait_for(lambda: o.is_true(cluster.get("ClusterQueue", cq), "Active"), timeout=60,
             what=f"ClusterQueue {cq} Active", interval=0.05)


def small_job(name: str, ns: str) -> dict[str, Any]:
    return o.job(name, ns).queue("lq").requests(cpu="10m", memory="1Mi").obj()


# ---- 1. latency ----------------------------------------------------------------------------------
#: The whole "addon" of the bare mitmdump: watch answers stream (as the harness's addon makes them),
#: without which mitmproxy buffers a watch until it ends and Kueue's informers see nothing.
_STREAM_WATCHES = """from urllib.parse import parse_qs, urlsplit


def responseheaders(flow):
    if parse_qs(urlsplit(flow.request.path).query).get("watch", [""])[0] in ("1", "true"):
        flow.response.stream = True
"""


#: `--bare-variant`: what the second mitmdump loads. "stream-only": only _STREAM_WATCHES (mitmproxy's floor);
#: "addon-no-flowfile" / "addon": the harness's addon (proxy_addons/kueue_faults.py) without / with its
#: flow file, to tell the addon's parts apart.
BARE_VARIANTS = ("stream-only", "addon-no-flowfile", "addon")


def start_bare_mitmdump(env: LocalEnvironment, variant: str = "stream-only") -> tuple[str, Path]:
    """A second mitmdump in front of the same kube-apiserver with the harness's options but without the
    addon (no classification, rules, event log or flow file; only watches streamed): the floor mitmproxy
    itself sets; or with the addon as `variant` says (BARE_VARIANTS). Recorded in the environment's
    process group, so env.stop() stops it. Returns (url, CA file)."""
    from harness.env.local import free_port
    from harness.proxy.client import _mitm_tool  # noqa: PLC2701 - the same binary the harness runs

    port = free_port()
    confdir = env.state / "mitmproxy-bare"
    confdir.mkdir(mode=0o700, exist_ok=True)
    if variant == "stream-only":
        script = confdir / "stream_watches.py"
        script.write_text(_STREAM_WATCHES)
        addon_args = ["-s", str(script)]
    else:
        import secrets as _secrets

        from harness.common import pki
        from harness.proxy.client import ADDON

        token = confdir / "control.token"
        pki.write_private(token, _secrets.token_urlsafe(24).encode())
        addon_args = ["-s", str(ADDON), "--set", f"kh_control_port={free_port()}", "--set", f"kh_token_file={token}",
                      "--set", f"kh_events={env.artifacts / 'bare-proxy-events.jsonl'}",
                      "--set", f"kh_flows={env.artifacts / 'bare-flows.mitm' if variant == 'addon' else ''}"]
    env.procs.start("bare-mitmdump", [
        _mitm_tool("mitmdump"), "-q", "--mode", f"reverse:{env.api_url}@{port}", "--listen-host", "127.0.0.1",
        *addon_args,
        "--set", f"confdir={confdir}", "--set", f"ssl_verify_upstream_trusted_ca={env.ca_file}",
        "--set", "connection_strategy=eager",
    ], env.artifacts / "bare-mitmdump.log")
    ca = confdir / "mitmproxy-ca-cert.pem"
    url = f"https://127.0.0.1:{port}"

    def up() -> bool:
        if not ca.exists():
            return False
        Client(url, ca, env.admin_token, timeout=2).request("GET", "/readyz")
        return True

    wait_for(up, timeout=30, what="the bare mitmdump", interval=0.2)
    return url, ca


def latency(env: LocalEnvironment, cluster: o.Cluster, n: int, warmup: int = 30, ns: str = "bench-latency",
            bare: bool = False) -> dict[str, Any]:
    """GET and PATCH (merge patch of an annotation) of one admitted Workload, `n` each per mode after
    `warmup`, modes interleaved in rotating order. `bare`: also through a mitmdump without the addon."""
    queues(cluster, ns, f"{ns}-cq")
    cluster.create(small_job("lat", ns))
    wl = wait_for(lambda: cluster.workload_for_job(ns, "lat"), timeout=30, what="the Workload of Job lat")
    path = f"{WL_PATH.format(ns=ns)}/{wl['metadata']['name']}"
    wait_for(lambda: o.is_true(cluster.get("Workload", wl["metadata"]["name"], ns), "QuotaReserved"), timeout=60,
             what="Workload lat admitted")
    clients = {"direct": Client(env.api_url, env.ca_file, env.admin_token),
               "proxy": Client(env.proxy.url, env.proxy.ca_file, env.admin_token)}
    if bare:
        url, ca = start_bare_mitmdump(env)
        clients["bare_mitmdump"] = Client(url, ca, env.admin_token)
    times: dict[str, dict[str, list[float]]] = {m: {k: [] for k in clients} for m in ("GET", "PATCH")}
    size = len(clients["direct"].request("GET", path)[1])
    seq = 0
    names = list(clients)
    try:
        for i in range(warmup + n):
            for method in ("GET", "PATCH"):
                k = i % len(names)
                order = [(m, clients[m]) for m in names[k:] + names[:k]]  # rotate who goes first
                for mode, c in order:
                    seq += 1
                    if method == "GET":
                        st, body, dt = c.request("GET", path)
                    else:
                        st, body, dt = c.request("PATCH", path, {"metadata": {"annotations": {"bench/seq": str(seq)}}},
                                                 "application/merge-patch+json")
                    if st != 200:
                        raise RuntimeError(f"{method} {mode} answered {st}: {body[:300]!r}")
                    if i >= warmup:
                        times[method][mode].append(dt * 1000.0)
    finally:
        for c in clients.values():
            c.close()
        if bare:
            env.procs.stop("bare-mitmdump")
    out: dict[str, Any] = {"requests_per_mode": n, "warmup": warmup, "workload_bytes": size}
    for method, m in times.items():
        d, p = summary(m["direct"]), summary(m["proxy"])
        out[method] = {
            "direct_ms": d, "proxy_ms": p,
            "added_ms_p50": round(p["p50"] - d["p50"], 3), "added_ms_p99": round(p["p99"] - d["p99"], 3),
            "ratio_p50": round(p["p50"] / d["p50"], 2), "ratio_p99": round(p["p99"] / d["p99"], 2),
        }
        if "bare_mitmdump" in m:
            b_ = summary(m["bare_mitmdump"])
            out[method].update({
                "bare_mitmdump_ms": b_, "bare_added_ms_p50": round(b_["p50"] - d["p50"], 3),
                "bare_added_ms_p99": round(b_["p99"] - d["p99"], 3),
                "addon_share_of_added_p50": round((p["p50"] - b_["p50"]) / (p["p50"] - d["p50"]), 2)
                if p["p50"] != d["p50"] else None,
            })
    return out


# ---- 2. watch lag --------------------------------------------------------------------------------
def watch_lag(env: LocalEnvironment, cluster: o.Cluster, n: int, gap: float = 0.01,
              ns: str = "bench-watch") -> dict[str, Any]:
    """Create `n` Workload objects directly (own namespace, no LocalQueue: Kueue leaves them pending) while
    a direct watch and a watch through the proxy are open; per object: send time, arrival on each watch."""
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    direct = Client(env.api_url, env.ca_file, env.admin_token)
    path = WL_PATH.format(ns=ns)
    rv = list_rv(direct, path)
    arrivals: dict[str, dict[str, float]] = {"direct": {}, "proxy": {}}

    def recorder(mode: str) -> Callable[[bytes, float], None]:
        def on_line(line: bytes, t: float) -> None:
            try:
                ev = json.loads(line)
            except ValueError:
                return
            if ev.get("type") == "ADDED":
                name = ((ev.get("object") or {}).get("metadata") or {}).get("name")
                if name:
                    arrivals[mode].setdefault(name, t)
        return on_line

    q = f"?watch=true&resourceVersion={rv}&allowWatchBookmarks=false&timeoutSeconds=600"
    watches = {
        "direct": RawWatch(env.api_url, env.ca_file, env.admin_token, path + q, recorder("direct"), "watch-direct"),
        "proxy": RawWatch(env.proxy.url, env.proxy.ca_file, env.admin_token, path + q, recorder("proxy"), "watch-proxy"),
    }
    sent: dict[str, float] = {}
    try:
        for w in watches.values():
            w.start()
        for w in watches.values():
            if not w.opened.wait(30) or w.error:
                raise RuntimeError(f"{w.name} did not open: {w.error}")
        for i in range(n):
            name = f"wl-{i:04d}"
            body = {
                "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"queueName": "none", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "10m"}}}]}}}]},
            }
            sent[name] = time.time()
            st, resp, _ = direct.request("POST", path, body)
            if st != 201:
                raise RuntimeError(f"create Workload {name}: {st} {resp[:300]!r}")
            time.sleep(gap)
        wait_for(lambda: all(len(arrivals[m]) >= n for m in arrivals), timeout=60,
                 what=f"both watches to deliver {n} ADDED events",
                 describe=lambda: {m: len(a) for m, a in arrivals.items()})
    finally:
        for w in watches.values():
            w.stop()
        direct.close()
    lag = {m: [(arrivals[m][k] - sent[k]) * 1000.0 for k in sent if k in arrivals[m]] for m in arrivals}
    added = [(arrivals["proxy"][k] - arrivals["direct"][k]) * 1000.0 for k in sent
             if k in arrivals["proxy"] and k in arrivals["direct"]]
    d, p = summary(lag["direct"]), summary(lag["proxy"])
    return {
        "events": n, "gap_seconds": gap, "direct_lag_ms": d, "proxy_lag_ms": p,
        "proxy_minus_direct_ms": summary(added),
        "ratio_p50": round(p["p50"] / d["p50"], 2), "ratio_p99": round(p["p99"] / d["p99"], 2),
        "added_ms_p50": round(p["p50"] - d["p50"], 3), "added_ms_p99": round(p["p99"] - d["p99"], 3),
    }


# ---- 3. admission throughput -----------------------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(env: LocalEnvironment) -> dict[str, float]:
    """utime+stime so far of each component process (from /proc), in seconds."""
    out = {}
    for name, (proc, _) in env.procs.procs.items():
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            out[name] = (int(fields[11]) + int(fields[12])) / _TICK
        except (OSError, IndexError, ValueError):
            pass
    return out


def admission_run(env: LocalEnvironment, cluster: o.Cluster, n: int, tag: str, timeout: float) -> dict[str, Any]:
    """Create `n` small Jobs as fast as one client can; time until all their Workloads are QuotaReserved."""
    ns, cq = f"tp-{tag}", f"tp-{tag}-cq"
    queues(cluster, ns, cq)
    direct = Client(env.api_url, env.ca_file, env.admin_token)
    path = WL_PATH.format(ns=ns)
    rv = list_rv(direct, path)
    reserved: dict[str, float] = {}  # job name -> first time its Workload was seen QuotaReserved=True
    workloads_seen: dict[str, float] = {}
    done = threading.Event()

    def on_line(line: bytes, t: float) -> None:
        try:
            ev = json.loads(line)
        except ValueError:
            return
        obj = ev.get("object") or {}
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        job = next((r.get("name") for r in owners if r.get("kind") == "Job"), None)
        if job is None:
            return
        workloads_seen.setdefault(job, t)
        if job not in reserved and o.is_true(obj, "QuotaReserved"):
            reserved[job] = t
            if len(reserved) >= n:
                done.set()

    w = RawWatch(env.api_url, env.ca_file, env.admin_token,
                 path + f"?watch=true&resourceVersion={rv}&allowWatchBookmarks=false&timeoutSeconds=900",
                 on_line, f"watch-{tag}")
    created: dict[str, float] = {}
    before = load()
    cpu0 = cpu_seconds(env)
    try:
        w.start()
        if not w.opened.wait(30) or w.error:
            raise RuntimeError(f"admission watch did not open: {w.error}")
        t0 = time.time()
        for i in range(n):
            name = f"j{i:04d}"
            created[name] = time.time()
            st, resp, _ = direct.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", small_job(name, ns))
            if st != 201:
                raise RuntimeError(f"create Job {name}: {st} {resp[:300]!r}")
        t_created = time.time()
        finished = done.wait(timeout)
        t_end = time.time()
        cpu1 = cpu_seconds(env)
    finally:
        w.stop()
        direct.close()
    if not finished:
        raise RuntimeError(f"{tag}: only {len(reserved)}/{n} Workloads QuotaReserved after {timeout:g}s "
                           f"(watch error: {w.error})")
    last = max(reserved.values())
    per_job = [(reserved[j] - created[j]) for j in created]
    wl_created = [(workloads_seen[j] - created[j]) for j in created if j in workloads_seen]
    return {
        "jobs": n, "seconds_to_all_reserved": round(last - t0, 3),
        "jobs_per_second": round(n / (last - t0), 2), "create_seconds": round(t_created - t0, 3),
        "job_to_quota_reserved_s": summary(per_job), "job_to_workload_seen_s": summary(wl_created),
        "load_before": before, "load_after": load(), "waited_seconds": round(t_end - t0, 3),
        # CPU seconds each component used from the first create to the last QuotaReserved (+ the wait's slack),
        # and as a share of one core over that time: mitmdump is one Python thread, so ~1.0 means saturated.
        "cpu_seconds": {k: round(cpu1[k] - cpu0[k], 2) for k in cpu1 if k in cpu0},
        "cpu_share_of_one_core": {k: round((cpu1[k] - cpu0[k]) / (t_end - t0), 2) for k in cpu1 if k in cpu0},
    }


# ---- driver --------------------------------------------------------------------------------------
def release_config(kueue_source: Path) -> dict[str, Any]:
    """clientConnection and controller (groupKindConcurrency) of the Configuration Kueue's release manifests
    ship (config/components/manager/controller_manager_config.yaml of the build's tree)."""
    import yaml

    f = kueue_source / "config" / "components" / "manager" / "controller_manager_config.yaml"
    cfg = yaml.safe_load(f.read_text())
    return {k: cfg[k] for k in ("clientConnection", "controller") if k in cfg}


def kueue_client_defaults(build: Any) -> dict[str, Any]:
    """Kueue's built-in client rate limit (DefaultClientConnectionQPS/Burst in apis/config/v1beta2/defaults.go)
    of the build: read from its git commit (repository builds) or its module folder (module-proxy builds)."""
    import re
    import subprocess

    rel = "apis/config/v1beta2/defaults.go"
    text, where = None, None
    if build.repo and build.commit:
        r = subprocess.run(["git", "--git-dir", str(build.repo), "show", f"{build.commit}:{rel}"],
                           capture_output=True, text=True, timeout=30)
        text, where = (r.stdout, f"{build.repo} {build.commit[:12]}:{rel}") if r.returncode == 0 else (None, None)
    if text is None:
        r = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30)
        f = Path(r.stdout.strip()) / f"sigs.k8s.io/kueue@{build.version}" / rel
        if r.returncode == 0 and f.is_file():
            text, where = f.read_text(), str(f)
    if text is None:
        return {"qps": None, "burst": None, "source": "not found"}
    qps = re.search(r"DefaultClientConnectionQPS\s+float32\s*=\s*([0-9.]+)", text)
    burst = re.search(r"DefaultClientConnectionBurst\s+int32\s*=\s*([0-9]+)", text)
    return {"qps": float(qps.group(1)) if qps else None, "burst": int(burst.group(1)) if burst else None,
            "source": where}


class _Front:
    """What LocalEnvironment._start_kueue reads of a proxy: where Kueue connects, and the CA to trust."""

    def __init__(self, url: str, ca_file: Path) -> None:
        self.url, self.ca_file = url, ca_file


def start_env(spec: Any, art: Path, mode: str, overrides: dict[str, Any] | None, tag: str,
              bare_variant: str = "stream-only") -> LocalEnvironment:
    """An environment with Kueue through the proxy ("proxy"), direct ("direct"), or through a mitmdump
    without the addon ("bare": started direct, then Kueue restarted against the bare mitmdump)."""
    env = LocalEnvironment.start(spec, artifacts=art / tag, say=quiet_say(f"[bench {tag}]"),
                                 with_proxy=mode == "proxy", kueue_config_overrides=overrides)
    if mode == "bare":
        try:
            env.proxy = _Front(*start_bare_mitmdump(env, bare_variant))
            env.restart_kueue()
        except BaseException:
            env.stop()
            raise
    return env


def proxy_profile(env: LocalEnvironment, cluster: o.Cluster, a, art: Path) -> dict[str, Any]:
    pid = env.procs.procs["proxy"][0].pid
    out: dict[str, Any] = {"pid": pid}
    # The addon is the package harness/proxy/addons (proxy_addons/kueue_faults.py only imports it).
    categories = [
        ("addon: flow file (copy, redact, .mitm write)", ("faultproxy/flowfile.py", "harness/common/redact.py",
                                                          "tnetstring", "io/io.py")),
        ("addon: event log (json.dumps + file write)", ("write (faultproxy/state.py)", "faultproxy/state.py")),
        ("addon: watch tap (line split + parse_watch_line)", ("faultproxy/watch.py", "parse_watch_line")),
        ("addon: classify request", ("classify_request", "faultproxy/classify.py")),
        ("addon: rules + holds (inject)", ("faultproxy/inject.py",)),
        ("addon: other hooks", ("faultproxy/", "proxy_addons/kueue_faults.py")),
        ("TLS (ssl / OpenSSL)", ("ssl.py", "_ssl", "OpenSSL", "SSL.py", "tls.py")),
        ("HTTP/1 parse + assemble", ("http1", "assemble", "read_request_head", "read_response_head")),
        ("HTTP/2 (h2)", ("h2/", "http2")),
        ("mitmproxy flow + hooks machinery", ("proxy/server.py", "proxy/layer", "layers/", "addonmanager", "hooks")),
        ("socket send (kernel loopback, in transport.write)", ("_SelectorSocketTransport.write", "sock_send")),
        ("asyncio event loop + sockets", ("asyncio", "selectors", "streams.py")),
    ]
    for phase, work in (
        ("latency_and_watch", lambda: (latency(env, cluster, a.requests, warmup=5, ns="bench-latency-2"),
                                       watch_lag(env, cluster, a.watch_events, ns="bench-watch-2"))),
        ("admission", lambda: admission_run(env, cluster, a.jobs, "profiled", a.timeout)),
    ):
        raw = art / "profile" / f"proxy-{phase}.pyspy.raw"
        t = time.time()
        with Profiler(pid, raw, rate=200, idle=False):
            work()
        stacks = read_stacks(raw)
        prof = top_frames(stacks, n=15)
        cats = categorize(stacks, categories)
        out[phase] = {"seconds": round(time.time() - t, 1), "raw": str(raw), "categories": cats, "top": prof}
        print(f"\nproxy profile, {phase} (CPU samples of mitmdump at 200 Hz):")
        for k, v in cats.items():
            print(f"  {v['share']:>6.1%}  {k}")
        print_profile(f"mitmdump hottest functions ({phase})", prof, n=10)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kueue-version", default=None, help=f"a Kueue tag (default {versions.DEFAULT_KUEUE_VERSION})")
    ap.add_argument("--kueue-ref", default=None, help="a branch, tag or commit of the Kueue repository")
    ap.add_argument("--kueue-repo", default=None,
                    help="Kueue repository (URL, path or .tar); default $KUEUE_HARNESS_KUEUE_REPO, else upstream")
    ap.add_argument("--requests", type=int, default=500, help="measured requests per method and mode")
    ap.add_argument("--watch-events", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1, help="admission runs per mode (alternating)")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound for one admission run (seconds)")
    ap.add_argument("--kueue-qps", type=int, default=None, help="Kueue clientConnection qps (burst 2x)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--no-bare", action="store_true", help="skip the mitmdump-without-addon latency comparison")
    ap.add_argument("--bare-throughput", action="store_true",
                    help="also measure admission throughput with Kueue through a mitmdump without the addon")
    ap.add_argument("--skip-latency", action="store_true", help="skip the latency and watch-lag measurements")
    ap.add_argument("--bare-variant", choices=BARE_VARIANTS, default="stream-only",
                    help="what the second mitmdump of --bare-throughput loads (default: only watch streaming)")
    ap.add_argument("--release-config", action="store_true",
                    help="run Kueue with the clientConnection and groupKindConcurrency of its release manifests")
    ap.add_argument("--tag", default="", help="suffix for the results file name (e.g. smoke)")
    a = ap.parse_args()
    if not (1 <= a.requests <= 5000 and 1 <= a.watch_events <= 2000 and 1 <= a.jobs <= 1000 and 1 <= a.rounds <= 5):
        ap.error("bounds: --requests 1..5000, --watch-events 1..2000, --jobs 1..1000, --rounds 1..5")
    from harness.build import binaries
    from harness.build.kueue import KueueSpec

    spec = KueueSpec.from_options(version=a.kueue_version, ref=a.kueue_ref, repo=a.kueue_repo)
    bins = binaries.ensure_all(spec, quiet_say("[bench build]"))  # build first: not inside a measured start
    label = spec.version or "ref-" + "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in spec.ref)
    art = ROOT / "artifacts" / f"bench-proxy-{time.strftime('%Y%m%d-%H%M%S')}"
    overrides: dict[str, Any] = {}
    if a.release_config:
        overrides.update(release_config(bins.kueue_source))
    if a.kueue_qps:
        overrides["clientConnection"] = {"qps": a.kueue_qps, "burst": 2 * a.kueue_qps}
    defaults = kueue_client_defaults(bins.kueue_build)
    print(f"Kueue {spec.wanted}: build {bins.kueue_build.version} ({(bins.kueue_build.commit or '')[:12]}); "
          f"built-in client rate limit qps {defaults['qps']}, burst {defaults['burst']} ({defaults['source']}); "
          f"overrides: {overrides or 'none'}", flush=True)
    res: dict[str, Any] = {"kueue_version": bins.kueue_build.version, "kueue_wanted": spec.wanted,
                           "kueue_build": bins.kueue_build.to_json(), "kubernetes_version": versions.KUBERNETES_VERSION,
                           "kueue_client_defaults": defaults,
                           "kueue_config_overrides": overrides or "none (the build's own defaults, one worker per "
                           "controller)", "artifacts": str(art), "load_start": load()}
    kinds = ("proxy", "direct", "bare") if a.bare_throughput else ("proxy", "direct")
    if a.bare_throughput:
        res["bare_variant"] = a.bare_variant
    throughput: dict[str, list[dict[str, Any]]] = {m: [] for m in kinds}
    modes = [] if a.skip_throughput else [m for _ in range(a.rounds) for m in kinds]
    first = not a.skip_latency
    # The proxy environment always comes first: latency and watch lag are measured in it.
    for i, mode in enumerate(modes or ["proxy"]):
        env = None
        try:
            env = start_env(spec, art, mode, overrides, f"{mode}{i}", a.bare_variant)
            if "kueue_reported" not in res:
                res["kueue_reported"] = dict(env.kueue_reported)
            cluster = o.Cluster(env.api_client())
            if first:
                first = False
                res["latency"] = latency(env, cluster, a.requests, bare=not a.no_bare)
                for m in ("GET", "PATCH"):
                    L = res["latency"][m]
                    print(f"{m:<5} direct p50 {L['direct_ms']['p50']:.2f} ms p99 {L['direct_ms']['p99']:.2f} ms | "
                          f"proxy p50 {L['proxy_ms']['p50']:.2f} ms p99 {L['proxy_ms']['p99']:.2f} ms | "
                          f"added p50 {L['added_ms_p50']:+.2f} ms p99 {L['added_ms_p99']:+.2f} ms | "
                          f"ratio p50 {L['ratio_p50']:.2f}x p99 {L['ratio_p99']:.2f}x", flush=True)
                    if "bare_mitmdump_ms" in L:
                        print(f"      mitmdump without the addon: p50 {L['bare_mitmdump_ms']['p50']:.2f} ms "
                              f"(added p50 {L['bare_added_ms_p50']:+.2f} ms, p99 {L['bare_added_ms_p99']:+.2f} ms)",
                              flush=True)
                res["watch"] = watch_lag(env, cluster, a.watch_events)
                W = res["watch"]
                print(f"watch lag: direct p50 {W['direct_lag_ms']['p50']:.2f} ms p99 {W['direct_lag_ms']['p99']:.2f} ms | "
                      f"proxy p50 {W['proxy_lag_ms']['p50']:.2f} ms p99 {W['proxy_lag_ms']['p99']:.2f} ms | "
                      f"ratio p50 {W['ratio_p50']:.2f}x p99 {W['ratio_p99']:.2f}x | proxy-direct per event "
                      f"p50 {W['proxy_minus_direct_ms']['p50']:+.2f} ms p99 {W['proxy_minus_direct_ms']['p99']:+.2f} ms",
                      flush=True)
            if modes:
                r = admission_run(env, cluster, a.jobs, f"{mode}{i}", a.timeout)
                r["env_ready_seconds"] = round(env.started["ready_seconds"], 2)
                throughput[mode].append(r)
                print(f"admission {mode:<6} round {i // len(kinds) + 1}: {a.jobs} Jobs QuotaReserved in "
                      f"{r['seconds_to_all_reserved']:.2f}s ({r['jobs_per_second']:.1f}/s; creates took "
                      f"{r['create_seconds']:.2f}s; job→QuotaReserved p50 {r['job_to_quota_reserved_s']['p50']:.2f}s) "
                      f"load {r['load_before']['loadavg_1m']}; CPU share of one core: "
                      + ", ".join(f"{k} {v:.2f}" for k, v in r["cpu_share_of_one_core"].items()), flush=True)
            if a.profile and mode == "proxy" and "profile" not in res:
                res["profile"] = proxy_profile(env, cluster, a, art)
        finally:
            if env is not None:
                env.stop()
    if modes:
        tp = {m: statistics.median(r["jobs_per_second"] for r in throughput[m]) for m in throughput}
        res["throughput"] = {"runs": throughput, "median_jobs_per_second": tp,
                             "ratio_proxy_vs_direct": round(tp["proxy"] / tp["direct"], 3)}
        print(f"admission throughput: proxy {tp['proxy']:.1f} Jobs/s vs direct {tp['direct']:.1f} Jobs/s → "
              f"{tp['proxy'] / tp['direct']:.1%} of direct (target ≥ 90%)")
        if "bare" in tp:
            res["throughput"]["ratio_bare_mitmdump_vs_direct"] = round(tp["bare"] / tp["direct"], 3)
            print(f"  through a mitmdump without the addon: {tp['bare']:.1f} Jobs/s → {tp['bare'] / tp['direct']:.1%} "
                  f"of direct (mitmproxy's own floor); the addon keeps {tp['proxy'] / tp['bare']:.1%} of that")
    res["load_end"] = load()
    res["targets"] = {
        "proxy_p50_added_ms_le_1": {m: res["latency"][m]["added_ms_p50"] <= 1.0 for m in ("GET", "PATCH")}
        if "latency" in res else None,
        "throughput_ratio_ge_0.9": res.get("throughput", {}).get("ratio_proxy_vs_direct", 0) >= 0.9 if modes else None,
    }
    default_build = spec.version == versions.DEFAULT_KUEUE_VERSION
    write_result("proxy-overhead" + ("" if default_build else f"-{label}") + ("-release-config" if a.release_config else "")
                 + (f"-qps{a.kueue_qps}" if a.kueue_qps else "") + (f"-{a.tag}" if a.tag else ""), res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
