"""`--keep-env` (issue 16, item 4): pytest alone cannot keep a local environment (its processes die with the
pytest process: PR_SET_PDEATHSIG), so it refuses with the remedy; `kueue-harness run --keep-env` runs the
cases inside a session instead (tests/integration/test_run_keep_env.py runs that on real components) and
refuses a session name in use before building anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import commands as cli
from tests.unit.live_proxy import LiveProxy

ROOT = Path(__file__).resolve().parents[2]


def _pytest(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "cases", "-p", "no:cacheprovider", "--collect-only", "-q",
                           *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_pytest_keep_env_on_the_local_target_is_a_usage_error_with_the_remedy() -> None:
    r = _pytest("--keep-env")
    assert r.returncode == 4, (r.stdout, r.stderr)  # pytest's usage error
    assert "--keep-env cannot keep a local environment from pytest" in r.stderr, r.stderr
    assert "kueue-harness run --keep-env" in r.stderr


def test_pytest_keep_env_on_kind_keeps_the_cluster_and_is_accepted() -> None:
    r = _pytest("--keep-env", "--target", "kind")
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_run_name_needs_keep_env(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["run", "--name", "x"]) == 2
    assert "--name names the session that `run --keep-env` keeps" in capsys.readouterr().err


def test_run_keep_env_refuses_a_running_session_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(cache))
    monkeypatch.delenv("KUEUE_HARNESS_SESSION", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no Go: a build would fail differently
    live = LiveProxy(cache, tmp_path, name="kept")
    try:
        code = cli.main(["run", "--keep-env", "--name", "kept", "--artifacts-dir", str(tmp_path / "run-art")])
    finally:
        live.close()
    err = capsys.readouterr().err
    assert code == 2, err
    assert "session kept is already running" in err and "kueue-harness down --name kept" in err, err
    assert not (tmp_path / "run-art").exists()
