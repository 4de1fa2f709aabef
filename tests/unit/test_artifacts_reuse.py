"""Evidence is never written over (a tester's report: `pytest --artifacts-dir D` run twice overwrote the first
run's summary.json, env/kueue.log and env/proxy-events.jsonl). A folder that already holds a run is treated
as artifacts/ is: the new run goes to D/<run-id> and says so (harness/env/runs.py run_folder), for pytest,
`kueue-harness run`, `up` and matrix/bisect's per-build folders; an empty folder, or one with only other
files, is used as it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import commands as cli
from harness.cli import matrix
from harness.env.runs import RUN_MARKERS, earlier_run, run_folder

ROOT = Path(__file__).resolve().parents[2]


def _earlier(d: Path) -> dict[str, str]:
    """An earlier run's evidence in `d`; returns its files' contents."""
    (d / "env").mkdir(parents=True)
    files = {"summary.json": '{"cases": ["earlier"]}', "env/kueue.log": "earlier kueue line\n",
             "env/proxy-events.jsonl": '{"ts": 1, "event": "earlier"}\n'}
    for name, text in files.items():
        (d / name).write_text(text)
    return files


def _untouched(d: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        assert (d / name).read_text() == text, name


def test_run_folder_uses_a_fresh_folder_and_goes_beside_an_earlier_run(tmp_path: Path) -> None:
    assert run_folder(None, "20261201-101500-42") == (Path("artifacts") / "20261201-101500-42", None)
    assert run_folder(tmp_path / "new", "r1") == (tmp_path / "new", None)  # missing: made by the run
    (tmp_path / "explore").mkdir()
    (tmp_path / "explore" / "runs.json").write_text("{}")  # explore writes it before its pytest starts
    assert run_folder(tmp_path / "explore", "r1") == (tmp_path / "explore", None)
    for marker in RUN_MARKERS:
        d = tmp_path / f"held-{marker}"
        d.mkdir()
        (d / marker).mkdir() if marker in ("env", "cases") else (d / marker).write_text("x")
        assert earlier_run(d) == [marker]
        folder, note = run_folder(d, "r1")
        assert folder == d / "r1" and note == (f"{d} already holds a run ({marker}); evidence is never written "
                                               f"over, so this run's goes to {d / 'r1'}")
    d = tmp_path / "held-summary.json"
    (d / "r1").mkdir()
    assert run_folder(d, "r1")[0] == d / "r1-2"  # the same run id twice (one second, one pid): a new folder


def _child_pytest(tmp_path: Path, art: Path, *extra: str) -> subprocess.CompletedProcess:
    """A child pytest with the plugin, whose one test prints where the run's evidence goes (no environment)."""
    (tmp_path / "test_where.py").write_text(
        "def test_where(request):\n    print('ARTIFACTS', request.config._kh_artifacts)\n")
    return subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_where.py"), "-s", "-q",
                           "-p", "no:cacheprovider", f"--rootdir={tmp_path}", f"--artifacts-dir={art}", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_pytest_puts_a_run_beside_an_earlier_one_and_says_so(tmp_path: Path) -> None:
    art = tmp_path / "art"
    r = _child_pytest(tmp_path, art)
    assert r.returncode == 0 and f"ARTIFACTS {art}\n" in r.stdout and "already holds" not in r.stderr, r
    files = _earlier(art)
    r = _child_pytest(tmp_path, art)
    assert r.returncode == 0, r
    where = Path(r.stdout.split("ARTIFACTS ", 1)[1].split()[0])
    assert where.parent == art and where.name != art.name, r.stdout
    assert f"kueue-harness: {art} already holds a run (summary.json, env); evidence is never written over, so " \
           f"this run's goes to {where}" in r.stderr, r.stderr
    _untouched(art, files)


def test_run_hands_pytest_a_new_folder_beside_an_earlier_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture) -> None:
    from harness.build import binaries
    from harness.env import local

    art = tmp_path / "art"
    files = _earlier(art)
    given: list[Path] = []

    def fake_pytest_main(args: list[str]) -> int:
        folder = Path(next(a for a in args if a.startswith("--artifacts-dir=")).split("=", 1)[1])
        given.append(folder)
        (folder / "summary.json").write_text(json.dumps({"kueue_version": "v0.17.0", "kubernetes_version": "v1.35.4",
                                                         "target": "local", "kueue": None, "cases": []}))
        return 0

    monkeypatch.setattr(binaries, "ensure_all", lambda spec: None)
    monkeypatch.setattr(local, "check_free_space", lambda path: None)
    monkeypatch.setattr(cli, "select_cases", lambda targets, options: ["cases/x.py::test_x"])
    monkeypatch.setattr(pytest, "main", fake_pytest_main)
    assert cli.main(["run", "--artifacts-dir", str(art)]) == 0
    out, err = capsys.readouterr()
    (folder,) = given
    assert folder.parent == art.resolve() and "already holds a run (summary.json, env)" in err, err
    assert f"Evidence: {folder}" in out, out
    _untouched(art, files)


def test_up_puts_a_session_beside_an_earlier_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """session._start_locked picks the folder before its supervisor starts (stopped there: no environment)."""
    from harness.cli import session

    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    art = tmp_path / "art"
    files = _earlier(art)
    said: list[str] = []

    class Started(Exception):
        pass

    def no_popen(cmd, **kw):
        raise Started(cmd[cmd.index("--artifacts") + 1])

    monkeypatch.setattr(session.subprocess, "Popen", no_popen)
    with pytest.raises(Started) as e:
        session.start("s1", "v0.17.0", None, False, str(art), say=said.append)
    folder = Path(str(e.value))
    assert folder.parent == art.resolve() and (folder / "session.log").is_file(), folder
    assert any(f"{art.resolve()} already holds a run" in line for line in said), said
    _untouched(art, files)


def test_matrix_never_reads_an_earlier_runs_summary_as_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    art = tmp_path / "v0.17.0"
    files = _earlier(art)

    def child(cmd, **kw):
        folder = Path(next(a for a in cmd if a.startswith("--artifacts-dir=")).split("=", 1)[1])
        (folder / "summary.json").write_text('{"cases": [{"case": "this run"}]}')
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(matrix.subprocess, "run", child)
    summary = matrix.run_cases(type("Spec", (), {"cli_args": lambda self: []})(), ["cases"], art)
    assert summary["cases"] == [{"case": "this run"}] and Path(summary["artifacts"]).parent == art, summary
    _untouched(art, files)
