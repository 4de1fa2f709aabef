"""Checkers decide verdicts: each reads a case's history and final objects and returns findings
(harness/checkers/base.py); `compose` runs a case's declared set, assumptions first. One file per checker;
importing this package registers them all.
"""

from harness.checkers import assumptions, liveness, log_flood, quota, reservation  # noqa: F401 - registration
from harness.checkers.base import (  # noqa: F401 - the public interface
    REGISTRY, Finding, Selection, Verdict, compose, register, run_safely,
)
from harness.checkers.assumptions import DEFAULT_ASSUMPTIONS, selection_with_defaults  # noqa: F401
