"""Issue 24 item 7: fresh bundles got "history.jsonl departs from docs/history.md" notes from the harness's own
`report`, because HISTORY_FIELDS (what `history_problems` holds a history to) required fields that the writers
give only sometimes and docs/history.md calls optional. Three sides must agree: every history event the
harness writes (`.record("event", …)` calls) gives every field HISTORY_FIELDS requires; every required field
is in docs/history.md's row for that event and not marked optional there; and every event has a row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.history.schema import HISTORY_FIELDS

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "history.md").read_text()
#: Fields the doc gives once for a whole section ("Every such event has `resource_version`, …").
COMMON = set(re.findall(r"Every such event has\s+`(\w+)`", DOC))

#: Calls that pass fields through `**`: what that mapping always holds (read at the call site; update both).
SPREAD = {
    # KueueEnv.configure_kueue's answer (harness/env/kueue_process.py): restarted, seconds (+ if_known).
    "kueue_configured": {"restarted", "seconds"},
    # {"what", "why", "after"} built just above the call (harness/explore/plugin.py).
    "step_skipped": {"what", "why", "after"},
    # Only {"finalizers_removed": …} when some were removed (optional).
    "case_objects_deleted": set(),
    # Only {"requests": …} when the Job asks for more than cpu (optional; harness/scenarios/setups.py).
    "job_created": set(),
    # Only {"steps_moved", "file"} when a perturbation's steps_after moved steps of it (optional;
    # harness/scenarios/case.py load_plan).
    "plan_loaded": set(),
    # A plan's process fault adds its `rule` (optional; harness/nemesis/runner.py).
    "kueue_restart": set(),
    # A session bundle's verdict adds `kueue` when Kueue's state is known (optional; harness/cli/bundle.py).
    "verdict": set(),
    # Only {"kueue_race": True} on a race build (optional; harness/scenarios/plugin.py).
    "case_started": set(),
}


def _record_calls():
    for path in [*(ROOT / "harness").rglob("*.py"), *(ROOT / "cases").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "record"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                given = {k.arg for k in node.keywords if k.arg}
                source = next((k.value.value for k in node.keywords if k.arg == "source"
                               and isinstance(k.value, ast.Constant)), "harness")
                spread = any(k.arg is None for k in node.keywords)
                yield f"{path.relative_to(ROOT)}:{node.lineno}", (source, node.args[0].value), given, spread


def test_every_written_event_gives_the_fields_the_schema_requires() -> None:
    calls = list(_record_calls())
    assert len(calls) > 30, "the scan found the writers"
    for where, key, given, spread in calls:
        assert key in HISTORY_FIELDS, f"{where}: {key} is not in HISTORY_FIELDS (nor, then, docs/history.md)"
        if spread:
            assert key[1] in SPREAD, f"{where}: {key} passes fields through ** : add what it holds to SPREAD"
            given = given | SPREAD[key[1]]
        missing = [f for f in HISTORY_FIELDS[key] if f not in given]
        assert not missing, f"{where}: {key} is written without {missing}, which HISTORY_FIELDS requires"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]  # `\|` inside a cell is text


def _names(cell: str) -> set[str]:
    """The events a first cell names: "`held` / `released`"; "`x_started` / `_cleared`" (x_cleared)."""
    out: list[str] = []
    for token in re.findall(r"`([^`]+)`", cell):
        out.append(out[-1].rsplit("_", 1)[0] + token if token.startswith("_") and out else token)
    return set(out)


def _rows(event: str) -> list[list[str]]:
    """The doc's table rows whose first cell names `event`."""
    return [_cells(line) for line in DOC.splitlines()
            if line.startswith("| `") and event in _names(_cells(line)[0])]


def test_the_doc_has_a_row_for_every_event_and_marks_no_required_field_optional() -> None:
    for (source, event), fields in HISTORY_FIELDS.items():
        rows = _rows(event)
        assert rows, f"docs/history.md has no row for {source}/{event}"
        for f in fields:
            if source == "monitor" and f in COMMON:
                continue  # the lifecycle section says it once for all its events
            ok = [r for r in rows if f"`{f}`" in r[1] and not re.search(rf"optional[^`]*`{f}`", r[1])]
            as_other = [r for r in rows if r[1].startswith("as `")]  # "as `watch_event` + `rule`"
            assert ok or as_other, f"docs/history.md's {event} row does not give `{f}` as always there"


def test_history_problems_finds_no_departure_in_a_history_of_what_the_writers_give() -> None:
    """The two that departed: a kueue_configured without if_known, a case_objects_deleted without
    finalizers_removed (both optional per the doc)."""
    from harness.history.schema import history_problems

    history = [
        {"ts": 1.0, "source": "harness", "event": "kueue_configured", "why": "case", "declared": {}, "summary": "default",
         "restarted": False, "seconds": 0.0, "feature_gates": {}},
        {"ts": 2.0, "source": "harness", "event": "case_objects_deleted", "namespace": "ns"},
    ]
    assert history_problems(history) == []


def test_the_doc_is_what_the_schema_renders() -> None:
    """docs/history.md is generated from harness/history/schema.py (issue 39: the schema in one place)."""
    from harness.history.page import render
    from harness.history.schema import PAGE

    assert render(PAGE) == DOC, "docs/history.md differs from harness/history/schema.py: run " \
        "`python -m harness.history.schema --write` (edit the schema, never the page)"


def test_a_row_gives_its_required_fields_to_every_event_it_names() -> None:
    from harness.history.page import Row, Table, problems, required_fields

    page = [Table("| event | fields | meaning |", [
        Row("`x_started` / `_cleared`", "`a`; started also `b`", "…", required={"x_started": ("a", "b"), "x_cleared": ("a",)}),
        Row("`y`", "`c`", "…", required=("c",))], source="monitor")]
    fields = required_fields(page)
    assert fields == {("monitor", "x_started"): ("a", "b"), ("monitor", "x_cleared"): ("a",), ("monitor", "y"): ("c",)}
    assert problems([{"ts": 1, "source": "monitor", "event": "x_started", "a": 1}], fields) == [
        "event 1 (monitor/x_started): missing b"]
    assert problems([{"ts": 2, "source": "monitor", "event": "y", "c": 1},
                     {"ts": 1, "source": "monitor", "event": "z"}], fields) == [
        "event 2 (z): earlier than the event before it", "event 2: unknown source/event monitor/z"]
