"""Unit tests for harness.kueue.versions: tags, version profiles, and known bugs judged by range or ancestry."""

from __future__ import annotations

import pytest

from harness.common.errors import HarnessError, UnservedVersion
from harness.kueue import bugs, versions
from harness.kueue.bugs import KNOWN_BUGS, KnownBug

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


@pytest.mark.parametrize(("spelling", "tag"), [("v0.17.0", "v0.17.0"), ("0.17.4", "v0.17.4"), ("v0.19.2", "v0.19.2"),
                                           ("v0.18.0-rc.1", "v0.18.0-rc.1")])
def test_check_tag_accepts_any_tag_from_the_first_profile(spelling: str, tag: str) -> None:
    assert versions.check_tag(spelling) == tag


@pytest.mark.parametrize("spelling", ["v0.15.0", "0.14.0", "v0.9.9"])
def test_check_tag_refuses_older_versions_with_the_reason(spelling: str) -> None:
    with pytest.raises(UnservedVersion) as exc:
        versions.check_tag(spelling)
    assert exc.value.exit_code == 3
    assert "v1beta1" in str(exc.value) and versions.KUEUE_PROFILES[0].since in str(exc.value)


@pytest.mark.parametrize("spelling", ["main", "release-0.17", "2f5004ff", "v0.17"])
def test_check_tag_sends_refs_to_kueue_ref(spelling: str) -> None:
    with pytest.raises(UnservedVersion) as exc:
        versions.check_tag(spelling)
    assert "--kueue-ref" in str(exc.value)
    assert isinstance(exc.value, HarnessError)


def test_profile_for_untagged_builds_is_the_newest() -> None:
    assert versions.kueue_profile(None) is versions.KUEUE_PROFILES[-1]
    assert versions.kueue_profile("v0.19.2").config_api == "config.kueue.x-k8s.io/v1beta2"


# --- expectations on real builds: release tags by range, other builds by git ancestry -------------------

def _ident(version: str, base: str | None = None, contains: dict[str, bool | None] | None = None,
           commit: str | None = "c0ffee00") -> versions.BuildIdentity:
    return versions.BuildIdentity(version, commit, base,
                                  (lambda sha: contains.get(sha)) if contains is not None else None)


@pytest.mark.parametrize(("tag", "status"), [("v0.16.6", "affected"), ("v0.16.9", "fixed"), ("v0.17.0", "affected"),
                                             ("v0.17.3", "affected"), ("v0.17.4", "fixed"), ("v0.18.0", "fixed"),
                                             ("v0.19.2", "fixed")])
def test_release_tags_are_judged_by_range(tag: str, status: str) -> None:
    exp = BUG_11480.expectation(_ident(tag, tag))
    assert exp.status == status
    assert tag in exp.reason


def test_a_commit_containing_a_fix_commit_is_fixed() -> None:
    exp = BUG_11480.expectation(_ident("v0.17.0-227-g2f5004ff", "v0.17.0",
                                       {"90a852a2": False, "2f5004ff": True, "32754e7e": False}))
    assert exp.status == "fixed" and "2f5004ff" in exp.reason and "release-0.17" in exp.reason


def test_the_parent_of_the_fix_is_affected() -> None:
    exp = BUG_11480.expectation(_ident("v0.17.0-226-g6b0c7a1d", "v0.17.0",
                                       {"90a852a2": False, "2f5004ff": False, "32754e7e": False}))
    assert exp.status == "affected" and "none of the fix commits" in exp.reason


def test_a_fix_commit_missing_from_the_repository_leaves_it_unknown() -> None:
    exp = BUG_11480.expectation(_ident("v0.17.0-5-gabc", "v0.17.0", {"90a852a2": None, "2f5004ff": False,
                                                                      "32754e7e": False}))
    assert exp.status == "unknown" and "plain verdict" in exp.reason


def test_a_shallow_untagged_build_is_unknown_unless_it_contains_the_fix() -> None:
    no = {"90a852a2": False, "2f5004ff": False, "32754e7e": False}
    assert BUG_11480.expectation(_ident("ff69552e", None, no)).status == "unknown"
    assert BUG_11480.expectation(_ident("ff69552e", None, {**no, "90a852a2": True})).status == "fixed"
    # no repository to ask at all
    assert BUG_11480.expectation(_ident("v0.17.0-3-gabc", "v0.17.0", None)).status == "unknown"


def test_a_bug_with_no_known_fix_affects_every_build() -> None:
    for ident in (_ident("v0.19.2", "v0.19.2"), _ident("ff69552e", None, {}), _ident("v0.17.4-dirty+12345678", "v0.17.4")):
        assert BUG_11480_OVERSUB.expectation(ident).status == "affected", ident


def test_dirty_source_builds_use_their_base_tag() -> None:
    exp = BUG_11480.expectation(_ident("v0.17.4-dirty+1a2b3c4d", "v0.17.4", {"90a852a2": False, "2f5004ff": True}))
    assert exp.status == "fixed"
    exp = BUG_11480.expectation(_ident("v0.17.1-dirty+1a2b3c4d", "v0.17.1",
                                       {"90a852a2": False, "2f5004ff": False, "32754e7e": False}))
    assert exp.status == "affected"


def test_kubernetes_staging_version_matches_kubernetes_version() -> None:
    major, minor, patch = versions.KUBERNETES_VERSION.lstrip("v").split(".")
    assert major == "1"
    assert versions.KUBERNETES_STAGING_VERSION == f"v0.{minor}.{patch}"


def test_a_build_with_a_fix_patch_is_fixed_and_other_patches_keep_the_base() -> None:
    bug = bugs.KnownBug(issue="x#1", affected=(">=0.16.0",), summary="s", fix_patches={"backport.patch": "ab" * 32})
    fixed = versions.BuildIdentity("v0.17.0+patch.12345678", "c0ffee00", "v0.17.0", None, ("ab" * 32,))
    exp = bug.expectation(fixed)
    assert exp.status == "fixed" and "backport.patch" in exp.reason
    other = versions.BuildIdentity("v0.17.0+patch.87654321", "c0ffee00", "v0.17.0", None, ("cd" * 32,))
    exp = bug.expectation(other)
    assert exp.status == "affected" and "not a known fix" in exp.reason
    # an unpatched tag is still judged by its range
    assert bug.expectation(versions.BuildIdentity("v0.17.0", None, "v0.17.0")).status == "affected"


def test_a_broken_bug_yaml_fails_only_what_reads_the_bugs(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """KNOWN_BUGS is read on first use: importing harness.kueue.bugs (every CLI command) never reads bug.yaml."""
    from harness.common.errors import HarnessError
    from harness.kueue import bugs

    bad = tmp_path / "bug.yaml"
    bad.write_text("bugs: [\n")
    with pytest.raises(HarnessError, match=rf"{bad}: not valid YAML .*{bad}"):
        bugs.parse(bad.read_text(), str(bad))
    monkeypatch.delitem(bugs.__dict__, "KNOWN_BUGS", raising=False)
    monkeypatch.setattr(bugs, "load", lambda: bugs.parse(bad.read_text(), str(bad)))
    with pytest.raises(HarnessError, match="not valid YAML"):
        bugs.KNOWN_BUGS  # noqa: B018
    monkeypatch.setattr(bugs, "load", lambda: {})
    assert bugs.KNOWN_BUGS == {}
