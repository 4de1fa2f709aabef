"""Known bugs muted in a search (issue 36): a violation whose cause a known bug's signature explains
(harness/kueue/signatures.py, on the run's writes) is recorded as that bug — counted, kept with its run, plan and
why — and never becomes a finding; explore.json `known` and `known_runs`, summary.md's line."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness.kueue import signatures


class KnownBugs:
    """The muted bugs ({key: harness.kueue.bugs.KnownBug with a signature}) and what was recorded as each."""

    def __init__(self, bugs: Mapping[str, Any] | None = None) -> None:
        self.bugs = dict(bugs or {})
        self.runs: list[dict[str, Any]] = []

    def record(self, key: str, rec: Any, res: Mapping[str, Any] | None, say: Callable[[str], None]) -> bool:
        """Whether violation `key` of run `rec` (a driver RunRecord) is a muted bug's, by its signature on the
        run's writes (`res["events"]`, explore.json); then it is recorded here and said."""
        for bug_key, bug in self.bugs.items():
            if not signatures.explains(bug.signature, key):
                continue
            why = signatures.matches(bug.signature, (res or {}).get("events") or [])
            if why:
                self.runs.append({"bug": bug_key, "key": key, "run": rec.id, "plan": rec.words, "why": why,
                                  "bundle": rec.bundle, "at_minutes": rec.at_minutes})
                say(f"[explore] known: {key} in run {rec.id} is {bug_key} ({why}); not a finding")
                return True
        return False

    def counts(self) -> dict[str, int]:
        """Violations recorded as each muted bug (every muted bug listed, 0 when none)."""
        out = {k: 0 for k in self.bugs}
        for r in self.runs:
            out[r["bug"]] = out.get(r["bug"], 0) + 1
        return out
