"""Perturbations a minute of `kueue-harness explore` (issue 25: >= 20 a minute idle on 2 cores, >= 6 at load 8).

    .venv/bin/python bench/explore_rate.py --workers 2 --minutes 10 [--burners 6] [--kueue-version v0.19.2] \\
        [--reference DIR] [--cases test_a_control,test_b_control] [--tag T] [--out DIR]

Runs one exploration of every control case under cases/ (or `--cases`) with `--workers` pytest processes,
each with its own environment, while `--burners` busy loops (bench/stress.py) load the machine; samples the
1-minute load every 5 s. `--reference DIR` reuses an earlier exploration's reference runs (the rate is then
the search's alone). The rate counts perturbations (explore.json `counts.tried`) over the search's wall
minutes (explore.json `minutes`, reference runs included when not reused); the runs a minute of every role
(no-op, minimising, replays) are given apart.

Writes bench/results/<date>-explore-rate[-T].json: `workers`, `burners`, `load` (samples, median, max),
`perturbations`, `minutes`, `per_minute`, `runs_per_minute`, `counts`, the command; prints one line. Not a
test: it prints figures. Run it alone: other work on the machine is load it does not count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, write_result  # noqa: E402
from stress import Burners, LoadSampler  # noqa: E402

from harness.common.errors import HarnessError  # noqa: E402
from harness.explore.cases import control_cases, resolve_case  # noqa: E402
from harness.explore.command import DEFAULT_WORKERS, MAX_WORKERS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--burners", type=int, default=0, help="busy CPU loops beside the exploration (default 0)")
    ap.add_argument("--kueue-version", default="v0.19.2")
    ap.add_argument("--reference", help="an earlier exploration's folder: reuse its reference runs")
    ap.add_argument("--cases", help="comma-separated control cases (default: every control under cases/)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", help="the exploration's folder (default /tmp/explore-rate-<time>)")
    args = ap.parse_args(argv)
    # Every check before the busy loops start: a bad input must cost nothing (and overwrite nothing).
    if not (1 <= args.workers <= MAX_WORKERS) or not (math.isfinite(args.minutes) and args.minutes > 0) \
            or args.burners < 0:
        ap.error(f"--workers must be 1-{MAX_WORKERS}, --minutes a finite number above 0, --burners >= 0")
    try:
        cases = [resolve_case(c) for c in args.cases.split(",")] if args.cases is not None else control_cases()
    except HarnessError as e:
        ap.error(f"--cases: {e}")
    if args.reference and not (Path(args.reference) / "reference").is_dir():
        ap.error(f"--reference {args.reference}: not the folder of an earlier exploration (no reference/ in it)")
    out = Path(args.out or f"/tmp/explore-rate-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        ap.error(f"--out {out}: a file, or a folder that already holds files (an earlier exploration?); give a new one")
    out.parent.mkdir(parents=True, exist_ok=True)
    name = "explore-rate" + (f"-{args.tag}" if args.tag else "")
    if (RESULTS / f"{time.strftime('%Y-%m-%d')}-{name}.json").exists():
        name += time.strftime("-%H%M%S")  # a result of the same day and tag is never overwritten
    cmd = [str(ROOT / ".venv" / "bin" / "kueue-harness"), "explore", "--kueue-version", args.kueue_version,
           "--minutes", f"{args.minutes:g}", "--workers", str(args.workers), "--out", str(out),
           *(["--reference", args.reference] if args.reference else []), *cases]
    print(f"[rate] {len(cases)} control(s), {args.workers} worker(s), {args.burners} busy loop(s): {' '.join(cmd)}")
    sampler = LoadSampler()
    with Burners(args.burners):
        sampler.start()
        t0 = time.monotonic()
        with open(out.parent / f"{out.name}.log", "w") as log:
            rc = subprocess.call(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
        wall = (time.monotonic() - t0) / 60.0
        samples = sampler.stop()
    result = json.loads((out / "explore.json").read_text()) if (out / "explore.json").is_file() else {}  # this run's
    counts = result.get("counts") or {}
    minutes = float(result.get("minutes") or wall)
    runs = result.get("runs") or []
    data = {"workers": args.workers, "burners": args.burners, "cases": cases, "kueue": result.get("kueue"),
            "reference_reused": bool(args.reference), "exit": rc, "out": str(out),
            "load": {"samples": samples, "median": statistics.median(samples) if samples else None,
                     "max": max(samples) if samples else None},
            "perturbations": counts.get("tried", 0), "minutes": round(minutes, 2),
            "per_minute": round(counts.get("tried", 0) / minutes, 2) if minutes else None,
            "runs": len(runs), "runs_per_minute": round(len(runs) / minutes, 2) if minutes else None,
            "counts": counts, "command": " ".join(cmd)}
    path = write_result(name, data)
    print(f"[rate] {data['perturbations']} perturbations in {data['minutes']} min: {data['per_minute']} a minute "
          f"({data['runs_per_minute']} runs a minute), load median {data['load']['median']}, exit {rc} ({path.name})")
    if rc != 0:
        tail = (out.parent / f"{out.name}.log").read_text(errors="replace").splitlines()[-5:]
        print("[rate] the exploration failed; the end of its log:\n" + "\n".join(tail))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
