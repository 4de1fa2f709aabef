"""The package layout holds the architecture: every import of harness/ (at module level or inside a function;
not those under `if TYPE_CHECKING:`, which never run) goes to its own package or a lower one of
harness.LAYERS, no imports form a circle between modules (TYPE_CHECKING imports included), and no module is over MAX_LINES lines (issue 21).
Read from the source with ast, nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "harness"
MAX_LINES = 600


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports(path: Path, known: set[str], typing: bool = False) -> set[str]:
    """The harness modules `path` imports (a `from pkg import name` of a submodule counts as that module);
    with `typing`, also those under `if TYPE_CHECKING:`."""
    mod = module_name(path)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                   for stmt in block.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing:
            continue  # `if TYPE_CHECKING:` imports exist for annotations only, never at run time
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("harness"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("harness"):
                continue
            subs = {f"{target}.{a.name}" for a in node.names} & known
            out.update(subs or {target})
    return {m for m in out if m in known and m != mod}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def package_of(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else None


def graph(typing: bool = False) -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(p, set(mods), typing) for m, p in mods.items()}


def test_top_level_holds_only_packages():
    loose = [p.name for p in PKG.iterdir() if p.is_file() and p.suffix == ".py" and p.name != "__init__.py"]
    assert not loose, f"harness/ holds modules {loose}: each belongs in the package of its part"
    pkgs = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert sorted(harness.LAYERS) == pkgs, "harness.LAYERS must name every package of harness/, once"


def test_every_package_says_what_it_owns_and_may_import():
    for name in harness.LAYERS:
        doc = ast.get_docstring(ast.parse((PKG / name / "__init__.py").read_text())) or ""
        assert len(doc) > 80, f"harness/{name}/__init__.py: a paragraph on what the package owns"
        if name not in ("cli",):
            assert "May import" in doc or "may import" in doc, f"harness/{name}/__init__.py: say what it may import"


def test_no_import_runs_up_the_layers():
    rank = {name: i for i, name in enumerate(harness.LAYERS)}
    up = []
    for mod, targets in graph().items():
        here = package_of(mod)
        for t in targets:
            there = package_of(t)
            if here and there and rank[there] > rank[here]:
                up.append(f"{mod} -> {t} ({here} is below {there})")
    assert not up, "imports that run up the layers of harness.LAYERS:\n  " + "\n  ".join(sorted(up))


def find_cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    """Not even through `if TYPE_CHECKING:` imports (issue 39): a type a lower module needs from a higher one
    is a Protocol of the lower module (harness/plan/actions.py `Rule`)."""
    g = graph(typing=True)
    # A package's __init__ re-exporting its own modules is not a circle of the code.
    g = {m: {t for t in ts if not (m.startswith(t + ".") and modules()[t].name == "__init__.py")} for m, ts in g.items()}
    cycles = find_cycles(g)
    assert not cycles, "import circles:\n  " + "\n  ".join(" <-> ".join(c) for c in cycles)


def test_find_cycles_sees_a_circle():
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_over_the_line_limit():
    big = [(len(p.read_text().splitlines()), str(p.relative_to(ROOT))) for p in PKG.rglob("*.py")]
    over = sorted((n, f) for n, f in big if n > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines (split them by concern): {over}"
