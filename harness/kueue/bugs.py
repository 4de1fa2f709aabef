"""Known upstream Kueue bugs, declared next to their cases: `cases/<bug folder>/bug.yaml` (a list under
`bugs:` of key, issue, summary, affected ranges, fixed_in tags, fix_commits per branch). Adding a bug is
adding its folder; nothing here changes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from harness.common import paths
from harness.common.errors import HarnessError
from harness.kueue.versions import KnownBug

CASES_DIR = paths.CASES_DIR
_FIELDS = {"key", "issue", "summary", "affected", "fixed_in", "fix_commits", "fix_patches"}


def parse(text: str, source: str) -> dict[str, KnownBug]:
    """The bugs of one bug.yaml text. `fix_patches` name patch files relative to `source`'s folder (read
    and hashed here). Raises HarnessError naming `source` and the bad entry or missing patch file."""
    try:
        doc: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise HarnessError(f"{source}: not valid YAML ({' '.join(str(e).replace('<unicode string>', source).split())}); fix or remove "
                           "that bug.yaml") from None
    if not isinstance(doc, dict):
        raise HarnessError(f"{source}: expected a mapping with a `bugs:` list")
    out: dict[str, KnownBug] = {}
    for i, b in enumerate(doc.get("bugs") or []):
        where = f"{source}: bugs[{i}]"
        if not isinstance(b, dict) or not {"key", "issue", "summary", "affected"} <= set(b):
            raise HarnessError(f"{where}: needs key, issue, summary and affected")
        unknown = set(b) - _FIELDS
        if unknown:
            raise HarnessError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(_FIELDS))})")
        out[str(b["key"])] = KnownBug(issue=str(b["issue"]), affected=tuple(b["affected"]), summary=str(b["summary"]),
                                      fixed_in=tuple(b.get("fixed_in") or ()),
                                      fix_commits={str(k): str(v) for k, v in (b.get("fix_commits") or {}).items()},
                                      fix_patches=_patch_digests(b.get("fix_patches") or [], source, where))
    return out


def _patch_digests(names: list, source: str, where: str) -> dict[str, str]:
    out = {}
    for n in names:
        path = Path(source).parent / str(n)
        try:
            out[str(n)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            raise HarnessError(f"{where}: fix_patches names {n}, but {path} cannot be read") from None
    return out


def load(folders: list[Path] | None = None) -> dict[str, KnownBug]:
    """Every bug declared under `folders` (default: each folder of cases/ with a bug.yaml)."""
    out: dict[str, KnownBug] = {}
    for f in sorted(folders if folders is not None else CASES_DIR.glob("*/bug.yaml")):
        path = f if f.name == "bug.yaml" else f / "bug.yaml"
        if path.is_file():
            out.update(parse(path.read_text(), str(path)))
    return out
