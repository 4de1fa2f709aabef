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
        path = Path(text.split("::")[0])
        if not (path if path.is_absolute() else ROOT / path).is_file():
            raise HarnessError(f"{text}: no such file {path}")
        return text
    found = []
    for f in sorted(cases_dir.rglob("test_*.py")):
        if re.search(rf"^def {re.escape(text)}\(", f.read_text(), re.MULTILINE):
            found.append(f"{f.relative_to(ROOT)}::{text}")
    if len(found) != 1:
        controls = sorted({m for f in cases_dir.rglob("test_*.py")
                           for m in re.findall(r"^def (test_\w+_control)\(", f.read_text(), re.MULTILINE)})
        what = "no case" if not found else f"{len(found)} cases"
        raise HarnessError(f"{what} named {text!r} under {cases_dir}; give a node id (file::name) or one of the "
                           f"control cases: {', '.join(controls)}")
    return found[0]


def case_slug(nodeid: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", nodeid.split("::")[-1].lower()).strip("-")
