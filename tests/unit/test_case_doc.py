"""docs/writing-a-case.md "The `case` object" is written by hand; these tests hold it to the code: every public
attribute, method and property of CaseContext (harness/scenarios/case.py), every set-up helper of
harness.scenarios and the bounds the doc lists are there, each method with its signature as the code has it."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from harness.checkers import bounds
from harness.scenarios import setups
from harness.scenarios.case import CaseContext

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-a-case.md"


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## 6. The `case` object")
    return text[start:text.index("\n## ", start + 1)]


def call(name: str, fn) -> str:
    """`name(params)` as the doc writes a call: parameters with their defaults, no annotations, no `self`."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=inspect.Parameter.empty) for n, p in sig.parameters.items() if n != "self"]
    return name + str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def public_methods() -> dict[str, object]:
    return {n: v for n, v in vars(CaseContext).items() if not n.startswith("_") and callable(v)}


def public_properties() -> list[str]:
    return [n for n, v in vars(CaseContext).items() if not n.startswith("_") and isinstance(v, property)]


def test_every_public_method_of_the_case_object_has_a_row_with_its_signature() -> None:
    section = _section()
    assert {"load_plan", "wait_plan", "observe", "monitor"} <= set(public_methods())
    for name, fn in public_methods().items():
        shown = call(f"case.{name}", fn)
        assert f"| `{shown}` |" in section, (
            f"CaseContext.{name} is not in docs/writing-a-case.md \"The `case` object\" as `{shown}`: add or fix its row "
            "in the Methods table (what it does, units, what it raises)")


def test_every_public_property_and_attribute_of_the_case_object_is_described() -> None:
    section = _section()
    for name in public_properties():
        assert f"| `case.{name}` |" in section, f"property CaseContext.{name} has no row in docs/writing-a-case.md"
    for f in dataclasses.fields(CaseContext):
        if not f.name.startswith("_"):
            assert f"| `case.{f.name}` |" in section, (
                f"attribute CaseContext.{f.name} has no row in docs/writing-a-case.md \"The `case` object\" Attributes")


def test_every_set_up_helper_has_a_row_with_its_signature() -> None:
    section = _section()
    helpers = {n: fn for n, fn in vars(setups).items() if inspect.isfunction(fn) and fn.__module__ == setups.__name__
               and not n.startswith("_") and fn.__name__ == n}  # not the alias setup_queues
    assert {"preemption_queues", "cohort_queues", "submit_job", "wait_workload"} <= set(helpers)
    for name, fn in helpers.items():
        shown = call(name, fn)
        assert f"| `{shown}` |" in section, f"harness.scenarios.{name} is not in docs/writing-a-case.md as `{shown}`"


def test_the_bounds_the_doc_lists_have_the_values_of_the_code() -> None:
    rows = re.findall(r"^\| `([A-Z_]+)` \| ([^|]+) \|", _section(), re.MULTILINE)
    assert {"STEP", "LIVENESS_BOUND"} <= {n for n, _ in rows}
    for name, value in rows:
        assert hasattr(bounds, name), f"docs/writing-a-case.md lists bounds.{name}, which does not exist"
        assert value.strip() == repr(getattr(bounds, name)), f"bounds.{name} is {getattr(bounds, name)!r}, the doc says {value}"


def test_the_signature_check_bites() -> None:
    assert call("case.observe", CaseContext.observe) == "case.observe(timeout=None, interval=0.2)"
    assert call("case.restart_kueue", CaseContext.restart_kueue) == "case.restart_kueue(kill=False, **fields)"
