"""One ordered, timestamped record of a case: the harness's own steps, the proxy's events (requests,
holds, releases, responses, watch deliveries) and Kueue's log milestones, written as JSONL.

Every record has `ts` (epoch seconds, float), `source` ("harness" | "proxy" | "kueue" | "monitor") and
`event`; the rest depends on the event (schema in docs/history.md).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from harness.kueue import log as kueue_log


class History:
    """A case's history. `record()` appends and flushes the harness's own events at once, so an
    interrupted run keeps what it did; `finalize()` merges the other sources in time order."""

    def __init__(self, path: Path, milestones: Iterable[str] = kueue_log.MILESTONES) -> None:
        #: Kueue log messages kept in the history (the defaults plus what the case's scenario declares).
        self.milestones = frozenset(milestones)
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._own = path.with_name("harness-events.jsonl")
        self._fh = open(self._own, "a", buffering=1)
        self.events: list[dict[str, Any]] = []
        self.started = time.time()
        self._lock = threading.Lock()  # the invariant monitor records from its watch threads

    def record(self, event: str, source: str = "harness", at: float | None = None, **fields: Any) -> dict[str, Any]:
        """Append the harness's event `event` with `fields`, at `at` (epoch seconds; default now: a session's
        bundle records what it reads afterwards at the time it happened); returns it."""
        with self._lock:
            ev = {"ts": time.time() if at is None else float(at), "source": source, "event": event, **fields}
            self.events.append(ev)
            if not self._fh.closed:
                self._fh.write(json.dumps(ev, sort_keys=True, default=str) + "\n")
        return ev

    def merged(self, proxy_events: Iterable[dict[str, Any]], log_lines: Iterable[dict[str, Any]],
               workload_keys: set[str]) -> list[dict[str, Any]]:
        """The history so far: the harness's own events, the proxy's events about `workload_keys`
        ("ns/name") or any hold, rule or flow error since the case started, and Kueue's milestone log
        lines (parsed JSON lines) about those Workloads or any other object of their namespaces (a Job's
        "Reconciler error", a ProvisioningRequest, a LocalQueue), and every data race report of a -race build
        (harness/kueue/log.py RaceReader) since the case started; sorted by time. Writes nothing."""
        merged = list(self.events)
        namespaces = {k.partition("/")[0] for k in workload_keys}
        job_flows: set[Any] = set()  # Kueue's writes to the case's Jobs (suspend, resume): progress steps
        for e in proxy_events:
            if e.get("ts", 0) < self.started:
                continue
            key = f"{e.get('namespace')}/{e.get('name')}"
            w = e.get("write") if isinstance(e.get("write"), dict) else {}
            wkey = f"{w.get('namespace')}/{w.get('name')}" if w else None
            if w.get("kind") == "Job" and w.get("namespace") in namespaces and e["event"] == "request":
                job_flows.add(e.get("flow"))
            if e["event"] in PROXY_CASE_EVENTS or key in workload_keys or wkey in workload_keys or (
                    e.get("flow") in job_flows and e["event"] in ("request", "response")):
                merged.append(e)
        for line in log_lines:
            ts = kueue_log.parse_ts(line.get("ts")) or 0.0
            if line.get("race_read"):  # Go's race detector (a -race build): about the process, whatever the case
                if ts >= self.started:
                    merged.append({"ts": ts, "source": "kueue", "event": "data_race", "report": line.get("report", ""),
                                   "accesses": kueue_log.race_accesses(str(line.get("report", "")))})
                continue
            if ts >= self.started and line.get("msg") in self.milestones and (
                    any(kueue_log.mentions(line, k) for k in workload_keys)
                    or kueue_log.in_namespaces(line, namespaces)):  # about the case's Jobs, Pods, queues too
                merged.append({"ts": ts, "source": "kueue", "event": "log", "msg": line.get("msg"),
                               "fields": {k: v for k, v in line.items() if k not in ("ts", "msg", "caller")}})
        merged.sort(key=lambda e: e["ts"])
        return merged

    def finalize(self, proxy_events: Iterable[dict[str, Any]], kueue_log_path: Path | None,
                 workload_keys: set[str]) -> list[dict[str, Any]]:
        """Merge the other sources (see `merged`) into history.jsonl sorted by time; returns the list."""
        lines = kueue_log.lines(kueue_log_path) if kueue_log_path is not None else ()
        merged = self.merged(proxy_events, lines, workload_keys)
        with open(self.path, "w") as fh:
            for e in merged:
                fh.write(json.dumps(e, sort_keys=True, default=str) + "\n")
        self._fh.close()
        return merged


#: Proxy events a case's history keeps whatever object they are about (holds, rules, failures).
PROXY_CASE_EVENTS = ("held", "released", "failed", "hold_expired", "hold_timeout", "delayed", "reset", "rule_added",
                     "watch_event_dropped", "watch_event_delayed",
                     "rule_removed", "flow_error", "signalled", "signal_done", "watch_events_undelivered", "fact",
                     "fact_problem")
