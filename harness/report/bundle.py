"""Reading a bundle: history.jsonl (its schema: harness/history/schema.py), objects.yaml,
bundle.json's checker selection, and the re-check (the same checker composition the run used).
"""

from __future__ import annotations

import gzip
import json
import lzma
import math
import shutil
import tarfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from harness.checkers import Finding, Selection, compose
from harness.common.errors import HarnessError
from harness.history.names import Names
from harness.history.schema import HISTORY_FIELDS, WRITE_FIELDS, history_problems  # noqa: F401 - re-exported

BUNDLE_SCHEMA = 1
#: Extraction limits of `extract_archive` (bytes, members): a real bundle is under 5 MB (docs/evidence.md),
#: so a member or archive above these is damaged or hostile, and must not fill the disk.
MAX_MEMBER_BYTES = 64 << 20
MAX_ARCHIVE_BYTES = 256 << 20
MAX_MEMBERS = 200


class BundleError(HarnessError):
    """A bundle folder or archive cannot be read; the message names the missing or broken file.
    Exit code 8 (docs/troubleshooting.md): 1 is kept for "the re-checked verdict differs"."""

    exit_code = 8


# =====================================================================================================
# Reading a bundle


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def extract_archive(archive: Path, into: Path) -> Path:
    """Unpack a bundle archive (.tar.gz: one folder of regular files) into the folder `into`; returns the
    bundle's folder. Reads the archive as a stream and checks each member before writing it: at most
    MAX_MEMBERS members, each at most MAX_MEMBER_BYTES and all together at most MAX_ARCHIVE_BYTES
    (uncompressed), names inside the one top folder, no links, devices or other special files. Raises
    BundleError (nothing more is written) when the archive is truncated, corrupt, or breaks a limit."""
    archive = Path(archive)
    top: str | None = None
    total = count = 0
    try:
        with tarfile.open(archive, "r|*") as tf:
            for m in tf:
                count += 1
                parts = PurePosixPath(m.name).parts
                if not parts or PurePosixPath(m.name).is_absolute() or ".." in parts:
                    raise BundleError(f"{archive}: member {m.name!r} is not a path inside the bundle folder")
                if top is None:
                    top = parts[0]
                elif parts[0] != top:
                    raise BundleError(f"{archive}: expected one bundle folder inside, found {top!r} and "
                                      f"{parts[0]!r}. Give the .tar.gz kueue-harness wrote for one case")
                if m.isdir():
                    continue
                if not m.isfile():
                    raise BundleError(f"{archive}: member {m.name} is a link or special file; a bundle holds "
                                      "regular files only")
                total += m.size
                if m.size > MAX_MEMBER_BYTES:
                    raise BundleError(f"{archive}: member {m.name} unpacks to {_mib(m.size)}, above the "
                                      f"{_mib(MAX_MEMBER_BYTES)} a bundle file may have; not extracted")
                if total > MAX_ARCHIVE_BYTES or count > MAX_MEMBERS:
                    raise BundleError(f"{archive}: unpacks to more than {_mib(MAX_ARCHIVE_BYTES)} or "
                                      f"{MAX_MEMBERS} files, more than a bundle has; not extracted")
                dest = into.joinpath(*parts)
                dest.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(m)
                with open(dest, "wb") as fh:
                    shutil.copyfileobj(src, fh)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as e:
        raise BundleError(f"{archive}: not a readable bundle archive (truncated or corrupt: {e}). Copy the "
                          "<case>.tar.gz again, or give the bundle's folder") from None
    if top is None:
        raise BundleError(f"{archive}: the archive is empty; a bundle archive holds one case folder")
    return into / top


def load_history(path: Path) -> list[dict[str, Any]]:
    """history.jsonl as a list of events in file order. Raises BundleError naming the file and line when
    it cannot be read, a line is not UTF-8 or not a JSON object, or an event lacks `event` or a finite
    numeric `ts` (epoch seconds)."""
    out = []
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise BundleError(f"cannot read {path}: {e}. A bundle needs history.jsonl (docs/evidence.md).") from None
    for i, bline in enumerate(raw.split(b"\n"), 1):
        try:
            line = bline.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BundleError(f"{path}:{i}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise BundleError(f"{path}:{i}: not JSON ({e})") from None
        if not isinstance(ev, dict) or "event" not in ev:
            raise BundleError(f"{path}:{i}: an event is a JSON object with `ts` and `event` (docs/history.md)")
        ts = ev.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise BundleError(f"{path}:{i}: `ts` must be epoch seconds (a finite number), got {ts!r}")
        out.append(ev)
    return out


def load_objects(path: Path) -> dict[str, list[dict[str, Any]]]:
    """objects.yaml ({"workloads": [...], "jobs": [...], "clusterqueues": [...]}); {} if absent or a
    comment only (the harness could not read the final state: `objects_problem` says which). Raises
    BundleError when it is not YAML."""
    try:
        data = yaml.safe_load(path.read_bytes())
    except OSError:
        return {}
    except yaml.YAMLError as e:
        raise BundleError(f"{path}: not YAML ({e})") from None
    return data if isinstance(data, dict) else {}


def objects_problem(path: Path) -> str | None:
    """Why the objects the checkers judge are not in the bundle folder's objects.yaml `path` (None when
    they are): missing, or the comment the harness left when it could not read the final state."""
    if not path.exists():
        return (f"{path.name} is missing: the checkers had no final Workloads, Jobs or ClusterQueues to judge "
                "(the quota checker's final state, liveness's final conditions)")
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"{path.name} cannot be read ({e})"
    if not load_objects(path):
        first = text.strip().splitlines()[0] if text.strip() else "empty"
        return f"{path.name} holds no objects ({first.lstrip('# ')})"
    return None


def load_meta(folder: Path) -> dict[str, Any]:
    """bundle.json of a bundle folder, checked: a JSON object whose `checkers` (if any) name registered
    checkers with parameters they accept. Raises BundleError naming the file otherwise."""
    path = folder / "bundle.json"
    try:
        meta = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        raise BundleError(f"{path}: {e}. Is this a kueue-harness bundle (docs/evidence.md)?") from None
    if not isinstance(meta, dict):
        raise BundleError(f"{path}: a bundle.json is a JSON object, this is {type(meta).__name__}")
    try:
        selection_of(meta).build()
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BundleError(f"{path}: `checkers` is not a selection this harness can run ({e})") from None
    return meta


# =====================================================================================================
# Checkers live in harness/checkers/; the report runs the same composition the case's verdict came from.


#: What ran before bundles recorded their checkers (bundle schema 1 without "checkers").
LEGACY_SELECTION = {"liveness": {}, "quota": {}, "log_flood": {}, "reservation": {}}


def selection_of(meta: Mapping[str, Any], bound: float | None = None) -> Selection:
    """The checkers (and parameters) the run used, from bundle.json; `bound` (seconds) overrides the
    liveness bound when given."""
    declared = meta.get("checkers") or LEGACY_SELECTION
    if not isinstance(declared, Mapping):
        raise TypeError(f"`checkers` must map checker names to parameters, got {type(declared).__name__}")
    chosen = {str(k): dict(v or {}) for k, v in declared.items()}
    if bound is not None and "liveness" in chosen:
        chosen["liveness"]["bound"] = bound
    return Selection(chosen)


def recheck(history: Sequence[Mapping[str, Any]], objects: Mapping[str, Any],
            bound: float | None = None, names: Names | None = None,
            selection: Selection | None = None) -> tuple[str, list[Finding]]:
    """Run the checkers over a history. Returns (verdict, findings): "error" when an assumption failed,
    "reproduced" if a bearing check was violated, "inconclusive" if one was undecided, else "passed".
    `selection` defaults to the liveness, quota, log-flood and reservation checkers. An empty history is
    "inconclusive": nothing in it can show an invariant held."""
    if not history:
        return "inconclusive", [Finding("history", "inconclusive", "the history is empty",
                                        "history.jsonl holds no event: nothing can be judged, so no invariant "
                                        "can be said to hold.")]
    v = compose(selection or selection_of({}, bound), history, objects, names)
    return v.verdict, v.findings
