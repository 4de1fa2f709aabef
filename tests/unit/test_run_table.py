"""`kueue-harness run`'s verdict table names the bugs of the cases that ran, not every bug under cases/
(summary.json's `cases[].kueue_bug`, written by the plugin from the case's kueue_bug marker), and its
`--help` says what it runs: every case under cases/, or those -k selects."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import commands as cli
from harness.kueue import bugs
from harness.scenarios import markers as pytest_plugin


def _summary(*cases: dict) -> dict:
    return {"kueue_version": "v0.17.0", "kubernetes_version": "v1.35.4", "target": "local", "kueue": None,
            "cases": [{"case": f"cases/x/test_x.py::{c['name']}", "verdict": "passed", "expected": "passed",
                       "seconds": 1.0, **{k: v for k, v in c.items() if k != "name"}} for c in cases]}


def test_title_names_only_the_bugs_of_the_cases_that_ran() -> None:
    assert len(bugs.KNOWN_BUGS) > 1  # else the test could not tell "all" from "those that ran"
    one = _summary({"name": "test_sticky", "kueue_bug": "kubernetes-sigs/kueue#14863"},
                   {"name": "test_sticky_control"})
    assert cli.verdict_table_title(one) == "Scenarios (kubernetes-sigs/kueue#14863)"
    two = _summary({"name": "b", "kueue_bug": "kubernetes-sigs/kueue#14863"},
                   {"name": "a", "kueue_bug": "kubernetes-sigs/kueue#11480"},
                   {"name": "c", "kueue_bug": "kubernetes-sigs/kueue#11480"})
    assert cli.verdict_table_title(two) == "Scenarios (kubernetes-sigs/kueue#11480, kubernetes-sigs/kueue#14863)"
    assert cli.verdict_table_title(_summary({"name": "test_sticky_control"})) == "Cases"


def test_the_plugin_records_the_case_bug_key() -> None:
    marked = SimpleNamespace(get_closest_marker=lambda name: pytest.mark.kueue_bug("kubernetes-sigs/kueue#14863").mark
                             if name == "kueue_bug" else None)
    plain = SimpleNamespace(get_closest_marker=lambda name: None)
    assert pytest_plugin._bug_key(marked) == "kubernetes-sigs/kueue#14863"
    assert pytest_plugin._bug_key(plain) is None


def test_run_prints_the_bugs_of_the_cases_that_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    """`run -k sticky` end to end, with pytest's run replaced by one that writes the summary.json the plugin
    would (no environment starts: the table is what is checked)."""
    from harness.build import binaries
    from harness.env import local

    art = tmp_path / "art"
    seen: list[list[str]] = []

    def fake_pytest_main(args: list[str]) -> int:
        seen.append(args)
        (art / "summary.json").write_text(json.dumps(_summary(
            {"name": "test_sticky_preemptor", "kueue_bug": "kubernetes-sigs/kueue#14863"},
            {"name": "test_sticky_preemptor_control"})))
        return 0

    monkeypatch.setattr(binaries, "ensure_all", lambda spec: None)
    monkeypatch.setattr(local, "check_free_space", lambda path: None)
    monkeypatch.setattr(cli, "select_cases", lambda targets, options: ["cases/x.py::test_x"])
    monkeypatch.setattr(pytest, "main", fake_pytest_main)
    assert cli.main(["run", "-k", "sticky", "--artifacts-dir", str(art)]) == 0
    out = capsys.readouterr().out
    assert "-k" in seen[0] and "sticky" in seen[0]
    assert "Scenarios (kubernetes-sigs/kueue#14863) on Kueue v0.17.0" in out, out
    assert "#11480" not in out, out


def test_run_help_says_what_it_runs(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "run every case under cases/" in out and "-k selects some" in out, out
    assert "seed" not in out, out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = " ".join(capsys.readouterr().out.split())
    assert "seed" not in top, top
