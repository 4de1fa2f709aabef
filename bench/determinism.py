"""Determinism of the seed cases: run each seed case and its no-fault control N times in one local
environment on real Kueue and print hits/N, false positives/N and time-to-verdict (median, max).

    .venv/bin/python bench/determinism.py --runs 10 [--kueue-version v0.17.0]

Writes bench/results/<date>-determinism-<version>.json. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ["cases/test_stuck_preemption.py", "cases/test_quota_oversubscription.py"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kueue-version", default="v0.17.0")
    ap.add_argument("--artifacts-dir", default=None)
    a = ap.parse_args()
    art = Path(a.artifacts_dir or ROOT / "artifacts" / f"bench-determinism-{time.strftime('%Y%m%d-%H%M%S')}")
    pytest.main([*(str(ROOT / c) for c in CASES), "-q", "-p", "no:cacheprovider", f"--repeat={a.runs}",
                 f"--kueue-version={a.kueue_version}", f"--artifacts-dir={art}"])
    summary = json.loads((art / "summary.json").read_text())
    by_case: dict[str, list[dict]] = {}
    for c in summary["cases"]:
        name = c["case"].split("::")[-1].split("[")[0]
        by_case.setdefault(name, []).append(c)
    rows = []
    print(f"\nKueue {summary['kueue_version']}, {a.runs} runs per case, one environment "
          f"(ready in {summary['environment_ready_seconds']}s)")
    print(f"{'case':<38} {'expected':<10} {'as expected':>11} {'errors':>6} {'median s':>8} {'max s':>6}")
    for name, runs in by_case.items():
        exp = runs[0]["expected"]
        ok = sum(r["verdict"] == exp for r in runs)
        err = sum(r["verdict"] == "error" for r in runs)
        secs = [r["seconds"] for r in runs]
        rows.append({"case": name, "expected": exp, "as_expected": ok, "runs": len(runs), "errors": err,
                     "median_seconds": round(statistics.median(secs), 2), "max_seconds": round(max(secs), 2),
                     "verdicts": [r["verdict"] for r in runs]})
        print(f"{name:<38} {exp:<10} {ok:>6}/{len(runs):<4} {err:>6} {statistics.median(secs):>8.1f} {max(secs):>6.1f}")
    out = ROOT / "bench" / "results" / f"{time.strftime('%Y-%m-%d')}-determinism-{summary['kueue_version']}.json"
    out.write_text(json.dumps({"kueue_version": summary["kueue_version"], "runs": a.runs,
                               "environment_ready_seconds": summary["environment_ready_seconds"],
                               "cases": rows, "artifacts": str(art)}, indent=2))
    print(f"written: {out}")
    return 0 if all(r["as_expected"] == r["runs"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
