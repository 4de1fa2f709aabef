"""Issue 25's bar, "a run that ends with a hold timeout and a lasting violation appears as a finding", on a
real run: the search is seeded with one perturbation of an earlier exploration (a run of its explore.json,
by id) instead of its roots, so that the run is made again now, with budget left to salvage it
(harness/explore/salvage.py: replayed as the plan that happened, a timed-out hold held for as long as it
was; kept as a finding, confirmed and minimised, when that reproduces).

    .venv/bin/python bench/salvage_proof.py --from DIR/explore.json --run p0055 --kueue-version v0.17.0 \\
        --out /tmp/salvage [--minutes 30]
    .venv/bin/python bench/salvage_proof.py --case CASE --moves '[{"kind": "hold", ...}]' --out /tmp/salvage

(`--moves`: a plan as explore.json stores a run's `moves`, for a run no exploration made: e.g. a hold whose
trigger can never come, which explore itself no longer generates.)

Prints the run's outcome, what salvage made of it and the finding; writes the exploration's explore.json and
summary.md in --out, and bench/results/<date>-salvage-proof[-TAG].json. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from harness.build import binaries  # noqa: E402
from harness.build.kueue import KueueSpec  # noqa: E402
from harness.common.errors import HarnessError  # noqa: E402
from harness.explore.cases import resolve_case  # noqa: E402
from harness.explore.command import MAX_WORKERS  # noqa: E402
from harness.explore.driver import Explorer  # noqa: E402
from harness.explore.model import Candidate, move_from_dict, validate  # noqa: E402


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
    ap.add_argument("--from", dest="src", help="an earlier exploration's explore.json")
    ap.add_argument("--run", help="the id of one of its perturbations (p0055)")
    ap.add_argument("--moves", help="instead of --from/--run: a JSON list of moves (explore.json `moves`)")
    ap.add_argument("--case", help="with --moves: the control case they perturb (a node id)")
    ap.add_argument("--kueue-version", default="v0.17.0")
    ap.add_argument("--out", required=True, help="a new folder for this exploration")
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="the budget: one run is made, but confirming and minimising get 15 %% of it (default 30)")
    ap.add_argument("--workers", type=int, default=1, help="explore --workers: the replays side by side (default 1)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    if not (1 <= args.workers <= MAX_WORKERS):
        ap.error(f"--workers must be 1-{MAX_WORKERS} (each starts its own environment), got {args.workers}")
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        ap.error(f"--minutes must be a finite number above 0, got {args.minutes}")
    if args.moves is not None and (args.src or args.run):
        ap.error("give --moves JSON --case CASE, or --from FILE --run ID, not both")
    if args.case and not args.moves:
        ap.error("--case goes with --moves (with --from/--run the run's own case is used)")
    if args.moves is not None:
        if not args.moves.strip():
            ap.error("--moves is empty: give a JSON list of moves as explore.json stores a run's `moves`")
        if not args.case:
            ap.error("--moves needs --case (the control case's node id or name)")
        r = {"moves": None, "case": args.case, "family": "seeded", "words": None}
        try:
            r["moves"] = json.loads(args.moves)
        except ValueError as e:
            ap.error(f"--moves: not JSON ({e})")
    else:
        if not (args.src and args.run):
            ap.error("give --from FILE --run ID, or --moves JSON --case CASE")
        try:
            runs = {x["id"]: x for x in json.loads(Path(args.src).read_text())["runs"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--from {args.src}: not an explore.json ({e})")
        if args.run not in runs or runs[args.run].get("role") != "perturbation":
            ap.error(f"--run {args.run}: no perturbation of that id in {args.src}")
        r = runs[args.run]
    where = "--moves" if args.moves is not None else f"--run {args.run}"
    if not isinstance(r.get("moves"), list) or not r["moves"]:
        ap.error(f"{where}: the moves must be a non-empty JSON list of moves (explore.json `moves`)")
    try:
        first = Candidate(tuple(move_from_dict(m) for m in r["moves"]), resolve_case(str(r["case"])),
                          r.get("family") or "seeded")
    except HarnessError as e:
        ap.error(f"{where}: {e}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        ap.error(f"{where}: not a list of explore.json moves ({type(e).__name__}: {e}; each needs kind and target)")
    problem = validate(first.moves)
    if problem:
        ap.error(f"{where}: not a plan the loader accepts: {problem}")
    r["words"] = r.get("words") or first.words()
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        ap.error(f"--out {out}: a file, or a folder that already holds files; evidence is never overwritten")
    spec = KueueSpec.from_options(args.kueue_version, None, None, None, None)
    binaries.ensure_all(spec, lambda line: print(f"    {line}"))
    ex = Seeded([first.case], spec, out.resolve(), minutes=args.minutes, max_runs=1, first=first,
                workers=args.workers)
    t0 = time.monotonic()
    result = ex.run()
    mine = [x for x in result["runs"] if x.get("role") == "perturbation"]
    data = {"from": args.src, "run": args.run, "moves": r["moves"], "plan": r.get("words"), "case": r["case"],
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
