"""What Kueue routed through the proxy runs with, besides its kubeconfig: leader election off, so its Lease traffic
never goes through the fault proxy (docs/kind.md "What happens", step 4). With one kubeconfig for all its traffic
(client-go's leader election uses the manager's own client), a routed Kueue renewed its Lease through mitmproxy;
on a loaded 2-core runner (load 25-31) the renewals timed out, Kueue logged "leader election lost" and exited,
voiding every later case. Leader election arbitrates between replicas; the routed Kueue is one (and rolls out
Recreate: harness/env/routing.py ANN_ORIGINAL_STRATEGY). The installed Configuration is kept on the ConfigMap and
put back by the routing's undo, a killed run's too.
"""

from __future__ import annotations

from typing import Any

import yaml

#: Kueue's ConfigMap of the release manifests and its key (config/components/manager).
KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
#: leaderElection.resourceName of the release configuration.
KUEUE_LEASE = "c1f6bfd2.kueue.x-k8s.io"
#: On ConfigMap kueue-manager-config while routed: Kueue's Configuration as installed (the text).
ANN_ORIGINAL_CONFIG = "kueue-harness/original-config"
FIELD_MANAGER = "kueue-harness"


def routed_config(text: str) -> str | None:
    """Kueue's Configuration `text` with leaderElection.leaderElect false, or None when it already is (or the
    text is not a mapping: left alone). Why: ANN_ORIGINAL_CONFIG."""
    try:
        cfg = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError:
        return None
    if not isinstance(cfg, dict):
        return None
    le = cfg.get("leaderElection") if isinstance(cfg.get("leaderElection"), dict) else {}
    if le.get("leaderElect") is False:
        return None
    cfg["leaderElection"] = {**le, "leaderElect": False}
    return yaml.safe_dump(cfg, sort_keys=False)


def _read(core: Any, namespace: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        return core.api_client.sanitize_for_serialization(core.read_namespaced_config_map(KUEUE_CONFIGMAP, namespace))
    except ApiException as e:
        if e.status == 404:
            return None  # a cluster that configures Kueue otherwise: its leader election stays as it is
        raise


def route_config(core: Any, namespace: str) -> bool:
    """Kueue's Configuration (ConfigMap kueue-manager-config, through CoreV1Api `core`) with leaderElection.leaderElect
    false, the text as installed kept in ANN_ORIGINAL_CONFIG for the undo (a run killed before its undo leaves it
    for the next run's). Returns whether it changed anything (False: no ConfigMap, or leader election off already)."""
    cm = _read(core, namespace)
    if cm is None:
        return False
    text = (cm.get("data") or {}).get(KUEUE_CONFIG_KEY) or ""
    routed = routed_config(text)
    if routed is None:
        return False
    anns = (cm.get("metadata") or {}).get("annotations") or {}
    keep = {} if ANN_ORIGINAL_CONFIG in anns else {ANN_ORIGINAL_CONFIG: text}
    core.patch_namespaced_config_map(KUEUE_CONFIGMAP, namespace, {
        "metadata": {"annotations": keep}, "data": {KUEUE_CONFIG_KEY: routed}}, field_manager=FIELD_MANAGER)
    return True


def unroute_config(core: Any, namespace: str) -> bool:
    """Put Kueue's installed Configuration back (ANN_ORIGINAL_CONFIG), if route_config changed it."""
    cm = _read(core, namespace)
    anns = ((cm or {}).get("metadata") or {}).get("annotations") or {}
    if ANN_ORIGINAL_CONFIG not in anns:
        return False
    core.patch_namespaced_config_map(KUEUE_CONFIGMAP, namespace, {
        "metadata": {"annotations": {ANN_ORIGINAL_CONFIG: None}},
        "data": {KUEUE_CONFIG_KEY: anns[ANN_ORIGINAL_CONFIG]}}, field_manager=FIELD_MANAGER)
    return True


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
