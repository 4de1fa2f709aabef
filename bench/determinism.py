"""Determinism of the seed cases: run each seed case and its no-fault control N times in one local
environment on real Kueue and print hits/N, false positives/N and time-to-verdict (median, max).

    .venv/bin/python bench/determinism.py --runs 10 [--kueue-version v0.17.0]

Time-to-verdict of a case = its setup (less the session's environment start, which pytest charges to the
first case) + its call, i.e. from the case's namespace to its verdict; the case's teardown (evidence:
history merge, final objects) is reported apart. `median_seconds`/`max_seconds` keep their old meaning
(pytest's setup + call + teardown, the first case including the environment start).

Writes bench/results/<date>-determinism-<version>.json. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ["cases/kueue_11480"]


def _tree() -> dict:
    """HEAD and uncommitted harness/addon/case files (others edit the tree while benchmarks run)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from _common import tree

    return tree()


class PhaseTimes:
    """pytest plugin: each item's setup/call/teardown durations, and how much of its setup went into
    session-scoped fixtures (the environment start), so time-to-verdict can leave that out."""

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, float]] = {}
        self.session_fixture_setup: dict[str, float] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        t = time.monotonic()
        try:
            return (yield)
        finally:
            if fixturedef.scope == "session":
                node = getattr(request, "node", None)
                nodeid = getattr(getattr(request, "_pyfuncitem", None), "nodeid", None) or getattr(node, "nodeid", "")
                self.session_fixture_setup[nodeid] = self.session_fixture_setup.get(nodeid, 0.0) + time.monotonic() - t

    def pytest_runtest_logreport(self, report) -> None:
        self.phases.setdefault(report.nodeid, {})[report.when] = report.duration

    def time_to_verdict(self, nodeid: str) -> float:
        p = self.phases.get(nodeid, {})
        return max(0.0, p.get("setup", 0.0) - self.session_fixture_setup.get(nodeid, 0.0)) + p.get("call", 0.0)


class LoadSampler:
    """os.getloadavg() every `every` seconds in a daemon thread (the machine is shared)."""

    def __init__(self, every: float = 10.0) -> None:
        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(round(os.getloadavg()[0], 2))
            self._stop.wait(self.every)

    def __enter__(self) -> "LoadSampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kueue-version", default="v0.17.0")
    ap.add_argument("--artifacts-dir", default=None)
    a = ap.parse_args()
    art = Path(a.artifacts_dir or ROOT / "artifacts" / f"bench-determinism-{time.strftime('%Y%m%d-%H%M%S')}")
    phases = PhaseTimes()
    with LoadSampler() as sampler:
        pytest.main([*(str(ROOT / c) for c in CASES), "-q", "-p", "no:cacheprovider", f"--repeat={a.runs}",
                     f"--kueue-version={a.kueue_version}", f"--artifacts-dir={art}"], plugins=[phases])
    summary = json.loads((art / "summary.json").read_text())
    by_case: dict[str, list[dict]] = {}
    for c in summary["cases"]:
        name = c["case"].split("::")[-1].split("[")[0]
        by_case.setdefault(name, []).append(c)
    rows = []
    print(f"\nKueue {summary['kueue_version']}, {a.runs} runs per case, one environment "
          f"(ready in {summary['environment_ready_seconds']}s)")
    print("time-to-verdict (ttv) = case setup without the environment start + call; first 10 runs and all")
    print(f"{'case':<38} {'expected':<10} {'as expected':>11} {'errors':>6} {'ttv med':>7} {'ttv max':>7}"
          f" {'(10) med':>8} {'(10) max':>8} {'teardown':>8}")
    for name, runs in by_case.items():
        exp = runs[0]["expected"]
        ok = sum(r["verdict"] == exp for r in runs)
        err = sum(r["verdict"] == "error" for r in runs)
        secs = [r["seconds"] for r in runs]
        ttv = [round(phases.time_to_verdict(r["case"]), 3) for r in runs]
        first = ttv[:10]
        teardown = [round(phases.phases.get(r["case"], {}).get("teardown", 0.0), 3) for r in runs]
        rows.append({"case": name, "expected": exp, "as_expected": ok, "runs": len(runs), "errors": err,
                     "median_seconds": round(statistics.median(secs), 2), "max_seconds": round(max(secs), 2),
                     "ttv_median_seconds": round(statistics.median(ttv), 2), "ttv_max_seconds": round(max(ttv), 2),
                     "ttv_first10_median_seconds": round(statistics.median(first), 2),
                     "ttv_first10_max_seconds": round(max(first), 2),
                     "teardown_median_seconds": round(statistics.median(teardown), 2),
                     "ttv_seconds": ttv, "verdicts": [r["verdict"] for r in runs],
                     "details": sorted({r.get("detail", "") for r in runs if r["verdict"] != exp})})
        print(f"{name:<38} {exp:<10} {ok:>6}/{len(runs):<4} {err:>6} {statistics.median(ttv):>7.1f} {max(ttv):>7.1f}"
              f" {statistics.median(first):>8.1f} {max(first):>8.1f} {statistics.median(teardown):>8.2f}")
    out = ROOT / "bench" / "results" / f"{time.strftime('%Y-%m-%d')}-determinism-{summary['kueue_version']}.json"
    out.write_text(json.dumps({"kueue_version": summary["kueue_version"], "runs": a.runs,
                               "environment_ready_seconds": summary["environment_ready_seconds"],
                               "cases": rows, "artifacts": str(art),
                               "session_fixture_setup_seconds": {k: round(v, 2) for k, v in phases.session_fixture_setup.items()},
                               "loadavg_1m_samples": sampler.samples,
                               "loadavg_1m_median": statistics.median(sampler.samples) if sampler.samples else None,
                               "cpus": os.cpu_count(), "tree": _tree()}, indent=2))
    print(f"written: {out}")
    return 0 if all(r["as_expected"] == r["runs"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
