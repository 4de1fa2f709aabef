"""Item 0 of issue 24: the README's `make test` on a machine that cannot reach github.com. A test that needs a
Kueue tag the Go module proxy does not serve skips, saying why and what to set, when no repository is
configured; with one configured, its failure is the test's failure."""

from __future__ import annotations

import pytest

from harness.build.kueue import KueueSpec
from harness.common.errors import BuildError, UnservedVersion
from tests.integration.builds import build_or_skip

UNREACHABLE = ("Kueue v0.17.4 is not served by the Go module proxy, and the Kueue repository "
               "https://github.com/kubernetes-sigs/kueue could not be cloned (git clone failed: Could not resolve "
               "host: github.com)")


def _fails(exc: Exception):
    def ensure(spec):
        raise exc
    return ensure


@pytest.mark.parametrize("exc", [UnservedVersion(UNREACHABLE), BuildError("git clone --bare failed (exit 128)")])
def test_unreachable_upstream_skips_saying_why(monkeypatch, exc):
    monkeypatch.delenv("KUEUE_HARNESS_KUEUE_REPO", raising=False)
    with pytest.raises(pytest.skip.Exception) as info:
        build_or_skip(KueueSpec(version="v0.17.4"), _fails(exc))
    msg = str(info.value)
    assert "cannot build Kueue v0.17.4 here" in msg and str(exc).splitlines()[0][:60] in msg
    assert "KUEUE_HARNESS_KUEUE_REPO" in msg, "the skip must say what to set"


def test_a_configured_repository_that_fails_is_a_failure(monkeypatch):
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_REPO", "/nowhere/kueue.git.tar")
    with pytest.raises(UnservedVersion):
        build_or_skip(KueueSpec(version="v0.17.4"), _fails(UnservedVersion(UNREACHABLE)))
    monkeypatch.delenv("KUEUE_HARNESS_KUEUE_REPO")
    with pytest.raises(BuildError):
        build_or_skip(KueueSpec(version="v0.17.4", repo="/nowhere/kueue.git"), _fails(BuildError("x")))


def test_a_build_that_works_is_returned(monkeypatch):
    monkeypatch.delenv("KUEUE_HARNESS_KUEUE_REPO", raising=False)
    assert build_or_skip(KueueSpec(version="v0.17.4"), lambda spec: ("built", spec.version)) == ("built", "v0.17.4")


def test_ci_runs_the_readme_command_as_a_user_would():
    """.ci/run must not set, for the README's `make test`, a variable a user does not have (it used to export
    KUEUE_HARNESS_KUEUE_REPO pointing at a shared .tar, hiding the air-gapped failure)."""
    from harness.common.paths import ROOT

    ci = (ROOT / ".ci" / "run").read_text()
    assert "\nmake test\n" in ci
    before, _, after = ci.partition("\nmake test\n")
    # Nothing before the README's command sets it; what runs after it with a repository (the tests that
    # skipped for want of one) sets it on that command line only, as the README tells a user to.
    assert "KUEUE_HARNESS_KUEUE_REPO" not in before
    assert "export KUEUE_HARNESS_KUEUE_REPO" not in after
