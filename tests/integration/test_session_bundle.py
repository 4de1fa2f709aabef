"""`kueue-harness bundle` on a real session: `up --plan stuck-preemption`, docs/by-hand.md's kubectl steps, then
a bundle of namespace demo that reproduces the stuck preemption from the session's own proxy events and
Kueue log, keeps the final objects' managedFields, shows the late admission's body, holds none of the
session's tokens, and that `kueue-harness report` re-checks to the same verdict.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import yaml

from harness.common.waiting import wait_for
from tests.integration.test_cli_session import (  # noqa: F401 - `session` fixture below
    EXAMPLES,
    Session,
    session,  # noqa: F401 - the fixture (its `down` runs at the end)
)


def test_bundle_of_a_stuck_preemption_session(session, tmp_path):  # noqa: F811 - the imported fixture
    session.up("stuck-preemption")
    session.kubectl("apply", "-f", str(EXAMPLES / "seed-queues.yaml"))
    session.kubectl("create", "-f", str(EXAMPLES / "job1.yaml"))
    wait_for(lambda: json.loads(session.cli("holds", "--json").stdout), timeout=30, what="job1's admission to be held")
    session.kubectl("create", "-f", str(EXAMPLES / "job2.yaml"))
    wait_for(lambda: len(session.cli("logs", "--grep", "Preemption already issued").stdout.splitlines()) >= 50,
             timeout=60, what="the preemption to wedge", describe=session.workloads)

    out = tmp_path / "bundle"
    r = session.cli("bundle", "--name", session.name, "--namespace", "demo", "--out", str(out))
    assert "verdict at the time of the bundle: reproduced" in r.stdout, r.stdout
    archive = out.with_name(out.name + ".tar.gz")
    assert archive.is_file()
    names = {p.name for p in out.iterdir()}
    assert {"report.md", "history.jsonl", "objects.yaml", "managed-fields.yaml", "kueue-excerpt.log", "flows.mitm",
            "flows.har", "writes.json", "timeline.mmd", "bundle.json"} <= names, names
    assert {"kueue.log", "kueue.log.gz"} & names

    meta = json.loads((out / "bundle.json").read_text())
    assert meta["verdict"] == "reproduced" and meta["namespace"] == "demo" and meta["redaction"]["found"] == []
    managed = yaml.safe_load((out / "managed-fields.yaml").read_text())
    job1 = next(v for k, v in managed.items() if k.startswith("Workload demo/job-job1-"))
    assert any(m["manager"] == "kueue-admission" and m.get("operation") == "Apply" for m in job1)
    md = (out / "report.md").read_text()
    assert "## The writes that decided the verdict" in md and "same field manager `kueue-admission`" in md
    assert "its body has no Evicted, Preempted condition" in md

    # None of the session's tokens is in the archive (they are in its state folder's tokens.csv).
    tokens = [line.split(",")[0] for line in (Path(session.info["state"]) / "tokens.csv").read_text().splitlines()]
    tokens.append((Path(session.info["state"]) / "control.token").read_text().strip())
    with tarfile.open(archive) as tf:
        blob = b"".join(tf.extractfile(m).read() for m in tf.getmembers() if m.isfile())
    assert len(tokens) >= 3 and not [t for t in tokens if t.encode() in blob]

    rc = session.cli("report", str(archive), "--out", str(tmp_path / "recheck"))
    assert "verdict: reproduced (recorded at run time: reproduced) — agrees" in rc.stdout, rc.stdout
