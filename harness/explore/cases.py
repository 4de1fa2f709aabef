"""Which control cases an exploration runs: a node id or a bare case name resolved under cases/, and the
slug of a case's reference file."""

from __future__ import annotations

import re
from pathlib import Path

from harness.common import paths
from harness.common.errors import HarnessError

ROOT = paths.ROOT
CASES_DIR = paths.CASES_DIR


def resolve_case(text: str, cases_dir: Path = CASES_DIR) -> str:
    """A node id ("cases/kueue_11480/test_stuck_preemption.py::test_stuck_preemption_control") for a node id
    or a bare case name. Raises HarnessError naming the control cases when there is no such case."""
    if "::" in text:
        file, _, name = text.partition("::")
        path = Path(file)
        full = path if path.is_absolute() else ROOT / path
        if not full.is_file():
            raise HarnessError(f"{text}: no such file {path}")
        func = name.split("[")[0]
        if not re.fullmatch(r"test_\w+", func) or not re.search(rf"^def {re.escape(func)}\(", full.read_text(),
                                                                 re.MULTILINE):
            here = sorted(set(re.findall(r"^def (test_\w+_control)\(", full.read_text(), re.MULTILINE)))
            raise HarnessError(f"{text}: no case {func or '(empty)'!r} in {path}; its control cases: "
                               f"{', '.join(here) or 'none'}")
        return _control(text, func)
    found = []
    for f in sorted(cases_dir.rglob("test_*.py")):
        if re.search(rf"^def {re.escape(text)}\(", f.read_text(), re.MULTILINE):
            found.append(f"{f.relative_to(ROOT)}::{text}")
    if len(found) != 1:
        controls = control_cases(cases_dir)
        what = "no case" if not found else f"{len(found)} cases"
        raise HarnessError(f"{what} named {text!r} under {cases_dir}; give a node id (file::name) or one of the "
                           f"control cases: {', '.join(controls)}")
    return _control(found[0], text)


def control_cases(cases_dir: Path = CASES_DIR) -> list[str]:
    """The names of every control case under `cases_dir` (test functions named test_*_control), sorted."""
    return sorted({m for f in cases_dir.rglob("test_*.py")
                   for m in re.findall(r"^def (test_\w+_control)\(", f.read_text(), re.MULTILINE)})


def _control(nodeid: str, func: str) -> str:
    """`nodeid` when `func` names a control case; else HarnessError: explore needs the scenario without its
    fault (its reference run must pass), and a bug case loads its own fault plan."""
    if not func.endswith("_control"):
        raise HarnessError(f"{nodeid}: not a control case. explore starts from a control case (a name ending in "
                           f"_control: the same scenario without its fault), e.g. {func}_control")
    return nodeid


def case_slug(nodeid: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", nodeid.split("::")[-1].lower()).strip("-")
