"""ClusterQueue status.flavorsReservation disagreeing with its Workloads, as the invariant monitor recorded
it. Informational: Kueue writes that status asynchronously, so short mismatches are expected.
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, events, register
from harness.history.names import Names


@register
class ReservationStatus:
    name: ClassVar[str] = "reservation"
    kind: ClassVar[str] = "info"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        started = events(history, "monitor", "reservation_mismatch_started")
        if not started:
            return []
        cleared = len(events(history, "monitor", "reservation_mismatch_cleared"))
        return [Finding("ClusterQueue status", "info", "status.flavorsReservation lagged",
                        f"status.flavorsReservation disagreed with the Workloads {len(started)} time(s), {cleared} cleared "
                        f"(Kueue writes it asynchronously). First: {names.text(str(started[0].get('mismatch', '')))}",
                        False)]
