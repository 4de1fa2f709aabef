"""The kind target's figures on this machine (docs/benchmarks.md "The kind target"):

1. how its start is spent (seconds): container engine, Kueue image, node image, `kind create cluster`, Kueue's
   install, the routed rollout: env.started of one kind environment started here (kind.start);
2. the proxy's added latency on the kind network: GET and PATCH of one admitted Workload, interleaved, to
   kube-apiserver directly (https://127.0.0.1:<port>, kind's port mapping) and through the proxy on the
   `kind` network's gateway (the address Kueue's Pod uses), with the bearer token of a ServiceAccount
   made for it (TokenRequest; the proxy adds no credential), the same loop as bench/proxy_overhead.py.
The per-case times kind vs local come from two summary.json files (`--summaries KIND LOCAL`), e.g. of
`ci/kind-seed-cases.sh --artifacts-dir DIR` and `make run ARGS="-k 'stuck_preemption or quota'"`.

    .venv/bin/python bench/kind.py [--requests 300] [--kueue-version v0.17.0] [--summaries KIND LOCAL]

Writes bench/results/<date>-kind[-<kueue>].json. Not a test: it prints figures. Stops and deletes what it made.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load, write_result  # noqa: E402
from proxy_overhead import latency  # noqa: E402

from harness import objects as o  # noqa: E402


class _KindEndpoints:
    """What bench/proxy_overhead.latency reads of an environment: api_url, ca_file, admin_token, proxy."""

    def __init__(self, env: Any, token: str, state: Path) -> None:
        from harness.env.routing import upstream_from_kubeconfig

        up = upstream_from_kubeconfig(env.admin_kubeconfig, None)
        self.api_url = up.server
        self.ca_file = state / "bench-apiserver-ca.crt"
        self.ca_file.write_bytes(up.ca_pem or b"")
        self.admin_token = token
        self.proxy = env.proxy


def bench_token(api: Any, ns: str = "bench-token") -> str:
    """A ServiceAccount `bench` in `ns` bound to cluster-admin, and a 1-hour token for it (TokenRequest)."""
    from kubernetes import client

    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    core.create_namespaced_service_account(ns, {"metadata": {"name": "bench"}})
    rbac.create_cluster_role_binding({"metadata": {"name": "kueue-harness-bench"},
                                      "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                  "name": "cluster-admin"},
                                      "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": ns}]})
    tr = core.create_namespaced_service_account_token("bench", ns, {"spec": {"expirationSeconds": 3600}})
    return tr.status.token


def per_case(path: Path) -> dict[str, float]:
    s = json.loads(path.read_text())
    return {c["case"].split("::")[-1]: c["seconds"] for c in s["cases"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kueue-version", default="v0.17.0")
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--summaries", nargs=2, metavar=("KIND", "LOCAL"), help="two summary.json files to compare")
    a = p.parse_args()
    out: dict[str, Any] = {"load_before": load(), "kueue_version": a.kueue_version}
    if a.summaries:
        kind_s, local_s = per_case(Path(a.summaries[0])), per_case(Path(a.summaries[1]))
        out["per_case_seconds"] = {k: {"kind": v, "local": local_s.get(k)} for k, v in kind_s.items()}
        for k, v in out["per_case_seconds"].items():
            print(f"{k:<40} kind {v['kind']:6.1f} s   local {v['local'] if v['local'] is None else round(v['local'], 1)} s")
    from harness.env import kind

    with tempfile.TemporaryDirectory(prefix="kh-bench-kind-") as tmp:
        t0 = time.monotonic()
        env = kind.start(a.kueue_version, Path(tmp) / "env", cluster="kueue-harness-bench")
        try:
            out["start"] = {k: round(float(v), 2) for k, v in env.started.items()}
            out["start"]["total_seconds"] = round(time.monotonic() - t0, 2)
            print("start:", json.dumps(out["start"]))
            token = bench_token(env.api_client())
            out["latency"] = latency(_KindEndpoints(env, token, env.state), o.Cluster(env.api_client()), a.requests)
            for m in ("GET", "PATCH"):
                r = out["latency"][m]
                print(f"{m}: direct p50 {r['direct_ms']['p50']} ms, proxy p50 {r['proxy_ms']['p50']} ms, added p50 "
                      f"{r['added_ms_p50']} ms / p99 {r['added_ms_p99']} ms")
        finally:
            env.stop()
    out["load_after"] = load()
    print(write_result(f"kind-{a.kueue_version}", out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
