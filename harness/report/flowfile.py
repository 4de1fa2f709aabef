"""Reading the session's flow file (the proxy's append-only .mitm, one per environment) for one case without
reading it from the start every time.

Each case's bundle takes the flows that started in the case's window (`harness.report.write.cut_flows`). The
file holds every flow of the session, so streaming it whole for every case made the bundles of a session
quadratic: at the end of a 19-case main job the file had 1858 flows (10.7 MB) and one pass over it cost
3.7 s of CPU (2 min of wall time at load 20, 2026-12-02). This module remembers, per file, where each flow
it has read ends and the latest time any flow up to there finished; a later read for a window starting at
`start` seeks past every flow that finished before `start`, and such a flow cannot have started in the
window. The result is exactly the flows a full pass would give (tests/unit/test_flowfile.py).
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: {(path, inode): ([end offset of each flow read, in file order], [latest finish time up to it, epoch s])}
_INDEX: dict[tuple[str, int], tuple[list[int], list[float]]] = {}
_LOCK = threading.Lock()


def finished_at(flow: Any) -> float:
    """The latest time (epoch s) a mitmproxy flow records: its request's start and end, its response's end,
    its error's time; 0.0 when it records none."""
    times = []
    for part, attrs in (("request", ("timestamp_start", "timestamp_end")), ("response", ("timestamp_end",)),
                        ("error", ("timestamp",))):
        obj = getattr(flow, part, None)
        times += [getattr(obj, a, None) for a in attrs] if obj is not None else []
    return max((t for t in times if t), default=0.0)


def flows_since(src: Path, start: float) -> Iterator[Any]:
    """The flows of .mitm file `src`, in file order, except (some of) those that finished before `start`
    (epoch s): every flow whose request started at or after `start` is among them. A half-written last flow
    (the proxy still writing) ends the iteration. Raises OSError when `src` cannot be read."""
    from mitmproxy import io as mio
    from mitmproxy.exceptions import FlowReadException

    st = os.stat(src)
    key = (str(Path(src).resolve()), st.st_ino)
    with _LOCK:
        offsets, latest = _INDEX.get(key, ([], []))
        if offsets and offsets[-1] > st.st_size:  # the file was cut short: what was remembered is wrong
            offsets, latest = [], []
        _INDEX[key] = (offsets, latest)
        # latest is non-decreasing: every flow before offsets[i-1] finished by latest[i-1] < start.
        i = bisect.bisect_left(latest, start)
        seek = offsets[i - 1] if i > 0 else 0
    with open(src, "rb") as fh:
        fh.seek(seek)
        reader = mio.FlowReader(fh)
        try:
            for f in reader.stream():
                end = fh.tell()
                with _LOCK:
                    if not offsets or end > offsets[-1]:
                        offsets.append(end)
                        latest.append(max(latest[-1] if latest else 0.0, finished_at(f)))
                yield f
        except FlowReadException:
            return  # the session file's last flow may be half written while the proxy runs


def forget() -> None:
    """Drop every remembered offset (tests)."""
    with _LOCK:
        _INDEX.clear()
