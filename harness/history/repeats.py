"""Repeated Kueue log lines in a history, summarised and expanded again.

A stuck preemption makes Kueue log "Preemption already issued, waiting for observation" and "Workload
re-queued" about every 10 ms (kubernetes-sigs/kueue#11480; docs/kueue-notes.md §8), so a case's history
would hold thousands of near-identical `log` events. `summarize` keeps the first `keep` lines of each
message about the same Workloads and replaces the rest by one `log_repeated` event that holds their count
and their times (microsecond offsets from the first, so a 15 s flood of ~1400 lines takes ~10 KB instead of
~700 KB). `expand` turns such a history back into one `log` event per line, with the same times to the
microsecond: the checkers (harness/checkers/base.py `compose`) and the diagram read the expanded history,
so a summarised history judges and draws exactly as the full one. Kueue's own log (kueue.log in a bundle)
keeps every line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: Lines of one message about the same Workloads kept as `log` events before the rest is summarised.
KEEP = 10
#: The fields of a `log` line that name the objects it is about (a repeat is the same message about the
#: same objects).
OBJECT_FIELDS = ("workload", "targetWorkload", "preemptingWorkload", "clusterQueue", "job")


def repeat_key(e: Mapping[str, Any]) -> tuple[str, ...]:
    """(message, "field=ns/name", ...) of a `log` event: what makes two lines repeats of each other."""
    f = e.get("fields") if isinstance(e.get("fields"), Mapping) else {}
    objs = []
    for k in OBJECT_FIELDS:
        v = f.get(k)
        if isinstance(v, Mapping):
            v = f"{v.get('namespace', '')}/{v.get('name', '')}"
        if v:
            objs.append(f"{k}={v}")
    return (str(e.get("msg")),) + tuple(objs)


def _cycle(e: Mapping[str, Any]) -> int | None:
    """A `log` event's schedulingCycle (Kueue's scheduler numbers each cycle's lines), or None."""
    n = (e.get("fields") or {}).get("schedulingCycle") if isinstance(e.get("fields"), Mapping) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _is_log(e: Mapping[str, Any]) -> bool:
    return e.get("source") == "kueue" and e.get("event") == "log"


def summarize(history: Sequence[Mapping[str, Any]], keep: int = KEEP) -> list[dict[str, Any]]:
    """`history` (sorted by time) with each message about the same Workloads kept as `log` events for its
    first `keep` lines only (`keep` >= 1); the later ones become one `log_repeated` event at the time of the
    first line it stands for, with `msg`, `fields` (of that line), `count` (lines), `first` and `last`
    (epoch seconds), `offsets_us` (each line's time after `first`, integer microseconds) and, when the lines carry
    one, `cycles` (each line's `schedulingCycle`, so Kueue's cycles are counted as in the full history). A message
    with at most `keep` + 1 lines is kept whole. Other events are unchanged; the result is sorted by time.
    Raises ValueError for `keep` < 1."""
    if keep < 1:
        raise ValueError(f"keep must be 1 or more, got {keep}")
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for e in history:
        if _is_log(e):
            groups.setdefault(repeat_key(e), []).append(e)
    cut = {k: v[keep:] for k, v in groups.items() if len(v) > keep + 1}
    dropped = {id(e) for rest in cut.values() for e in rest}
    out = [dict(e) for e in history if id(e) not in dropped]
    for rest in cut.values():
        first = rest[0]
        t0 = float(first["ts"])
        rep = {"ts": t0, "source": "kueue", "event": "log_repeated", "msg": first.get("msg"),
               "fields": first.get("fields") or {}, "count": len(rest), "first": t0,
               "last": float(rest[-1]["ts"]),
               "offsets_us": [round((float(e["ts"]) - t0) * 1e6) for e in rest]}
        cycles = [_cycle(e) for e in rest]
        if any(c is not None for c in cycles):
            rep["cycles"] = cycles  # each line's schedulingCycle: the checkers count Kueue's cycles (progress.py)
        out.append(rep)
    out.sort(key=lambda e: e["ts"])
    return out


def expand(history: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """`history` with every `log_repeated` event replaced by its lines as `log` events (times from
    `first` + `offsets_us`; `msg` and `fields` of the summary), sorted by time. A history without
    summaries is returned as a list of the same events (nothing is copied). A summary whose offsets are
    missing or malformed stands for `count` lines at its `first` time."""
    if not any(e.get("event") == "log_repeated" for e in history):
        return list(history)
    out: list[Mapping[str, Any]] = []
    for e in history:
        if e.get("event") != "log_repeated" or e.get("source") != "kueue":
            out.append(e)
            continue
        t0 = float(e.get("first", e["ts"]))
        offsets = e.get("offsets_us")
        if not isinstance(offsets, list) or not all(isinstance(o, int) for o in offsets):
            count = e.get("count")
            offsets = [0] * (count if isinstance(count, int) and 0 < count <= 1_000_000 else 1)
        fields = e.get("fields") if isinstance(e.get("fields"), Mapping) else {}
        cycles = e.get("cycles") if isinstance(e.get("cycles"), list) and len(e["cycles"]) == len(offsets) else None
        for i, o in enumerate(offsets):
            f = fields if cycles is None or cycles[i] is None else {**fields, "schedulingCycle": cycles[i]}
            out.append({"ts": t0 + o / 1e6, "source": "kueue", "event": "log", "msg": e.get("msg"), "fields": f})
    out.sort(key=lambda x: x["ts"])
    return out
