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

from harness import kueue_log


class History:
    """A case's history. `record()` appends and flushes the harness's own events at once, so an
    interrupted run keeps what it did; `finalize()` merges the other sources in time order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._own = path.with_name("harness-events.jsonl")
        self._fh = open(self._own, "a", buffering=1)
        self.events: list[dict[str, Any]] = []
        self.started = time.time()
        self._lock = threading.Lock()  # the invariant monitor records from its watch threads

    def record(self, event: str, source: str = "harness", **fields: Any) -> dict[str, Any]:
        with self._lock:
            ev = {"ts": time.time(), "source": source, "event": event, **fields}
            self.events.append(ev)
            if not self._fh.closed:
                self._fh.write(json.dumps(ev, sort_keys=True, default=str) + "\n")
        return ev

    def finalize(self, proxy_events: Iterable[dict[str, Any]], kueue_log_path: Path | None,
                 workload_keys: set[str]) -> list[dict[str, Any]]:
        """Merge the proxy's events for `workload_keys` ("ns/name") since the case started, and Kueue's
        milestone log lines about them, into history.jsonl sorted by time. Returns the merged list."""
        merged = list(self.events)
        for e in proxy_events:
            if e.get("ts", 0) < self.started:
                continue
            key = f"{e.get('namespace')}/{e.get('name')}"
            w = e.get("write") if isinstance(e.get("write"), dict) else {}
            wkey = f"{w.get('namespace')}/{w.get('name')}" if w else None
            if e["event"] in ("held", "released", "failed", "hold_expired", "hold_timeout", "delayed", "reset",
                              "rule_added") \
                    or key in workload_keys or wkey in workload_keys:
                merged.append(e)
        if kueue_log_path is not None:
            for line in kueue_log.excerpt(kueue_log_path, workload_keys, since=self.started):
                if line.get("msg") in kueue_log.MILESTONES:
                    merged.append({"ts": kueue_log.parse_ts(line.get("ts")) or 0.0, "source": "kueue",
                                   "event": "log", "msg": line.get("msg"),
                                   "fields": {k: v for k, v in line.items() if k not in ("ts", "msg", "caller")}})
        merged.sort(key=lambda e: e["ts"])
        with open(self.path, "w") as fh:
            for e in merged:
                fh.write(json.dumps(e, sort_keys=True, default=str) + "\n")
        self._fh.close()
        return merged
