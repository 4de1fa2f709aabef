"""Unit tests for harness.versions: known-bug version ranges and the pinned Kueue release table."""

from __future__ import annotations

import pytest

from harness import versions
from harness.errors import HarnessError, UnservedVersion
from harness.versions import KNOWN_BUGS, KUEUE_RELEASES, KnownBug, kueue_release

BUG_11480 = KNOWN_BUGS["kubernetes-sigs/kueue#11480"]
BUG_11480_OVERSUB = KNOWN_BUGS["kubernetes-sigs/kueue#11480-oversubscription"]


@pytest.mark.parametrize("prefix", ["v", ""])
@pytest.mark.parametrize(
    ("version", "affected"),
    [
        ("0.15.9", False),  # below the first affected minor
        ("0.16.0", True),  # lower bound is inclusive
        ("0.16.8", True),  # last affected 0.16 patch
        ("0.16.9", False),  # fixed in 0.16.9
        ("0.16.10", False),
        ("0.17.0", True),
        ("0.17.3", True),  # last affected 0.17 patch
        ("0.17.4", False),  # fixed in 0.17.4
        ("0.18.0", False),
    ],
)
def test_11480_affects_boundaries(prefix: str, version: str, affected: bool) -> None:
    assert BUG_11480.affects(prefix + version) is affected


@pytest.mark.parametrize("prefix", ["v", ""])
@pytest.mark.parametrize(
    ("version", "affected"),
    [("0.15.9", False), ("0.16.0", True), ("0.16.9", True), ("0.17.4", True), ("0.18.0", True)],
)
def test_11480_oversubscription_has_no_fixed_release(prefix: str, version: str, affected: bool) -> None:
    assert BUG_11480_OVERSUB.affects(prefix + version) is affected


def test_affects_any_of_several_ranges() -> None:
    bug = KnownBug("x/y#1", (">=1.0,<1.2", "==2.5.1"), "synthetic")
    assert bug.affects("v1.1.7")
    assert bug.affects("2.5.1")
    assert not bug.affects("v2.5.0")
    assert not bug.affects("v1.2.0")


def test_every_served_release_is_keyed_by_its_own_tag() -> None:
    assert KUEUE_RELEASES, "at least one pinned release"
    for tag, rel in KUEUE_RELEASES.items():
        assert tag.startswith("v")
        assert rel.version == tag
    assert versions.DEFAULT_KUEUE_VERSION in KUEUE_RELEASES


@pytest.mark.parametrize("spelling", ["v0.17.0", "0.17.0"])
def test_kueue_release_for_pinned_version(spelling: str) -> None:
    rel = kueue_release(spelling)
    assert rel.version == "v0.17.0"
    assert rel.config_api == "config.kueue.x-k8s.io/v1beta2"
    assert rel is KUEUE_RELEASES["v0.17.0"]


@pytest.mark.parametrize("spelling", ["v0.16.5", "0.16.5", "v0.99.0"])
def test_kueue_release_unserved_lists_served_versions(spelling: str) -> None:
    with pytest.raises(UnservedVersion) as exc:
        kueue_release(spelling)
    err = exc.value
    assert isinstance(err, HarnessError)
    assert err.exit_code == 3
    msg = str(err)
    assert "v" + spelling.lstrip("v") in msg
    for tag in KUEUE_RELEASES:
        assert tag in msg
    assert ", ".join(KUEUE_RELEASES) in msg
    assert "--kueue-version" in msg
    assert "KUEUE_RELEASES" in msg
    # `from None`: no KeyError chained into the user-facing error.
    assert err.__cause__ is None and err.__suppress_context__


def test_kubernetes_staging_version_matches_kubernetes_version() -> None:
    major, minor, patch = versions.KUBERNETES_VERSION.lstrip("v").split(".")
    assert major == "1"
    assert versions.KUBERNETES_STAGING_VERSION == f"v0.{minor}.{patch}"
