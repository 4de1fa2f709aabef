"""Offline: `kueue-harness report BUNDLE` re-runs the checkers on a bundle (folder or .tar.gz) and
writes report.recheck.md beside the run's own report.md (never over it); no cluster is needed.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.checkers import Finding
from harness.common.errors import HarnessError
from harness.report import race
from harness.report.bundle import (
    BundleError,
    extract_archive,
    history_problems,
    load_history,
    load_meta,
    load_objects,
    objects_problem,
)
from harness.report.markdown import render_report

# =====================================================================================================
# Offline: `kueue-harness report BUNDLE`


@dataclass
class Recheck:
    """What `report_bundle` found: the bundle folder it read, the run's recorded verdict, the re-checked
    one, the findings, the report it wrote (report.recheck.md) and what is wrong with the bundle (`notes`:
    missing files, departures from docs/history.md)."""

    folder: Path
    recorded: str
    verdict: str
    findings: list[Finding]
    report: Path
    notes: list[str] = field(default_factory=list)


#: The re-check's report: never report.md, which is the run's own record.
RECHECK_NAME = "report.recheck.md"


def check_bound(bound: float | None) -> float | None:
    """`bound` if it is a usable liveness bound (seconds: finite, above 0) or None; else HarnessError
    (exit code 2) saying what is."""
    if bound is None:
        return None
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not math.isfinite(bound) or bound <= 0:
        raise HarnessError(f"--liveness-bound must be a number of seconds above 0, finite, got {bound!r} "
                           "(e.g. --liveness-bound 15, the seed cases' bound)")
    return float(bound)


def report_bundle(bundle: Path, out: Path | None = None, bound: float | None = None) -> Recheck:
    """Re-run the checkers on a bundle (folder or .tar.gz) and write report.recheck.md: into the bundle
    folder, for an archive into `<archive>.recheck/` (the archive's files unpacked there), or into `out`
    (a folder; an archive is unpacked there too). The recorded report.md is never rewritten. `bound`:
    liveness bound in seconds (None: the run's). No cluster is needed.

    Raises HarnessError (exit 2) for a bound that is not a positive finite number, BundleError (exit 8)
    when the archive is damaged or breaks the extraction limits, or history.jsonl / bundle.json is
    missing or malformed; OSError when the output folder cannot be written."""
    bound = check_bound(bound)
    bundle = Path(bundle)
    if not bundle.exists():
        raise BundleError(f"{bundle} does not exist: give a bundle folder (artifacts/<run>/cases/<case>) or its .tar.gz")
    made: list[Path] = []  # the folders this call created: removed again when the bundle is refused
    if bundle.is_dir():
        folder = bundle
        dest = Path(out) if out else folder
    else:
        dest = Path(out) if out else bundle.with_name(bundle.name.removesuffix(".gz").removesuffix(".tar") + ".recheck")
        d = dest.absolute()
        while not d.exists() and d != d.parent:
            made.append(d)
            d = d.parent
        dest.mkdir(parents=True, exist_ok=True)
    try:
        if not bundle.is_dir():
            with tempfile.TemporaryDirectory(dir=dest) as tmp:
                src = extract_archive(bundle, Path(tmp))
                for p in src.iterdir():
                    if p.is_file():
                        shutil.move(p, dest / p.name)
            folder = dest
        meta = load_meta(folder)
        history = load_history(folder / "history.jsonl")
        objects = load_objects(folder / "objects.yaml")
    except BaseException:
        # A refused archive leaves no `.recheck/` folder behind (issue 24): what it unpacked goes too.
        if made:
            shutil.rmtree(made[-1], ignore_errors=True)
        raise
    notes = [p for p in [objects_problem(folder / "objects.yaml")] if p]
    notes += [f"history.jsonl departs from docs/history.md: {p}" for p in history_problems(history)]
    md, verdict, findings = render_report(meta, history, objects, bound, notes=notes, recheck=True,
                                          writes=race.load_writes(folder), managed=race.load_managed(folder))
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / RECHECK_NAME
    target.write_text(md)
    return Recheck(folder, str(meta.get("verdict", "?")), verdict, findings, target, notes)


def cli(bundle: str, out: str | None = None, bound: float | None = None) -> int:
    """`kueue-harness report`: print the findings and the verdict; returns the exit code: 0 when the
    re-checked verdict is the run's recorded one, 1 when it differs. Raises as `report_bundle` (the CLI
    prints those errors and exits 2 or 8)."""
    r = report_bundle(Path(bundle), Path(out) if out else None, bound)
    print(f"{r.folder.name}: re-checked offline from history.jsonl + objects.yaml with the run's checkers"
          + (f" (liveness bound {bound:g}s)" if bound is not None else ""))
    for n in r.notes:
        print(f"  note: {n}")
    for f in r.findings:
        print(f"  {f.check:<20} {f.result:<15} {f.evidence}")
    same = r.verdict == r.recorded
    print(f"verdict: {r.verdict} (recorded at run time: {r.recorded}) — {'agrees' if same else 'DIFFERS'}")
    print(f"report: {r.report}")
    return 0 if same else 1
