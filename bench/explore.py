"""Explore from the two control cases alone (issue 14): does `kueue-harness explore` find both
kubernetes-sigs/kueue#11480 scenarios on an affected build, how many perturbations and minutes did each
take, and does the stuck-preemption finding disappear on a build with the fix?

    KUEUE_HARNESS_KUEUE_REPO=/path/kueue.git.tar .venv/bin/python bench/explore.py \\
        [--affected v0.17.0] [--fixed v0.17.4] [--minutes 30] [--replay-runs 10] [--tag TAG]

1. `explore test_stuck_preemption_control test_quota_oversubscription_control` on the affected build,
   `--minutes` of budget (the whole budget is spent: the table counts every perturbation, discarded run
   and no-op run);
2. the same on the fixed build, with at most as many perturbations as the affected run tried;
3. each minimal plan found on the affected build replayed `--replay-runs` times on both builds
   (`pytest CASE --plan FILE --repeat N`): hits/N.

Writes bench/results/<date>-explore[-TAG].json and prints a table. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, load, write_result  # noqa: E402

CASES = ["test_stuck_preemption_control", "test_quota_oversubscription_control"]
SCENARIO_1, SCENARIO_2 = "liveness:job2:stuck", "quota:cq"


def explore(version: str, out: Path, minutes: float, max_runs: int | None) -> dict:
    cmd = [str(ROOT / ".venv/bin/kueue-harness"), "explore", *CASES, "--kueue-version", version, "--out", str(out),
           "--minutes", str(minutes), "--no-known"]  # it measures finding the known bugs: none muted
    if max_runs:
        cmd += ["--max-runs", str(max_runs)]
    t0 = time.monotonic()
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    result = json.loads((out / "explore.json").read_text())
    result["wall_minutes"] = round((time.monotonic() - t0) / 60, 2)
    return result


def replay(case: str, plan: str, version: str, runs: int, out: Path) -> dict:
    """Hits of `plan` on `case`, `runs` times in one environment (pytest --plan --repeat)."""
    art = out / f"replay-{Path(plan).stem}-{version}"
    cmd = [sys.executable, "-m", "pytest", case, "-q", "-p", "no:cacheprovider", "--no-verdict-table",
           f"--plan={plan}", f"--repeat={runs}", f"--artifacts-dir={art}", f"--kueue-version={version}"]
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    cases = json.loads((art / "summary.json").read_text())["cases"]
    verdicts = [c["verdict"] for c in cases]
    return {"runs": len(verdicts), "reproduced": verdicts.count("reproduced"), "passed": verdicts.count("passed"),
            "error": verdicts.count("error"), "evidence": str(art)}


def brief(result: dict) -> dict:
    found = {f["key"]: {"first_run": f["first_run"], "perturbations": f["first_index"], "minutes": f["first_minutes"],
                        "minimal_plan": f.get("minimal_words"), "reproduced": f.get("reproduced"), "file": f.get("file"),
                        "case": f.get("case"), "bundle": f.get("bundle")} for f in result["findings"]}
    return {"kueue": result["kueue"], "minutes": result["minutes"], "counts": result["counts"], "found": found}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--affected", default="v0.17.0")
    ap.add_argument("--fixed", default="v0.17.4")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--replay-runs", type=int, default=10)
    ap.add_argument("--out", default=None, help="folder for the explorations (default artifacts/bench-explore-<time>)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    out = Path(args.out or ROOT / "artifacts" / f"bench-explore-{time.strftime('%Y%m%d-%H%M%S')}")
    load_before = load()
    affected = explore(args.affected, out / args.affected, args.minutes, None)
    a = brief(affected)
    fixed = explore(args.fixed, out / args.fixed, args.minutes, affected["counts"]["tried"])
    b = brief(fixed)
    replays = {}
    for key, f in a["found"].items():
        if f.get("file"):
            replays[key] = {v: replay(f["case"], f["file"], v, args.replay_runs, out) for v in (args.affected, args.fixed)}
    data = {"command": " ".join(sys.argv), "cases": CASES, "budget_minutes": args.minutes, "load_before": load_before,
            "load_after": load(), "affected": a, "fixed": b, "replays": replays,
            "targets": {"both_found_within_minutes": 30, "false_positives": 0},
            "met": {"scenario_1_found": SCENARIO_1 in a["found"], "scenario_2_found": SCENARIO_2 in a["found"],
                    "within_30_min": all(k in a["found"] and a["found"][k]["minutes"] <= 30 for k in (SCENARIO_1, SCENARIO_2)),
                    "scenario_1_gone_on_fixed": SCENARIO_1 not in b["found"],
                    "no_false_positive": affected["counts"]["false_positives"] == 0 and fixed["counts"]["false_positives"] == 0},
            "evidence": str(out)}
    write_result("explore" + (f"-{args.tag}" if args.tag else ""), data)
    print(f"\n{'build':<10} {'tried':>6} {'discarded':>9} {'violations':>10} {'distinct':>8} {'no-op':>6} {'FP':>3} {'min':>6}")
    for r in (a, b):
        c = r["counts"]
        print(f"{r['kueue']:<10} {c['tried']:>6} {c['discarded']:>9} {c['violations']:>10} {c['distinct']:>8} "
              f"{c['noop_runs']:>6} {c['false_positives']:>3} {r['minutes']:>6.1f}")
    for r in (a, b):
        for key, f in r["found"].items():
            print(f"  {r['kueue']} {key}: after {f['perturbations']} perturbations, {f['minutes']:.1f} min; minimal: "
                  f"{f['minimal_plan']} ({f['reproduced']})")
    for key, per in replays.items():
        print(f"  replay {key}: " + "; ".join(f"{v} {x['reproduced']}/{x['runs']} reproduced" for v, x in per.items()))
    print("met:", data["met"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
