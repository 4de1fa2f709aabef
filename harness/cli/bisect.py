"""`kueue-harness bisect`: the first Kueue commit where a case's verdict changes, found by driving
`git bisect` (with --no-checkout, over the harness's bare copy of the repository) and running the case on
each step's build. Every step builds in the repository's one worktree, so Go's build cache carries over.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from harness.build import kueue as kueue_build
from harness.build.binaries import build_lock
from harness.cli.matrix import CASES_DIR, run_cases, run_folder
from harness.common.errors import HarnessError


@dataclass
class Step:
    """One bisect step: commit, its `git describe`, verdicts of the N runs, the mark given, seconds."""

    commit: str
    describe: str
    verdicts: list[str]
    mark: str
    build_seconds: float
    run_seconds: float


def case_target(case: str) -> str:
    """"test_stuck_preemption" -> "<cases>/<file>.py::test_stuck_preemption". Raises HarnessError."""
    name = case.split("::")[-1]
    for f in sorted(CASES_DIR.rglob("test_*.py")):
        if re.search(rf"^def {re.escape(name)}\(", f.read_text(), re.M):
            return f"{f}::{name}"
    raise HarnessError(f"no case named {name} under {CASES_DIR} (e.g. test_stuck_preemption, "
                       "test_quota_oversubscription, or their *_control)")


def _bisect(repo: Path, *args: str) -> str:
    p = subprocess.run(["git", "--git-dir", str(repo), "bisect", *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise HarnessError(f"git bisect {' '.join(args)} failed: {(p.stderr or p.stdout).strip()[-500:]}")
    return p.stdout


def verdict_of(verdicts: list[str]) -> str | None:
    """The step's verdict when every run agrees on reproduced/passed; None (skip the commit) otherwise."""
    return verdicts[0] if verdicts and len(set(verdicts)) == 1 and verdicts[0] in ("reproduced", "passed") else None


def run_bisect(case: str, good: str, bad: str, out: Path, repo_arg: str | None = None, runs: int = 1,
               say: Callable[[str], None] = print) -> dict[str, Any]:
    """Bisect between `good` (old verdict) and `bad` (new verdict) for `case`; return and write
    out/bisect.json with the first commit that has the new verdict and every step.

    Raises HarnessError when the two ends give the same verdict or cannot be decided, or `good` is not an
    ancestor of `bad`.
    """
    target = case_target(case)
    repo = kueue_build.repo_dir(repo_arg, say)
    t_start = time.monotonic()
    steps: list[Step] = []

    def describe(sha: str) -> str:
        return subprocess.run(["git", "--git-dir", str(repo), "describe", "--tags", "--match", "v[0-9]*", sha],
                              capture_output=True, text=True).stdout.strip() or sha[:12]

    def step(sha: str, mark_for: Callable[[str | None], str]) -> Step:
        n = len(steps) + 1
        spec = kueue_build.KueueSpec(ref=sha, repo=repo_arg)
        t0 = time.monotonic()
        kueue_build.build(spec, lambda line: say(f"    {line}"))
        t1 = time.monotonic()
        summary = run_cases(spec, [target], out / f"step{n:02d}-{sha[:10]}", runs)
        verdicts = [c["verdict"] for c in summary.get("cases", [])]
        s = Step(sha, describe(sha), verdicts, mark_for(verdict_of(verdicts)), round(t1 - t0, 1),
                 round(time.monotonic() - t1, 1))
        steps.append(s)
        say(f"step {n}: {s.describe} ({sha[:10]}): {', '.join(verdicts) or 'no verdict'} -> {s.mark} "
            f"(build {s.build_seconds:.0f}s, run {s.run_seconds:.0f}s; {(time.monotonic() - t_start) / 60:.1f} min so far)")
        return s

    good_sha = kueue_build.resolve(repo, good, say)
    bad_sha = kueue_build.resolve(repo, bad, say)
    if good_sha == bad_sha:
        raise HarnessError(f"--good {good} and --bad {bad} are the same commit ({good_sha[:10]}): bisect needs an older "
                           "commit with the old verdict and a later one with the new verdict")
    out.mkdir(parents=True, exist_ok=True)
    if kueue_build.is_ancestor(repo, good_sha, bad_sha) is not True:
        raise HarnessError(f"--good {good} is not an ancestor of --bad {bad} in {repo}: bisect needs the older ref as --good")
    say(f"bisecting {case} between {good} ({good_sha[:10]}) and {bad} ({bad_sha[:10]}), {runs} run(s) per step")
    old = verdict_of(step(good_sha, lambda v: "old").verdicts)
    new = verdict_of(step(bad_sha, lambda v: "new").verdicts)
    if old is None or new is None or old == new:
        raise HarnessError(f"{case} gives {steps[0].verdicts} on {good} and {steps[1].verdicts} on {bad}: bisect needs "
                           "two different, consistent verdicts at the ends (more --runs may help)")
    result: dict[str, Any] = {"case": case, "good": good, "bad": bad, "old_verdict": old, "new_verdict": new,
                              "repo": str(repo), "runs": runs}
    with build_lock(f"bisect-{repo.parent.name}"):
        subprocess.run(["git", "--git-dir", str(repo), "bisect", "reset"], capture_output=True)
        _bisect(repo, "start", "--no-checkout", "--term-old=old", "--term-new=new")
        try:
            _bisect(repo, "new", bad_sha)
            text = _bisect(repo, "old", good_sha)
            while True:
                m = re.search(r"([0-9a-f]{40}) is the first new commit", text)
                if m:
                    result["first_new_commit"] = m.group(1)
                    break
                if "only skipped commits left" in text:
                    result["candidates"] = re.findall(r"^([0-9a-f]{40})", text, re.M)
                    break
                sha = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "BISECT_HEAD"], capture_output=True,
                                     text=True).stdout.strip()
                s = step(sha, lambda v: "old" if v == old else "new" if v == new else "skip")
                text = _bisect(repo, s.mark, sha)
        finally:
            subprocess.run(["git", "--git-dir", str(repo), "bisect", "reset"], capture_output=True)
    first = result.get("first_new_commit")
    if first:
        subject = subprocess.run(["git", "--git-dir", str(repo), "log", "-1", "--format=%s", first],
                                 capture_output=True, text=True).stdout.strip()
        result["first_new_subject"] = subject
        result["first_new_describe"] = describe(first)
    result["steps"] = [asdict(s) for s in steps]
    result["minutes"] = round((time.monotonic() - t_start) / 60, 2)
    (out / "bisect.json").write_text(json.dumps(result, indent=1))
    return result


def cli(args) -> int:
    if args.good == args.bad:
        raise HarnessError(f"--good and --bad are both {args.good}: bisect needs two refs, an older one with the old "
                           "verdict (--good) and a later one with the new verdict (--bad)")
    out = run_folder(args, "bisect")
    r = run_bisect(args.case, args.good, args.bad, out, args.kueue_repo, args.runs)
    print(f"\n{'step':<5} {'commit':<12} {'describe':<28} {'verdicts':<24} {'mark':<5} {'build s':>8} {'run s':>6}")
    for i, s in enumerate(r["steps"], 1):
        print(f"{i:<5} {s['commit'][:10]:<12} {s['describe'][:28]:<28} {','.join(s['verdicts'])[:24]:<24} "
              f"{s['mark']:<5} {s['build_seconds']:>8.0f} {s['run_seconds']:>6.0f}")
    if r.get("first_new_commit"):
        print(f"\nfirst commit where {r['case']} is {r['new_verdict']} (was {r['old_verdict']}): "
              f"{r['first_new_commit'][:10]} {r['first_new_describe']}  {r['first_new_subject']}")
    else:
        print(f"\nno single commit: only skipped commits left, one of {', '.join(c[:10] for c in r.get('candidates', []))}")
    print(f"{len(r['steps'])} steps in {r['minutes']:.1f} min; evidence and bisect.json in {out}")
    return 0 if r.get("first_new_commit") else 1
