"""Issue 25's bar, "a run that ends with a hold timeout and a lasting violation appears as a finding", on a
real run: the search is seeded with one perturbation of an earlier exploration (a run of its explore.json,
by id) instead of its roots, so that the run is made again now, with budget left to salvage it
(harness/explore/salvage.py: replayed as the plan that happened, a timed-out hold held for as long as it
was; kept as a finding, confirmed and minimised, when that reproduces).

    .venv/bin/python bench/salvage_proof.py --from DIR/explore.json --run p0055 --kueue-version v0.17.0 \\
        --out /tmp/salvage [--minutes 30]

Prints the run's outcome, what salvage made of it and the finding; writes the exploration's explore.json and
summary.md in --out, and bench/results/<date>-salvage-proof[-TAG].json. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from harness.build import binaries  # noqa: E402
from harness.build.kueue import KueueSpec  # noqa: E402
from harness.explore.driver import Explorer  # noqa: E402
from harness.explore.model import Candidate, move_from_dict  # noqa: E402


class Seeded(Explorer):
    """An exploration whose only root is the given candidate (no generated roots)."""

    def __init__(self, *a, first: Candidate, **kw) -> None:
        super().__init__(*a, **kw)
        self.first = first

    def seed(self, traces) -> int:
        self.push(self.first, "root")
        return 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", required=True, help="an earlier exploration's explore.json")
    ap.add_argument("--run", required=True, help="the id of one of its perturbations (p0055)")
    ap.add_argument("--kueue-version", default="v0.17.0")
    ap.add_argument("--out", required=True, help="a new folder for this exploration")
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="the budget: one run is made, but confirming and minimising get 15 %% of it (default 30)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    try:
        runs = {r["id"]: r for r in json.loads(Path(args.src).read_text())["runs"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        ap.error(f"--from {args.src}: not an explore.json ({e})")
    if args.run not in runs or runs[args.run].get("role") != "perturbation":
        ap.error(f"--run {args.run}: no perturbation of that id in {args.src}")
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        ap.error(f"--out {out}: already holds files; evidence is never overwritten")
    r = runs[args.run]
    first = Candidate(tuple(move_from_dict(m) for m in r["moves"]), r["case"], r.get("family") or "seeded")
    spec = KueueSpec.from_options(args.kueue_version, None, None, None, None)
    binaries.ensure_all(spec, lambda line: print(f"    {line}"))
    ex = Seeded([r["case"]], spec, out.resolve(), minutes=args.minutes, max_runs=1, first=first)
    t0 = time.monotonic()
    result = ex.run()
    mine = [x for x in result["runs"] if x.get("role") == "perturbation"]
    data = {"from": args.src, "run": args.run, "plan": r.get("words"), "case": r["case"],
            "kueue": result["kueue"], "earlier": {k: r.get(k) for k in ("outcome", "reason", "violated", "salvage")},
            "now": [{k: x.get(k) for k in ("id", "outcome", "reason", "violated", "salvage")} for x in mine],
            "findings": [{k: f.get(k) for k in ("id", "key", "plan", "note", "confirmed", "minimal_words", "reproduced",
                                                 "file")} for f in result["findings"]],
            "counts": result["counts"], "minutes": round((time.monotonic() - t0) / 60, 2), "evidence": str(out)}
    write_result("salvage-proof" + (f"-{args.tag}" if args.tag else ""), data)
    print(json.dumps({k: data[k] for k in ("earlier", "now", "findings")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
