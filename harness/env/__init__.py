"""Where Kueue runs: `local` (harness/env/local.py, processes here), `kind` and `kubeconfig`
(harness/env/incluster.py, kind.py: Kueue in a cluster, routed through the proxy). `start_target` picks
the in-cluster one from pytest options; runs.py holds what every environment shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from harness.common.errors import HarnessError


def start_target(target: str, option: Callable[[str], Any], kueue_version: str,
                 artifacts: Path) -> Any:
    """Start the `kind` or `kubeconfig` target from the pytest options (`option` = config.getoption)."""
    from harness.env import incluster

    if target == "kind":
        from harness.env import kind

        return kind.start(
            kueue_version, artifacts, cluster=option("--kind-cluster"), node_image=option("--kind-image"),
            manifests=option("--kueue-manifests"), keep_cluster=bool(option("--keep-env")),
            proxy_listen_host=option("--proxy-listen-host"), proxy_server_host=option("--proxy-server-host"),
        )
    if target == "kubeconfig":
        path = Path(option("kh_kubeconfig") or incluster.default_kubeconfig())
        if not path.is_file():
            raise HarnessError(f"kubeconfig {path} does not exist: pass --kubeconfig")
        return incluster.InClusterEnvironment.start(
            kueue_version, artifacts, path, target="kubeconfig", context=option("--kube-context"),
            proxy_listen_host=option("--proxy-listen-host"), proxy_server_host=option("--proxy-server-host"),
        )
    raise HarnessError(f"unknown target {target!r}: local, kind or kubeconfig")
