"""Proof under load: run the main job (`kueue-harness run`: every case and control under cases/) R times while
N busy CPU loops keep the machine loaded, and count the wrong verdicts (issue 20).

    .venv/bin/python bench/stress.py --runs 10 [--burners 16] [--kueue-version v0.17.0] [-k EXPR]

A busy loop is a Python process spinning `while True` (no stress-ng needed); 16 of them keep the 1-minute
load average at about 16 on a 2-core machine (target: >= 4x the cores, >= 8 on 2 cores). The load is
sampled every 5 s during each run. A verdict is wrong when it differs from the one the case's bug gives on
the Kueue that ran (summary.json `expected`): a false reproduction (reproduced, expected passed), a false
pass (passed, expected reproduced), an error, or anything else.

Writes bench/results/<date>-stress-<time>.json: top-level `wrong_verdicts`, `runs`, `burners`, the load seen,
every run's exit code and per-case verdicts, and per case expected vs actual counts; prints the table. The
burners are stopped (by their pids) on exit, Ctrl-C included. Not a test: it prints figures. Run it alone
(`flock /tmp/kh-env.lock …` on a shared machine): it loads every core on purpose.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, load, machine, tree  # noqa: E402

from harness.common.waiting import WaitTimeout, wait_for  # noqa: E402

#: How often (seconds) the load average is sampled during a run.
SAMPLE_EVERY = 5.0


# ---- pure parts (tests/unit/test_stress.py) ------------------------------------------------------------

def case_name(nodeid: str) -> str:
    """The case a summary.json entry is about, without pytest's repetition suffix: "cases/x.py::t[r1]" -> "t"."""
    return re.sub(r"\[r\d+\]$", "", nodeid.split("::")[-1])


def classify(verdict: str, expected: str) -> str | None:
    """None when `verdict` is the expected one, else what kind of wrong it is: "false reproduction",
    "false pass", "error" or "other" (e.g. inconclusive). An empty `expected` (a case without one) is
    taken as "passed": a control."""
    expected = expected or "passed"
    if verdict == expected:
        return None
    if verdict == "reproduced":
        return "false reproduction"
    if verdict == "passed":
        return "false pass"
    if verdict == "error":
        return "error"
    return "other"


def tally(runs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per case and overall counts from runs ({"cases": [{"case", "verdict", "expected"}, …]} each).

    Returns {"wrong_verdicts": N, "errors": N, "verdicts": N, "error_share": F, "by_kind": {kind: N},
    "cases": {case: {"expected": [..], "actual": {verdict: N}, "wrong": N, "errors": N, "error_reasons": [..],
    "seconds_max": S}}, "missing": {case: runs it was absent from}}. An `error` (a run too slow to judge, an
    assumption that failed) is counted apart, with its reason, never as a wrong verdict: it claims nothing
    (issue "Judge progress, not the clock": errors ≤ 10 % of the verdicts at 32 busy loops); a false
    reproduction, a false pass or anything else is wrong."""
    per: dict[str, dict[str, Any]] = {}
    by_kind: collections.Counter[str] = collections.Counter()
    seen_in: collections.Counter[str] = collections.Counter()
    n_runs = 0
    for run in runs:
        n_runs += 1
        for name in {case_name(c["case"]) for c in run.get("cases") or []}:
            seen_in[name] += 1
        for c in run.get("cases") or []:
            name = case_name(c["case"])
            d = per.setdefault(name, {"expected": set(), "actual": collections.Counter(), "wrong": 0, "errors": 0,
                                      "error_reasons": [], "seconds_max": 0.0})
            d["expected"].add(c.get("expected") or "passed")
            d["actual"][c.get("verdict", "error")] += 1
            d["seconds_max"] = max(d["seconds_max"], float(c.get("seconds") or 0.0))
            kind = classify(c.get("verdict", "error"), c.get("expected", ""))
            if kind == "error":
                d["errors"] += 1
                d["error_reasons"].append(str(c.get("detail") or "")[:300])
                by_kind[kind] += 1
            elif kind:
                d["wrong"] += 1
                by_kind[kind] += 1
    cases = {k: {**v, "expected": sorted(v["expected"]), "actual": dict(v["actual"])} for k, v in sorted(per.items())}
    missing = {k: n_runs - seen_in[k] for k in cases if seen_in[k] < n_runs}
    n = sum(sum(d["actual"].values()) for d in cases.values())
    errors = by_kind.get("error", 0)
    return {"wrong_verdicts": sum(by_kind.values()) - errors, "errors": errors, "verdicts": n,
            "error_share": round(errors / n, 3) if n else 0.0, "by_kind": dict(by_kind), "cases": cases,
            "missing": missing}


def cases_from_bundles(art: Path) -> list[dict[str, Any]]:
    """The verdicts of a run stopped before its summary.json: each case bundle's bundle.json under
    `art` ({"case", "verdict", "expected", "seconds", "detail"}), in file name order."""
    out = []
    for p in sorted(art.rglob("cases/*/bundle.json")):
        try:
            b = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        out.append({k: b.get(k) for k in ("case", "verdict", "expected", "seconds", "detail")})
    return out


def table(t: dict[str, Any], runs: int) -> str:
    """The printed table: case, expected, actual counts, wrong count."""
    rows = [("case", "expected", "actual", "wrong", "errors")]
    for name, d in t["cases"].items():
        actual = ", ".join(f"{v} {n}/{runs}" for v, n in sorted(d["actual"].items()))
        rows.append((name, "/".join(d["expected"]), actual, str(d["wrong"]), str(d.get("errors", 0))))
    w = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(t["by_kind"].items()) if k != "error") or "none"
    lines.append(f"wrong verdicts: {t['wrong_verdicts']} ({kinds})")
    errors = t.get("errors", 0)
    lines.append(f"errors (counted apart): {errors} of {t.get('verdicts', 0)} verdicts ({100 * t.get('error_share', 0):.1f} %)")
    for name, d in t["cases"].items():
        for why in d.get("error_reasons") or []:
            lines.append(f"  {name}: {why}")
    return "\n".join(lines)


# ---- the load ----------------------------------------------------------------------------------------------

def _spin(nice: int = 0) -> None:  # pragma: no cover - runs in the burner processes
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler: terminate() just ends it
    if nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    while True:
        pass


class Burners:
    """N busy Python processes; `stop()` ends exactly those (by pid). Use as a context manager. `nice`: their
    niceness (negative, as root: they take the CPU from the harness, Kueue and kube-apiserver, which plain busy
    loops barely slow — Linux favours processes that sleep, so at nice 0 the run's pace stays ~1x idle; a
    negative niceness is closer to other heavy jobs or a hypervisor taking the cores)."""

    def __init__(self, n: int, nice: int = 0) -> None:
        self.n, self.nice = n, nice
        self.procs: list[multiprocessing.Process] = []

    def __enter__(self) -> "Burners":
        ctx = multiprocessing.get_context("fork")
        for _ in range(self.n):
            p = ctx.Process(target=_spin, args=(self.nice,), daemon=True)
            p.start()
            self.procs.append(p)
        return self

    def stop(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        self.procs = []

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class LoadSampler(threading.Thread):
    """Samples os.getloadavg()[0] every SAMPLE_EVERY seconds until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self._stop_ev = threading.Event()

    def run(self) -> None:
        while not self._stop_ev.wait(SAMPLE_EVERY):
            self.samples.append(round(os.getloadavg()[0], 2))

    def stop(self) -> list[float]:
        self._stop_ev.set()
        self.join(timeout=SAMPLE_EVERY + 1)
        return self.samples


class CpuLimit:
    """A cgroup (v1 `cpu` controller) that gives the main job and everything it starts — pytest, kube-apiserver,
    etcd, Kueue, the proxy — at most `percent` of one core: a slow machine, every part of it slow, as when other
    jobs or a hypervisor take the cores (busy loops beside the run barely slow Kueue: Linux favours processes
    that sleep). `enter(pid)` is the child's preexec hook. Needs root and /sys/fs/cgroup/cpu; removed on exit."""

    ROOT = Path("/sys/fs/cgroup/cpu")

    def __init__(self, percent: float) -> None:
        if not (self.ROOT / "cgroup.procs").exists():
            raise SystemExit(f"--cpu-limit needs the cgroup v1 cpu controller at {self.ROOT} (not found here)")
        self.percent = percent
        self.path = self.ROOT / f"kueue-harness-stress-{os.getpid()}"

    def __enter__(self) -> "CpuLimit":
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text("100000")
        (self.path / "cpu.cfs_quota_us").write_text(str(int(self.percent * 1000)))
        return self

    def enter(self) -> None:  # pragma: no cover - runs in the child between fork and exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def __exit__(self, *exc: Any) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():  # anything left is moved back out
            try:
                (self.ROOT / "cgroup.procs").write_text(pid)
            except OSError:
                pass
        try:
            self.path.rmdir()
        except OSError:
            pass


# ---- one run of the main job ---------------------------------------------------------------------------

def run_main_job(art: Path, kueue_version: str, k: str | None, timeout: float,
                 limit: CpuLimit | None = None, target: str = "local") -> dict[str, Any]:
    """`kueue-harness run --artifacts-dir ART` (+ --kueue-version, -k; inside `limit`'s cgroup when given);
    returns {"exit", "seconds", "cases", "load", "artifacts"} from its summary.json (cases [] when it wrote none)."""
    cmd = [str(ROOT / ".venv" / "bin" / "kueue-harness"), "run", "--artifacts-dir", str(art),
           "--kueue-version", kueue_version, *(["-k", k] if k else []),
           *(["--target", target] if target != "local" else [])]
    sampler = LoadSampler()
    sampler.start()
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=limit.enter if limit is not None else None)
        code, tail = proc.returncode, (proc.stdout + proc.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        code, tail = None, f"timed out after {timeout:g}s: {str(e.stdout or '')[-2000:]}"
    seconds = round(time.monotonic() - t0, 1)
    samples = sampler.stop()
    summaries = sorted(art.rglob("summary.json"), key=lambda p: p.stat().st_mtime)
    cases = json.loads(summaries[-1].read_text()).get("cases", []) if summaries else []
    if not summaries:  # stopped before its end (--run-timeout): the cases judged so far, from their bundles
        cases = cases_from_bundles(art)
    return {"exit": code, "seconds": seconds, "artifacts": str(art), "complete": bool(summaries),
            "load": {"min": min(samples, default=None), "max": max(samples, default=None), "samples": samples},
            "cases": [{k2: c.get(k2) for k2 in ("case", "verdict", "expected", "seconds", "detail")} for c in cases],
            **({"output_tail": tail} if code != 0 else {})}


def retally(path: Path) -> dict[str, Any]:
    """Re-count a results file: runs stopped before their summary.json take their verdicts from the case
    bundles they left (cases_from_bundles); writes the file back (`retallied`: true) and returns it."""
    data = _stress_doc(path)  # checked before anything is written back
    for r in data.get("run_details") or []:
        if not r.get("cases") or r.get("complete") is False:
            r["cases"] = cases_from_bundles(Path(r["artifacts"]))
            r["complete"] = False
    t = tally(data.get("run_details") or [])
    data.update(wrong_verdicts=t["wrong_verdicts"], errors=t["errors"], verdicts=t["verdicts"],
                error_share=t["error_share"], by_kind=t["by_kind"], cases=t["cases"], missing=t["missing"], retallied=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return data


def _stress_doc(path: Path) -> dict[str, Any]:
    """A stress results file read and checked: a JSON object with `"benchmark": "stress"`, a Kueue version
    and `run_details`, a list of runs each with a `cases` list. Raises ValueError naming the file and what
    is wrong (OSError when it cannot be read)."""
    try:
        d = json.loads(path.read_text())
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text file ({e.reason})") from None
    except ValueError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(d, dict) or d.get("benchmark") != "stress":
        raise ValueError(f"{path}: not a results file of bench/stress.py (no \"benchmark\": \"stress\")")
    if not isinstance(d.get("kueue_version"), str):
        raise ValueError(f"{path}: no kueue_version")
    runs = d.get("run_details")
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("cases"), list)
                                             and all(isinstance(c, dict) and "case" in c for c in r["cases"])
                                             for r in runs):
        raise ValueError(f"{path}: run_details is not a list of runs with their cases")
    return d


def combine(paths: list[Path]) -> dict[str, Any]:
    """One results document from several results files of the same Kueue version (runs of one proof made
    in parts): every run of each, re-tallied; `sources` names the files and their runs, `burners` and
    `load_1m` span them. Raises ValueError naming the files when their versions differ."""
    if len({p.resolve() for p in paths}) != len(paths):
        raise ValueError("a file is given twice: its runs would count twice")
    docs = [(p, _stress_doc(p)) for p in paths]
    versions = {str(d.get("kueue_version")) for _, d in docs}
    if len(versions) != 1:
        raise ValueError(f"these files ran different Kueue versions ({', '.join(sorted(map(str, versions)))}): "
                         + ", ".join(f"{p.name} {d.get('kueue_version')}" for p, d in docs))
    runs = [r for _, d in docs for r in d["run_details"]]
    t = tally(runs)
    loads = [d.get("load_1m") if isinstance(d.get("load_1m"), dict) else {} for _, d in docs]
    lows = [x["min"] for x in loads if isinstance(x.get("min"), (int, float))]
    highs = [x["max"] for x in loads if isinstance(x.get("max"), (int, float))]
    return {"benchmark": "stress", "combined": True, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": docs[0][1].get("machine"), "kueue_version": versions.pop(),
            "sources": [{"file": p.name, "runs": d.get("runs"), "burners": d.get("burners"), "tree": d.get("tree"),
                         "wrong_verdicts": d.get("wrong_verdicts")} for p, d in docs],
            "wrong_verdicts": t["wrong_verdicts"], "errors": t["errors"], "verdicts": t["verdicts"],
            "error_share": t["error_share"], "by_kind": t["by_kind"], "runs": len(runs),
            "burners": sorted({d["burners"] for _, d in docs if isinstance(d.get("burners"), int)}),
            "load_1m": {"min": min(lows, default=None), "max": max(highs, default=None)},
            "main_job_exits": [r.get("exit") for r in runs], "cases": t["cases"], "missing": t["missing"],
            "run_details": runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="runs of the main job (default 10)")
    ap.add_argument("--burners", type=int, default=16, help="busy CPU loops (default 16: load ~16 on 2 cores)")
    ap.add_argument("--target", choices=("local", "kind"), default="local",
                    help="where Kueue runs (kind: a kind cluster made here offline, docs/kind.md)")
    ap.add_argument("--cpu-limit", type=float, default=None, metavar="PERCENT",
                    help="run the main job (and every process it starts) in a cgroup with at most PERCENT of one core: "
                         "a slow machine (needs root and cgroup v1's cpu controller)")
    ap.add_argument("--nice", type=int, default=0, help="the busy loops' niceness (default 0; negative, as root, "
                    "makes them take the CPU from Kueue and kube-apiserver: a slow machine, not only a loaded one)")
    ap.add_argument("--kueue-version", default="v0.17.0")
    ap.add_argument("-k", help="only cases matching this pytest -k expression (default: all)")
    ap.add_argument("--run-timeout", type=float, default=1800.0, help="seconds one run may take (default 1800)")
    ap.add_argument("--min-load", type=float, default=8.0,
                    help="wait (at most 120 s) until the 1-minute load average reaches this before the first run (default 8)")
    ap.add_argument("--tag", default="", help="added to the results file name")
    ap.add_argument("--retally", metavar="FILE", help="re-count an existing results file (runs stopped early: "
                                                      "from their case bundles) and print its table; runs nothing")
    ap.add_argument("--combine", nargs="+", metavar="FILE",
                    help="one results file from several of the same Kueue version (a proof made in parts): "
                         "bench/results/<date>-stress-combined[-TAG].json; runs nothing")
    args = ap.parse_args(argv)
    if args.tag and not re.fullmatch(r"[A-Za-z0-9._-]+", args.tag):
        ap.error(f"--tag {args.tag!r}: letters, digits, '.', '_' and '-' only (it is part of a file name)")
    if args.combine:
        try:
            data = combine([Path(f) for f in args.combine])
        except (OSError, ValueError) as e:
            ap.error(f"--combine: {e}")
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"{time.strftime('%Y-%m-%d')}-stress-combined{'-' + args.tag if args.tag else ''}.json"
        if out.exists():
            ap.error(f"{out} exists: results are never overwritten; give another --tag")
        out.write_text(json.dumps(data, indent=2, default=str) + "\n")
        print(table({k: data[k] for k in ("wrong_verdicts", "by_kind", "cases")}, data["runs"]))
        print(f"main job exit codes: {data['main_job_exits']}; load (1 min) {data['load_1m']['min']}–{data['load_1m']['max']}")
        print(f"written: {out.relative_to(ROOT)}")
        return 0 if data["wrong_verdicts"] == 0 and all(x == 0 for x in data["main_job_exits"]) else 1
    if args.retally:
        try:
            data = retally(Path(args.retally))
        except (OSError, ValueError) as e:
            ap.error(f"--retally: {e}")
        print(table({k: data[k] for k in ("wrong_verdicts", "errors", "verdicts", "error_share", "by_kind", "cases")},
                    len(data["run_details"])))
        return 0 if data["wrong_verdicts"] == 0 else 1
    if args.runs < 1 or args.burners < 0:
        ap.error("--runs must be >= 1 and --burners >= 0")
    stamp = time.strftime("%H%M%S")
    base = ROOT / "artifacts" / f"stress-{time.strftime('%Y%m%d')}-{stamp}"
    runs: list[dict[str, Any]] = []

    def interrupted(signum, frame):  # noqa: ARG001 - stop the burners, then unwind
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    started = load()
    with Burners(args.burners, args.nice) as burners:
        print(f"[stress] {args.burners} busy loops started (pids {', '.join(str(p.pid) for p in burners.procs)}); "
              f"waiting for load >= {args.min_load:g}", flush=True)
        try:
            # The 1-minute average rises slowly: bounded, and the run goes on (recorded) if it never gets there.
            wait_for(lambda: os.getloadavg()[0] >= args.min_load, timeout=120, interval=2,
                     what=f"the 1-minute load average to reach {args.min_load:g}")
        except WaitTimeout:
            print(f"[stress] load only {os.getloadavg()[0]:.1f} after 120 s; running anyway", flush=True)
        try:
            for i in range(args.runs):
                print(f"[stress] run {i + 1}/{args.runs} (load {os.getloadavg()[0]:.1f}) …", flush=True)
                if args.cpu_limit is not None:
                    with CpuLimit(args.cpu_limit) as limit:
                        r = run_main_job(base / f"run-{i + 1}", args.kueue_version, args.k, args.run_timeout, limit,
                                         args.target)
                else:
                    r = run_main_job(base / f"run-{i + 1}", args.kueue_version, args.k, args.run_timeout,
                                     target=args.target)
                runs.append(r)
                bad = [f"{case_name(c['case'])}: {c['verdict']} (expected {c['expected'] or 'passed'})"
                       for c in r["cases"] if classify(c["verdict"], c["expected"] or "")]
                print(f"[stress] run {i + 1}: exit {r['exit']}, {len(r['cases'])} cases, {r['seconds']:.0f}s, load "
                      f"{r['load']['min']}–{r['load']['max']}" + (f"; WRONG: {'; '.join(bad)}" if bad else ""), flush=True)
        except KeyboardInterrupt:
            print("[stress] interrupted: stopping the busy loops, writing what ran", flush=True)
    t = tally(runs)
    loads = [s for r in runs for s in r["load"]["samples"]]
    data = {"benchmark": "stress", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "tree": tree(),
            "command": " ".join(["bench/stress.py", *(argv if argv is not None else sys.argv[1:])]),
            "wrong_verdicts": t["wrong_verdicts"], "errors": t["errors"], "verdicts": t["verdicts"],
            "error_share": t["error_share"], "by_kind": t["by_kind"], "runs": len(runs),
            "runs_asked": args.runs, "burners": args.burners, "nice": args.nice, "cpu_limit_percent": args.cpu_limit, "target": args.target, "kueue_version": args.kueue_version,
            "min_load": args.min_load, "load_before": started, "load_1m": {"min": min(loads, default=None), "max": max(loads, default=None),
                                                "samples": len(loads)},
            "main_job_exits": [r["exit"] for r in runs], "cases": t["cases"], "missing": t["missing"], "run_details": runs}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{time.strftime('%Y-%m-%d')}-stress-{stamp}{'-' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(table(t, len(runs)))
    print(f"main job exit codes: {data['main_job_exits']}; load (1 min) {data['load_1m']['min']}–{data['load_1m']['max']}")
    print(f"written: {out.relative_to(ROOT)}")
    return 0 if t["wrong_verdicts"] == 0 and runs and all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
