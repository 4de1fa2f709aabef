"""Unit tests for harness.build.kueue: specs, repositories (URL/path/.tar), refs, ancestry, source-tree
keys and the cache entry, on small git repositories made here (no Go build)."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from harness.build import kueue as kb
from harness.common.errors import HarnessError, UnservedVersion
from harness.kueue import versions


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    for var in ("KUEUE_HARNESS_KUEUE_REPO", "KUEUE_HARNESS_KUEUE_REF", "KUEUE_HARNESS_KUEUE_SOURCE_DIR",
                "KUEUE_HARNESS_KUEUE_BINARY", "KUEUE_HARNESS_KUEUE_SOURCE", "KUEUE_HARNESS_KUEUE_PATCH"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "cache"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> dict[str, str]:
    """A tiny Kueue-shaped repository: v0.17.0, a fix commit, v0.17.4 on release-0.17; returns shas."""
    r = tmp_path / "upstream"
    (r / "cmd" / "kueue").mkdir(parents=True)
    (r / "config" / "components" / "crd" / "bases").mkdir(parents=True)
    (r / "config" / "components" / "webhook").mkdir(parents=True)
    (r / "cmd" / "kueue" / "main.go").write_text("package main\n")
    (r / "config" / "components" / "crd" / "bases" / "a.yaml").write_text("kind: CustomResourceDefinition\n")
    (r / "config" / "components" / "webhook" / "manifests.yaml").write_text("kind: X\n")
    git(r, "init", "-q", "-b", "main")
    git(r, "add", ".")
    git(r, "commit", "-qm", "base")
    git(r, "tag", "v0.17.0")
    git(r, "checkout", "-qb", "release-0.17")
    (r / "cmd" / "kueue" / "main.go").write_text("package main\n// fixed\n")
    git(r, "commit", "-qam", "the fix")
    fix = git(r, "rev-parse", "HEAD")
    (r / "README").write_text("x\n")
    git(r, "add", ".")
    git(r, "commit", "-qm", "after")
    git(r, "tag", "v0.17.4")
    return {"path": str(r), "v0.17.0": git(r, "rev-parse", "v0.17.0"), "fix": fix, "v0.17.4": git(r, "rev-parse", "v0.17.4")}


def test_spec_from_options_defaults_to_the_default_tag() -> None:
    assert kb.KueueSpec.from_options().version == versions.DEFAULT_KUEUE_VERSION
    assert kb.KueueSpec.from_options("0.17.4").version == "v0.17.4"


def test_spec_ref_wins_over_the_default_version_but_not_an_explicit_one(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24 item 6: a version given together with a ref is refused, even the default's spelling (it was
    dropped silently); the default and KUEUE_HARNESS_KUEUE_VERSION give way to a ref."""
    monkeypatch.delenv("KUEUE_HARNESS_KUEUE_VERSION", raising=False)
    s = kb.KueueSpec.from_options(None, ref="release-0.17")
    assert s.ref == "release-0.17" and s.version is None and s.wanted == "ref release-0.17"
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_VERSION", "v0.17.4")
    assert kb.KueueSpec.from_options(None, ref="main").ref == "main"
    assert kb.KueueSpec.from_options(None).version == "v0.17.4"
    for version in (versions.DEFAULT_KUEUE_VERSION, "v0.17.4"):
        with pytest.raises(HarnessError, match="two builds"):
            kb.KueueSpec.from_options(version, ref="main")
    with pytest.raises(HarnessError, match="two builds"):
        kb.KueueSpec.from_options(None, ref="main", source=str(tmp_path))


def test_spec_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "cmd" / "kueue").mkdir(parents=True)  # a Kueue tree, as far as the spec looks
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_SOURCE_DIR", str(tmp_path))
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_REPO", "/some/repo.tar")
    s = kb.KueueSpec.from_options()
    assert s.source == str(tmp_path.resolve()) and s.repo == "/some/repo.tar"
    assert s.cli_args() == ["--kueue-source", str(tmp_path.resolve()), "--kueue-repo", "/some/repo.tar"]


@pytest.mark.parametrize(("describe", "base"), [("v0.17.4", "v0.17.4"), ("v0.17.0-226-g6b0c7a1d", "v0.17.0"),
                                                ("v0.17.4-dirty", "v0.17.4"), ("v0.18.0-rc.1-3-gabc", "v0.18.0-rc.1"),
                                                (None, None), ("ff69552e", None)])
def test_base_tag(describe: str | None, base: str | None) -> None:
    assert kb._base_tag(describe) == base


def test_repo_from_a_path_resolves_tags_branches_and_ancestry(upstream: dict[str, str]) -> None:
    repo = kb.repo_dir(upstream["path"], progress=lambda s: None)
    assert (repo / "HEAD").is_file()
    assert kb.resolve(repo, "v0.17.4", lambda s: None) == upstream["v0.17.4"]
    assert kb.resolve(repo, "release-0.17", lambda s: None) == upstream["v0.17.4"]
    assert kb.is_ancestor(repo, upstream["fix"], upstream["v0.17.4"]) is True
    assert kb.is_ancestor(repo, upstream["fix"], upstream["v0.17.0"]) is False
    assert kb.is_ancestor(repo, "0" * 40, upstream["v0.17.0"]) is None
    with pytest.raises(UnservedVersion, match="not in the repository"):
        kb.resolve(repo, "v0.99.0", lambda s: None)


def test_a_new_tag_in_a_path_repository_is_fetched(upstream: dict[str, str]) -> None:
    repo = kb.repo_dir(upstream["path"], progress=lambda s: None)
    git(Path(upstream["path"]), "tag", "v0.17.5")
    assert kb.resolve(repo, "v0.17.5", lambda s: None) == upstream["v0.17.4"]


def test_repo_from_a_tar_of_a_bare_repository(upstream: dict[str, str], tmp_path: Path) -> None:
    bare = tmp_path / "kq.git"
    git(tmp_path, "clone", "-q", "--bare", upstream["path"], str(bare))
    tar = tmp_path / "kueue.git.tar"
    with tarfile.open(tar, "w") as tf:
        tf.add(bare, arcname="kq.git")
    lines: list[str] = []
    repo = kb.repo_dir(str(tar), progress=lines.append)
    assert kb.resolve(repo, "v0.17.0", lambda s: None) == upstream["v0.17.0"]
    assert any("unpacking" in line for line in lines)
    assert kb.repo_dir(str(tar), progress=lambda s: pytest.fail("unpacked twice")) == repo
    # A snapshot is never fetched: a missing ref is an error at once.
    with pytest.raises(UnservedVersion):
        kb.resolve(repo, "v9.9.9", lambda s: None)


def test_repo_errors(tmp_path: Path) -> None:
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(HarnessError, match="not a .tar"):
        kb.repo_dir(str(tmp_path / "plain.txt"))
    (tmp_path / "notgit").mkdir()
    with pytest.raises(HarnessError, match="not a git repository"):
        kb.repo_dir(str(tmp_path / "notgit"))


def test_source_key_covers_uncommitted_and_untracked_changes(upstream: dict[str, str]) -> None:
    tree = Path(upstream["path"])
    v1, commit, base, h1 = kb.source_key(tree)
    assert commit == upstream["v0.17.4"] and base == "v0.17.4" and v1 == f"v0.17.4+{h1[:8]}"
    (tree / "cmd" / "kueue" / "main.go").write_text("package main\n// local change\n")
    v2, _, base2, h2 = kb.source_key(tree)
    assert h2 != h1 and v2.startswith("v0.17.4-dirty+") and base2 == "v0.17.4"
    (tree / "new.go").write_text("package x\n")
    assert kb.source_key(tree)[3] != h2
    assert kb.source_key(tree)[3] == kb.source_key(tree)[3]  # stable


def test_source_key_without_git(tmp_path: Path) -> None:
    (tmp_path / "t" / "cmd").mkdir(parents=True)
    (tmp_path / "t" / "cmd" / "a.go").write_text("a")
    v, commit, base, h = kb.source_key(tmp_path / "t")
    assert v == f"source+{h[:8]}" and commit is None and base is None
    (tmp_path / "t" / "cmd" / "a.go").write_text("b")
    assert kb.source_key(tmp_path / "t")[3] != h


def test_cache_entry_round_trip(tmp_path: Path, upstream: dict[str, str]) -> None:
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "kueue").write_text("#!/bin/sh\n")
    kb._copy_config(Path(upstream["path"]), entry)
    assert (entry / "config" / "components" / "crd" / "bases" / "a.yaml").is_file()
    built = kb.KueueBuild(entry / "kueue", entry, "v0.17.4", upstream["v0.17.4"], "git x tag v0.17.4", "v0.17.4", None, 12.0)
    kb._save_entry(entry, built)
    assert kb._load_entry(entry) == built


def test_copy_config_refuses_a_tree_without_crds(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="crd/bases"):
        kb._copy_config(tmp_path, tmp_path / "entry")


def test_identity_uses_the_reported_version_and_ancestry(upstream: dict[str, str]) -> None:
    repo = kb.repo_dir(upstream["path"], progress=lambda s: None)
    built = kb.KueueBuild(Path("/k"), Path("/d"), "v0.17.0-1-gabc", upstream["fix"], "git", "v0.17.0", repo)
    ident = built.identity("v0.17.0-1-gabc", upstream["fix"])
    assert ident.contains(upstream["fix"]) is True and ident.contains(upstream["v0.17.4"]) is False
    # A reported commit that is no sha (module-proxy builds) falls back to what the build knows.
    assert built.identity("v0.17.0", "module-proxy").commit == upstream["fix"]


def test_source_that_is_no_kueue_tree(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="not a Kueue source tree"):
        kb.build(kb.KueueSpec(source=str(tmp_path)), progress=lambda s: None)


def test_spec_with_patches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    patch = tmp_path / "fix.patch"
    patch.write_text("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    spec = kb.KueueSpec.from_options("v0.17.0", patches=[str(patch)])
    assert spec.patches == (str(patch.resolve()),)
    assert spec.wanted == "v0.17.0 + fix.patch"
    assert spec.cli_args()[:4] == ["--kueue-version", "v0.17.0", "--kueue-patch", str(patch.resolve())]
    with pytest.raises(HarnessError, match="no such file"):
        kb.KueueSpec.from_options("v0.17.0", patches=[str(tmp_path / "missing.patch")])
    (tmp_path / "notes.txt").write_text("fix the admission\n")
    with pytest.raises(HarnessError, match="not a unified diff"):
        kb.KueueSpec.from_options("v0.17.0", patches=[str(tmp_path / "notes.txt")])
    with pytest.raises(HarnessError, match="not a Kueue source tree"):
        kb.KueueSpec.from_options(source=str(tmp_path / "nowhere"))
    with pytest.raises(HarnessError, match="apply the patch to the tree yourself"):
        kb.KueueSpec.from_options(source=str(tmp_path), patches=[str(patch)])
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_PATCH", str(patch))
    assert kb.KueueSpec.from_options("v0.17.0").patches == (str(patch.resolve()),)


def test_patches_apply_in_the_worktree_or_fail_naming_the_patch(upstream: dict[str, str], tmp_path: Path) -> None:
    wt = Path(upstream["path"])
    good = tmp_path / "good.patch"
    good.write_text("--- a/README\n+++ b/README\n@@ -1 +1 @@\n-x\n+y\n")
    kb._apply_patches(wt, (str(good),), "v0.17.4")
    assert (wt / "README").read_text() == "y\n"
    with pytest.raises(kb.BuildError, match=r"good.patch does not apply to v0.17.4"):
        kb._apply_patches(wt, (str(good),), "v0.17.4")  # already applied: the old line is gone
    key, parts = kb.patch_digest((str(good),))
    assert len(key) == 12 and parts[0]["file"] == "good.patch" and len(parts[0]["sha256"]) == 64


def test_bug_yaml_fix_patches_are_hashed_relative_to_the_file(tmp_path: Path) -> None:
    import hashlib

    from harness.kueue import bugs

    (tmp_path / "backport.patch").write_text("diff\n")
    text = "bugs:\n  - {key: k, issue: i, summary: s, affected: ['>=0.16.0'], fix_patches: [backport.patch]}\n"
    bug = bugs.parse(text, str(tmp_path / "bug.yaml"))["k"]
    assert bug.fix_patches == {"backport.patch": hashlib.sha256(b"diff\n").hexdigest()}
    with pytest.raises(HarnessError, match="fix_patches names gone.patch"):
        bugs.parse(text.replace("backport.patch", "gone.patch"), str(tmp_path / "bug.yaml"))
