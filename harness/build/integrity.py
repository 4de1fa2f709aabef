"""A checksum record beside each binary the harness built, so a damaged cached binary (a truncated copy, a
disk error, an edit) is found and rebuilt instead of crashing at start-up with an empty log.

`<binary>.integrity.json` holds {"sha256", "size", "mtime_ns"} of the binary as it was renamed into place
(Kueue's entry also keeps it in build.json, as "binary"). A cached binary is checked on every use by size
and mtime (a stat: no start-up cost); the full sha256 is computed when either differs, and after the binary
crashed (`damaged`, from harness/env/local.py). A binary without a record (a cache from before the record
existed) gets one the first time it is used.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def record_path(binary: Path) -> Path:
    return binary.with_name(binary.name + ".integrity.json")


def measure(binary: Path) -> dict[str, Any]:
    """{"sha256": hex, "size": bytes, "mtime_ns": ns} of `binary`. Raises OSError."""
    h = hashlib.sha256()
    with open(binary, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    st = os.stat(binary)
    return {"sha256": h.hexdigest(), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def write_record(binary: Path) -> dict[str, Any]:
    """Measure `binary` and write its record beside it; returns the record. Raises OSError."""
    rec = measure(binary)
    tmp = record_path(binary).with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(rec))
    os.replace(tmp, record_path(binary))
    return rec


def read_record(binary: Path) -> dict[str, Any] | None:
    try:
        rec = json.loads(record_path(binary).read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("sha256"), str) else None


def problem(binary: Path, rec: dict[str, Any] | None, full: bool = False) -> str | None:
    """Why `binary` is not the one `rec` describes ("it is 1024 bytes, built as 98765432"; "its sha256
    differs from the one recorded when it was built"), or None when it is (or there is no record to judge
    by). `full`: hash it even when size and mtime agree (after it crashed)."""
    if not rec:
        return None
    try:
        st = os.stat(binary)
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if st.st_size != rec.get("size"):
        return f"it is {st.st_size} bytes, built as {rec.get('size')}"
    if not full and st.st_mtime_ns == rec.get("mtime_ns"):
        return None
    try:
        now = measure(binary)
    except OSError as e:
        return f"it cannot be read ({e.strerror})"
    if now["sha256"] != rec["sha256"]:
        return "its sha256 differs from the one recorded when it was built"
    return None


def check_cached(binary: Path) -> str | None:
    """problem() against the record beside `binary`; a binary without one gets one now (None)."""
    rec = read_record(binary)
    if rec is None:
        try:
            write_record(binary)
        except OSError:
            pass
        return None
    why = problem(binary, rec)
    if why is None and os.stat(binary).st_mtime_ns != rec.get("mtime_ns"):
        try:  # the same bytes with a new mtime (copied, touched): hashed once, not on every use
            write_record(binary)
        except OSError:
            pass
    return why


def damaged(binary: Path) -> str | None:
    """After `binary` crashed: the full check against its record (beside it, or Kueue's build.json), or
    None when it is intact or the harness did not build it (no record)."""
    rec = read_record(binary)
    if rec is None:
        meta = binary.parent / "build.json"
        try:
            rec = json.loads(meta.read_text()).get("binary") if binary.name == "kueue" else None
        except (OSError, ValueError, AttributeError):
            rec = None
    return problem(binary, rec, full=True)
