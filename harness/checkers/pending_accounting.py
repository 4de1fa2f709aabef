"""Pending accounting: a ClusterQueue's and LocalQueue's `status.pendingWorkloads`, `reservingWorkloads` and
`admittedWorkloads` agree with the Workloads that really wait, hold quota and are admitted
(harness/checkers/model/accounting.py, with the Kueue code they come from). Kueue writes these counts
`UpdatesBatchPeriod` (1 s, pkg/constants/constants.go:31-33) after a Workload change, so only a
disagreement that lasts `settle` seconds (default 3: the period, a reconcile and the monitor's watch) counts,
or one still open at the verdict that began at least `settle` before it. Source: kubernetes-sigs/kueue#9591
(a Workload both in the heap and in the inadmissible list is counted twice; fix #9598, v0.16.3).

Judged on the invariant monitor's `accounting_mismatch_started` / `_cleared` facts (it re-evaluates on every
Workload, ClusterQueue and LocalQueue event). Kueue's `kueue_pending_workloads` and
`kueue_admitted_active_workloads` metrics are not read: the local environment serves no metrics (its Kueue
Configuration sets metrics.bindAddress "0", harness/env/kueue_process.py).
"""

from __future__ import annotations

from typing import ClassVar

from harness.checkers.base import Finding, History, Objects, observed_until, register, within_case
from harness.checkers.model.accounting import FIELDS
from harness.history.names import Names, case_t0

#: Seconds a count may lag its Workloads: UpdatesBatchPeriod (1 s) + a reconcile + the monitor's watch.
SETTLE = 3.0


@register
class PendingAccounting:
    """`fields`: which counts to judge (default all three); `settle`: seconds a mismatch may last.
    Violated by a mismatch that lasted `settle` (decided at once) or is open at the verdict and began `settle`
    before it; inconclusive when the monitor saw no ClusterQueue of the case (nothing judged); held
    otherwise, with the short mismatches listed, not bearing."""

    name: ClassVar[str] = "pending_accounting"
    kind: ClassVar[str] = "invariant"
    needs_monitor: ClassVar[bool] = True

    def __init__(self, fields: tuple[str, ...] | list[str] = FIELDS, settle: float = SETTLE) -> None:
        bad = [f for f in fields if f not in FIELDS]
        if bad or not fields:
            raise ValueError(f"pending_accounting: fields must be some of {', '.join(FIELDS)}, got {list(fields)!r}")
        if isinstance(settle, bool) or not isinstance(settle, (int, float)) or settle <= 0:
            raise ValueError(f"pending_accounting: settle must be seconds > 0, got {settle!r}")
        self.fields, self.settle = tuple(fields), float(settle)
        #: observe() waits at most this long past the other checkers when nothing is decided.
        self.bound = self.settle + 1.0

    def _spans(self, history: History) -> list[tuple[dict, float | None]]:
        """[(started event, cleared time or None)] for the judged fields."""
        out = []
        for i, e in enumerate(history):
            if e.get("source") != "monitor" or e.get("event") != "accounting_mismatch_started" \
                    or e.get("field") not in self.fields:
                continue
            k = (e.get("kind"), e.get("name"), e.get("field"))
            end = next((c["ts"] for c in history[i + 1:] if c.get("source") == "monitor"
                        and c.get("event") == "accounting_mismatch_cleared"
                        and (c.get("kind"), c.get("name"), c.get("field")) == k), None)
            out.append((e, end))
        return out

    def decided(self, history: History, objects: Objects, names: Names) -> bool:
        """A mismatch that lasted `settle` is final; otherwise only the end of the case decides."""
        history = within_case(history)
        t_end = observed_until(history)
        return any((end if end is not None else t_end) - e["ts"] >= self.settle for e, end in self._spans(history))

    def check(self, history: History, objects: Objects, names: Names) -> list[Finding]:
        history = within_case(history)
        t0, t_end = case_t0(history), observed_until(history)
        cqs = [c for c in objects.get("clusterqueues") or []]
        spans = self._spans(history)
        if not cqs and not spans:
            return [Finding(self.name, "inconclusive", "no ClusterQueue to judge",
                            "The case's final objects hold no ClusterQueue and the monitor recorded no count of one: "
                            "the Workload accounting cannot be judged.")]
        out, short = [], []
        for e, end in spans:
            lasted = (end if end is not None else t_end) - e["ts"]
            how = f"for {lasted:.2f}s" if end is not None else f"until the verdict ({lasted:.2f}s)"
            text = f"From t={e['ts'] - t0:.3f}s {how}: {names.text(str(e.get('finding')))}"
            if lasted >= self.settle:
                out.append(Finding(self.name, "violated", names.text(f"{e.get('kind')} {e.get('name')}: "
                                                                     f"{e.get('field')} {e.get('status')} ≠ {e.get('counted')}"),
                                   text + f" (≥ {self.settle:g}s: Kueue updates it within 1 s)."))
            else:
                short.append(text)
        if out:
            return out
        note = (f" {len(short)} shorter mismatch(es), Kueue's update lag (< {self.settle:g}s): " + "; ".join(short[:3])
                if short else "")
        return [Finding(self.name, "held", f"{', '.join(self.fields)} agree with the Workloads",
                        f"No ClusterQueue or LocalQueue of the case reported {', '.join(self.fields)} different from its "
                        f"Workloads for {self.settle:g}s or more.{note}")]
