"""Helpers shared by the bench scripts: percentiles, load, results files, py-spy profiles, small waits.

Not a test module and not part of the harness package: bench scripts import it as `from _common import …`
(they put their own folder on sys.path).
"""

from __future__ import annotations

import collections
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pct(values: Iterable[float], p: float) -> float:
    """The p-th percentile (0-100) with linear interpolation between closest ranks."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(values: list[float], digits: int = 3) -> dict[str, float]:
    """n, min, p50, p90, p99, max, mean of `values` (rounded)."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values), "min": round(min(values), digits), "p50": round(pct(values, 50), digits),
        "p90": round(pct(values, 90), digits), "p99": round(pct(values, 99), digits),
        "max": round(max(values), digits), "mean": round(statistics.fmean(values), digits),
    }


def load() -> dict[str, Any]:
    """The machine's load right now: os.getloadavg() and the CPU count."""
    one, five, fifteen = os.getloadavg()
    return {"loadavg_1m": round(one, 2), "loadavg_5m": round(five, 2), "loadavg_15m": round(fifteen, 2),
            "cpus": os.cpu_count()}


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}


def tree() -> dict[str, Any]:
    """The code measured: HEAD and the uncommitted files of the harness and the addon (others edit the tree)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = [l[3:] for l in git("status", "--porcelain", "--", "harness", "proxy_addons", "cases").splitlines()]
    return {"head": git("rev-parse", "--short", "HEAD"), "uncommitted": dirty}


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write bench/results/<date>-<name>.json (pretty JSON); returns the path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{time.strftime('%Y-%m-%d')}-{name}.json"
    data = {"benchmark": name, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
            "tree": tree(), **data}
    out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"written: {out.relative_to(ROOT)}")
    return out


def quiet_say(prefix: str = "[bench]"):
    """A `say` for LocalEnvironment.start that keeps lines short and goes to stderr."""
    def say(line: str) -> None:
        print(f"{prefix} {line}", file=sys.stderr, flush=True)
    return say


# ---- py-spy -----------------------------------------------------------------------------------------
def py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


class Profiler:
    """`py-spy record` attached to a running process, writing collapsed stacks ("raw" format).

    Use as a context manager; on exit py-spy gets SIGINT and writes `out`. `idle=True` also samples
    threads that wait (wall-clock attribution); without it only CPU-active stacks are kept.
    """

    def __init__(self, pid: int, out: Path, rate: int = 100, idle: bool = False, subprocesses: bool = False,
                 native: bool = False) -> None:
        self.pid, self.out, self.rate, self.idle, self.subprocesses = pid, out, rate, idle, subprocesses
        self.native = native
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Profiler":
        exe = py_spy()
        if exe is None:
            raise RuntimeError("py-spy is not installed: `.venv/bin/pip install py-spy` (bench/README in docs/benchmarks.md)")
        cmd = [exe, "record", "-p", str(self.pid), "-r", str(self.rate), "-f", "raw", "-o", str(self.out),
               "--nonblocking"]
        if self.idle:
            cmd.append("--idle")
        if self.subprocesses:
            cmd.append("--subprocesses")
        if self.native:
            cmd.append("--native")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out.with_suffix(".py-spy.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        time.sleep(0.5)  # let it attach before the measured work starts
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


def _frame_name(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)"; keep "function (file.py)".
    if " (" in frame and frame.endswith(")"):
        fn, loc = frame.rsplit(" (", 1)
        loc = loc[:-1]
        path = loc.rsplit(":", 1)[0]
        parts = Path(path).parts
        short = "/".join(parts[-2:]) if len(parts) >= 2 else path
        return f"{fn} ({short})"
    return frame


def read_stacks(raw: Path, within: str | None = None) -> list[tuple[list[str], int]]:
    """Collapsed stacks from a py-spy raw file: [(frames root→leaf, samples)]. `within`: keep only stacks
    with a frame whose text contains it, cut so they start at that frame."""
    out = []
    if not raw.exists():
        return out
    for line in raw.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        stack, _, n = line.rpartition(" ")
        try:
            count = int(n)
        except ValueError:
            continue
        frames = stack.split(";")
        if within is not None:
            idx = next((i for i, f in enumerate(frames) if within in f), None)
            if idx is None:
                continue
            frames = frames[idx:]
        out.append((frames, count))
    return out


def top_frames(stacks: list[tuple[list[str], int]], n: int = 15) -> dict[str, Any]:
    """Self (leaf) and inclusive sample shares of the hottest functions."""
    total = sum(c for _, c in stacks)
    leaf: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    for frames, c in stacks:
        names = [_frame_name(f) for f in frames]
        if names:
            leaf[names[-1]] += c
        for name in set(names):
            incl[name] += c
    def share(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return [{"function": k, "samples": v, "share": round(v / total, 3) if total else 0.0}
                for k, v in counter.most_common(n)]
    return {"samples": total, "self": share(leaf), "inclusive": share(incl)}


def categorize(stacks: list[tuple[list[str], int]], categories: list[tuple[str, tuple[str, ...]]],
               outermost: bool = False) -> dict[str, Any]:
    """Share of samples per category: the first category any of whose markers occurs in a stack's frames
    (raw "function (/path/file.py:line)" or short "function (dir/file.py)"; checked leaf→root, so the
    innermost match wins, or the outermost with `outermost=True`); "other" for the rest."""
    total = sum(c for _, c in stacks)
    counts: collections.Counter[str] = collections.Counter()
    for frames, c in stacks:
        cat = "other"
        for f in (frames if outermost else reversed(frames)):
            short = _frame_name(f)
            hit = next((name for name, markers in categories if any(m in f or m in short for m in markers)), None)
            if hit:
                cat = hit
                break
        counts[cat] += c
    return {k: {"samples": v, "share": round(v / total, 3) if total else 0.0} for k, v in counts.most_common()}


def print_profile(title: str, prof: dict[str, Any], n: int = 10) -> None:
    print(f"\n{title}: {prof['samples']} samples")
    print("  self (leaf) share   function")
    for r in prof["self"][:n]:
        print(f"  {r['share']:>6.1%}             {r['function']}")
    print("  inclusive share     function")
    for r in prof["inclusive"][:n]:
        print(f"  {r['share']:>6.1%}             {r['function']}")
