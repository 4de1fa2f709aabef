"""What the commands share: the Kueue build options (--kueue-version, --kueue-ref, --kueue-source, --kueue-repo,
--kueue-patch) and the KueueSpec they make, --name, the shipped plans, the harness version, and the messages
for a folder that cannot be written or a closed stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.kueue import versions


def _spec(args: argparse.Namespace):
    """The Kueue build the command's --kueue-version/--kueue-ref/--kueue-source/--kueue-repo name."""
    from harness.build.kueue import KueueSpec

    return KueueSpec.from_options(args.kueue_version, getattr(args, "kueue_ref", None),
                                  getattr(args, "kueue_source", None), getattr(args, "kueue_repo", None),
                                  getattr(args, "kueue_patch", None), getattr(args, "kueue_race", False))


def _add_kueue_options(p: argparse.ArgumentParser, what: str = "Kueue to run") -> None:
    p.add_argument("--kueue-version", default=None,
                   help=f"{what}: a release tag (env KUEUE_HARNESS_KUEUE_VERSION; default "
                        f"{versions.DEFAULT_KUEUE_VERSION}), from the Go module proxy where served, else built from "
                        "--kueue-repo; not with --kueue-ref or --kueue-source")
    p.add_argument("--kueue-ref", help="a branch, tag or commit of --kueue-repo instead (env KUEUE_HARNESS_KUEUE_REF)")
    p.add_argument("--kueue-source", help="a local Kueue working tree instead, uncommitted changes included "
                                          "(env KUEUE_HARNESS_KUEUE_SOURCE_DIR)")
    p.add_argument("--kueue-repo", help="Kueue git repository: URL, path, or .tar of a bare repository "
                                        f"(env KUEUE_HARNESS_KUEUE_REPO; default {versions.UPSTREAM_KUEUE_REPO})")
    p.add_argument("--kueue-patch", action="append", metavar="FILE",
                   help="a unified diff applied on top of --kueue-version/--kueue-ref before building (repeatable; "
                        "e.g. a one-line backport of a fix: cases/kueue_14863/backport.patch)")
    p.add_argument("--kueue-race", action="store_true",
                   help="build Kueue with Go's race detector (cached apart; env KUEUE_HARNESS_KUEUE_RACE=1): every data race "
                        "it runs into is a violation of no_data_race, added to every case, with both stacks in the bundle "
                        "(docs/kueue-builds.md); local target only")


#: Seconds `run --keep-env` waits for its session to start and run the cases (builds are done before).
KEEP_ENV_TIMEOUT = 6 * 3600.0


def _add_name(p: argparse.ArgumentParser, what: str = "the session's name (default: default)") -> None:
    p.add_argument("--name", default=None, help=what)


def _shipped_plans() -> str:
    from harness.plan.load import shipped_plans

    return ", ".join(sorted(shipped_plans()))


def _version() -> str:
    """The installed project's version (package metadata, from pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kueue-harness")
    except PackageNotFoundError:
        return "unknown (not installed: `pip install -e .` in the checkout)"


#: Options that name a path the user chose: (argparse dest, option, default when not given).
_PATH_OPTIONS = (("artifacts_dir", "--artifacts-dir", "artifacts"), ("out", "--out", None), ("file", "--file", None))


def _os_error(e: OSError, args: argparse.Namespace) -> str:
    """One paragraph for an OSError: what failed on which path, and the remedy for that path (the option
    that chose it, when one did)."""
    what = f"{e.strerror or e}{': ' + os.fsdecode(e.filename) if e.filename else ''}"
    if e.filename:
        failed = Path(os.fsdecode(e.filename)).resolve()
        for dest, option, default in _PATH_OPTIONS:
            if not hasattr(args, dest):
                continue
            given = getattr(args, dest) or default
            if not given:
                continue
            chosen = Path(given).resolve()
            if failed == chosen or chosen in failed.parents or (failed in chosen.parents and failed != Path("/")):
                return (f"{what}. It is on the path {option} names{'' if getattr(args, dest) else ' by default'}: "
                        f"check its permissions and free space, or choose another with {option}.")
    return f"{what}. Check that path's permissions and the free space there."


def _stdout_gone() -> bool:
    """True when standard output's reader has gone; then stdout is pointed at /dev/null, so Python's own
    flush at exit does not complain a second time."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(ev & select.POLLERR for _, ev in poll.poll(0))  # a pipe whose read end is closed
    except (OSError, ValueError):
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return gone
