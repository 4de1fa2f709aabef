"""Issue 24 item 4: each case's verdict is on disk (summary.json) the moment it is decided; SIGTERM and SIGHUP
stop `run` as Ctrl-C does, and no space left on the device stops it after the running case, naming the path:
the verdicts decided before are kept, the table is rebuilt from them, junit.xml is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.childproc import default_signals
from tests.unit.run_fake_cases import write_cases

ROOT = Path(__file__).resolve().parents[2]


def run_fake(tmp: Path, how: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
    cases = write_cases(tmp / "fake_cases")
    art = tmp / "art"
    seen = tmp / "seen.json"
    env = {**os.environ, "FAKE_ART": str(art), "FAKE_SEEN": str(seen), "FAKE_HOW": how,
           "KUEUE_HARNESS_CACHE": str(tmp / "cache")}
    # The run as a user starts it from a terminal (tests/childproc.py).
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "unit" / "run_fake_cases.py"), str(cases), "run",
                        "--artifacts-dir", str(art)], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
                       preexec_fn=default_signals)
    return r, art, seen


@pytest.mark.parametrize(("how", "code"), [("SIGTERM", 143), ("SIGHUP", 129), ("SIGINT", 130)])
def test_a_signal_keeps_the_verdicts_decided_before(tmp_path: Path, how: str, code: int) -> None:
    r, art, seen = run_fake(tmp_path, how)
    out = r.stdout + r.stderr
    assert r.returncode == code, out
    # On disk the moment it was decided (read by the next case, before the signal).
    early = json.loads(seen.read_text())
    assert early["complete"] is False and [c["verdict"] for c in early["cases"]] == ["passed"], early
    summary = json.loads((art / "summary.json").read_text())
    got = {c["case"].split("::")[-1]: (c["verdict"], c["detail"]) for c in summary["cases"]}
    assert got["test_a_decided"][0] == "passed"
    assert got["test_b_then"] == ("error", f"did not finish: interrupted by {how}"
                                  if how != "SIGINT" else "did not finish: interrupted (Ctrl-C)"), got
    assert "test_c_never_runs" not in got and not seen.with_suffix(".c").exists()
    assert summary["complete"] is True and summary["interrupted"] == how
    assert f"interrupted by {how}: 1 verdict(s) decided before it are kept in {art / 'summary.json'}" in out, out
    assert "test_a_decided" in r.stdout and "passed" in r.stdout, "the table is rebuilt from summary.json"
    assert "Kueue None" not in r.stdout and "Kueue v0.17.0 (asked for: it never reported a version" in r.stdout
    assert "test_a_decided" in (art / "junit.xml").read_text()
    assert not list(art.glob(".summary.json.tmp-*")), "no temporary file left"


def test_no_space_stops_the_run_after_the_case_naming_the_path(tmp_path: Path) -> None:
    r, art, seen = run_fake(tmp_path, "enospc")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    summary = json.loads((art / "summary.json").read_text())
    got = {c["case"].split("::")[-1]: c["verdict"] for c in summary["cases"]}
    assert got == {"test_a_decided": "passed", "test_b_then": "error"}, got
    assert not seen.with_suffix(".c").exists(), "the run must stop after the case that met the full disk"
    assert f"no space left on the device writing {art / 'env' / 'kueue.log'}" in out, out
    assert f"the verdicts decided before are in {art / 'summary.json'}" in out, out


def test_summary_json_that_cannot_be_written_keeps_the_last_good_one(tmp_path: Path, monkeypatch) -> None:
    """The rename is atomic: a failed write (here: no space) leaves the earlier summary.json whole and
    stops the run naming summary.json's path."""
    import errno
    import types

    from harness.scenarios import verdicts
    from harness.scenarios.markers import _VERDICTS_KEY

    art = tmp_path / "art"
    art.mkdir()
    (art / "summary.json").write_text('{"cases": ["earlier"]}')
    config = types.SimpleNamespace(stash=pytest.Stash(), _kh_artifacts=art,
                                   option=types.SimpleNamespace(kueue_version="v0.17.0"),
                                   getoption=lambda name, default=None: "local")
    config.stash[_VERDICTS_KEY] = {"x": {"case": "x", "verdict": "passed"}}
    session = types.SimpleNamespace(config=config, shouldstop=False)
    real = Path.write_text

    def full(self, *a, **k):
        if self.name.startswith(".summary.json.tmp-"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.warns(UserWarning, match="could not write .*summary.json"):
        assert verdicts.write_summary(session) is None
    assert json.loads((art / "summary.json").read_text()) == {"cases": ["earlier"]}
    assert f"no space left on the device writing {art / 'summary.json'}" in session.shouldstop
