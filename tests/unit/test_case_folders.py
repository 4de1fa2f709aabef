"""Every bug folder of cases/ keeps to the corpus's bar (issue 23): each plan and each case file ≤ 30 lines,
and each test of a bug folder declares at least one invariant checker that builds — never an empty
invariant. The seed folder kueue_11480 predates the bar (its case file drives two scenarios by hand)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from harness.checkers import REGISTRY, Selection

CASES = Path(__file__).resolve().parents[2] / "cases"
SEED = {"kueue_11480"}
FOLDERS = sorted(p.parent for p in CASES.glob("*/bug.yaml"))


@pytest.mark.parametrize("folder", [f for f in FOLDERS if f.name not in SEED], ids=lambda f: f.name)
def test_plans_and_cases_are_at_most_30_lines(folder):
    for f in [*folder.glob("plans/*.yaml"), *folder.glob("test_*.py")]:
        n = len(f.read_text().splitlines())
        assert n <= 30, f"{f.relative_to(CASES.parent)} has {n} lines (the bar is 30)"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name)
def test_every_case_declares_an_invariant(folder):
    for f in folder.glob("test_*.py"):
        mod = importlib.import_module(f"cases.{folder.name}.{f.stem}")
        tests = [getattr(mod, n) for n in dir(mod) if n.startswith("test_") and callable(getattr(mod, n))]
        assert tests, f"{f} has no test"
        for t in tests:
            module_marks = getattr(mod, "pytestmark", [])
            module_marks = module_marks if isinstance(module_marks, list) else [module_marks]
            marks = [getattr(m, "mark", m) for m in [*getattr(t, "pytestmark", []), *module_marks]]
            marks = [m for m in marks if getattr(m, "name", None) == "checkers"]
            assert marks, f"{f}::{t.__name__} declares no @pytest.mark.checkers"
            declared = {name: {} for m in marks for name in m.args} | {k: v for m in marks for k, v in m.kwargs.items()}
            built = Selection(declared).build()
            assert any(REGISTRY[c.name].kind == "invariant" for c in built), \
                f"{f}::{t.__name__} declares no invariant (only {sorted(declared)})"
