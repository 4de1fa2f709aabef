"""The CLI as a person uses it (docs/manual-session.md): `kueue-harness up --plan …`, kubectl, `holds`,
`release`, `logs`, `down` — both seed scenarios reproduced from their plan files without Python, on the
real components.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.procs import is_alive
from harness.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "harness.cli"]
EXAMPLES = ROOT / "docs" / "examples"


class Session:
    def __init__(self, tmp: Path, kueue_version: str) -> None:
        self.env = {**os.environ, "KUEUE_HARNESS_SESSION": str(tmp / "session.json")}
        self.tmp = tmp
        self.kueue_version = kueue_version
        self.info: dict = {}

    def cli(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        r = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, env=self.env, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kueue-harness {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def up(self, plan: str) -> None:
        self.cli("up", "--kueue-version", self.kueue_version, "--plan", plan, "--artifacts-dir", str(self.tmp / "art"))
        self.info = json.loads(Path(self.env["KUEUE_HARNESS_SESSION"]).read_text())

    def kubectl(self, *args: str) -> str:
        r = subprocess.run([self.info["kubectl"], *args], capture_output=True, text=True, timeout=60,
                           env={**self.env, "KUBECONFIG": self.info["admin_kubeconfig"]})
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
        return r.stdout

    def workloads(self) -> dict[str, dict[str, str]]:
        """Workload name prefix ("job1") -> {condition type: status}."""
        items = json.loads(self.kubectl("get", "workloads", "-n", "demo", "-o", "json"))["items"]
        return {w["metadata"]["name"].split("-")[1]: {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}
                for w in items}

    def down(self) -> None:
        procs = []
        if self.info:
            try:
                procs = json.loads((Path(self.info["state"]) / "processes.json").read_text())["procs"]
            except (OSError, ValueError):
                pass
        self.cli("down", check=False)
        for r in procs:
            assert not is_alive(r["pid"], r.get("start")), f"{r['name']} still runs after `down`"


@pytest.fixture
def session(tmp_path, kueue_version):
    s = Session(tmp_path, kueue_version)
    yield s
    s.down()


def test_manual_walkthrough_reproduces_stuck_preemption(session):
    """docs/manual-session.md, step by step: hold, inspect, release by hand."""
    session.up("manual-stuck-preemption")
    again = session.cli("up", check=False)
    assert again.returncode == 2 and "already running" in again.stderr
    session.kubectl("apply", "-f", str(EXAMPLES / "seed-queues.yaml"))
    session.kubectl("create", "-f", str(EXAMPLES / "job1.yaml"))

    def holds() -> list[dict]:
        return json.loads(session.cli("holds", "--json").stdout)

    h = wait_for(lambda: [x for x in holds() if x["rule"] == "admission-job1"], timeout=30,
                 what="job1's admission to be held", describe=holds)
    session.kubectl("create", "-f", str(EXAMPLES / "job2.yaml"))
    wait_for(lambda: {x["rule"] for x in holds()} >= {"admission-job1", "eviction-job1", "quota-release-job1"},
             timeout=30, what="the eviction answer and the quota release of job1 to be held", describe=holds)
    assert session.workloads()["job1"].get("Evicted") == "True"
    by_rule = {x["rule"]: x["id"] for x in holds()}
    session.cli("release", h[0]["id"])
    wait_for(lambda: "Evicted" not in session.workloads()["job1"], timeout=30,
             what="the late admission to remove job1's Evicted condition", describe=session.workloads)
    session.cli("release", by_rule["quota-release-job1"])
    session.cli("release", by_rule["eviction-job1"])
    # Stuck: job2 never gets quota, and Kueue floods its log. Wait for the flood, then check job2.
    wait_for(lambda: len(session.cli("logs", "--grep", "Preemption already issued").stdout.splitlines()) >= 50,
             timeout=30, what="Kueue to log 'Preemption already issued, waiting for observation'")
    assert session.workloads()["job2"].get("QuotaReserved") != "True"


@pytest.mark.parametrize("plan", ["stuck-preemption", "quota-oversubscription"])
def test_seed_plans_reproduce_from_the_cli(session, plan):
    """`up --plan <seed plan>` and three kubectl commands reproduce each scenario hands-off."""
    session.up(plan)
    session.kubectl("apply", "-f", str(EXAMPLES / "seed-queues.yaml"))
    session.kubectl("create", "-f", str(EXAMPLES / "job1.yaml"))
    wait_for(lambda: json.loads(session.cli("holds", "--json").stdout), timeout=30,
             what="job1's admission to be held")
    session.kubectl("create", "-f", str(EXAMPLES / "job2.yaml"))
    if plan == "stuck-preemption":
        wait_for(lambda: len(session.cli("logs", "--grep", "Preemption already issued").stdout.splitlines()) >= 50,
                 timeout=60, what="the preemption to wedge", describe=session.workloads)
        assert session.workloads()["job2"].get("QuotaReserved") != "True"
        assert "Evicted" not in session.workloads()["job1"]
    else:
        both = wait_for(lambda: (lambda w: w if all(w.get(j, {}).get("QuotaReserved") == "True" for j in ("job1", "job2"))
                                 else None)(session.workloads()),
                        timeout=60, what="job1 and job2 to both hold quota in the 1-cpu ClusterQueue",
                        describe=session.workloads)
        assert both
        jobs = json.loads(session.kubectl("get", "jobs", "-n", "demo", "-o", "json"))["items"]
        assert [j["spec"].get("suspend") for j in jobs] == [False, False], "both Jobs should be running"
    assert not json.loads(session.cli("holds", "--json").stdout), "the plan should have released every hold"


def test_up_fails_fast_when_the_environment_cannot_start(tmp_path, kueue_version):
    """A Kueue that exits at once: `up` reports it within seconds (it used to wait its 15-minute bound)."""
    s = Session(tmp_path, kueue_version)
    s.env["KUEUE_HARNESS_KUEUE_BINARY"] = "/bin/false"
    start = time.monotonic()
    r = s.cli("up", "--kueue-version", kueue_version, "--artifacts-dir", str(tmp_path / "art"), check=False, timeout=120)
    assert r.returncode != 0
    assert time.monotonic() - start < 60, "up should give up as soon as the session process fails"
    assert "failed to start" in r.stderr and "kueue exited during start-up" in r.stderr
    assert s.cli("status", check=False).returncode == 1  # nothing is left running


def test_two_racing_ups_start_one_session(tmp_path, kueue_version):
    s = Session(tmp_path, kueue_version)
    args = [*CLI, "up", "--kueue-version", kueue_version, "--artifacts-dir", str(tmp_path / "art")]
    procs = [subprocess.Popen(args, cwd=ROOT, env=s.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        results = [p.communicate(timeout=600) for p in procs]
        codes = sorted(p.returncode for p in procs)
        assert codes == [0, 2], results
        refused = next(err for (out, err), p in zip(results, procs) if p.returncode == 2)
        assert "starting a session right now" in refused or "already running" in refused
        s.info = json.loads(Path(s.env["KUEUE_HARNESS_SESSION"]).read_text())
    finally:
        s.down()


def test_down_during_a_starting_up_says_so(tmp_path, kueue_version):
    s = Session(tmp_path, kueue_version)
    up = subprocess.Popen([*CLI, "up", "--kueue-version", kueue_version, "--artifacts-dir", str(tmp_path / "art")],
                          cwd=ROOT, env=s.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = Path(s.env["KUEUE_HARNESS_SESSION"]).with_suffix(".lock")
        wait_for(lambda: lock.exists(), timeout=30, what="`up` to take its lock")
        r = s.cli("down", check=False)
        assert r.returncode == 2 and "starting right now" in r.stderr, (r.stdout, r.stderr)
        up.communicate(timeout=600)
        assert up.returncode == 0
        s.info = json.loads(Path(s.env["KUEUE_HARNESS_SESSION"]).read_text())
    finally:
        if up.poll() is None:
            up.kill()
        s.down()
