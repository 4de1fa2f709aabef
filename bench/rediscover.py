"""Rediscovery (issue 25): does `kueue-harness explore`, given only a bug's *control* case (its bug plan is
never shown to it), find that bug on a build the bug affects, and does the finding disappear on a build
with the fix?

    KUEUE_HARNESS_KUEUE_REPO=/path/kueue.git.tar .venv/bin/python bench/rediscover.py \\
        [--minutes 15] [--bugs 14863,10901] [--no-fixed] [--tag TAG]

For each bug of BUGS: `explore CONTROL --kueue-version AFFECTED --minutes M`; the bug counts as *found*
when a finding's key names the bug's invariant (`signature`: the checker the bug's own case judges by, which
the control shares; harness/explore/findings.py violation_keys), with the perturbation and minute explore
first saw it. Then the same control on the FIXED build with at most as many perturbations: a signature
finding there is a false positive of the oracle (or a second bug). Bugs whose scene no wire ordering of
the control can make (the bug needs other objects: a limits-only pod set, a Job finalizer, a scale-up)
are kept in the table: explore is expected to miss them, and the table says so.

Writes bench/results/<date>-explore-rediscovery[-TAG].json with a `bugs` list (one object per bug: `bug`,
`build`, `found`, `perturbation`, `minute`, …) and prints a table. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, load, write_result  # noqa: E402

from harness.explore.findings import cluster_key, key_matches  # noqa: E402


@dataclass(frozen=True)
class Bug:
    """One bug to rediscover: its key, its control case, builds, and the checkers whose violation is it."""

    bug: str
    control: str
    affected: str
    fixed: str | None
    signature: tuple[str, ...]
    fixed_patches: tuple[str, ...] = ()
    #: Why explore may not reach it from the control (empty: a wire ordering of the control can make it).
    scene: str = ""


C = "cases/"
#: The twelve bugs of issue 25 item 5; builds from each case's bug.yaml (affected / fixed ranges), the cached
#: tags. Signatures: the checkers of the bug's case (cases/<bug>/test_*.py CHECKS), which its control shares.
BUGS: tuple[Bug, ...] = (
    Bug("kubernetes-sigs/kueue#14863", C + "kueue_14863/test_sticky_preemptor.py::test_sticky_preemptor_control",
        "v0.17.0", "v0.17.0", ("liveness:s", "pending_fits_admitted:s"),
        fixed_patches=("cases/kueue_14863/backport.patch",)),
    Bug("kubernetes-sigs/kueue#13662", C + "kueue_13662/test_preemption_thrashing.py::test_preemption_thrashing_control",
        "v0.17.0", "v0.19.2", ("bounded_evictions",)),
    Bug("kubernetes-sigs/kueue#10759", C + "kueue_10759/test_stuck_terminating.py::test_stuck_terminating_control",
        "v0.17.0", "v0.17.2", ("deletion_completes",)),
    Bug("kubernetes-sigs/kueue#10901", C + "kueue_10901/test_deactivated_in_flight.py::test_deactivated_in_flight_control",
        "v0.17.0", "v0.17.4", ("pending_fits_admitted",)),
    Bug("kubernetes-sigs/kueue#10417", C + "kueue_10417/test_stale_subtree_quota.py::test_stale_subtree_quota_control",
        "v0.17.0", "v0.17.2", ("quota",)),
    Bug("kubernetes-sigs/kueue#10181", C + "kueue_10181/test_stale_expectation.py::test_stale_expectation_control",
        "v0.16.3", "v0.16.6", ("liveness:p2", "pending_fits_admitted:p2")),
    Bug("kubernetes-sigs/kueue#9428", C + "kueue_9428/test_repeated_eviction.py::test_repeated_eviction_control",
        "v0.16.1", "v0.16.3", ("write_count", "bounded_evictions")),
    Bug("kubernetes-sigs/kueue#9591", C + "kueue_9591/test_inflight_update.py::test_inflight_update_control",
        "v0.16.1", "v0.16.3", ("log_count",)),
    Bug("kubernetes-sigs/kueue#1789", C + "kueue_1789/test_orphaned_workload.py::test_orphaned_workload_control",
        "v0.17.0", "v0.19.2", ("write_count",)),
    Bug("kubernetes-sigs/kueue#9889", C + "kueue_9889/test_limits_only.py::test_limits_only_control",
        "v0.16.3", "v0.16.6", ("log_count",),
        scene="the bug needs a limits-only pod set under TAS; the control's Workloads have requests"),
    Bug("kubernetes-sigs/kueue#12820", C + "kueue_12820/test_terminating_job.py::test_terminating_job_control",
        "v0.19.2", "v0.17.0", ("running_pods_within_quota",)),  # the scene: explore's "deleted otherwise" family
    Bug("kubernetes-sigs/kueue#9015", C + "kueue_9015/test_elastic_scale_up.py::test_elastic_scale_up_control",
        "v0.17.0", "v0.17.4", ("running_pods_within_quota",)),
)


def signature_hit(keys: list[str], signature: tuple[str, ...]) -> list[str]:
    """The finding keys ("checker:subject[:how]") that name the bug (harness/explore/findings.py
    key_matches: "liveness:s" names "liveness:s:never"; "quota" names "quota:cq")."""
    return [k for k in keys if key_matches(k, signature)]


def explore(control: str, version: str, patches: tuple[str, ...], out: Path, minutes: float,
            max_runs: int | None, stop_on: tuple[str, ...] = ()) -> dict[str, Any]:
    """One exploration of `control` on `version` (+ patches), ending early once a finding named by
    `stop_on` was seen (`explore --stop-on`); its explore.json, or {"error": why}."""
    cmd = [str(ROOT / ".venv/bin/kueue-harness"), "explore", control, "--kueue-version", version, "--out", str(out),
           "--minutes", str(minutes), "--no-known"]  # it measures finding the known bugs: none muted
    for k in stop_on:
        cmd += ["--stop-on", k]
    for p in patches:
        cmd += ["--kueue-patch", p]
    if max_runs:
        cmd += ["--max-runs", str(max_runs)]
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    # The search's own budget plus a build (a cold Kueue build takes ~10 min under load) and its wind-down.
    try:
        rc = subprocess.run(cmd, cwd=ROOT, timeout=minutes * 60 + 1800).returncode
    except subprocess.TimeoutExpired:
        rc = None
    try:
        result = json.loads((out / "explore.json").read_text())
    except (OSError, ValueError) as e:
        return {"error": f"no explore.json (exit {rc}): {e}", "wall_minutes": round((time.monotonic() - t0) / 60, 2)}
    result["exit"] = rc
    result["wall_minutes"] = round((time.monotonic() - t0) / 60, 2)
    return result


def replay(control: str, version: str, patches: tuple[str, ...], plan: str, out: Path, runs: int = 5) -> dict[str, Any]:
    """The minimal plan of a finding replayed `runs` times on `control` at `version` (+ patches), as a user
    would (`pytest CONTROL --plan FILE --repeat N`): {"verdicts": {verdict: n}, "runs", "command"}, or
    {"error": why}. On a fixed build every run should pass."""
    cmd = [sys.executable, "-m", "pytest", control, "--plan", plan, "--kueue-version", version, f"--repeat={runs}",
           "-p", "no:cacheprovider", "-q", "--no-verdict-table", f"--artifacts-dir={out}"]
    for p in patches:
        cmd += ["--kueue-patch", p]
    print("$", " ".join(cmd), flush=True)
    try:
        subprocess.run(cmd, cwd=ROOT, timeout=1800, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        cases = json.loads((out / "summary.json").read_text()).get("cases") or []
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"error": f"no summary.json ({e})", "command": " ".join(cmd)}
    verdicts: dict[str, int] = {}
    for c in cases:
        verdicts[str(c.get("verdict"))] = verdicts.get(str(c.get("verdict")), 0) + 1
    return {"verdicts": verdicts, "runs": len(cases), "command": " ".join(cmd), "evidence": str(out)}


def judge(bug: Bug, result: dict[str, Any]) -> dict[str, Any]:
    """What one exploration says about `bug`: found, at which perturbation and minute, the counts."""
    if "error" in result:
        return {"found": None, "error": result["error"]}
    findings = result.get("findings") or []
    hits = [f for f in findings if signature_hit([str(f["key"])], bug.signature)]
    first = min(hits, key=lambda f: float(f.get("first_minutes") or 0.0)) if hits else None
    return {"found": bool(hits), "key": first["key"] if first else None,
            "perturbation": first.get("first_index") if first else None,
            "minute": round(float(first.get("first_minutes") or 0.0), 2) if first else None,
            "plan": (first.get("minimal_words") or first.get("plan")) if first else None,
            "plan_file": first.get("file") if first else None,
            "reproduced": first.get("reproduced") if first else None,
            "other_findings": sorted(str(f.get("id") or f["key"]) for f in findings if f not in hits),
            # Every signature finding, variants too (another root cause of the same key: driver.on_violation),
            # with its root cause (findings.cluster_key of its minimal plan) and plan file.
            "hits": [{"id": f.get("id") or f["key"], "key": f["key"], "variant_of": f.get("variant_of"),
                      "perturbation": f.get("first_index"), "minute": round(float(f.get("first_minutes") or 0.0), 2),
                      "plan": f.get("minimal_words") or f.get("plan"), "plan_file": f.get("file"),
                      "reproduced": f.get("reproduced"),
                      "cause": cluster_key(str(f["key"]), f.get("minimal") or f.get("moves") or [])} for f in hits],
            "counts": result.get("counts"), "kueue": result.get("kueue"), "minutes": result.get("minutes"),
            "wall_minutes": result.get("wall_minutes")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0, help="explore budget per bug and build (default 15)")
    ap.add_argument("--bugs", default="", help="comma-separated bug numbers (default: all twelve)")
    ap.add_argument("--no-fixed", action="store_true", help="skip the fixed builds")
    ap.add_argument("--full-budget", action="store_true",
                    help="explore the affected build for the whole budget (no --stop-on), so that a second root cause "
                         "of the bug's invariant (a variant) is found too; on the fixed build every such finding's plan "
                         "is replayed, and the bug counts as rediscovered when one root cause is gone there")
    ap.add_argument("--out", default=None, help="folder (default artifacts/bench-rediscover-<time>)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--merge-from", metavar="FILE", default=None,
                    help="with --add-to: take the rows of this results file (a run made beside the other) into the "
                         "--add-to file; runs nothing")
    ap.add_argument("--add-to", metavar="FILE", default=None,
                    help="a results file of an earlier rediscovery: its rows are kept, those of the bugs run now "
                         "replaced (each row says when it ran); written back to FILE")
    args = ap.parse_args()
    if not math.isfinite(args.minutes) or args.minutes <= 0:
        ap.error(f"--minutes must be a finite number above 0, got {args.minutes}")
    if args.tag and not re.fullmatch(r"[A-Za-z0-9._-]+", args.tag):
        ap.error(f"--tag {args.tag!r}: letters, digits, '.', '_' and '-' only (it is part of a file name)")
    if args.bugs.strip() and not [b for b in args.bugs.split(",") if b.strip()]:
        ap.error(f"--bugs {args.bugs!r} names no bug; leave it out for all twelve")
    wanted = {b.strip().lstrip("#") for b in args.bugs.split(",") if b.strip()}
    bugs = [b for b in BUGS if not wanted or b.bug.rpartition("#")[2] in wanted]
    if wanted - {b.bug.rpartition("#")[2] for b in BUGS}:
        ap.error(f"unknown bug(s) {sorted(wanted - {b.bug.rpartition('#')[2] for b in BUGS})}; known: "
                 + ", ".join(b.bug.rpartition("#")[2] for b in BUGS))
    if args.merge_from and args.full_budget:
        ap.error("--full-budget explores; --merge-from runs nothing (it takes rows of a run made beside): give one")
    if args.merge_from and not args.add_to:
        ap.error("--merge-from needs --add-to FILE (the file its rows go into)")
    out = Path(args.out or ROOT / "artifacts" / f"bench-rediscover-{time.strftime('%Y%m%d-%H%M%S')}")
    load_before, rows = load(), []
    earlier: list[dict[str, Any]] = []
    if args.add_to:
        try:
            earlier = json.loads(Path(args.add_to).read_text())["bugs"]
            assert isinstance(earlier, list) and all(isinstance(r, dict) and "bug" in r for r in earlier)
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
            ap.error(f"--add-to {args.add_to}: not a results file of bench/rediscover.py ({e or 'no bugs list'})")
    if args.merge_from:
        try:
            src = json.loads(Path(args.merge_from).read_text())
            rows = src["bugs"]
            assert isinstance(rows, list) and all(isinstance(r, dict) and "bug" in r for r in rows)
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
            ap.error(f"--merge-from {args.merge_from}: not a results file of bench/rediscover.py ({e or 'no bugs list'})")
        mine = {r["bug"] for r in rows}
        order = [b.bug for b in BUGS]
        merged = sorted([r for r in earlier if r["bug"] not in mine] + rows,
                        key=lambda r: order.index(r["bug"]) if r["bug"] in order else len(order))
        prev = json.loads(Path(args.add_to).read_text())
        # A bug run again replaces its row; the row it replaces is kept beside (nothing recorded is lost).
        replaced = [*prev.get("replaced_rows", []), *(r for r in earlier if r["bug"] in mine)]
        data = {**prev, "bugs": merged, "replaced_rows": replaced, "found": sum(1 for r in merged if r.get("found")),
                "rediscovered": rediscovered(merged),
                "noop_false_positives": sum(int(((r.get(side) or {}).get("counts") or {}).get("false_positives") or 0)
                                            for r in merged for side in ("affected", "fixed")),
                "perturbations_per_minute": [*prev.get("perturbations_per_minute", []),
                                             *src.get("perturbations_per_minute", [])],
                "commands": [*(prev.get("commands") or [prev.get("command")]), *(src.get("commands") or [src.get("command")])],
                "merged_from": [*prev.get("merged_from", []), str(args.merge_from)],
                "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        Path(args.add_to).write_text(json.dumps(data, indent=2, default=str) + "\n")
        print(f"written: {args.add_to} ({len(rows)} row(s) from {args.merge_from}; found {data['found']} of {len(merged)})")
        return 0
    for b in bugs:
        slug = b.bug.rpartition("#")[2]
        a = judge(b, explore(b.control, b.affected, (), out / slug / b.affected, args.minutes, None,
                             () if args.full_budget else b.signature))
        row: dict[str, Any] = {"bug": b.bug, "control": b.control, "build": b.affected, "signature": list(b.signature),
                               **{k: a.get(k) for k in ("found", "perturbation", "minute", "key", "plan", "reproduced")},
                               "affected": a, "scene": b.scene or None, "full_budget": bool(args.full_budget)}
        if b.fixed and not args.no_fixed and not a.get("found"):
            row["fixed"] = {"skipped": "not found on the affected build: nothing to disappear"}
        elif b.fixed and not args.no_fixed:
            # The whole budget, not --stop-on: a fixed build is judged by finding nothing in as many tries.
            tried = ((a.get("counts") or {}).get("tried")) or None
            fb = b.fixed + ("+patch" if b.fixed_patches else "")
            f = judge(b, explore(b.control, b.fixed, b.fixed_patches, out / slug / fb, args.minutes, tried))
            row["fixed_build"], row["fixed"] = fb, f
            row["gone_on_fixed"] = None if f.get("found") is None else not f["found"]
            if args.full_budget:
                # Each root cause apart: its plan replayed on the fixed build, and whether the fixed build's
                # own exploration found the same cause (findings.cluster_key) again.
                kept = {h["cause"] for h in f.get("hits") or []}
                row["hits_fixed"] = []
                for h in (a.get("hits") or [])[:4]:
                    rp = (replay(b.control, b.fixed, b.fixed_patches, str(h["plan_file"]),
                                 out / slug / f"{fb}-replay-{re.sub(r'[^a-z0-9]+', '-', h['id'].lower())}")
                          if h.get("plan_file") else {"error": "no minimal plan file"})
                    row["hits_fixed"].append({"id": h["id"], "cause": h["cause"], "replay": rp,
                                              "cause_found_on_fixed": h["cause"] in kept,
                                              "gone": (f.get("found") is not None and h["cause"] not in kept
                                                       and "verdicts" in rp
                                                       and not rp["verdicts"].get("reproduced", 0))})
            elif a.get("plan_file"):
                # The finding itself on the fixed build: its minimal plan, replayed (the search above may not
                # generate that plan there: the fixed build's reference trace differs).
                row["replay_fixed"] = replay(b.control, b.fixed, b.fixed_patches, str(a["plan_file"]),
                                             out / slug / f"{fb}-replay")
        row["ran"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        row["budget_minutes"], row["load_after"] = args.minutes, load()  # a merged file mixes runs: each row says its own
        rows.append(row)
        if args.add_to:
            mine = {r["bug"] for r in rows}
            merged = [r for r in earlier if r["bug"] not in mine] + rows
            order = [b.bug for b in BUGS]
            merged.sort(key=lambda r: order.index(r["bug"]) if r["bug"] in order else len(order))
            data = summary(merged, args, load_before, out)
            prev = json.loads(Path(args.add_to).read_text())
            # The file's rows come from several runs: the budget and load of each run, not only this one's.
            data["budget_minutes"] = sorted({r.get("budget_minutes", prev.get("budget_minutes")) for r in merged} - {None})
            first = [{"command": prev.get("command"), "budget_minutes": prev.get("budget_minutes"),
                      "load_before": prev.get("load_before"), "load_after": prev.get("load_after"),
                      "evidence": prev.get("evidence"), "bugs": [r["bug"] for r in earlier]}]
            data["runs"] = [*(x for x in prev.get("runs", first) if x.get("command") != data["command"]),
                            {"command": data["command"], "budget_minutes": args.minutes, "load_before": load_before,
                             "load_after": data["load_after"], "evidence": str(out), "bugs": [r["bug"] for r in rows]}]
            del data["load_before"], data["load_after"]
            data["replaced_rows"] = [*prev.get("replaced_rows", []),
                                     *(r for r in earlier if r["bug"] in mine and r not in prev.get("replaced_rows", []))]
            data["commands"] = [*(prev.get("commands") or [prev.get("command")]), data.pop("command")]
            data["evidence"] = [*(prev.get("evidence") if isinstance(prev.get("evidence"), list)
                                  else [prev.get("evidence")]), data["evidence"]]
            if data["commands"][-1] == (prev.get("commands") or [None])[-1]:  # the same run, bug after bug
                data["commands"].pop()
                data["evidence"].pop()
            both = {k: v for k, v in {**prev, **data}.items() if k not in ("command", "load_before", "load_after")}
            Path(args.add_to).write_text(json.dumps({**both, "updated": row["ran"]}, indent=2, default=str) + "\n")
            print(f"written: {args.add_to}")
        else:
            data = summary(rows, args, load_before, out)
            write_result("explore-rediscovery" + (f"-{args.tag}" if args.tag else ""), data)
    if not rows:
        return 0
    print(f"\n{'bug':<30} {'build':<8} {'found':<6} {'pert':>5} {'min':>6}  fixed")
    for r in rows:
        fixed = r.get("fixed") or {}
        if "skipped" in fixed or not fixed:
            gone = "-"
        else:
            gone = {True: "gone", False: "STILL FOUND", None: "error"}[r.get("gone_on_fixed")]
        rp = r.get("replay_fixed") or {}
        replayed = (", ".join(f"{v} {n}/{rp['runs']}" for v, n in sorted(rp["verdicts"].items())) if "verdicts" in rp
                    else rp.get("error", ""))
        print(f"{r['bug']:<30} {r['build']:<8} {str(r['found']):<6} {str(r['perturbation'] or '-'):>5} "
              f"{str(r['minute'] or '-'):>6}  {r.get('fixed_build', '-')} {gone}"
              + (f"; its minimal plan replayed there: {replayed}" if replayed else ""))
    mine = {r["bug"] for r in rows}
    print(f"this run: found {sum(1 for r in rows if r.get('found'))} of {len(rows)}, rediscovered (not found on "
          f"the fixed build) {len([b for b in data['rediscovered'] if b in mine])}; false positives in no-op runs: "
          f"{sum(int(((r.get(s) or {}).get('counts') or {}).get('false_positives') or 0) for r in rows for s in ('affected', 'fixed'))}")
    if args.add_to:
        print(f"{args.add_to}: found {data['found']} of {len(data['bugs'])}, rediscovered {len(data['rediscovered'])}, "
              f"false positives {data['noop_false_positives']}")
    return 0


def rediscovered(rows: list[dict[str, Any]]) -> list[str]:
    """The bugs found on their affected build whose finding did not stay on the fixed build: a finding that
    the fix leaves in place (gone_on_fixed False, or its minimal plan still reproducing there when replayed)
    is another mechanism with the same symptom, not the bug; one whose fixed-build exploration could not run
    (gone_on_fixed None: its reference run did not pass) is not judged gone. A row with no fixed build run
    (no gone_on_fixed key) counts as found alone. A `--full-budget` row is judged per root cause
    (`hits_fixed`): rediscovered when one cause the affected build showed is neither found by the fixed
    build's exploration nor reproduced there by its own plan (another cause of the same key, such as
    kueue#11480's late admission behind kueue#14863's stuck preemptor, may stay)."""
    def gone(r: dict[str, Any]) -> bool:
        if r.get("hits_fixed") is not None:  # --full-budget: one root cause gone on the fixed build is the bug
            return any(h.get("gone") for h in r["hits_fixed"])
        replayed = ((r.get("replay_fixed") or {}).get("verdicts") or {}).get("reproduced", 0)
        return ("gone_on_fixed" not in r or r["gone_on_fixed"] is True) and not replayed

    return [r["bug"] for r in rows if r.get("found") and gone(r)]


def summary(rows: list[dict[str, Any]], args: argparse.Namespace, load_before: dict[str, Any], out: Path) -> dict[str, Any]:
    """The results file's fields for the rows so far (written after every bug: a stopped bench keeps them)."""
    fps = sum(int(((r.get(side) or {}).get("counts") or {}).get("false_positives") or 0)
              for r in rows for side in ("affected", "fixed"))
    per_min = [((r["affected"].get("counts") or {}).get("tried") or 0) / r["affected"]["minutes"]
               for r in rows if r["affected"].get("minutes")]
    return {"command": " ".join(sys.argv), "budget_minutes": args.minutes, "load_before": load_before,
            "load_after": load(), "bugs": rows, "found": sum(1 for r in rows if r.get("found")),
            "rediscovered": rediscovered(rows),
            "noop_false_positives": fps,
            "perturbations_per_minute": [round(x, 2) for x in per_min],
            "targets": {"found_of_12": 6, "noop_false_positives": 0, "perturbations_per_minute_idle": 20},
            "evidence": str(out)}


if __name__ == "__main__":
    sys.exit(main())
