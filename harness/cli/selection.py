"""Which cases a run would select: pytest's own collection of cases/ with the options of the run, nothing
built or started. Used by `run` and `matrix` (a -k typo is refused in seconds, before any build)."""

from __future__ import annotations

import sys

from harness.common.errors import HarnessError
from harness.common.paths import CASES_DIR


def _no_case_message(k: str | None) -> str:
    if k:
        return (f"no case matched -k {k}: -k takes a pytest expression over case names, e.g. -k stuck_preemption "
                "or -k 'not control'; `kueue-harness run -- --collect-only -q` lists the cases")
    return f"no case was collected from {CASES_DIR}: is the checkout complete?"


def select_cases(targets: list[str], options: list[str]) -> list[str]:
    """The node ids pytest would run for `targets` (cases/ and -k EXPR) with `options` (the Kueue build, the
    target, the arguments after `--`): pytest's own collection, in this process, nothing built or started
    (collection imports the case modules only). Under pytest-xdist the collection is forced to this process
    (`-n0`), so `-n N` after `--` is allowed. Raises HarnessError when pytest refuses the options or a case
    module does not import (pytest's own lines are printed first, to stderr)."""
    import contextlib
    import importlib.util
    import io

    import pytest

    class _Collected:
        ids: list[str] = []

        def pytest_collection_finish(self, session: pytest.Session) -> None:
            self.ids = [i.nodeid for i in session.items]

    got = _Collected()
    extra = ["-n0"] if importlib.util.find_spec("xdist") is not None else []
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = pytest.main([*targets, "-p", "no:cacheprovider", "--collect-only", "-qq", *options, *extra],
                           plugins=[got])
    if code in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return got.ids
    print(out.getvalue(), file=sys.stderr, end="")
    if code == pytest.ExitCode.USAGE_ERROR:
        raise HarnessError(f"pytest refused the options for {CASES_DIR} ({' '.join(options)}): its message is above")
    raise HarnessError(f"collecting the cases under {CASES_DIR} failed (pytest exit {int(code)}): its lines are above")
