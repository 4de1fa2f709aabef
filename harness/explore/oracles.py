"""Which invariants judge a perturbed run: explore's oracles, chosen from the reference run (issue 25).

Every run is judged by the case's own checkers plus plugin.EXPLORE_CHECKERS (plan_happened,
watch_caught_up, liveness, quota, log_flood). On top of them `choose` adds the checkers that the
reference run makes meaningful, so a bug class other than kueue#11480's is seen when it happens:

| oracle | added when the reference run | bug class (upstream) |
|---|---|---|
| `bounded_evictions` | has an eviction write | preemption thrashing, repeated evictions (kueue#13662, kueue#9428) |
| `deletion_completes` | deleted an object of the case | a finalizer never removed, a deletion that wedges (kueue#1789, kueue#12820) |
| `pending_fits_admitted` | had a Workload written pending (it waited for quota) | a pending Workload that fits but is never admitted (kueue#9889, kueue#10181) |

`write_count` (several eviction requests for one victim, kueue#9428) is not chosen by default: a perturbation
can make Kueue evict a victim again legitimately (a stale admission overwrote its eviction, and a fixed
Kueue evicts it anew), and the checker counts writes per object, not per preemption; give it with
`--oracle 'write_count={"write": "eviction", "max": 1, "answered": "ok"}'` where the case allows it.

`not_judged` names the progress invariants a move makes meaningless: a write the proxy fails every time
(`fail`, `times: null`) blocks what depends on it whatever Kueue does, so `liveness` and
`deletion_completes` are not applied to such a run (the safety invariants still are); `pending_fits_admitted`
still is, unless the write failed is an admission (`not_judged`). Nor is `deletion_completes` applied to a
run whose delete step deletes with propagation Orphan: nothing it watches is deleted then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.explore.model import Move, how_of
from harness.explore.trace import Trace

#: Progress invariants: a write failed every time makes them unjudgeable (module docstring).
PROGRESS = ("liveness", "pending_fits_admitted", "deletion_completes")


def choose(trace: Trace, reference: Mapping[str, Any], registered: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{checker name: parameters} to add to every run of the case whose reference trace is `trace` and whose
    reference explore.json is `reference`; only checkers in `registered` (harness.checkers.REGISTRY)."""
    have = set(registered)
    kinds = {w.target.cls for w in trace.writes}
    out: dict[str, dict[str, Any]] = {}
    if "eviction" in kinds:
        out["bounded_evictions"] = {}
    if reference.get("deleting"):
        out["deletion_completes"] = {}
    if "pending" in kinds:
        out["pending_fits_admitted"] = {}
    return {k: v for k, v in out.items() if k in have}


def not_judged(moves: Iterable[Move]) -> list[str]:
    """The checkers (PROGRESS) a plan of `moves` makes unjudgeable: any write failed every time. One of them
    stays judged unless the write failed is an admission: `pending_fits_admitted` reads the API state, in
    which a victim whose eviction keeps failing still holds its quota, so a Workload it finds fitting fits
    whatever the fault blocks — kubernetes-sigs/kueue#14863's very shape (a preemption that keeps failing,
    and a Workload that fits starved behind it). An admission failed every time leaves its Workload pending
    and fitting by the fault alone. A delete step made to delete with propagation Orphan (`delete_as`)
    deletes only its Job, a kind `deletion_completes` does not watch: its subject (the dependents the
    reference run saw deleted) is gone by the move itself, so it is not applied either (a run of 2026-12-06
    said `error: nothing was deleted`)."""
    out: list[str] = []
    if any(m.kind == "delete_as" and (how_of(m.how) or {}).get("propagation") == "Orphan" for m in moves):
        out.append("deletion_completes")
    forever = [m for m in moves if m.kind == "fail" and m.times is None]
    if not forever:
        return out
    if any(m.target.cls == "admission" for m in forever):
        return list(PROGRESS)
    return [c for c in PROGRESS if c != "pending_fits_admitted"]
