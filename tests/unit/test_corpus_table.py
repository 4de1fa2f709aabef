"""docs/bugs.md's bug table is what bench/corpus_table.py generates from cases/*/bug.yaml and bench/results
(regenerate it with `.venv/bin/python bench/corpus_table.py --write`); and the generator reads results files
as bench/corpus.py writes them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import corpus_table  # noqa: E402


def test_the_bug_page_table_matches_the_generator():
    assert corpus_table.PAGE == ROOT / "docs" / "bugs.md"
    section = corpus_table.page_section(corpus_table.PAGE.read_text())
    assert section is not None, "docs/bugs.md lost its corpus-table markers"
    assert section == corpus_table.table(), \
        "docs/bugs.md's bug table is stale: run .venv/bin/python bench/corpus_table.py --write"


def test_the_table_counts_verdicts_per_build(tmp_path):
    cases = tmp_path / "cases" / "kueue_1"
    (cases / "plans").mkdir(parents=True)
    (cases / "bug.yaml").write_text("bugs:\n  - {key: kubernetes-sigs/kueue#1, issue: kubernetes-sigs/kueue#1, "
                                    "summary: s, affected: ['>=0.16.0,<0.16.3'], fixed_in: [v0.16.3]}\n")
    (cases / "plans" / "p.yaml").write_text("a\nb\n")
    (cases / "test_x.py").write_text("x\n" * 7)
    res = tmp_path / "results"
    res.mkdir()
    runs = [{"test": "test_x", "verdict": "reproduced"}] * 4 + [{"test": "test_x", "verdict": "error"}] + \
           [{"test": "test_x_control", "verdict": "passed"}] * 5
    for v, rs in (("v0.16.1", runs), ("v0.16.6", [{"test": "test_x", "verdict": "passed"}] * 5)):
        (res / f"2026-12-02-corpus-kueue_1-{v}.json").write_text(json.dumps(
            {"bug_folder": "cases/kueue_1", "kueue_requested": v, "runs": rs}))
    (res / "2026-12-02-corpus-kueue_10-v0.16.1.json").write_text(json.dumps(
        {"bug_folder": "cases/kueue_10", "kueue_requested": "v0.16.1", "runs": runs}))
    row = corpus_table.table(tmp_path / "cases", res).splitlines()[2]
    assert "| v0.16.1: case reproduced 4/5, error 1/5; control passed 5/5 |" in row
    assert "| v0.16.6: case passed 5/5 |" in row and row.endswith("| 2 / 7 |")
