"""Where runs keep their state, and the free-space check every run makes first. Shared by the local and
in-cluster environments and the session supervisor (no environment imports another for these).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.build import binaries
from harness.common.errors import HarnessError

#: Kueue's log alone grows by about 0.5 MB per second of "Preemption already issued" flood at V(3).
MIN_FREE_BYTES = 64 * 1024 * 1024


def check_free_space(folder: Path, need: int = MIN_FREE_BYTES) -> None:
    """Raise HarnessError if `folder`'s file system has less than `need` bytes free: a full disk mid-run
    truncates Kueue's log and the proxy's events, the evidence the verdict rests on."""
    free = shutil.disk_usage(folder).free
    if free < need:
        raise HarnessError(
            f"the artifacts folder {folder} has {free // 1024} KiB free; a run needs at least "
            f"{need // (1024 * 1024)} MiB for Kueue's log, the proxy's events and the bundles. Free space there "
            "or point --artifacts-dir (KUEUE_HARNESS_ARTIFACTS) at another file system."
        )


def runs_root() -> Path:
    """Where runs keep their state (keys, tokens, process records): <cache>/runs, mode 0700."""
    root = binaries.cache_root() / "runs"
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    return root


def forget_secrets(state: Path) -> None:
    """Delete everything in a run's state folder but its (secret-free) process record: keys, tokens,
    kubeconfigs (a kind cluster's admin key among them), etcd's data. The next start's reap_stale() removes
    the folder. Called when an environment stops, and when one fails to start."""
    if not state.is_dir():
        return
    for child in state.iterdir():
        if child.name != "processes.json":
            shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)


#: What in a folder shows that a run (pytest, `run`, `up`) already left its evidence there.
RUN_MARKERS = ("summary.json", "junit.xml", "session.log", "env", "cases")


def earlier_run(folder: Path) -> list[str]:
    """The RUN_MARKERS `folder` holds ([] when it holds no run: missing, empty, or only other files, such as
    the runs.json `kueue-harness explore` writes before its pytest starts)."""
    return [m for m in RUN_MARKERS if (folder / m).exists()]


def run_folder(given: str | Path | None, run_id: str) -> tuple[Path, str | None]:
    """The folder a run writes its evidence to, and a note saying why it is not the one asked for (None when
    it is). Without `given` (--artifacts-dir / KUEUE_HARNESS_ARTIFACTS): artifacts/<run_id>, a new folder per
    run. With `given`: that folder, unless it already holds a run (earlier_run): evidence is never written
    over, so the run then goes to `given`/<run_id> (with "-2", "-3" … if that exists), as artifacts/ holds
    one folder per run. Nothing is created. `run_id`: "<YYYYmmdd-HHMMSS>-<pid>" (pytest_plugin, cli)."""
    if not given:
        return Path("artifacts") / run_id, None
    base = Path(given)
    found = earlier_run(base)
    if not found:
        return base, None
    d, n = base / run_id, 1
    while d.exists():
        n += 1
        d = base / f"{run_id}-{n}"
    return d, (f"{base} already holds a run ({', '.join(found)}); evidence is never written over, so this run's "
               f"goes to {d}")
