"""`kueue-harness`: the command line. `run` reproduces the seed cases on real Kueue and prints a verdict
table; `build` builds the real components; `versions` lists what is pinned and served.

Exit codes: 0 every case got the verdict its Kueue version should give; 1 some case did not (or errored);
2-7 a foreseeable problem before any case ran (see harness/errors.py and README "When things go wrong").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness import versions
from harness.errors import HarnessError

CASES_DIR = Path(__file__).resolve().parent.parent / "cases"
SEED_CASES = ("test_stuck_preemption.py", "test_quota_oversubscription.py")


def _cmd_run(args: argparse.Namespace) -> int:
    import pytest

    versions.kueue_release(args.kueue_version)
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    art = Path(args.artifacts_dir or Path("artifacts") / run_id).resolve()
    targets = [str(CASES_DIR / c) for c in SEED_CASES]
    if args.k:
        targets += ["-k", args.k]
    code = pytest.main([*targets, "-p", "no:cacheprovider", "-q", "-rN", f"--kueue-version={args.kueue_version}",
                        f"--artifacts-dir={art}", f"--junitxml={art / 'junit.xml'}",
                        *(["--keep-env"] if args.keep_env else [])])
    summary = art / "summary.json"
    if summary.exists():
        data = json.loads(summary.read_text())
        print(f"\nSeed scenarios of kubernetes-sigs/kueue#11480 on Kueue {data['kueue_version']} "
              f"(kube-apiserver {data['kubernetes_version']}, target {data['target']}):")
        print(f"  {'case':<40} {'verdict':<11} {'expected':<11} {'seconds':>7}")
        for c in data["cases"]:
            print(f"  {c['case'].split('::')[-1]:<40} {c['verdict']:<11} {c.get('expected', ''):<11} {c['seconds']:>7.1f}")
        print(f"Evidence: {art}  (summary.json, junit.xml, env/kueue.log, env/proxy-events.jsonl, "
              "cases/<case>/history.jsonl)")
    return 0 if code == 0 else 1


def _cmd_build(args: argparse.Namespace) -> int:
    from harness.env import binaries

    b = binaries.ensure_all(args.kueue_version)
    for k, v in b.__dict__.items():
        print(f"{k:<24} {v}")
    return 0


def _cmd_versions(args: argparse.Namespace) -> int:
    print(f"kube-apiserver / kube-controller-manager  {versions.KUBERNETES_VERSION}")
    print(f"etcd                                      {versions.ETCD_VERSION}")
    print(f"Kueue (runnable here)                     {', '.join(versions.KUEUE_RELEASES)}")
    for bug in versions.KNOWN_BUGS.values():
        aff = [v for v in versions.KUEUE_RELEASES if bug.affects(v)]
        print(f"{bug.issue}: affected {' or '.join(bug.affected)}; runnable affected: {', '.join(aff) or 'none'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kueue-harness", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="build what is missing, reproduce the seed cases, print the verdicts")
    r.add_argument("--kueue-version", default=os.environ.get("KUEUE_HARNESS_KUEUE_VERSION", versions.DEFAULT_KUEUE_VERSION),
                   help=f"Kueue version (default {versions.DEFAULT_KUEUE_VERSION}; served: {', '.join(versions.KUEUE_RELEASES)})")
    r.add_argument("--artifacts-dir", help="where the evidence goes (default artifacts/<run-id>)")
    r.add_argument("--keep-env", action="store_true", help="leave the environment running afterwards")
    r.add_argument("-k", help="only cases matching this pytest -k expression")
    r.set_defaults(func=_cmd_run)
    b = sub.add_parser("build", help="build (or find in the cache) every real component")
    b.add_argument("--kueue-version", default=versions.DEFAULT_KUEUE_VERSION)
    b.set_defaults(func=_cmd_build)
    v = sub.add_parser("versions", help="pinned component versions and the Kueue versions a known bug affects")
    v.set_defaults(func=_cmd_versions)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except HarnessError as e:
        print(f"kueue-harness: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("kueue-harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
