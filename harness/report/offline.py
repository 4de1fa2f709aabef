"""Offline: `kueue-harness report BUNDLE` re-runs the checkers on a bundle (folder or .tar.gz) and
writes a fresh report.md; no cluster is needed.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.checkers import Finding
from harness.report.bundle import BundleError, history_problems, load_history, load_objects
from harness.report.markdown import render_report

# =====================================================================================================
# Offline: `kueue-harness report BUNDLE`


@dataclass
class Recheck:
    """What `report_bundle` found: the bundle folder it read, the run's recorded verdict, the re-checked
    one, the findings and the report.md it wrote."""

    folder: Path
    recorded: str
    verdict: str
    findings: list[Finding]
    report: Path


def _extract(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tf:
        tops = {m.name.split("/")[0] for m in tf.getmembers()}
        if len(tops) != 1:
            raise BundleError(f"{archive}: expected one bundle folder inside, found {sorted(tops)}")
        tf.extractall(into, filter="data")
    return into / tops.pop()


def report_bundle(bundle: Path, out: Path | None = None, bound: float | None = None) -> Recheck:
    """Re-run the checkers on a bundle (folder or .tar.gz) and write report.md: into the folder itself,
    or for an archive into `out` (default: `<archive>.recheck/` beside it). No cluster is needed.
    Raises BundleError if history.jsonl or bundle.json is missing or malformed."""
    bundle = Path(bundle)
    if not bundle.exists():
        raise BundleError(f"{bundle} does not exist: give a bundle folder (artifacts/<run>/cases/<case>) or its .tar.gz")
    if bundle.is_dir():
        folder = bundle
        dest = Path(out) if out else folder
    else:
        dest = Path(out) if out else bundle.with_name(bundle.name.removesuffix(".gz").removesuffix(".tar") + ".recheck")
        with tempfile.TemporaryDirectory() as tmp:
            src = _extract(bundle, Path(tmp))
            dest.mkdir(parents=True, exist_ok=True)
            for p in src.iterdir():
                if p.is_file():
                    shutil.copy2(p, dest / p.name)
        folder = dest
    try:
        meta = json.loads((folder / "bundle.json").read_text())
    except (OSError, ValueError) as e:
        raise BundleError(f"{folder}/bundle.json: {e}. Is this a kueue-harness bundle (docs/evidence.md)?") from None
    history = load_history(folder / "history.jsonl")
    objects = load_objects(folder / "objects.yaml")
    md, verdict, findings = render_report(meta, history, objects, bound)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "report.md").write_text(md)
    return Recheck(folder, str(meta.get("verdict", "?")), verdict, findings, dest / "report.md")


def cli(bundle: str, out: str | None = None, bound: float | None = None) -> int:
    """`kueue-harness report`: print the findings and the verdict; exit 0 when the re-checked verdict is
    the run's recorded one, 1 when it differs."""
    r = report_bundle(Path(bundle), Path(out) if out else None, bound)
    print(f"{r.folder.name}: re-checked offline from history.jsonl + objects.yaml with the run's checkers"
          + (f" (liveness bound {bound:g}s)" if bound is not None else ""))
    for p in history_problems(load_history(r.folder / "history.jsonl")):
        print(f"  note: history.jsonl departs from docs/history.md: {p}")
    for f in r.findings:
        print(f"  {f.check:<20} {f.result:<15} {f.evidence}")
    same = r.verdict == r.recorded
    print(f"verdict: {r.verdict} (recorded at run time: {r.recorded}) — {'agrees' if same else 'DIFFERS'}")
    print(f"report: {r.report}")
    return 0 if same else 1
