"""A continuous invariant monitor: the harness's own watches on Workloads, ClusterQueues and Cohorts (direct to
kube-apiserver, never through the proxy) re-run the quota checker on every event and record into the
case's history the moment a violation starts and when it clears, so a transient oversubscription is
caught, not only the final state. Also records when ClusterQueue status.flavorsReservation disagrees
with the Workloads. With `lifecycle`, it also records object lifecycle facts (deletions, a Workload's
spec.active, reservations, evictions; harness/checkers/model/lifecycle.py) of the case's objects, and whether running Pods
request more than their ClusterQueue's admitted Workloads hold: the facts the checkers of deletions,
evictions, inactive Workloads and Pods judge (docs/history.md, source `monitor`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from harness.checkers.model import accounting, lifecycle
from harness.checkers.model import quota as checks

#: How often (seconds) the monitor reads an object whose deletion is pending (`object_still_deleting`).
STILL_DELETING_EVERY = 1.0


class InvariantMonitor:
    """Watch Workloads, ClusterQueues and Cohorts; keep the open findings. Use as a context manager.
    The quota check runs over the case's real cohort tree (checks.cohorts_in_scope: the Cohorts named with
    the prefix and those the case's ClusterQueues name, with their parents), so a deleted Cohort leaves the
    tree the moment its DELETED event comes (kubernetes-sigs/kueue#10417).

    `record(event, source="monitor", **fields)` is called with "quota_violation_started" /
    "quota_violation_cleared" / "reservation_mismatch_started" / "reservation_mismatch_cleared".
    `cluster_queue_prefix` limits the check to the case's ClusterQueues (others may run in parallel).
    A quota finding is recorded only once a direct read of the ClusterQueues and Cohorts confirms it: each
    kind has its own watch, and one that lags (or re-lists) must not make a legitimate borrow look like an
    oversubscription (a Workload admitted through a Cohort the Cohort watch has not delivered yet).
    With `lifecycle`, LocalQueues and the Pods of `namespace` are watched too, and the lifecycle
    facts of the objects in scope (namespaced ones in `namespace`, cluster-scoped ones named with the
    prefix) are recorded (harness/checkers/model/lifecycle.py lifecycle_events), plus "pods_over_quota_started" /
    "pods_over_quota_cleared"; and, every `still_deleting_every` seconds while the deletion of such an object
    is pending, "object_still_deleting" from a direct read of it (or "object_deleted", read: true, when the
    read finds it gone): a stuck deletion is quiet — no watch event comes — and the deletion checker must
    tell "still there" from "nothing heard" (harness/checkers/deletion.py, kubernetes-sigs/kueue#10759).
    """

    def __init__(self, api_client, record: Callable[..., Any], cluster_queue_prefix: str,
                 namespace: str | None = None, lifecycle: bool = False,
                 still_deleting_every: float = STILL_DELETING_EVERY) -> None:
        self.api = api_client
        self.record = record
        self.prefix = cluster_queue_prefix
        self.namespace = namespace
        self.lifecycle = lifecycle
        self.still_deleting_every = still_deleting_every
        #: (kind, key) -> (namespace, name, epoch seconds the deletion was first seen) of objects in scope
        #: whose deletion started and that no DELETED event or read has shown gone yet.
        self.deleting: dict[tuple[str, str], tuple[str | None, str, float]] = {}
        #: (kind, key) of objects a read found gone before their watch's DELETED came (not recorded twice).
        self._gone_by_read: set[tuple[str, str]] = set()
        self.localqueues: dict[str, dict[str, Any]] = {}
        self.cohorts: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, dict[str, Any]] = {}
        self.evictions: dict[str, int] = {}
        self.open_pods: dict[tuple, lifecycle.PodsOverQuota] = {}
        self.workloads: dict[str, dict[str, Any]] = {}
        self.cluster_queues: dict[str, dict[str, Any]] = {}
        self.open_quota: dict[tuple, checks.QuotaFinding] = {}
        self.open_mismatch: dict[tuple, checks.StatusMismatch] = {}
        self.open_accounting: dict[tuple, accounting.AccountingMismatch] = {}
        self.ever_violated: list[checks.QuotaFinding] = []
        self.first_violation_at: float | None = None  # epoch seconds
        self.ever_mismatched: list[checks.StatusMismatch] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watches: list[Any] = []
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    def __enter__(self) -> "InvariantMonitor":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        # Cohorts always: the quota tree is judged with their parents and own quotas (check_quota).
        watched = [("workloads", self.workloads), ("clusterqueues", self.cluster_queues), ("cohorts", self.cohorts)]
        if self.lifecycle:
            watched += [("localqueues", self.localqueues), ("pods", self.pods)]
        for plural, store in watched:
            t = threading.Thread(target=self._run, args=(plural, store), daemon=True, name=f"monitor-{plural}")
            t.start()
            self._threads.append(t)
        if self.lifecycle:
            t = threading.Thread(target=self._still_deleting_loop, daemon=True, name="monitor-deleting")
            t.start()
            self._threads.append(t)
            if self.namespace:
                t = threading.Thread(target=self._run_events, daemon=True, name="monitor-events")
                t.start()
                self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for w in self._watches:
            w.stop()
        for t in self._threads:
            t.join(timeout=10)

    def _run(self, plural: str, store: dict[str, dict[str, Any]]) -> None:
        from kubernetes import client, watch

        co = client.CustomObjectsApi(self.api)
        kind = _KINDS[plural]
        while not self._stop.is_set():
            w = watch.Watch()
            self._watches.append(w)
            try:
                # timeout_seconds bounds each watch so stop() is honoured even on a quiet stream.
                if plural == "pods":
                    stream = w.stream(client.CoreV1Api(self.api).list_namespaced_pod, self.namespace or "default",
                                      timeout_seconds=5)
                else:
                    stream = w.stream(co.list_cluster_custom_object, "kueue.x-k8s.io", "v1beta2", plural,
                                      timeout_seconds=5)
                for ev in stream:
                    obj = ev["object"]
                    if not isinstance(obj, dict):
                        obj = self.api.sanitize_for_serialization(obj)
                    meta = obj.get("metadata") or {}
                    key = f"{meta.get('namespace', '')}/{meta.get('name')}"
                    with self._lock:
                        prev = store.get(key)
                        if ev["type"] == "DELETED":
                            store.pop(key, None)
                        else:
                            store[key] = obj
                        if self.lifecycle and self._in_scope(kind, meta):
                            self._record_lifecycle(kind, ev["type"], obj, prev)
                        self._evaluate()
                    if self._stop.is_set():
                        break
            except Exception as e:  # noqa: BLE001 - a broken watch is restarted; recorded for the report
                if not self._stop.is_set():
                    # Recorded in the history: the monitor_healthy assumption voids a verdict it weakened.
                    self.errors.append(f"{plural}: {type(e).__name__}: {e}")
                    self.record("watch_error", source="monitor", error=self.errors[-1])
            finally:
                w.stop()

    def _run_events(self) -> None:
        """Kubernetes Events of the case's namespace (core/v1 Events: the same objects events.k8s.io/v1 serves),
        each recorded once as `k8s_event` when it is new or its count grew: what Kueue (or any controller)
        reported about the case's objects, independent of Kueue's log format (kueue PR #13785: v0.17's event
        recorder writes no "Event occurred" log line)."""
        from kubernetes import client, watch

        seen: dict[str, Any] = {}
        while not self._stop.is_set():
            w = watch.Watch()
            self._watches.append(w)
            try:
                for ev in w.stream(client.CoreV1Api(self.api).list_namespaced_event, self.namespace,
                                   timeout_seconds=5):
                    obj = ev["object"]
                    obj = obj if isinstance(obj, dict) else self.api.sanitize_for_serialization(obj)
                    meta, inv = obj.get("metadata") or {}, obj.get("involvedObject") or {}
                    count = obj.get("count") or (obj.get("series") or {}).get("count") or 1
                    if ev["type"] == "DELETED" or seen.get(meta.get("uid")) == count:
                        continue
                    seen[meta.get("uid")] = count
                    self.record("k8s_event", source="monitor", reason=obj.get("reason"), type=obj.get("type"),
                                message=str(obj.get("message") or "")[:500], count=count,
                                regarding=f"{inv.get('kind')}/{inv.get('name')}",
                                reporter=(obj.get("source") or {}).get("component") or obj.get("reportingComponent"))
                    if self._stop.is_set():
                        break
            except Exception as e:  # noqa: BLE001 - as the other watches: restarted, recorded
                if not self._stop.is_set():
                    self.errors.append(f"events: {type(e).__name__}: {e}")
                    self.record("watch_error", source="monitor", error=self.errors[-1])
            finally:
                w.stop()

    def _in_scope(self, kind: str, meta: dict[str, Any]) -> bool:
        if kind in ("ClusterQueue", "Cohort"):
            return str(meta.get("name", "")).startswith(self.prefix)
        return self.namespace is None or meta.get("namespace") == self.namespace

    def _record_lifecycle(self, kind: str, ev_type: str, obj: dict[str, Any], prev: dict[str, Any] | None) -> None:
        key = lifecycle.key_of(kind, obj)
        # A re-listed watch (after its timeout) delivers every object again as ADDED: not a first sight.
        for event, fields in lifecycle.lifecycle_events(kind, ev_type, obj, prev, self.evictions.get(key, 0)):
            if event == "workload_evicted":
                self.evictions[key] = fields["count"]
            if event == "object_deleted" and (kind, key) in self._gone_by_read:
                continue  # a read already found it gone and recorded that
            self.record(event, source="monitor", **fields)
        meta = obj.get("metadata") or {}
        if ev_type == "DELETED":
            self.deleting.pop((kind, key), None)
            self._gone_by_read.discard((kind, key))
        elif meta.get("deletionTimestamp") and (kind, key) not in self.deleting:
            self.deleting[(kind, key)] = (meta.get("namespace"), str(meta.get("name")), time.time())
        elif not meta.get("deletionTimestamp"):
            self._gone_by_read.discard((kind, key))  # a new object of that name

    def _still_deleting_loop(self) -> None:
        while not self._stop.wait(self.still_deleting_every):
            self.check_deleting()

    def check_deleting(self) -> None:
        """Read each object whose deletion is pending and record `object_still_deleting` (its finalizers,
        `seconds` since its deletion was seen) or, when the read finds it gone, `object_deleted` (read:
        true). Called every `still_deleting_every` seconds by the monitor's own thread."""
        with self._lock:
            pending = dict(self.deleting)
        for (kind, key), (ns, name, since) in pending.items():
            try:
                obj = self._read(kind, ns, name)
            except Exception as e:  # noqa: BLE001 - recorded: monitor_healthy voids a verdict it weakened
                if not self._stop.is_set():
                    self.errors.append(f"read {kind} {key}: {type(e).__name__}: {e}")
                    self.record("watch_error", source="monitor", error=self.errors[-1])
                continue
            with self._lock:
                if (kind, key) not in self.deleting:
                    continue  # its DELETED came meanwhile
                meta = (obj or {}).get("metadata") or {}
                if obj is None or not meta.get("deletionTimestamp"):
                    # Gone (or gone and made again) between two watches: the watch may never say so.
                    self.deleting.pop((kind, key), None)
                    self._gone_by_read.add((kind, key))
                    self.record("object_deleted", source="monitor", kind=kind, key=key, finalizers=[],
                                resource_version=None, read=True)
                else:
                    self.record("object_still_deleting", source="monitor", kind=kind, key=key,
                                finalizers=list(meta.get("finalizers") or []),
                                seconds=round(time.time() - since, 3), resource_version=meta.get("resourceVersion"))

    def _confirmed(self, found: dict[tuple, checks.QuotaFinding], wls: list[dict[str, Any]]
                   ) -> dict[tuple, checks.QuotaFinding]:
        """The findings to keep: the open ones of `found`, and as new ones those a direct read of the
        ClusterQueues and Cohorts finds (the quota tree now, with the Workloads as the watch has them). A read that fails keeps them and is
        recorded as `watch_error` (monitor_healthy then voids the verdict)."""
        from kubernetes import client

        co = client.CustomObjectsApi(self.api)
        try:
            cqs = [c for c in co.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]
                   if c["metadata"]["name"].startswith(self.prefix)]
            all_cohorts = co.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "cohorts")["items"]
        except Exception as e:  # noqa: BLE001 - recorded: monitor_healthy voids a verdict it weakened
            if not self._stop.is_set():
                self.errors.append(f"confirm quota: {type(e).__name__}: {e}")
                self.record("watch_error", source="monitor", error=self.errors[-1])
            return found
        names = {c["metadata"]["name"] for c in cqs}
        wls = [w for w in wls if ((w.get("status") or {}).get("admission") or {}).get("clusterQueue") in names]
        fresh = {(f.scope, f.name, f.flavor, f.resource): f for f in
                 checks.check_quota(wls, cqs, checks.cohorts_in_scope(all_cohorts, cqs, self.prefix))}
        # Open findings go on as the watch sees them; new ones are the read's (its tree, its names).
        return {**{k: f for k, f in found.items() if k in self.open_quota},
                **{k: f for k, f in fresh.items() if k not in self.open_quota}}

    def _read(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The object now, by a direct GET (None: 404)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            if kind == "Pod":
                return self.api.sanitize_for_serialization(
                    client.CoreV1Api(self.api).read_namespaced_pod(name, namespace or "default"))
            co, plural = client.CustomObjectsApi(self.api), _PLURALS[kind]
            if namespace:
                return co.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, plural, name)
            return co.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _evaluate_pods(self) -> None:
        pods = [p for p in self.pods.values() if self.namespace is None or
                (p.get("metadata") or {}).get("namespace") == self.namespace]
        found = {(f.cluster_queue, f.resource): f for f in
                 lifecycle.pods_over_quota(pods, self.workloads.values(), self.localqueues.values())}
        for k, f in found.items():
            if k not in self.open_pods:
                self.record("pods_over_quota_started", source="monitor", finding=f.describe(), cluster_queue=f.cluster_queue,
                            resource=f.resource, running_milli=f.running_milli, held_milli=f.held_milli, pods=list(f.pods))
        for k, f in self.open_pods.items():
            if k not in found:
                self.record("pods_over_quota_cleared", source="monitor", finding=f.describe(), cluster_queue=f.cluster_queue,
                            resource=f.resource)
        self.open_pods = found

    def _evaluate(self) -> None:
        if self.lifecycle and (self.pods or self.open_pods):
            self._evaluate_pods()
        cqs = [c for c in self.cluster_queues.values() if c["metadata"]["name"].startswith(self.prefix)]
        if not cqs:
            return
        names = {c["metadata"]["name"] for c in cqs}
        wls = [w for w in self.workloads.values()
               if ((w.get("status") or {}).get("admission") or {}).get("clusterQueue") in names]
        cohorts = checks.cohorts_in_scope(self.cohorts.values(), cqs, self.prefix)
        found = {(f.scope, f.name, f.flavor, f.resource): f for f in checks.check_quota(wls, cqs, cohorts)}
        if any(k not in self.open_quota for k in found):
            found = self._confirmed(found, wls)
        for k, f in found.items():
            if k not in self.open_quota:
                self.ever_violated.append(f)
                if self.first_violation_at is None:
                    self.first_violation_at = time.time()
                self.record("quota_violation_started", source="monitor", finding=f.describe(),
                            used_milli=f.used_milli, allowed_milli=f.allowed_milli, workloads=list(f.workloads))
        for k, f in self.open_quota.items():
            if k not in found:
                self.record("quota_violation_cleared", source="monitor", finding=f.describe())
        self.open_quota = found
        mism = {(m.cq, m.flavor, m.resource): m for m in checks.check_flavors_reservation(cqs, wls)}
        for k, m in mism.items():
            if k not in self.open_mismatch:
                self.ever_mismatched.append(m)
                self.record("reservation_mismatch_started", source="monitor", mismatch=m.describe())
        for k, m in self.open_mismatch.items():
            if k not in mism:
                self.record("reservation_mismatch_cleared", source="monitor", mismatch=m.describe())
        self.open_mismatch = mism
        if self.lifecycle:
            self._evaluate_accounting(cqs)

    def _evaluate_accounting(self, cqs: list[dict[str, Any]]) -> None:
        """Record when the case's ClusterQueues' and LocalQueues' Workload counts (status.pendingWorkloads,
        reservingWorkloads, admittedWorkloads) start and stop disagreeing with the Workloads
        (harness/checkers/model/accounting.py; judged by harness/checkers/pending_accounting.py)."""
        lqs = [lq for lq in self.localqueues.values() if self.namespace is None
               or (lq.get("metadata") or {}).get("namespace") == self.namespace]
        found = {(m.kind, m.name, m.field): m for m in accounting.mismatches(cqs, lqs, self.workloads.values())}
        for k, m in found.items():
            if k not in self.open_accounting:
                self.record("accounting_mismatch_started", source="monitor", kind=m.kind, name=m.name, field=m.field,
                            status=m.status, counted=m.counted, workloads=list(m.workloads), finding=m.describe())
        for k, m in self.open_accounting.items():
            if k not in found:
                self.record("accounting_mismatch_cleared", source="monitor", kind=m.kind, name=m.name, field=m.field,
                            finding=m.describe())
        self.open_accounting = found


_KINDS = {"workloads": "Workload", "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue", "cohorts": "Cohort",
          "pods": "Pod"}
_PLURALS = {kind: plural for plural, kind in _KINDS.items()}
