"""Where Kueue runs: `local` (local.py: etcd, kube-apiserver, kube-controller-manager, the proxy and the Kueue
manager as processes here; control_plane.py its settings and helpers, kueue_process.py the Kueue manager,
etcd_template.py the start from a prepared etcd, pods.py kube-scheduler + kwok for Pods that run), `kind`
and `kubeconfig` (incluster.py, kind.py: Kueue in a cluster, routed through the proxy; engine.py, kind_image.py,
kueue_image.py: the container engine and the images the kind target makes offline). `start_target`
picks the in-cluster one from pytest options; runs.py holds what every environment shares.

May import: harness.common, harness.kueue, harness.build, harness.objects, harness.plan, harness.proxy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from harness.common.errors import HarnessError


def start_target(target: str, option: Callable[[str], Any], kueue_version: str,
                 artifacts: Path, kueue_spec: Any = None, say: Callable[[str], None] | None = None) -> Any:
    """Start the `kind` or `kubeconfig` target from the pytest options (`option` = config.getoption).
    `kueue_spec` (harness.build.kueue.KueueSpec): the build the kind target makes its Kueue image from;
    `say`: where its progress lines go (default: stderr)."""
    from harness.env import incluster

    if target == "kind":
        from harness.env import kind

        return kind.start(
            kueue_spec if kueue_spec is not None else kueue_version, artifacts, cluster=option("--kind-cluster"),
            node_image=option("--kind-image"),
            manifests=option("--kueue-manifests"), keep_cluster=bool(option("--keep-env")),
            proxy_listen_host=option("--proxy-listen-host"), proxy_server_host=option("--proxy-server-host"),
            **({"say": say} if say is not None else {}),
        )
    if target == "kubeconfig":
        path = Path(option("kh_kubeconfig") or incluster.default_kubeconfig())
        if not path.is_file():
            raise HarnessError(f"kubeconfig {path} does not exist: pass --kubeconfig")
        return incluster.InClusterEnvironment.start(
            kueue_version, artifacts, path, target="kubeconfig", context=option("--kube-context"),
            proxy_listen_host=option("--proxy-listen-host"), proxy_server_host=option("--proxy-server-host"),
            **({"say": say} if say is not None else {}),
        )
    raise HarnessError(f"unknown target {target!r}: local, kind or kubeconfig")
