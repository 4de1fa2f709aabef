"""The checker reference of docs/writing-a-case.md, generated from the registry so it cannot drift: every
checker `@register` put in REGISTRY (importing harness.checkers imports every module of the package, and with
it every checker), with its `name`, its `kind`, the parameters of its constructor with their defaults (what a
case writes in `@pytest.mark.checkers(name={param: value})`) and the first paragraph of its docstring.

    .venv/bin/python -m harness.checkers.reference   # prints the block docs/writing-a-case.md holds

tests/unit/test_checker_doc.py fails when the doc's block differs from what this prints. A package with a
`__main__.py` rather than a module: harness.checkers imports every module of its folder, and `python -m` on a
module already imported warns (runpy's RuntimeWarning); a package's `__main__` is imported by nothing else.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

#: The order of the kinds in the reference: what a case declares first.
KIND_ORDER = ("invariant", "assumption", "info")
KIND_WORDS = {
    "invariant": "Invariants (the property that states a bug: every case declares at least one)",
    "assumption": "Assumptions (what must have happened for the verdict to mean anything: violated, the verdict is "
                  "`error`, never `reproduced`)",
    "info": "Information (rows in report.md that never decide the verdict)",
}


def _first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line ("" for none)."""
    if not doc or not doc.strip():
        return ""
    para = inspect.cleandoc(doc).split("\n\n")[0]
    return " ".join(para.split())


def _description(cls: type, registry: dict[str, type]) -> str:
    """The first paragraph of the class's own docstring; for a class without one, its module's when that module
    registers no other checker (its docstring is then about this checker alone); else a note that it has none."""
    own = _first_paragraph(cls.__dict__.get("__doc__"))
    if own:
        return own
    module = sys.modules.get(cls.__module__)
    alone = [c for c in registry.values() if c.__module__ == cls.__module__] == [cls]
    if alone and module is not None and _first_paragraph(module.__doc__):
        return f"{_first_paragraph(module.__doc__)} (from its module's docstring, {cls.__module__})"
    return f"(no docstring: see {cls.__module__.replace('.', '/')}.py)"


def parameters(cls: type) -> list[inspect.Parameter]:
    """The constructor parameters of checker class `cls` (none for a checker without an `__init__`)."""
    if all(klass.__dict__.get("__init__") is None for klass in cls.__mro__ if klass is not object):
        return []
    return list(inspect.signature(cls).parameters.values())


def _param_text(p: inspect.Parameter) -> str:
    star = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
    ann = "" if p.annotation is p.empty else f": {p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)}"
    if p.default is p.empty:
        return f"`{star}{p.name}{ann}`" + ("" if star else " (required)")
    return f"`{p.name}{ann} = {p.default!r}`"


def checker_reference(registry: dict[str, Any] | None = None) -> str:
    """The markdown block: per kind an index line, then per checker a heading `name` (kind), its parameters
    with defaults and the first paragraph of its docstring. Deterministic (sorted by kind, then name)."""
    import harness.checkers  # noqa: F401 - registers every checker
    from harness.checkers.assumptions import DEFAULT_ASSUMPTIONS
    from harness.checkers.base import REGISTRY

    registry = REGISTRY if registry is None else registry
    order = sorted(registry, key=lambda n: (KIND_ORDER.index(registry[n].kind) if registry[n].kind in KIND_ORDER
                                            else len(KIND_ORDER), n))
    out = []
    for kind in [*KIND_ORDER, *sorted({c.kind for c in registry.values()} - set(KIND_ORDER))]:
        names = [n for n in order if registry[n].kind == kind]
        if names:
            out.append(f"**{KIND_WORDS.get(kind, kind)}:** " + ", ".join(f"`{n}`" for n in names) + ".")
            out.append("")
    for name in order:
        cls = registry[name]
        params = parameters(cls)
        default = " — run for every case" if name in DEFAULT_ASSUMPTIONS else ""
        out.append(f"#### `{name}` ({cls.kind}{default})")
        out.append("")
        out.append("Parameters: " + (", ".join(_param_text(p) for p in params) if params else "none") + ".")
        out.append("")
        out.append(_description(cls, registry))
        out.append("")
    return "\n".join(out)

