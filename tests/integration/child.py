"""Run a pytest file of cases in a child process (its own session and environment) and read its verdicts:
the shape the integration tests of case-level features share (plan steps, Pods, Kueue configuration,
lifecycle checkers)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class ChildRun:
    """`out`: the child's stdout+stderr; `summary`: its summary.json; `verdicts`: case name → summary entry;
    `art`: its artifacts folder; `returncode`: pytest's exit code."""

    out: str
    summary: dict[str, Any]
    verdicts: dict[str, dict[str, Any]]
    art: Path
    returncode: int


def run_child_cases(tmp_path: Path, source: str, kueue_version: str, timeout: float = 900) -> ChildRun:
    """Write `source` as tmp_path/test_child.py and run it with pytest on Kueue `kueue_version`, artifacts in
    tmp_path/art. Raises subprocess.TimeoutExpired after `timeout` seconds, FileNotFoundError when the child
    wrote no summary.json (its output is then the clue)."""
    f = tmp_path / "test_child.py"
    f.write_text(source)
    art = tmp_path / "art"
    p = subprocess.run([sys.executable, "-m", "pytest", str(f), "-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}",
                        f"--artifacts-dir={art}", f"--kueue-version={kueue_version}"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    summary = json.loads((art / "summary.json").read_text())
    return ChildRun(p.stdout, summary, {c["case"].split("::")[-1]: c for c in summary["cases"]}, art, p.returncode)
