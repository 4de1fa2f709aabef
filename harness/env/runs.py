"""Where runs keep their state, and the free-space check every run makes first. Shared by the local and
in-cluster environments and the session supervisor (no environment imports another for these).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.env import binaries
from harness.errors import HarnessError

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
