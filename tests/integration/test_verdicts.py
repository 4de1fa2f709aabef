"""Verdicts that mean what they say, and runs that go wrong (issue 8), on the real components: a Kueue
crash, a fault that never happens, Ctrl-C in the middle of a case, a Kueue that cannot start.
Each runs pytest (or the environment) in a child process, the way a user would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.common.procs import is_alive
from harness.common.waiting import wait_for
from tests.childproc import default_signals

ROOT = Path(__file__).resolve().parents[2]

CASES = textwrap.dedent('''
    import os, signal, time
    from harness.plan.rules import Match
    from harness.scenarios.case import InvariantViolation
    import pytest
    # A case with no invariant that applied is an error (harness/checkers/base.py compose): quota judges them all.
    pytestmark = pytest.mark.checkers("quota")

    def test_a_kueue_crash_is_an_error(case):
        os.killpg(case.env.procs.procs["kueue"][1].pgid, signal.SIGKILL)
        raise InvariantViolation("this would look like a reproduction")

    def test_a_fault_that_never_happens_is_an_error(case):
        case.proxy.hold(Match(write="admission", name="no-such-workload-*")).wait_held(2)

    def test_after_a_crash_kueue_runs_again(case):
        assert case.env.kueue_alive()
        from harness import scenarios as seed
        seed.setup_queues(case)

    def test_a_restart_the_case_asks_for_is_fine(case):
        from harness import scenarios as seed
        seed.setup_queues(case)
        case.restart_kueue(kill=True)
        assert case.env.kueue_alive()

    def test_a_hold_past_its_max_age_is_an_error(case):
        from harness import scenarios as seed
        q = seed.setup_queues(case)
        rule = case.proxy.hold(Match(write="admission", namespace=case.ns, name="job-j-*"), max_hold=1)
        seed.submit_job(case, q, "j", q.low)
        rule.wait_held(30)
        case.proxy.wait_event(lambda e: e["event"] == "hold_expired", 30, "the hold to expire")
''')


def _pytest(tmp: Path, test_file: str, *extra: str, **popen) -> subprocess.Popen:
    f = tmp / "test_child.py"
    f.write_text(test_file)
    return subprocess.Popen([sys.executable, "-m", "pytest", str(f), "-q", "-p", "no:cacheprovider",
                             f"--rootdir={tmp}", f"--artifacts-dir={tmp / 'art'}", *extra],
                            cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=default_signals, **popen)


def test_verdicts_are_error_when_the_run_itself_went_wrong(tmp_path, kueue_version):
    p = _pytest(tmp_path, CASES, f"--kueue-version={kueue_version}")
    out, _ = p.communicate(timeout=300)
    summary = json.loads((tmp_path / "art" / "summary.json").read_text())
    verdicts = {c["case"].split("::")[-1]: c for c in summary["cases"]}
    crash = verdicts["test_a_kueue_crash_is_an_error"]
    assert crash["verdict"] == "error", out
    assert "Kueue exited during the case" in crash["detail"], crash
    assert verdicts["test_a_fault_that_never_happens_is_an_error"]["verdict"] == "error"
    assert "WaitTimeout" in verdicts["test_a_fault_that_never_happens_is_an_error"]["detail"]
    assert verdicts["test_after_a_crash_kueue_runs_again"]["verdict"] == "passed", out
    assert verdicts["test_a_restart_the_case_asks_for_is_fine"]["verdict"] == "passed", out
    expired = verdicts["test_a_hold_past_its_max_age_is_an_error"]
    assert expired["verdict"] == "error" and "max_hold" in expired["detail"], expired


def test_ctrl_c_in_a_case_tears_down_and_keeps_the_evidence(tmp_path, kueue_version):
    slow = textwrap.dedent('''
        import time
        def test_slow(case):
            case.record("about_to_wait")
            time.sleep(120)
    ''')
    p = _pytest(tmp_path, slow, f"--kueue-version={kueue_version}", start_new_session=True)
    art = tmp_path / "art"
    own = wait_for(lambda: list(art.glob("cases/*/harness-events.jsonl")), timeout=120,
                   what="the child's case to start")
    wait_for(lambda: "about_to_wait" in own[0].read_text(), timeout=60, what="the case to reach its wait")
    procs = json.loads(_child_state(p.pid).read_text())["procs"]
    assert {r["name"] for r in procs} >= {"etcd", "kube-apiserver", "proxy", "kueue"}
    os.kill(p.pid, signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode != 0
    wait_for(lambda: not any(is_alive(r["pid"], r.get("start")) for r in procs), timeout=30,
             what="every environment process to stop after Ctrl-C")
    assert (art / "summary.json").exists(), out
    case = json.loads((art / "summary.json").read_text())["cases"][0]
    assert case["verdict"] == "error" and "interrupted" in case["detail"], case
    assert "about_to_wait" in own[0].read_text()


def _child_state(owner: int) -> Path:
    """The process record of the environment that process `owner` started (harness/common/procs.py)."""
    from harness.env.local import runs_root

    for f in runs_root().glob("*/processes.json"):
        if json.loads(f.read_text()).get("owner", {}).get("pid") == owner:
            return f
    raise AssertionError(f"no environment recorded for pid {owner}")


def test_a_kueue_that_cannot_start_is_a_clear_error(tmp_path, kueue_version):
    from harness.common.errors import EnvironmentNotReady
    from harness.env.local import LocalEnvironment

    with pytest.raises(EnvironmentNotReady) as err:
        LocalEnvironment.start(kueue_version, artifacts=tmp_path / "env",
                               kueue_config_overrides={"notAKueueField": True})
    msg = str(err.value)
    assert "kueue exited during start-up" in msg
    assert "notAKueueField" in msg, msg  # Kueue's own strict-decoding error, quoted from its log
    assert (tmp_path / "env" / "kueue.log").exists()


def test_parallel_workers_get_separate_environments(tmp_path, kueue_version):
    """`pytest -n 2`: each worker starts its own environment, on its own ports, with its own evidence."""
    two = textwrap.dedent('''
        import json, os
        import pytest
        from harness import scenarios as seed
        pytestmark = pytest.mark.checkers("quota")  # an invariant that applies (no vacuous pass)
        def _note(case):
            seed.setup_queues(case)
            out = {"worker": os.environ.get("PYTEST_XDIST_WORKER"), "ports": case.env.ports,
                   "state": str(case.env.state), "artifacts": str(case.env.artifacts)}
            (case.dir / "env.json").write_text(json.dumps(out))
        def test_one(case):
            _note(case)
        def test_two(case):
            _note(case)
    ''')
    p = _pytest(tmp_path, two, f"--kueue-version={kueue_version}", "-n", "2")
    out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    notes = [json.loads(f.read_text()) for f in (tmp_path / "art").glob("gw*/cases/*/env.json")]
    assert len(notes) == 2, out
    assert notes[0]["worker"] != notes[1]["worker"]
    assert notes[0]["state"] != notes[1]["state"] and notes[0]["artifacts"] != notes[1]["artifacts"]
    assert not set(notes[0]["ports"].values()) & set(notes[1]["ports"].values())
    for n in notes:
        procs = json.loads((Path(n["state"]) / "processes.json").read_text())["procs"]
        assert not any(is_alive(r["pid"], r.get("start")) for r in procs)


@pytest.fixture
def small_tmpfs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_nearly_full_artifacts_disk_is_refused_before_anything_starts(small_tmpfs, kueue_version):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--kueue-version", kueue_version,
                        "--artifacts-dir", str(small_tmpfs / "run")], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "KiB free" in r.stderr and "--artifacts-dir" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
