"""The evidence bundle of one case run, and its offline re-check: `report.md` (verdict, versions, fault
plan, a Mermaid sequence diagram of the race, checker findings), logs, flows and final objects, redacted.

Writing (`write_case_bundle`) needs the live environment; everything else is pure over a bundle's files
(history.jsonl + objects.yaml + bundle.json), so `kueue-harness report BUNDLE` re-runs the checkers and
re-renders report.md on a machine with no cluster. Layout of a bundle: docs/evidence.md; history.jsonl's
events: docs/history.md.

Modules: `bundle` (reading, archive extraction with limits, the history schema, the re-check), `diagram`
(the sequence diagram and its validator), `markdown` (report.md), `race` (the writes that decided the
verdict: bodies, field ownership, what a forced apply removed), `write` (cutting logs and flows, writing
and packing a case's bundle), `offline` (`kueue-harness report`). The bundle of a running `up` session
(`kueue-harness bundle`) is harness/cli/bundle.py. Callers use this package: `from harness import report`.

May import: harness.common, harness.kueue, harness.objects, harness.history, harness.plan, harness.checkers.
"""

from harness.history.names import Names  # noqa: F401 - part of the report API (short names in reports)
from harness.report.bundle import (  # noqa: F401
    BUNDLE_SCHEMA,
    HISTORY_FIELDS,
    LEGACY_SELECTION,
    WRITE_FIELDS,
    BundleError,
    history_problems,
    load_history,
    load_objects,
    recheck,
    selection_of,
)
from harness.report.diagram import (  # noqa: F401
    FLOOD_GROUP,
    MAX_DIAGRAM_LINES,
    _clean,
    diagram_lines,
    validate_sequence_diagram,
)
from harness.report.markdown import INVARIANTS, render_report  # noqa: F401
from harness.report.offline import Recheck, cli, report_bundle  # noqa: F401
from harness.report.write import (  # noqa: F401
    EXCERPT_REPEATS,
    LOG_PLAIN_MAX,
    cut_flows,
    cut_kueue_log,
    write_case_bundle,
)

__all__ = [
    "_clean", "BUNDLE_SCHEMA", "EXCERPT_REPEATS", "FLOOD_GROUP", "HISTORY_FIELDS", "INVARIANTS", "LEGACY_SELECTION",
    "LOG_PLAIN_MAX", "MAX_DIAGRAM_LINES", "WRITE_FIELDS", "BundleError", "Names", "Recheck", "cli", "cut_flows",
    "cut_kueue_log", "diagram_lines", "history_problems", "load_history", "load_objects", "recheck",
    "render_report", "report_bundle", "selection_of", "validate_sequence_diagram", "write_case_bundle",
]
