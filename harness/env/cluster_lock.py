"""One run at a time on a cluster: a coordination.k8s.io Lease `kube-system/kueue-harness-run` names the run that
routes Kueue there (its id, pid, host and start), renewed while it runs. A second run on the same cluster is
refused with those facts instead of undoing the first one's routing between two of its cases (seen on a kept
kind cluster: "Kueue in this cluster is still routed by an earlier run; undoing that first"). A lock whose holder
is gone — its pid no longer runs on this host, or, held from another host, not renewed for STALE seconds — is
taken over, and said.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from datetime import datetime, timezone
from typing import Any, Callable

from harness.common.errors import HarnessError
from harness.common.procs import is_alive, proc_start_time

NAMESPACE = "kube-system"
NAME = "kueue-harness-run"
#: Seconds between renewals of a held lock.
RENEW_EVERY = 20.0
#: A lock held from another host and not renewed for this long is stale.
STALE = 120.0


class ClusterInUse(HarnessError):
    """Another run holds the cluster's lock (its message names the run, pid, host and since when)."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


def holder_record(run_id: str) -> dict[str, Any]:
    """What the lock says of this process: run id, pid and its start time, host, since."""
    pid = os.getpid()
    return {"run": run_id, "pid": pid, "start_time": proc_start_time(pid), "host": socket.gethostname(),
            "since": _now().isoformat(timespec="seconds")}


def stale(holder: dict[str, Any], renewed: datetime | None, host: str | None = None, now: datetime | None = None) -> str | None:
    """Why the lock of `holder` (holder_record) may be taken over, or None while its run lives: on this host,
    its pid (with that start time) no longer runs; on another, no renewal for STALE seconds."""
    host = host or socket.gethostname()
    if holder.get("host") == host:
        pid = holder.get("pid")
        if not isinstance(pid, int) or not is_alive(pid, holder.get("start_time")):
            return f"its process {pid} on this host is gone"
        return None
    if renewed is None or ((now or _now()) - renewed).total_seconds() > STALE:
        return f"not renewed for over {STALE:g}s from host {holder.get('host')}"
    return None


class ClusterLock:
    """acquire() / release() of the Lease through `api_client` (a kubernetes ApiClient, admin identity)."""

    def __init__(self, api_client: Any, run_id: str, say: Callable[[str], None]) -> None:
        from kubernetes import client

        self.coord = client.CoordinationV1Api(api_client)
        self.run_id, self.say = run_id, say
        self.record = holder_record(run_id)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.held = False

    def _body(self, resource_version: str | None = None) -> dict[str, Any]:
        now = _now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        meta: dict[str, Any] = {"name": NAME, "namespace": NAMESPACE,
                                "annotations": {"kueue-harness/holder": json.dumps(self.record)}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": f"{self.run_id} pid {self.record['pid']} on {self.record['host']}",
                         "leaseDurationSeconds": int(STALE), "acquireTime": now, "renewTime": now}}

    def acquire(self) -> None:
        """Take the lock, or raise ClusterInUse naming the run that holds it. Renewed every RENEW_EVERY s."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.coord.create_namespaced_lease(NAMESPACE, self._body())
        except ApiException as e:
            if e.status != 409:
                raise
            lease = self.coord.read_namespaced_lease(NAME, NAMESPACE)
            try:
                holder = json.loads((lease.metadata.annotations or {}).get("kueue-harness/holder") or "{}")
            except ValueError:
                holder = {}
            renewed = lease.spec.renew_time
            why = stale(holder, renewed)
            if why is None:
                raise ClusterInUse(
                    f"this cluster is in use by kueue-harness run {holder.get('run')} (pid {holder.get('pid')} on host "
                    f"{holder.get('host')}, since {holder.get('since')}; Lease {NAMESPACE}/{NAME}): wait for it to end, "
                    "or stop it; a run whose process is gone is taken over by the next one") from None
            self.say(f"taking over the cluster lock of run {holder.get('run')} ({why})")
            self.coord.replace_namespaced_lease(NAME, NAMESPACE, self._body(lease.metadata.resource_version))
        self.held = True
        self._thread = threading.Thread(target=self._renew, name="kueue-harness-cluster-lock", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_EVERY):
            try:
                now = _now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                self.coord.patch_namespaced_lease(NAME, NAMESPACE, {"spec": {"renewTime": now}})
            except Exception as e:  # noqa: BLE001 - said; the lock is renewed again at the next tick
                self.say(f"could not renew the cluster lock: {type(e).__name__}: {e}")

    def release(self) -> None:
        """Stop renewing and delete the Lease if this run holds it."""
        self._stop.set()
        if not self.held:
            return
        self.held = False
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.coord.read_namespaced_lease(NAME, NAMESPACE)
            holder = json.loads((lease.metadata.annotations or {}).get("kueue-harness/holder") or "{}")
            if holder.get("run") == self.run_id:
                self.coord.delete_namespaced_lease(NAME, NAMESPACE)
        except (ApiException, ValueError) as e:
            if not (isinstance(e, ApiException) and e.status == 404):
                self.say(f"could not release the cluster lock: {type(e).__name__}: {e}")
