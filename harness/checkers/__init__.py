"""Checkers decide verdicts: each reads a case's history and final objects and returns findings
(harness/checkers/base.py); `compose` runs a case's declared set, assumptions first. One file per checker:
importing this package imports every module in it, and each registers its checkers (@register), so a new
checker is a new file and nothing else. The models they judge with live in model/ (Kueue's quota tree,
object lifecycles); monitor.py is the invariant monitor, the one part that watches during a run.

May import: harness.common, harness.kueue, harness.objects, harness.history, harness.plan.
"""

import importlib
import pkgutil

from harness.checkers.base import (  # noqa: F401 - the public interface
    REGISTRY,
    Finding,
    Selection,
    Verdict,
    compose,
    register,
    run_safely,
)

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")

from harness.checkers.assumptions import DEFAULT_ASSUMPTIONS, selection_with_defaults  # noqa: E402,F401
