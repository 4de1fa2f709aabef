"""How often Kueue logged "Preemption already issued, waiting for observation" per preemptor and target
(pkg/scheduler/preemption/preemption.go; a stuck preemption retries every ~10 ms). Informational: the
liveness checker decides. The count is over the whole case, the one number every report section uses.
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, register, within_case
from harness.checkers.bounds import FLOOD_LINES
from harness.history.names import Names
from harness.kueue import log as kueue_log


@register
class LogFlood:
    name: ClassVar[str] = "log_flood"
    kind: ClassVar[str] = "info"

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        counts: dict[tuple[str, str], list[float]] = {}
        for e in within_case(history):
            if e.get("source") == "kueue" and e.get("msg") == kueue_log.PREEMPTION_WAITING:
                f = e.get("fields") or {}
                k = (names.kobj(f.get("preemptingWorkload")), names.kobj(f.get("targetWorkload")))
                counts.setdefault(k, []).append(e["ts"])
        if not counts:
            return [Finding("log flood", "info", "no 'Preemption already issued' lines",
                            "Kueue never logged 'Preemption already issued, waiting for observation' for the case.", False)]
        out = []
        for (p, t), ts in counts.items():
            flood = len(ts) >= FLOOD_LINES
            out.append(Finding("log flood", "info", f"'Preemption already issued' ×{len(ts)}",
                               f"Kueue logged 'Preemption already issued, waiting for observation' {len(ts)} times for "
                               f"{p} waiting on {t}, over {ts[-1] - ts[0]:.1f}s"
                               + (f" (a flood: ≥ {FLOOD_LINES} lines; the preemption never completes)." if flood else "."),
                               False))
        return out
