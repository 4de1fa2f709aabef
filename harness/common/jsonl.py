"""Following a growing JSON-lines file (Kueue's log, the proxy's proxy-events.jsonl): one reader for the
live checks, the session's notices and the nemesis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class JsonlTail:
    """Returns, on each `read()`, the JSON objects appended since the last read. It starts at the file's
    current end with `from_end` (earlier lines are someone else's: a session's log holds every earlier
    case), else at byte 0. A partial last line waits for its newline; lines that are not JSON objects
    (a partial first line after `from_end`, stray text) are skipped; a file that cannot be read reads as []."""

    def __init__(self, path: str | Path, from_end: bool = False) -> None:
        self.path = Path(path)
        self.offset = 0
        self._partial = b""
        if from_end:
            try:
                self.offset = self.path.stat().st_size
            except OSError:
                self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        out: list[dict[str, Any]] = []
        for raw in lines:
            out += self.parse(raw)
        return out

    def parse(self, raw: bytes) -> list[dict[str, Any]]:
        """The objects one complete line gives (default: itself when it is a JSON object, else none)."""
        if raw.lstrip().startswith(b"{"):
            try:
                d = json.loads(raw)
            except ValueError:
                return []
            return [d] if isinstance(d, dict) else []
        return []
