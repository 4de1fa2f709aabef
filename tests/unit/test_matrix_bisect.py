"""Pure parts of `kueue-harness matrix` and `bisect`: build names, per-case aggregation and cells, the
Markdown table, step verdicts and finding a case by name."""

from __future__ import annotations

import argparse

import pytest

from harness.cli.bisect import case_target, verdict_of
from harness.cli.matrix import aggregate, case_name, cell, parse_build, render_md, run_folder
from harness.common.errors import HarnessError, UnservedVersion


def test_parse_build_names_tags_refs_and_sources(tmp_path) -> None:
    assert parse_build("0.17.4").version == "v0.17.4"
    assert parse_build("ref:main", repo="r.tar").ref == "main"
    assert parse_build(f"source:{tmp_path}").source == str(tmp_path.resolve())
    with pytest.raises(UnservedVersion):
        parse_build("v0.15.0")


def test_repetitions_share_a_row_and_cells_say_what_differs() -> None:
    summary = {"cases": [
        {"case": "cases/a.py::test_x[r0]", "verdict": "reproduced", "expected": "reproduced", "seconds": 1.0},
        {"case": "cases/a.py::test_x[r1]", "verdict": "error", "expected": "reproduced", "seconds": 2.0},
        {"case": "cases/a.py::test_y", "verdict": "passed", "expected": "passed", "seconds": 0.5},
    ]}
    assert case_name("cases/a.py::test_x[r12]") == "test_x"
    rows = aggregate(summary)
    assert rows["test_x"]["verdicts"] == {"reproduced": 1, "error": 1}
    assert cell(rows["test_x"]) == "reproduced 1/2, error 1/2 (expected reproduced)"
    assert cell(rows["test_y"]) == "passed 1/1" and cell(None) == "-"
    md = render_md({"cases": ["test_x", "test_y"], "builds": [
        {"asked": "v0.17.0", "kueue_version": "v0.17.0", "commit": None, "rows": rows},
        {"asked": "v0.99.0", "error": "not in the repository"}]})
    assert "| v0.17.0 | `v0.17.0` | `?` | reproduced 1/2, error 1/2 (expected reproduced) | passed 1/1 |" in md
    assert "| v0.99.0 | error: not in the repository |" in md


def test_a_step_needs_agreeing_decisive_verdicts() -> None:
    assert verdict_of(["reproduced", "reproduced"]) == "reproduced"
    assert verdict_of(["passed"]) == "passed"
    assert verdict_of(["reproduced", "passed"]) is None
    assert verdict_of(["error"]) is None and verdict_of([]) is None


def test_case_target_finds_the_case_file() -> None:
    assert case_target("test_stuck_preemption").endswith("kueue_11480/test_stuck_preemption.py::test_stuck_preemption")
    with pytest.raises(HarnessError, match="no case named"):
        case_target("test_nope")


def test_run_folder_checks_runs(tmp_path) -> None:
    assert run_folder(argparse.Namespace(runs=1, out=str(tmp_path)), "matrix") == tmp_path.resolve()
    assert run_folder(argparse.Namespace(runs=2, out=None), "bisect").name.startswith("bisect-")
    with pytest.raises(HarnessError, match="--runs"):
        run_folder(argparse.Namespace(runs=0, out=None), "matrix")


def test_matrix_and_bisect_never_write_into_a_folder_that_holds_files(tmp_path) -> None:
    import argparse

    from harness.cli.matrix import run_folder
    from harness.common.errors import HarnessError

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.json").write_text("{}")
    (tmp_path / "file").write_text("x")
    for kind in ("matrix", "bisect"):
        with pytest.raises(HarnessError, match="already holds files .*evidence is never overwritten"):
            run_folder(argparse.Namespace(runs=1, out=str(tmp_path / "full")), kind)
        with pytest.raises(HarnessError, match="is a file, not a folder"):
            run_folder(argparse.Namespace(runs=1, out=str(tmp_path / "file")), kind)
    (tmp_path / "empty").mkdir()
    assert run_folder(argparse.Namespace(runs=1, out=str(tmp_path / "empty")), "matrix") == (tmp_path / "empty").resolve()


def test_matrix_refuses_a_k_that_matches_no_case_before_any_build(capsys) -> None:
    from harness.cli.commands import main

    assert main(["matrix", "v0.17.0", "-k", "zzz_nomatch", "--out", "/tmp/kh-never-made"]) == 2
    assert "no case matched -k zzz_nomatch" in capsys.readouterr().err
