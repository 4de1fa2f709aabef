"""`kueue-harness explore`: its options (cases, the Kueue build, minutes, shards, reference runs, --out) and the
command that runs an Explorer (driver.py) with progress lines, SIGINT/SIGTERM kept as a partial table, or
merges shards (tables.py).
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.checkers import REGISTRY
from harness.common.errors import HarnessError
from harness.explore import generate
from harness.explore.driver import Explorer, resolve_case
from harness.explore.tables import merge, render_summary

#: `--workers` at most: each is a whole environment (about 1 GiB of memory and some CPU even when idle).
MAX_WORKERS = 8
#: `--workers` when not given (docs/benchmarks.md "Explore: workers": 2 doubles the rate of 1 on 2 cores).
DEFAULT_WORKERS = 2


def add_parser(sub: Any, add_kueue_options: Callable[..., None]) -> None:
    ex = sub.add_parser("explore", help="find orderings that break Kueue, starting from control cases' reference "
                                        "runs; `explore merge DIR...` joins the tables of shards")
    ex.add_argument("cases", nargs="+", metavar="CASE",
                    help="control cases: node ids or names (test_stuck_preemption_control); or `merge DIR...`")
    add_kueue_options(ex)
    ex.add_argument("--out", help="the exploration's folder (default artifacts/explore-<time>)")
    ex.add_argument("--minutes", type=float, default=30.0, help="wall-time budget of the search (default 30)")
    ex.add_argument("--max-runs", type=int, default=400, help="at most this many perturbations (default 400)")
    ex.add_argument("--batch", type=int, default=10, help="runs judged together before the search goes on (default "
                                                          "10); with --no-stream also the runs per environment")
    ex.add_argument("--workers", type=int, default=None,
                    help="pytest processes, each with its own environment (about 1 GiB), taking the runs of a batch "
                         "side by side (default 2; on 2 cores: 1 → 5.6, 2 → 12, 3 → 17 perturbations a minute idle, "
                         f"docs/benchmarks.md \"Explore: workers\"; at most {MAX_WORKERS}; 1 with --no-stream)")
    ex.add_argument("--no-stream", dest="stream", action="store_false",
                    help="one pytest process (one environment) per batch instead of one for the whole search")
    ex.add_argument("--shard", help="I/N: run the I-th of N disjoint shards of the root perturbations")
    ex.add_argument("--max-depth", type=int, default=3, help="moves per plan at most (default 3)")
    ex.add_argument("--min-runs", type=int, default=5, help="runs per plan when confirming, strengthening and "
                                                            "minimising a violation (default 5)")
    ex.add_argument("--noop-every", type=int, default=20, help="a no-op run every N perturbations (default 20)")
    ex.add_argument("--reference", help="reuse the reference runs of an earlier exploration's folder")
    ex.add_argument("--stop-after", type=int, help="stop once this many distinct violations were found")
    ex.add_argument("--stop-on", action="append", default=[], metavar="KEY",
                    help="stop once a finding's key is KEY or starts with KEY: (repeatable), e.g. 'liveness:s' or "
                         "'quota'")
    ex.add_argument("--oracle", action="append", default=[], metavar="NAME[=JSON]",
                    help="judge every run also by this checker with these parameters (repeatable), e.g. "
                         "'write_count={\"write\": \"eviction\", \"max\": 1}' (docs/checkers.md)")
    ex.add_argument("--known", action="append", default=None, metavar="BUG",
                    help="mute this known bug (a key of cases/*/bug.yaml with a signature, e.g. "
                         "kubernetes-sigs/kueue#11480-oversubscription): a violation its signature explains is counted "
                         "as the bug, not a finding (repeatable; default: every bug with a signature that affects the build)")
    ex.add_argument("--no-known", action="store_true",
                    help="mute no known bug: every violation is a finding (rediscovery measurements)")
    ex.add_argument("--reference-only", action="store_true",
                    help="only run the reference runs (for shards on other machines: --reference DIR)")
    ex.set_defaults(func=cli)


def cli(args: Any) -> int:
    if args.cases and args.cases[0] == "merge":
        dirs = [Path(d) for d in args.cases[1:]]
        out = Path(args.out) if args.out else None
        result = merge(dirs, out)
        print(render_summary(result), end="")
        if out is not None:
            print(f"\nmerged: {out / 'summary.md'} and explore.json")
        return 0
    from harness.build import binaries
    from harness.build.kueue import KueueSpec

    try:
        shard = generate.parse_shard(args.shard)
    except ValueError as e:
        raise HarnessError(str(e)) from None
    for k in ("minutes", "max_runs", "batch", "workers", "max_depth", "min_runs", "noop_every", "stop_after"):
        v = getattr(args, k, None)
        if v is not None and (not math.isfinite(v) or v <= 0):
            raise HarnessError(f"--{k.replace('_', '-')} must be a finite number above 0, got {v}")
    for key in getattr(args, "stop_on", None) or ():
        check = key.split(":")[0]
        if not key.strip() or any(not part for part in key.split(":")) or check not in REGISTRY:
            raise HarnessError(f"--stop-on {key!r}: give a finding key or its start, CHECKER[:SUBJECT[:HOW]] "
                               f"(e.g. 'liveness:s' or 'quota'), CHECKER one of {', '.join(sorted(REGISTRY))}")
    import pytest

    from harness.explore.plugin import parse_oracles

    try:
        parse_oracles(getattr(args, "oracle", None) or [])  # a wrong checker name or parameter, before anything is built
    except pytest.UsageError as e:
        raise HarnessError(str(e)) from None
    cases = [resolve_case(c) for c in args.cases]
    twice = sorted({c for c in cases if cases.count(c) > 1})
    if twice:
        raise HarnessError(f"{', '.join(twice)}: given more than once; give each control case once")
    if getattr(args, "workers", None) is None:
        args.workers = DEFAULT_WORKERS if getattr(args, "stream", True) else 1
    if args.workers > MAX_WORKERS:
        raise HarnessError(f"--workers {args.workers}: at most {MAX_WORKERS} (each starts its own etcd, kube-apiserver, "
                           "kube-controller-manager, proxy and Kueue; 2 idle cores measured best with 3: "
                           "docs/benchmarks.md \"Explore: workers\")")
    if args.workers > 1 and not getattr(args, "stream", True):
        raise HarnessError("--workers N runs N pytest processes on one stream; it cannot go with --no-stream")
    if args.reference and not (Path(args.reference) / "reference").is_dir():
        raise HarnessError(f"--reference {args.reference}: not the folder of an earlier `kueue-harness explore` "
                           "(it has no reference/ folder)")
    if getattr(args, "kueue_source", None) and not Path(args.kueue_source).is_dir():
        raise HarnessError(f"--kueue-source {args.kueue_source}: no such folder (a Kueue working tree)")
    spec = KueueSpec.from_options(args.kueue_version, args.kueue_ref, args.kueue_source, args.kueue_repo,
                                  getattr(args, "kueue_patch", None), getattr(args, "kueue_race", False))
    out = Path(args.out or Path("artifacts") / f"explore-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file, not a folder: give a new folder for the exploration")
    if out.is_dir() and any(out.iterdir()):
        raise HarnessError(f"--out {out} already holds files (an earlier exploration?): evidence is never overwritten. "
                           "Give a new folder; `--reference DIR` reuses an earlier exploration's reference runs")
    if getattr(args, "known", None) or getattr(args, "no_known", False):  # a bad --known before minutes of builds
        known_bugs(None, getattr(args, "known", None), getattr(args, "no_known", False))
    print(f"[explore] Kueue {spec.wanted}: building (or finding) the binaries")
    bins = binaries.ensure_all(spec, lambda line: print(f"    {line}"))
    known = known_bugs(bins.kueue_build.identity(), getattr(args, "known", None), getattr(args, "no_known", False))
    print(f"[explore] known bugs muted: {', '.join(known) or 'none'}")
    ex = Explorer(cases, spec, out, minutes=args.minutes, max_runs=args.max_runs, batch=args.batch, shard=shard,
                  max_depth=args.max_depth, min_runs=args.min_runs, noop_every=args.noop_every,
                  reference=Path(args.reference).resolve() if args.reference else None, stop_after=args.stop_after,
                  stop_on=tuple(getattr(args, "stop_on", None) or ()),
                  reference_only=args.reference_only, stream=args.stream, workers=args.workers,
                  oracles=tuple(getattr(args, "oracle", None) or ()), known=known)
    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # run_batch stops the batch's pytest process group; the table is written

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)  # also when started in the background (SIGINT ignored)
    result = ex.run()
    print()
    print(render_summary(result), end="")
    print(f"\nexplore: {out / 'summary.md'}, explore.json, findings/, every run's plan under plans/ and evidence under "
          f"{'stream/' if args.stream else 'batches/'}")
    return 0


def known_bugs(identity: Any, asked: list[str] | None, none: bool) -> dict[str, Any]:
    """The known bugs explore mutes ({key: KnownBug}): none with `none`; else the `asked` keys (each must have a
    signature); else every bug of cases/*/bug.yaml with a signature that affects the build `identity`
    (harness/kueue/bugs.py expectation). Raises HarnessError for an unknown key or one without a signature."""
    from harness.kueue import bugs

    if none and asked:
        raise HarnessError("--known and --no-known contradict each other: give one")
    if none:
        return {}
    every = bugs.load()
    if asked:
        bad = [k for k in asked if k not in every or not every[k].signature]
        if bad:
            have = ", ".join(k for k, b in every.items() if b.signature) or "none"
            raise HarnessError(f"--known {', '.join(bad)}: not a bug of cases/*/bug.yaml with a signature (those with one: "
                               f"{have})")
        return {k: every[k] for k in asked}
    return {k: b for k, b in every.items() if b.signature and b.expectation(identity).status == "affected"}
