"""No data race: Go's race detector, in a Kueue built with `-race` (`--kueue-race`), reported no two goroutines
touching one variable unsynchronised while the case ran. Reads the history's `kueue` `data_race` events (each
race report Kueue printed on its log, both stacks: harness/kueue/log.py RaceReader) and `case_started`'s
`kueue_race` (what the binary's build information says, harness/build/kueue.py binary_race).

Added to every case when the build is a race build (harness/scenarios/markers.py); a case may declare it too.
The detector sees only the code that ran: a case that proves a race absent must also show that the racing
paths ran (cases/kueue_12736 counts its Visibility API reads and Kueue's preemption requeues).
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.history.names import Names


@register
class NoDataRace:
    """Violated for every data race Go's race detector reported in Kueue during the case, with both accesses in
    the finding and the whole report in the history; `error` when the Kueue under test was not built with the
    race detector (nothing could be seen), held otherwise."""

    name: ClassVar[str] = "no_data_race"
    kind: ClassVar[str] = "invariant"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        started = next((e for e in history if e.get("source") == "harness" and e.get("event") == "case_started"), None)
        races = [e for e in within_case(history) if e.get("source") == "kueue" and e.get("event") == "data_race"]
        if not races and (started is None or started.get("kueue_race") is not True):
            return [Finding(self.name, "error", "Kueue not built with -race",
                            "The Kueue binary under test was not built with Go's race detector (its build information "
                            "has no -race=true), so no data race could be reported: run with --kueue-race.")]
        if not races:
            return [Finding(self.name, "held", "no data race",
                            "Go's race detector reported no data race in Kueue while the case ran.")]
        out = []
        for i, e in enumerate(races, 1):
            acc = [str(a) for a in e.get("accesses") or []]
            first = acc[0].split(": ", 1)[-1] if acc else "?"
            other = acc[1].split(": ", 1)[-1] if len(acc) > 1 else "?"
            out.append(Finding(self.name, "violated", f"data race: {first} / {other}"[:160],
                               f"Data race {i} of {len(races)} (Go's race detector in Kueue): "
                               + "; ".join(acc) + " — the whole report, both stacks, is the `data_race` event of "
                               "history.jsonl and in kueue.log."))
        return out
