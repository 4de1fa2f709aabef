"""Kueue builds the integration tests need beyond the default tag: a tag the Go module proxy does not serve
(v0.17.4, the fixed release) is built from a Kueue git repository — KUEUE_HARNESS_KUEUE_REPO (a path, URL or
.tar of a bare repository) when configured, else upstream github.com. On a machine that cannot reach
github.com and with no repository configured, such a test skips and says why and what to set (README
"Quick start"); a configured repository that fails is a failure: the user asked for it.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

from harness.build import binaries
from harness.build import kueue as kueue_build
from harness.common.errors import BuildError, UnservedVersion


def repository_configured(spec: kueue_build.KueueSpec) -> str | None:
    """The Kueue repository the user configured for `spec` (its --kueue-repo, else
    KUEUE_HARNESS_KUEUE_REPO), or None when the upstream default would be used."""
    return spec.repo or os.environ.get("KUEUE_HARNESS_KUEUE_REPO") or None


def build_or_skip(spec: kueue_build.KueueSpec,
                  ensure: Callable[[kueue_build.KueueSpec], Any] = binaries.ensure_all) -> Any:
    """`ensure(spec)` (binaries.ensure_all: every component for that Kueue build); pytest.skip with the
    build's first error line when it cannot be made and no repository is configured (UnservedVersion,
    BuildError: upstream unreachable). Raises what `ensure` raises when a repository is configured."""
    try:
        return ensure(spec)
    except (UnservedVersion, BuildError) as e:
        if repository_configured(spec):
            raise
        first = str(e).splitlines()[0]
        first = first if len(first) <= 400 else first[:400] + " …"
        pytest.skip(f"cannot build Kueue {spec.wanted} here: {first} (to run this test, set KUEUE_HARNESS_KUEUE_REPO "
                    "to a Kueue git repository or a .tar of one)")
