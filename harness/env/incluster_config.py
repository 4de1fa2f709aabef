"""A case's declared Kueue configuration (`@pytest.mark.kueue_config`, harness/kueue/config.py) given to Kueue in a
cluster: Kueue reads its Configuration from ConfigMap `kueue-manager-config` (key controller_manager_config.yaml,
mounted into the manager's Pod) only when it starts, so the ConfigMap is rewritten with the declaration laid over
the installed Configuration and Kueue's Pod deleted (the Deployment makes a new one, which mounts the new
content). The installed Configuration is kept and put back when the environment stops, before the routing is
undone (whose rollout then starts Kueue as installed).

Mixed into InClusterEnvironment (harness/env/incluster.py); same contract as the local target's configure_kueue.
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from harness.common.errors import EnvironmentNotReady
from harness.env.routing import KUEUE_CONFIG_KEY, KUEUE_CONFIGMAP
from harness.kueue import config as kconfig


class InClusterKueueConfig:
    """configure_kueue / kueue_config_info / restore_kueue_config for an environment with `api_client()`,
    `routing`, `state`, `artifacts`, `kueue_build`, `kueue_version`, `say`, `restart_kueue()`, `started`."""

    _installed_config: str | None = None
    kueue_config: Any = None

    def _save_config(self) -> None:
        """Kueue's Configuration from its ConfigMap, to state/kueue-config.yaml (the report reads feature
        gates there) and to the artifacts."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            cm = client.CoreV1Api(self.api_client()).read_namespaced_config_map(KUEUE_CONFIGMAP, self.routing.namespace)
            text = (cm.data or {}).get(KUEUE_CONFIG_KEY)
        except ApiException as e:
            if e.status != 404:
                raise
            text = None  # a cluster may configure Kueue otherwise (no ConfigMap: its defaults)
            self.say(f"no ConfigMap {self.routing.namespace}/{KUEUE_CONFIGMAP}: Kueue's feature gates are "
                     "read as its defaults")
        if text:
            (self.state / "kueue-config.yaml").write_text(text)
            (self.artifacts / "kueue-config.yaml").write_text(text)

    def _read_config(self) -> str:
        from kubernetes import client

        cm = client.CoreV1Api(self.api_client()).read_namespaced_config_map(KUEUE_CONFIGMAP, self.routing.namespace)
        return (cm.data or {}).get(KUEUE_CONFIG_KEY) or ""

    def _write_config(self, text: str) -> None:
        from kubernetes import client

        client.CoreV1Api(self.api_client()).patch_namespaced_config_map(
            KUEUE_CONFIGMAP, self.routing.namespace, {"data": {KUEUE_CONFIG_KEY: text}}, field_manager="kueue-harness")
        (self.state / "kueue-config.yaml").write_text(text)
        (self.artifacts / "kueue-config.yaml").write_text(text)

    def _resolve(self, cfg: kconfig.KueueConfig) -> kconfig.KueueConfig:
        """`cfg` with its "if-known" gates resolved from the build's feature table; refused (KueueConfigError)
        when this run did not build the Kueue that runs (a published image: its table is not at hand)."""
        if not cfg.if_known:
            return cfg
        found = kconfig.features_text(self.kueue_build) if self.kueue_build is not None else None
        if found is None:
            raise kconfig.KueueConfigError(
                f"cannot tell whether Kueue {self.kueue_version} knows {', '.join(cfg.if_known)} (declared "
                f"{kconfig.IF_KNOWN!r}): no copy of its {kconfig.FEATURES_FILE} is at hand")
        return cfg.resolve(kconfig.parse_gates(found[0]))

    def configure_kueue(self, cfg: kconfig.KueueConfig | None) -> dict[str, Any]:
        """Give Kueue `cfg` (None: the installed Configuration). Kueue is restarted only when the
        Configuration differs from the one it runs with. Returns {"restarted", "seconds"[, "if_known"]}.
        Raises KueueConfigError for a bad gate (before touching Kueue) or when Kueue does not come up with
        it (then the previous Configuration is written back and Kueue restarted with it)."""
        cfg = self._resolve(cfg or kconfig.DEFAULT)
        extra = {"if_known": cfg.if_known_given()} if cfg.if_known else {}
        current = self._read_config()
        if self._installed_config is None:
            self._installed_config = current
        gates = cfg.effective_gates()
        if gates and self.kueue_build is not None:
            found = kconfig.features_text(self.kueue_build)
            if found is not None:
                kconfig.check_gates(gates, kconfig.parse_gates(found[0]), self.kueue_version)
        base = yaml.safe_load(self._installed_config) or {}
        wanted = self._installed_config if cfg.is_default else yaml.safe_dump(cfg.apply(base), sort_keys=False)
        self.kueue_config = cfg
        if (yaml.safe_load(wanted) or {}) == (yaml.safe_load(current) or {}):
            return {"restarted": False, "seconds": 0.0, **extra}
        t = time.monotonic()
        self._write_config(wanted)
        try:
            self.restart_kueue()
        except EnvironmentNotReady as e:
            self._write_config(current)
            self.restart_kueue()
            raise kconfig.KueueConfigError(
                f"Kueue did not start with {cfg.summary()}: {str(e).splitlines()[0]}. Kueue runs again with the "
                "previous configuration; fix the declaration") from None
        self.say(f"Kueue restarted with {cfg.summary() if not cfg.is_default else 'its installed configuration'}")
        self.started["kueue_config_changes"] = self.started.get("kueue_config_changes", 0) + 1
        return {"restarted": True, "seconds": round(time.monotonic() - t, 3), **extra}

    def kueue_config_info(self) -> dict[str, Any]:
        """For summary.json and report.md: what was declared and the Configuration Kueue runs with."""
        written = self.state / "kueue-config.yaml"
        try:
            configuration = yaml.safe_load(written.read_text())
        except OSError:
            configuration = None
        cfg = self.kueue_config or kconfig.DEFAULT
        info = {"declared": cfg.to_json(), "summary": cfg.summary(), "configuration": configuration,
                "feature_gates_reported": self.kueue_reported_gates}
        if cfg.if_known and cfg.known_gates is not None:
            info["if_known"] = cfg.if_known_given()
        return info

    @property
    def kueue_reported_gates(self) -> dict[str, bool]:
        """The feature gates the running Kueue reported (its last "Loaded feature gates" line in kueue.log)."""
        from harness.kueue import log as kueue_log

        gates: dict[str, bool] = {}
        for line in kueue_log.lines(self.kueue_log):
            if line.get("msg") == "Loaded feature gates" and isinstance(line.get("featureGates"), dict):
                gates = dict(line["featureGates"])
        return gates

    def restore_kueue_config(self) -> None:
        """Put the installed Configuration back into the ConfigMap (no restart: the routing's undo rolls
        Kueue out again)."""
        if self._installed_config is not None and self._read_config() != self._installed_config:
            self._write_config(self._installed_config)
            self.say(f"restored ConfigMap {self.routing.namespace}/{KUEUE_CONFIGMAP}")
