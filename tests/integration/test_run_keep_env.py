"""`kueue-harness run --keep-env` keeps the environment (issue 16, item 4), on the real components: the
cases run inside a session supervisor, and afterwards `status`, `holds`, `plan load` and `down` work on the
kept session; `down` leaves none of its processes running.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.common.procs import is_alive
from tests.integration.test_cli_session import CLI, EXAMPLES, ROOT, Session


def test_run_keep_env_leaves_a_session_that_the_session_commands_drive(tmp_path: Path, kueue_version: str) -> None:
    s = Session(tmp_path, kueue_version)
    art = tmp_path / "run"
    try:
        r = subprocess.run([*CLI, "run", "--keep-env", "--name", s.name, "--kueue-version", kueue_version,
                            "--artifacts-dir", str(art), "-k", "stuck_preemption_control"],
                           capture_output=True, text=True, cwd=ROOT, env=s.env, timeout=900)
        assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
        assert "test_stuck_preemption_control" in r.stdout and "passed" in r.stdout, r.stdout
        assert f"Environment kept as session {s.name}" in r.stdout, r.stdout
        assert f"kueue-harness down --name {s.name}" in r.stdout
        summary = json.loads((art / "summary.json").read_text())
        assert [c["verdict"] for c in summary["cases"]] == ["passed"]
        s.info = json.loads(s.record.read_text())
        assert s.info["cases"] == {"exit": 0} and s.info["artifacts"] == str(art)
        status = s.cli("status")
        assert "kueue " in status.stdout and "EXITED" not in status.stdout, status.stdout
        assert "rules loaded: 0, holds: 0" in status.stdout, "the cases' rules and holds are gone"
        assert s.cli("holds").stdout.startswith("nothing is held")
        # The kept environment works: a manual plan on it holds job1's admission.
        s.cli("plan", "load", "manual-stuck-preemption")
        s.kubectl("apply", "-f", str(EXAMPLES / "seed-queues.yaml"))
        s.kubectl("create", "-f", str(EXAMPLES / "job1.yaml"))
        assert s.cli("wait", "admission-job1", "--timeout", "30", "--name", s.name).returncode == 0
        procs = json.loads((Path(s.info["state"]) / "processes.json").read_text())["procs"]
        assert {p["name"] for p in procs} >= {"etcd", "kube-apiserver", "proxy", "kueue"}
        assert "stopped" in s.cli("down").stdout
        left = [p["name"] for p in procs if is_alive(p["pid"], p.get("start"))]
        assert not left, f"{left} still run after `down`"
    finally:
        s.down()
