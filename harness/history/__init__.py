"""The history of a case: one ordered, timestamped record of the harness's steps, the proxy's events and
Kueue's log milestones (`record.py`: History, written as JSONL, merged live for the checkers), short names
for people (`names.py`), the summarising of repeated log lines (`repeats.py`), and the schema of the
events (`schema.py`, rendered by `page.py`: docs/history.md is generated from it).

May import: harness.common, harness.kueue.
"""

from harness.history.record import History  # noqa: F401 - the package's interface
