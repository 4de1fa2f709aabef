"""Reads Kueue's JSON log (zap, one object per line: ts/level/logger/caller/msg + key/values) and
finds the lines that matter to a case, e.g. "Preemption already issued, waiting for observation".

Keys and messages: Kueue v0.17 pkg/scheduler/preemption/preemption.go:191-203, scheduler.go
(docs/kueue-notes.md §8).
klog.KObj values appear as {"name": ..., "namespace": ...}.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from harness.common.jsonl import JsonlTail

PREEMPTION_WAITING = "Preemption already issued, waiting for observation"
PREEMPTION_ONGOING = "Preemption ongoing"
PREEMPTED = "Preempted"
ADMITTED = "Workload successfully admitted and assigned flavors"
#: V(2), once per Workload a scheduling cycle considers, with its `schedulingCycle` (pkg/scheduler/scheduler.go):
#: how the checkers count Kueue's cycles while nothing moves (harness/checkers/progress.py).
ATTEMPTING = "Attempting to schedule workload"

#: Messages worth a place in a case's history (milestones of the race).
MILESTONES = (PREEMPTION_WAITING, PREEMPTION_ONGOING, PREEMPTED, ADMITTED, ATTEMPTING,
              "Could not admit Workload and assign flavors in apiserver", "Workload re-queued",
              "Handling a job with evicted condition")


def parse_ts(ts: Any) -> float | None:
    """Kueue's `ts` (RFC3339Nano string, or epoch seconds) as epoch seconds."""
    if isinstance(ts, (int, float)):
        return float(ts)
    if isinstance(ts, str):
        try:
            return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


#: The `msg` of the line a data race report of Go's race detector is read as (`RaceReader`).
DATA_RACE = "WARNING: DATA RACE"
#: Characters of one race report kept (both stacks of a report are ~2-6k; a runaway report is cut there).
RACE_REPORT_MAX = 40_000


class RaceReader:
    """Reads Kueue's log line by line: JSON lines as dicts, and each report of Go's race detector (a Kueue
    built with `-race`, `--kueue-race`: plain text on stderr between two "==================" lines, starting
    "WARNING: DATA RACE", with the stacks of both accesses) as one dict {"msg": DATA_RACE, "report": text,
    "ts": the time of the JSON line before it (the report has none; Kueue at -v=3 logs many lines a second),
    "race_read": True}. JSON lines written into a report by other goroutines come out as they are."""

    def __init__(self, fallback_ts: float | None = None) -> None:
        self.block: list[str] | None = None
        self.last_ts = fallback_ts

    def feed(self, raw: str) -> list[dict[str, Any]]:
        line = raw.rstrip("\r\n")
        if line.startswith("{"):  # zap's lines; an indented brace is stray text
            try:
                d = json.loads(line)
            except ValueError:
                return []
            if not isinstance(d, dict):
                return []
            t = parse_ts(d.get("ts"))
            self.last_ts = t if t is not None else self.last_ts
            return [d]
        if self.block is not None:
            if line.startswith("=================="):
                text, self.block = "\n".join(self.block)[:RACE_REPORT_MAX], None
                return [{"msg": DATA_RACE, "report": text, "ts": self.last_ts, "race_read": True}]
            self.block.append(line)
        elif line.startswith(DATA_RACE):
            self.block = [line]
        return []


def race_accesses(report: str) -> list[str]:
    """The accesses of a race report, one line each: "Write at 0x… by goroutine 312: sigs.k8s.io/kueue/….(*x).set()"
    (the header line of each stack and its first frame)."""
    out: list[str] = []
    lines = report.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^(previous )?(atomic )?(read|write)s? at ", line, re.IGNORECASE):
            frame = lines[i + 1].strip() if i + 1 < len(lines) else ""
            out.append(f"{line.strip()} {frame}".strip())
    return out


def lines(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON log line of `path` as a dict, and every race report as one (`RaceReader`); other text is
    skipped."""
    try:
        fh = open(path, errors="replace")
    except OSError:
        return
    reader = RaceReader()
    with fh:
        for raw in fh:
            yield from reader.feed(raw)


class Tail(JsonlTail):
    """Kueue's log followed live (harness/common/jsonl.py), race reports included (`RaceReader`);
    `new_lines()` is `read()`."""

    def __init__(self, path: str | Path, from_end: bool = False) -> None:
        super().__init__(path, from_end)
        self._reader = RaceReader(time.time())

    def parse(self, raw: bytes) -> list[dict[str, Any]]:
        return self._reader.feed(raw.decode(errors="replace"))

    def new_lines(self) -> list[dict[str, Any]]:
        return self.read()


def _obj_key(v: Any) -> str | None:
    if isinstance(v, dict) and "name" in v:
        return f"{v.get('namespace', '')}/{v['name']}" if v.get("namespace") else v["name"]
    if isinstance(v, str):
        return v
    return None


def mentions(line: dict[str, Any], key: str) -> bool:
    """True if any KObj-like value of the line (workload, targetWorkload, ...) is `key` ("ns/name"), or the
    line names its object with top-level `namespace` and `name` keys (controller-runtime's reconciler
    lines, e.g. "Reconciling" with controller=workload namespace=ns name=w) and they make `key`."""
    ns, name = line.get("namespace"), line.get("name")
    if isinstance(name, str) and (f"{ns}/{name}" if isinstance(ns, str) and ns else name) == key:
        return True
    return any(_obj_key(v) == key for k, v in line.items()
               if k not in ("msg", "ts", "level", "logger", "caller", "namespace", "name"))


def in_namespaces(line: dict[str, Any], namespaces: set[str]) -> bool:
    """True if the line names an object of one of `namespaces`: a KObj value ({"name", "namespace"}: a Job, a
    Pod, a ProvisioningRequest, a LocalQueue, not only a Workload) or controller-runtime's top-level `namespace`
    (its reconcilers' lines, e.g. "Reconciler error" about a Job)."""
    if not namespaces:
        return False
    if line.get("namespace") in namespaces:
        return True
    return any(isinstance(v, dict) and v.get("namespace") in namespaces for v in line.values())


#: Keys a `{log: REGEX}` trigger does not see: when and where in Kueue's code the line was written.
_UNSEARCHED = ("ts", "caller", "msg")


def _text(v: Any) -> str:
    if isinstance(v, dict) and isinstance(v.get("name"), str) and set(v) <= {"name", "namespace"}:
        return _obj_key(v) or ""
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def normalized(line: dict[str, Any]) -> str:
    """The text a plan's `{log: REGEX}` trigger is searched in (docs/fault-plans.md, Triggers): the
    message, then ` key=value` for every other key in the line's order except ts and caller. An object
    (klog.KObj, `{"name", "namespace"}`) is written `namespace/name` (`name` when cluster-scoped); a line
    that names its object with top-level `namespace` and `name` keys (controller-runtime's reconcilers)
    also gets `object=namespace/name`, so `object=ns/w1` or `=ns/w1\\b` finds a Workload whichever way
    the line carries it. Other values are compact JSON (`schedulingCycle=6`, `assignments=[…]`).

    Example: `Workload successfully admitted and assigned flavors level=Level(-2) logger=scheduler
    replica-role=standalone schedulingCycle=6 workload=team-a/job-job2-d4d7c clusterQueue=cq assignments=[…]`.
    """
    parts = [str(line.get("msg", ""))]
    parts += [f"{k}={_text(v)}" for k, v in line.items() if k not in _UNSEARCHED]
    ns, name = line.get("namespace"), line.get("name")
    if isinstance(ns, str) and isinstance(name, str):
        parts.append(f"object={ns}/{name}")
    return " ".join(parts)


def count(path: Path, msg: str, since: float | None = None, **match: str) -> int:
    """How many lines have message `msg`, a time at or after `since` (epoch seconds; None: any) and, for
    each `field=key`, that KObj field equal to "ns/name"."""
    n = 0
    for line in lines(path):
        if line.get("msg") != msg or not all(_obj_key(line.get(f)) == k for f, k in match.items()):
            continue
        ts = parse_ts(line.get("ts"))
        if since is None or (ts is not None and ts >= since):
            n += 1
    return n


def excerpt(path: Path, keys: set[str], since: float | None = None) -> list[dict[str, Any]]:
    """Lines about any Workload in `keys` ("ns/name"), from `since` (epoch s) on."""
    out = []
    for line in lines(path):
        ts = parse_ts(line.get("ts"))
        if since is not None and ts is not None and ts < since:
            continue
        if any(mentions(line, k) for k in keys):
            out.append(line)
    return out


def last_lines(path: Path, n: int = 20) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


def last_error(path: Path, lines_back: int = 400) -> str | None:
    """Kueue's last error in the last `lines_back` lines of its log, as "msg: error" ('leader election lost',
    'problem running manager: …'), None when there is none: the reason a case that saw Kueue exit gives first."""
    for raw in reversed(last_lines(path, lines_back)):
        if not raw.startswith("{"):
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if line.get("level") in ("error", "dpanic", "panic", "fatal"):
            err = line.get("error")
            return f"{line.get('msg')}: {err}" if err else str(line.get("msg"))
    return None
