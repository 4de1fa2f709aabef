"""Where the harness's own files and its cache live: the checkout (or installed tree) that holds harness/,
cases/ and proxy_addons/, and the cache folder builds and runs share (`KUEUE_HARNESS_CACHE`).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The folder that holds harness/, cases/ and proxy_addons/ (the checkout, or site-packages when installed).
ROOT = Path(__file__).resolve().parents[2]
#: One folder per upstream bug: bug.yaml, plans/*.yaml, test_*.py (docs/architecture.md "Add a bug").
CASES_DIR = ROOT / "cases"
#: The script mitmdump loads (it imports harness/proxy/addons).
ADDON = ROOT / "proxy_addons" / "kueue_faults.py"


def cache_root() -> Path:
    """The harness's cache folder: $KUEUE_HARNESS_CACHE, else ~/.cache/kueue-harness (not created here)."""
    env = os.environ.get("KUEUE_HARNESS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kueue-harness"
