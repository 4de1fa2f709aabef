"""Kueue's visibility server on the local target (the VisibilityOnDemand feature gate: an aggregated API server
inside the Kueue process, pkg/visibility/server.go). Off by default (docs/kueue-notes.md §4); a case turns it
on with `@pytest.mark.kueue_config(feature_gates={"VisibilityOnDemand": True})`, and then:

- Kueue reads its serving certificate from /visibility/tls.crt and tls.key, a path compiled into Kueue
  (`certDir = "/visibility"`, server.go in v0.17.0 – v0.19.2) that no flag or Configuration key moves.
  `ensure_certificate` writes a pair there once (signed by a CA kept beside it, /visibility/ca.crt, which
  clients verify against) and keeps it while it is valid: every environment on the machine shares it.
- It listens on 127.0.0.1 at a port of the environment (`visibilityServer.bindPort`, Kueue >= v0.17.0) and
  authenticates callers through kube-apiserver (TokenReview, SubjectAccessReview): the harness's admin token
  works (`pending_workloads`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cryptography import x509

from harness.common import pki
from harness.common.errors import HarnessError

#: Where Kueue reads its visibility serving pair (pkg/visibility/server.go `certDir`).
CERT_DIR = Path("/visibility")
#: The visibility API version the harness reads (served by v0.17.0 and later: apis/visibility/v1beta2).
API = "visibility.kueue.x-k8s.io/v1beta2"


def enabled(config: dict[str, Any]) -> bool:
    """Whether a Kueue Configuration (as given to Kueue) turns the visibility server on."""
    return (config.get("featureGates") or {}).get("VisibilityOnDemand") is True


def _valid(crt: Path, days: int = 1) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(crt.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc > dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days)


def ensure_certificate(cert_dir: Path = CERT_DIR) -> Path:
    """The CA file clients verify Kueue's visibility server against; writes the serving pair
    (`cert_dir`/tls.crt, tls.key: IP SAN 127.0.0.1, a year) and that CA when they are missing or expire within a
    day. Raises HarnessError when `cert_dir` cannot be written, saying how to make it writable."""
    ca_file, crt, key = cert_dir / "ca.crt", cert_dir / "tls.crt", cert_dir / "tls.key"
    try:
        cert_dir.mkdir(mode=0o755, exist_ok=True)
        with open(cert_dir / ".kueue-harness.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two environments starting at once write one pair
            if _valid(ca_file) and _valid(crt) and key.is_file():
                return ca_file
            ca = pki.make_ca("kueue-harness-visibility-ca", days=365)
            pem, key_pem = pki.issue(ca, "kueue-visibility", ips=("127.0.0.1",), dns=("localhost",), days=365)
            pki.write_private(key, key_pem)
            crt.write_bytes(pem)
            ca_file.write_bytes(ca.cert_pem)
    except OSError as e:
        raise HarnessError(
            f"Kueue's visibility server (VisibilityOnDemand) reads its certificate from {cert_dir}/tls.crt, a path "
            f"compiled into Kueue (pkg/visibility/server.go); the harness could not write it ({e.strerror}). Make "
            f"the folder writable once (sudo install -d -o {os.getuid()} {cert_dir}), or leave VisibilityOnDemand off"
        ) from None
    return ca_file


def pending_workloads(port: int, token: str, cluster_queue: str, ca_file: Path, timeout: float = 10) -> list[dict]:
    """The pending Workloads of `cluster_queue` as Kueue's visibility server lists them (its PendingWorkloadsInfo,
    pkg/cache/queue/manager.go: a snapshot of the ClusterQueue's queue, in queue order): the `items` of
    PendingWorkloadsSummary, each {"metadata": {"name", "namespace"}, "priority", "positionInClusterQueue", …}.
    Raises HarnessError on an answer other than 200 (with its status and first 300 bytes)."""
    from harness.env.control_plane import _https_get

    url = f"https://127.0.0.1:{port}/apis/{API}/clusterqueues/{quote(cluster_queue, safe='')}/pendingworkloads"
    try:
        status, body = _https_get(url, ca_file, token, timeout)
    except OSError as e:  # refused, reset, TLS: the server is not up (or not this one)
        raise HarnessError(f"Kueue's visibility server did not answer GET {url}: {e}") from None
    if status != 200:
        raise HarnessError(f"Kueue's visibility server answered {status} to GET {url}: {body[:300]!r}")
    return list(json.loads(body).get("items") or [])
