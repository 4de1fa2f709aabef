"""The kind and kubeconfig targets for real, on this machine: the seed cases of kubernetes-sigs/kueue#11480 on a
kind cluster the harness makes offline (its own container engine when none runs, the node image from
harness-built Kubernetes binaries, the Kueue image of the build under test: harness/env/kind.py), then the
same cases with `--target kubeconfig` against that same cluster (Kueue installed there by the first run), then
nothing left behind: no cluster container, no `kind` network, no daemon the run started.

Skips only when no container engine can be started here (the reason is said). Slow: the first run on a
machine builds the node image (about 20 min cold); later runs take about 6 min.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.common.errors import HarnessError
from harness.common.paths import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(5400)]

CLUSTER = "kueue-harness-it"
SEEDS = {"test_stuck_preemption": "reproduced", "test_stuck_preemption_control": "passed",
         "test_quota_oversubscription": "reproduced", "test_quota_oversubscription_control": "passed"}


def _child(art: Path, *args: str, timeout: float = 3600) -> tuple[int, str, dict]:
    p = subprocess.run([sys.executable, "-m", "pytest", "cases/kueue_11480", "-q", "-p", "no:cacheprovider",
                        f"--artifacts-dir={art}", "--kueue-version=v0.17.0", *args], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    summary = json.loads((art / "summary.json").read_text()) if (art / "summary.json").is_file() else {}
    return p.returncode, p.stdout, summary


def _verdicts(summary: dict) -> dict[str, tuple[str, str]]:
    return {c["case"].split("::")[-1]: (c["verdict"], c.get("expected")) for c in summary.get("cases", [])}


@pytest.fixture(scope="module")
def engine_here():
    from harness.env import engine

    try:
        eng = engine.ensure(keep=True)
    except HarnessError as e:
        pytest.skip(f"no container engine can be started on this machine: {e}")
    yield eng
    eng.stop()


def test_seed_cases_on_kind_then_kubeconfig_target(engine_here, tmp_path):
    from harness.env import engine, kind

    rc, out, summary = _child(tmp_path / "kind", "--target=kind", f"--kind-cluster={CLUSTER}", "--keep-env")
    try:
        assert summary, f"the kind run wrote no summary.json (rc {rc}):\n{out[-4000:]}"
        assert summary["target"] == "kind" and summary["kubernetes_version"].startswith("v1.35.4")
        got = _verdicts(summary)
        assert {k: v[0] for k, v in got.items()} == SEEDS, out[-4000:]
        assert all(v == e for v, e in got.values()), got
        assert rc == 0, out[-4000:]
        log = (tmp_path / "kind" / "env" / "kueue.log").read_text()
        assert log.count('"msg"') > 100, "Kueue's log did not reach kueue.log through the API"
        assert "cannot follow the log" not in log

        # The kubeconfig target against the same cluster: Kueue is installed there (the routing was undone).
        kubeconfig = tmp_path / "kind.kubeconfig"
        kubeconfig.write_text(kind.get_kubeconfig(CLUSTER))
        kubeconfig.chmod(0o600)
        rc2, out2, summary2 = _child(tmp_path / "kc", "--target=kubeconfig", f"--kubeconfig={kubeconfig}",
                                     f"--proxy-listen-host={kind.network_gateway()}")
        assert summary2, f"the kubeconfig run wrote no summary.json (rc {rc2}):\n{out2[-4000:]}"
        assert summary2["target"] == "kubeconfig"
        got2 = _verdicts(summary2)
        assert {k: v[0] for k, v in got2.items()} == SEEDS, out2[-4000:]
        assert rc2 == 0, out2[-4000:]
    finally:
        if kind.cluster_exists(CLUSTER):
            kind.delete_cluster(CLUSTER, tmp_path / "delete.kubeconfig", print)
        if kind.network_exists("kind"):
            kind.remove_network("kind", print)
    # No container or network left (the daemon, when the fixture started it, is stopped by the fixture).
    assert [x for x in engine.leftovers(CLUSTER) if "dockerd" not in x] == []
