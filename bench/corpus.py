"""Measure one bug of the corpus (cases/<bug>/): run its case and its control N times on one Kueue build
through pytest, and record each run's verdict, what it was expected to be and its detail.

    .venv/bin/python bench/corpus.py cases/kueue_9428 --kueue-version v0.16.1 --runs 5 [-- PYTEST ARGS]

Writes bench/results/<date>-corpus-<bug>-<version>.json, which bench/corpus_table.py turns into the
bug table of docs/bugs.md. Not a test: it prints figures (and exits 0 whatever the verdicts were).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, load, write_result  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", help="a bug folder, e.g. cases/kueue_9428")
    ap.add_argument("--kueue-version", required=True, help="the Kueue tag to run (built if missing)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each test of the folder (default 5)")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. -k control")
    a = ap.parse_args(argv)
    folder = Path(a.case)
    if not (ROOT / folder / "bug.yaml").is_file():
        ap.error(f"{folder} has no bug.yaml: name a folder of cases/ (e.g. cases/kueue_9428)")
    if a.runs < 1:
        ap.error("--runs must be 1 or more")
    art = Path(tempfile.mkdtemp(prefix=f"corpus-{folder.name}-", dir=ROOT / "artifacts" if (ROOT / "artifacts").is_dir() else None))
    cmd = [sys.executable, "-m", "pytest", str(folder), f"--repeat={a.runs}", "--kueue-version", a.kueue_version,
           "--artifacts-dir", str(art), "-q", *a.pytest_args]
    print("running:", " ".join(cmd), flush=True)
    before, t0 = load(), time.time()
    proc = subprocess.run(cmd, cwd=ROOT)
    seconds = round(time.time() - t0, 1)
    summaries = sorted(art.rglob("summary.json"))
    if not summaries:
        print(f"no summary.json under {art}: pytest exited {proc.returncode} before any case ran", file=sys.stderr)
        return 1
    s = json.loads(summaries[-1].read_text())
    runs = [{"test": re.sub(r"\[.*\]$", "", c["case"].split("::")[-1]), "verdict": c.get("verdict"),
             "expected": c.get("expected"), "detail": c.get("detail"), "seconds": c.get("seconds")}
            for c in s.get("cases", [])]
    tally: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in runs:
        tally[r["test"]][r["verdict"]] += 1
    for test, c in tally.items():
        print(f"  {test}: " + ", ".join(f"{v} {n}/{sum(c.values())}" for v, n in c.most_common()))
    version = s.get("kueue_version") or a.kueue_version
    race = "--kueue-race" in a.pytest_args  # Go's race detector: a result of its own (docs/kueue-builds.md)
    patches = [Path(x).stem for i, x in enumerate(a.pytest_args) if i and a.pytest_args[i - 1] == "--kueue-patch"]
    write_result(f"corpus-{folder.name}-{a.kueue_version}" + "".join(f"+{x}" for x in patches)
                 + ("-race" if race else ""), {
        "command": " ".join(["python", "bench/corpus.py", str(folder), "--kueue-version", a.kueue_version,
                             "--runs", str(a.runs), *a.pytest_args]),
        "bug_folder": str(folder), "kueue_requested": a.kueue_version, "kueue_version": version,
        "runs_per_test": a.runs, "race": race, "patches": patches, "seconds": seconds, "load_before": before, "load_after": load(),
        "pytest_exit": proc.returncode, "artifacts": str(art.relative_to(ROOT)) if art.is_relative_to(ROOT) else str(art),
        "tally": {t: dict(c) for t, c in tally.items()}, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
