"""`kueue-harness up --pods` as a person uses it (docs/pods.md "In a session"): kube-scheduler and kwok run
in the session, a Node from docs/examples/kwok-node.yaml turns Ready, a Pod runs on it and ends when
annotated, `status` lists both processes, and `down` stops them with the rest.
"""

from __future__ import annotations

import json

from harness.common.waiting import wait_for
from tests.integration.test_cli_session import EXAMPLES, Session, session  # noqa: F401 - fixture


def test_up_pods_runs_a_pod_on_a_kwok_node_and_finishes_it_on_demand(session: Session) -> None:  # noqa: F811
    session.up(None, "--pods")
    assert session.info["pods"]["kube_scheduler"] == "v1.35.4" and session.info["pods"]["kwok"] == "v0.8.0"
    status = session.cli("status").stdout
    assert "kube-scheduler" in status and "kwok" in status, status
    session.kubectl("apply", "-f", str(EXAMPLES / "kwok-node.yaml"))
    session.kubectl("wait", "node/node-1", "--for=condition=Ready", "--timeout=30s")
    session.kubectl("create", "-f", str(EXAMPLES / "pod.yaml"))
    session.kubectl("wait", "pod/p1", "-n", "default", "--for=condition=Ready", "--timeout=30s")

    def pod() -> dict:
        return json.loads(session.kubectl("get", "pod", "p1", "-n", "default", "-o", "json"))

    assert pod()["spec"]["nodeName"] == "node-1" and pod()["status"]["phase"] == "Running"
    session.kubectl("annotate", "pod", "p1", "-n", "default", "kueue-harness.x-k8s.io/finish=Succeeded")
    wait_for(lambda: pod()["status"]["phase"] == "Succeeded", timeout=30, what="p1 Succeeded",
             describe=lambda: pod()["status"])
    # `session.down()` (the fixture) checks that every recorded process, kube-scheduler and kwok too, is gone.
