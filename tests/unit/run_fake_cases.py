"""`kueue-harness run` on synthetic cases (issue 24 item 4): `python tests/unit/run_fake_cases.py CASES_DIR
ARGS...` runs the real CLI and the real pytest plugin, with CASES_DIR in place of cases/ and no build (nothing
here needs a component). The cases in CASES_DIR declare their own `case` fixture, so the plugin records their
verdicts as it records a real case's (passed / error) without an environment."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.build import binaries
from harness.cli import commands

FAKE_CASES = '''
import errno, json, os, signal
from pathlib import Path

import pytest

ART = Path(os.environ["FAKE_ART"])


@pytest.fixture
def case():
    return None


def test_a_decided(case):
    pass


def test_b_then(case):
    # What is on disk the moment test_a was decided, before anything else happens.
    Path(os.environ["FAKE_SEEN"]).write_text((ART / "summary.json").read_text())
    how = os.environ["FAKE_HOW"]
    if how == "enospc":
        raise OSError(errno.ENOSPC, "No space left on device", str(ART / "env" / "kueue.log"))
    os.kill(os.getpid(), getattr(signal, how))
    raise AssertionError("the signal did not stop the case")


def test_c_never_runs(case):
    Path(os.environ["FAKE_SEEN"]).with_suffix(".c").write_text("ran")
'''


def write_cases(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_fake_cases.py").write_text(FAKE_CASES)
    return folder


if __name__ == "__main__":
    commands.CASES_DIR = Path(sys.argv[1])
    binaries.ensure_all = lambda spec, progress=None: None  # nothing to build: the cases need no component
    sys.exit(commands.main(sys.argv[2:]))
