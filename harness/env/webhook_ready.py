"""When a Kueue Pod that replaced another one serves Kueue's webhooks for every caller.

One dry-run create that a webhook answered is not proof: while the Service of Kueue's webhooks still lists
the old Pod (a rollout just ended; the EndpointSlice controller and kube-proxy lag behind), kube-apiserver's
calls go to either Pod, and a call to the Pod that is gone hangs until the webhook's `timeoutSeconds`
(10 s in Kueue's manifests). A kind CI run of 2026-12-06 lost its first case that way: a Job create answered
500 "failed calling webhook \"mjob.kb.io\" ... context deadline exceeded", seconds after "environment
ready". So the in-cluster environment waits until the Services its webhook configurations name list the
routed Pod (or Pods) alone as ready, and then until the webhooks answered several calls in a row.
"""

from __future__ import annotations

from typing import Any, Callable

#: Answered calls in a row before the webhooks count as served (a caller still routed to a Pod that is gone
#: fails about every second call while the old address is in kube-proxy's rules).
STREAK = 3


def webhook_services(api_client: Any, namespace: str) -> list[str]:
    """The names of the Services in `namespace` that the cluster's mutating and validating webhook
    configurations call (clientConfig.service), sorted; [] when none does."""
    from kubernetes import client

    adm = client.AdmissionregistrationV1Api(api_client)
    names: set[str] = set()
    for cfgs in (adm.list_mutating_webhook_configuration().items, adm.list_validating_webhook_configuration().items):
        for cfg in cfgs:
            for hook in cfg.webhooks or []:
                svc = hook.client_config.service if hook.client_config else None
                if svc is not None and svc.namespace == namespace:
                    names.add(svc.name)
    return sorted(names)


def ready_addresses(slices: list[dict[str, Any]]) -> set[str]:
    """The addresses of the ready endpoints of EndpointSlices (dicts as the API returns them): the ones
    kube-proxy routes to. An endpoint without `conditions.ready` counts as ready (discovery.k8s.io/v1:
    "nil should be interpreted as true")."""
    out: set[str] = set()
    for s in slices:
        for ep in s.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            out.update(ep.get("addresses") or [])
    return out


def only_routed_serve(api_client: Any, namespace: str, ours: set[str]) -> bool:
    """True when every webhook Service of `namespace` has ready endpoints and all of them are in `ours`
    (the addresses of this run's routed Pods: one, or each replica of a Deployment scaled up). True as well
    when the credentials may not list webhook configurations or EndpointSlices (403: a `kubeconfig` target's
    narrower user), where the answered streak alone stands. Raises other ApiExceptions (the wait counts them
    as "not yet")."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    disc = client.DiscoveryV1Api(api_client)
    try:
        for svc in webhook_services(api_client, namespace):
            got = disc.list_namespaced_endpoint_slice(namespace, label_selector=f"kubernetes.io/service-name={svc}")
            ready = ready_addresses(api_client.sanitize_for_serialization(got.items))
            if not ready or not ready <= ours:
                return False
    except ApiException as e:
        if e.status == 403:
            return True
        raise
    return True


def streak(probe: Callable[[], bool], n: int = STREAK) -> Callable[[], bool]:
    """A probe that is true once `probe` was true `n` times in a row (an exception or a false result starts
    the count again; the exception propagates, for the wait's message)."""
    count = [0]

    def run() -> bool:
        try:
            ok = probe()
        except Exception:
            count[0] = 0
            raise
        count[0] = count[0] + 1 if ok else 0
        return count[0] >= n

    return run
