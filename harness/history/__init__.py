"""The history of a case: one ordered, timestamped record of the harness's steps, the proxy's events and
Kueue's log milestones (`record.py`: History, written as JSONL, merged live for the checkers), short names
for people (`names.py`), and the summarising of repeated log lines (`repeats.py`). The schema is
docs/history.md.

May import: harness.common, harness.kueue.
"""

from harness.history.record import History  # noqa: F401 - the package's interface
