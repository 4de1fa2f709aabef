"""Kueue builds from any source: a release tag (from the Go module proxy where it is served, else from a
Kueue git repository), any git ref, or a local source tree with uncommitted changes.

Cache layout (root: $KUEUE_HARNESS_CACHE or ~/.cache/kueue-harness):
  kueue/<key>/kueue              the manager binary
  kueue/<key>/config/components  the CRDs, webhooks and manager config of the *same* tree
  kueue/<key>/build.json         version compiled in, commit, where it came from, build seconds
  kueue-git/<repo-key>/repo.git  a bare copy of the repository (cloned, or unpacked from a .tar)
  kueue-git/<repo-key>/worktree  the one checkout builds use: Go's build cache is keyed by content,
                                 and one folder keeps a step to a neighbouring commit at about a minute
Keys: the tag ("v0.17.4"), "git-<sha12>" for a ref, "src-<hash12>" for a source tree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.build import integrity
from harness.build.go import GoTarget, Progress, _default_progress, _module_dir, _run_go, go_binary
from harness.build.go import build as build_module
from harness.build.go import build_lock as _lock
from harness.common.errors import BuildError, HarnessError, UnservedVersion
from harness.common.paths import cache_root
from harness.kueue import versions

KUEUE_MODULE = "sigs.k8s.io/kueue"
#: The parts of config/components a run needs (CRDs, webhooks) or a benchmark reads (manager config).
CONFIG_PARTS = ("crd", "webhook", "manager")


def _kueue_target(version: str, commit: str = "module-proxy", race: bool = False) -> GoTarget:
    go_mod = (
        "module kueueharness.local/build/kueue\n\ngo 1.25.0\n\n"
        f"require sigs.k8s.io/kueue {version}\n"
    )
    pkg = "sigs.k8s.io/kueue/pkg/version"
    ldflags = f"-X '{pkg}.GitVersion={version}' -X '{pkg}.GitCommit={commit}'"
    return GoTarget(
        "kueue", version, go_mod, ("sigs.k8s.io/kueue/cmd/kueue",), "sigs.k8s.io/kueue/cmd/kueue",
        None, ldflags, "KUEUE_HARNESS_KUEUE_BINARY", race,
    )


@dataclass(frozen=True)
class KueueSpec:
    """Which Kueue to build: exactly one of `version` (a tag), `ref` (branch, tag or commit of `repo`)
    or `source` (a local tree). `repo`: URL, repository path or .tar of a bare repository."""

    version: str | None = None
    ref: str | None = None
    source: str | None = None
    repo: str | None = None
    #: Patch files (unified diffs, absolute paths) applied with `git apply` on top of `version`/`ref`.
    patches: tuple[str, ...] = ()
    #: Build with Go's race detector (`--kueue-race`, env KUEUE_HARNESS_KUEUE_RACE=1): Kueue then reports every
    #: data race it runs into on its log ("WARNING: DATA RACE", both stacks); cached apart ("+race").
    race: bool = False

    @classmethod
    def from_options(cls, version: str | None = None, ref: str | None = None, source: str | None = None,
                     repo: str | None = None, patches: list[str] | tuple[str, ...] | None = None,
                     race: bool = False) -> "KueueSpec":
        """Build a spec from CLI/pytest options; the environment fills what they leave out
        (KUEUE_HARNESS_KUEUE_REF, _SOURCE_DIR, _REPO, _VERSION, _PATCH: paths joined by os.pathsep, _RACE=1).
        Raises HarnessError on two builds at once, a patch with --kueue-source, or a missing patch file."""
        env_patches = [p for p in os.environ.get("KUEUE_HARNESS_KUEUE_PATCH", "").split(os.pathsep) if p]
        patch_paths = tuple(str(Path(p).expanduser().resolve()) for p in (patches or env_patches))
        for p in patch_paths:
            if not Path(p).is_file():
                raise HarnessError(f"--kueue-patch {p}: no such file (give a unified diff made with `git diff` "
                                   "inside a Kueue tree)")
            head = Path(p).read_bytes()[:65536].decode(errors="replace")
            if not re.search(r"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", head, re.M) or "\n+++ " not in "\n" + head:
                raise HarnessError(f"--kueue-patch {p}: not a unified diff (no ---/+++ file header and @@ hunk): make it "
                                   "with `git diff` inside a Kueue tree; refused before any build")
        if patch_paths and (source or os.environ.get("KUEUE_HARNESS_KUEUE_SOURCE_DIR")):
            raise HarnessError("--kueue-patch applies to a tag or --kueue-ref; with --kueue-source, apply the "
                               "patch to the tree yourself")
        spec = cls._from_options(version, ref, source, repo)
        if spec.source and not (Path(spec.source) / "cmd" / "kueue").is_dir():
            raise HarnessError(f"--kueue-source {spec.source} is not a Kueue source tree (no cmd/kueue/): pass the folder "
                               "that holds Kueue's go.mod; refused before any build")
        race = race or os.environ.get("KUEUE_HARNESS_KUEUE_RACE", "") not in ("", "0")
        return dataclasses.replace(spec, patches=patch_paths, race=race)

    @classmethod
    def _from_options(cls, version: str | None, ref: str | None, source: str | None,
                      repo: str | None) -> "KueueSpec":
        ref = ref or os.environ.get("KUEUE_HARNESS_KUEUE_REF") or None
        source = source or os.environ.get("KUEUE_HARNESS_KUEUE_SOURCE_DIR") or None
        repo = repo or os.environ.get("KUEUE_HARNESS_KUEUE_REPO") or None
        given = [n for n, v in (("--kueue-ref", ref), ("--kueue-source", source)) if v]
        if version and given:
            # Two selectors given: refused, never one silently winning (issue 24). A version that only comes
            # from KUEUE_HARNESS_KUEUE_VERSION or the default (version=None here) gives way to a ref or source.
            raise HarnessError(f"--kueue-version {version} and {given[0]} name two builds: give one of them "
                               f"(--kueue-version for a release tag, {given[0]} for the other)")
        if len(given) > 1:
            raise HarnessError("--kueue-ref and --kueue-source name two builds: give one of them")
        if not (ref or source):
            version = versions.check_tag(version or os.environ.get("KUEUE_HARNESS_KUEUE_VERSION")
                                         or versions.DEFAULT_KUEUE_VERSION)
        return cls(version=version, ref=ref, source=str(Path(source).resolve()) if source else None, repo=repo)

    @property
    def wanted(self) -> str:
        """What was asked for, in words: "v0.17.4", "ref release-0.17", "source /path", "v0.17.0 + fix.patch"."""
        base = self.version or (f"ref {self.ref}" if self.ref else f"source {self.source}")
        return base + "".join(f" + {Path(p).name}" for p in self.patches) + (" -race" if self.race else "")

    def cli_args(self) -> list[str]:
        """The pytest/CLI options that name this build again (for subprocesses and re-run lines)."""
        args = (["--kueue-version", self.version] if self.version else
                ["--kueue-ref", self.ref] if self.ref else ["--kueue-source", str(self.source)])
        for p in self.patches:
            args += ["--kueue-patch", p]
        return args + (["--kueue-repo", self.repo] if self.repo else []) + (["--kueue-race"] if self.race else [])


@dataclass(frozen=True)
class KueueBuild:
    """A built Kueue manager. `dir` holds `config/components` of the same tree; `version` is what the
    binary was built to report (gitVersion), `commit` its git commit (None when unknown); `base_tag` the
    nearest release tag; `repo` a local repository that holds `commit`, for ancestry questions."""

    binary: Path
    dir: Path
    version: str
    commit: str | None
    source: str
    base_tag: str | None
    repo: Path | None
    seconds: float = 0.0
    #: Patches applied on top of `commit`: ({"file": name, "sha256": hex of its bytes}, …).
    patches: tuple[dict, ...] = ()
    #: Whether the binary was built with Go's race detector, read from its build information (`binary_race`).
    race: bool = False

    def identity(self, reported_version: str | None = None, reported_commit: str | None = None
                 ) -> versions.BuildIdentity:
        """The identity known bugs are judged on: what the binary reported when given, else what it was
        built to report."""
        commit = reported_commit if reported_commit and re.fullmatch(r"[0-9a-f]{7,40}", reported_commit) else self.commit
        repo = self.repo

        def contains(sha: str) -> bool | None:
            return is_ancestor(repo, sha, commit) if repo and commit else None

        return versions.BuildIdentity(reported_version or self.version, commit, self.base_tag,
                                      contains if repo and commit else None,
                                      tuple(p["sha256"] for p in self.patches))

    def to_json(self) -> dict:
        out = {"version": self.version, "commit": self.commit, "source": self.source, "base_tag": self.base_tag,
               "repo": str(self.repo) if self.repo else None, "build_seconds": round(self.seconds, 1)}
        if self.patches:
            out["patches"] = [dict(p) for p in self.patches]
        if self.race:
            out["race"] = True
        return out


# ---- git -------------------------------------------------------------------------------------------

def _git(*args: str, cwd: Path | None = None, check: bool = True, timeout: float = 600) -> str:
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except FileNotFoundError:
        raise HarnessError("git is not on PATH: install git (Kueue is built from its git repository for "
                           "tags the Go module proxy does not serve, --kueue-ref and --kueue-source)") from None
    if check and p.returncode != 0:
        raise BuildError(f"git {' '.join(args)} failed (exit {p.returncode}): {p.stderr.strip()[-800:]}")
    return p.stdout.strip() if p.returncode == 0 else ""


def _git_ok(*args: str) -> bool:
    """True when `git args` exits 0 (for yes/no questions such as "is this ref there")."""
    return subprocess.run(["git", *args], capture_output=True).returncode == 0


def is_ancestor(repo: Path, ancestor: str, commit: str) -> bool | None:
    """Whether `ancestor` is in the history of `commit` in the git directory `repo` (None: `ancestor` is
    not in the repository, so it cannot be told)."""
    if not _git_ok("--git-dir", str(repo), "cat-file", "-e", f"{ancestor}^{{commit}}"):
        return None
    rc = subprocess.run(["git", "--git-dir", str(repo), "merge-base", "--is-ancestor", ancestor, commit],
                        capture_output=True).returncode
    return True if rc == 0 else False if rc == 1 else None


def _find_git_dir(top: Path) -> Path | None:
    for d in [top, *sorted(p for p in top.rglob("*") if p.is_dir())][:2000]:
        if (d / "HEAD").is_file() and (d / "objects").is_dir() and (d / "refs").is_dir():
            return d
    return None


def repo_dir(repo: str | None, progress: Progress = _default_progress) -> Path:
    """A local bare git repository for `repo` (None: KUEUE_HARNESS_KUEUE_REPO, else upstream): a URL is
    cloned into the cache once, a repository path is cloned from (and fetched again when a ref is
    missing), a .tar of a bare repository is unpacked once (keyed by its path, size and mtime).

    Raises BuildError when cloning fails (with git's message), HarnessError when git is missing.
    """
    repo = repo or os.environ.get("KUEUE_HARNESS_KUEUE_REPO") or versions.UPSTREAM_KUEUE_REPO
    root = cache_root() / "kueue-git"
    path = Path(repo).expanduser()
    if path.is_file():
        if not tarfile.is_tarfile(path):
            raise HarnessError(f"--kueue-repo {repo} is a file but not a .tar of a git repository")
        st = path.stat()
        key = hashlib.sha256(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
        dest = root / f"tar-{key}"
        with _lock(f"repo-{key}", progress):
            if not (dest / "repo.git" / "HEAD").is_file():
                progress(f"unpacking the Kueue repository {path} into {dest}")
                dest.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(dir=dest))
                with tarfile.open(path) as tf:
                    tf.extractall(tmp, filter="data")
                found = _find_git_dir(tmp)
                if found is None:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise HarnessError(f"{path} holds no git repository (no folder with HEAD, objects/, refs/)")
                found.rename(dest / "repo.git")
                shutil.rmtree(tmp, ignore_errors=True)
                # A snapshot: its own remote is not ours to fetch from.
                (dest / "origin").write_text(f"{path.resolve()}\n")
                (dest / "static").write_text("unpacked from a .tar: never fetched\n")
        return dest / "repo.git"
    local = path.is_dir()
    ident = str(path.resolve()) if local else repo
    key = hashlib.sha256(ident.encode()).hexdigest()[:12]
    dest = root / f"{'path' if local else 'url'}-{key}"
    with _lock(f"repo-{key}", progress):
        if not (dest / "repo.git" / "HEAD").is_file():
            if local and not _git("-C", ident, "rev-parse", "--git-dir", check=False):
                raise HarnessError(f"--kueue-repo {repo} is not a git repository")
            progress(f"cloning the Kueue repository {ident} into {dest} (once)")
            dest.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(dest / "repo.git", ignore_errors=True)
            _git("clone", "--bare", "--quiet", ident, str(dest / "repo.git"), timeout=3600)
            (dest / "origin").write_text(ident + "\n")
    return dest / "repo.git"


def _fetch(repo_git: Path, progress: Progress) -> bool:
    if (repo_git.parent / "static").exists():
        return False
    progress(f"fetching branches and tags into {repo_git}")
    out = subprocess.run(["git", "--git-dir", str(repo_git), "fetch", "--quiet", "--tags", "origin",
                          "+refs/heads/*:refs/heads/*"], capture_output=True, text=True,
                         env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    if out.returncode != 0:
        progress(f"fetch failed ({out.stderr.strip()[-200:]}); using the refs already here")
    return out.returncode == 0


def resolve(repo_git: Path, ref: str, progress: Progress = _default_progress) -> str:
    """The full commit sha of `ref` (tag, branch, sha) in `repo_git`; fetches once when it is missing, and
    always for a branch name (branches move). Raises UnservedVersion when the ref cannot be found."""

    def rev() -> str:
        return _git("--git-dir", str(repo_git), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)

    is_branch = _git_ok("--git-dir", str(repo_git), "show-ref", "--verify", "--quiet", f"refs/heads/{ref}")
    sha = rev()
    if is_branch or not sha:
        if _fetch(repo_git, progress):
            sha = rev() or sha
    if not sha:
        origin = repo_git.parent / "origin"
        where = origin.read_text().strip() if origin.is_file() else str(repo_git)
        tags = _git("--git-dir", str(repo_git), "tag", "--list", "v[0-9]*", "--sort=version:refname", check=False).split()
        shown = ", ".join(tags[-40:]) or "none"
        raise UnservedVersion(f"Kueue {ref} is not in the repository {where} (its tags: {shown}). Pick one of those, "
                              "or point --kueue-repo at another repository.")
    return sha


def _describe(git_args: list[str]) -> str | None:
    out = _git(*git_args, "describe", "--tags", "--match", "v[0-9]*", check=False)
    return out or None


def _base_tag(describe: str | None) -> str | None:
    if not describe:
        return None
    m = re.match(r"^(v\d+\.\d+\.\d+(?:-(?:rc|alpha|beta)[0-9.]*)?)(?:-\d+-g[0-9a-f]+)?(?:-dirty)?$", describe)
    return m.group(1) if m else None


# ---- building --------------------------------------------------------------------------------------

def _load_entry(entry: Path, progress: Progress = _default_progress) -> KueueBuild | None:
    """The cached build in `entry`, or None when there is none or its binary is damaged (its size or sha256
    differs from build.json's "binary" record, harness/build/integrity.py: then it is removed, said through
    `progress`, and the caller builds it again). An entry from before the record gets one now."""
    meta = entry / "build.json"
    if not ((entry / "kueue").is_file() and meta.is_file()):
        return None
    try:
        m = json.loads(meta.read_text())
    except ValueError:
        progress(f"{meta} is not JSON; building Kueue again into {entry}")
        return None
    why = integrity.problem(entry / "kueue", m.get("binary"))
    if why is not None:
        progress(f"the cached Kueue binary {entry / 'kueue'} is damaged ({why}); removing it and building it again")
        (entry / "kueue").unlink(missing_ok=True)
        return None
    if not m.get("binary"):
        try:
            meta.write_text(json.dumps({**m, "binary": integrity.measure(entry / "kueue")}, indent=1))
        except OSError:
            pass
    return KueueBuild(entry / "kueue", entry, m["version"], m.get("commit"), m["source"], m.get("base_tag"),
                      Path(m["repo"]) if m.get("repo") else None, m.get("build_seconds", 0.0),
                      tuple(m.get("patches") or ()), bool(m.get("race")))


def _save_entry(entry: Path, b: KueueBuild) -> KueueBuild:
    """Write build.json, with the binary's checksum record ("binary": harness/build/integrity.py)."""
    (entry / "build.json").write_text(json.dumps({**b.to_json(), "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                  "binary": integrity.measure(entry / "kueue")}, indent=1))
    return b


def _copy_config(tree: Path, entry: Path) -> None:
    src = tree / "config" / "components"
    if not (src / "crd" / "bases").is_dir():
        raise BuildError(f"{tree} has no config/components/crd/bases: is it a Kueue source tree?")
    dst = entry / "config" / "components"
    shutil.rmtree(dst, ignore_errors=True)
    for part in CONFIG_PARTS:
        if (src / part).is_dir():
            shutil.copytree(src / part, dst / part)


def _go_build(tree: Path, out: Path, version: str, commit: str, what: str, log_name: str,
              progress: Progress, race: bool = False) -> None:
    go = go_binary()
    mod = "-mod=vendor" if (tree / "vendor" / "modules.txt").is_file() else "-mod=mod"
    pkg = "sigs.k8s.io/kueue/pkg/version"
    ldflags = f"-X '{pkg}.GitVersion={version}' -X '{pkg}.GitCommit={commit}'"
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    progress(f"{what} with {go} ({mod}; a cold build takes minutes, a neighbouring commit about one; "
             f"log: {logs / log_name})")
    with open(logs / log_name, "w") as log:
        _run_go([go, "build", "-v", "-trimpath", *(["-race"] if race else []), mod, "-ldflags", ldflags, "-o", str(tmp),
                 "./cmd/kueue"],
                tree, log, what, progress)
    tmp.rename(out)


def _from_module_proxy(tag: str, entry: Path, repo_commit: str | None, progress: Progress,
                       race: bool = False) -> KueueBuild | None:
    """Build `tag` from the Go module proxy; None when the proxy does not serve it."""
    go = go_binary()
    probe = subprocess.run([go, "mod", "download", "-json", f"{KUEUE_MODULE}@{tag}"], capture_output=True, text=True)
    if probe.returncode != 0:
        progress(f"the Go module proxy does not serve {KUEUE_MODULE}@{tag}; building it from the git repository")
        return None
    t0 = time.monotonic()
    target = _kueue_target(tag, repo_commit or "module-proxy", race)
    binary = build_module(target, progress)
    entry.mkdir(parents=True, exist_ok=True)
    _copy_config(_module_dir(go, KUEUE_MODULE, tag), entry)
    shutil.copy2(binary, entry / "kueue")
    return _save_entry(entry, KueueBuild(entry / "kueue", entry, tag, repo_commit, f"Go module proxy {KUEUE_MODULE}@{tag}",
                                         tag, None, time.monotonic() - t0, race=_race_of(entry / "kueue", race)))


def patch_digest(patches: tuple[str, ...]) -> tuple[str, tuple[dict, ...]]:
    """(12 hex digits over every patch's bytes in order, ({"file", "sha256"} per patch)) for build keys
    and build.json. Raises HarnessError when a patch file cannot be read."""
    h, parts = hashlib.sha256(), []
    for p in patches:
        try:
            data = Path(p).read_bytes()
        except OSError as e:
            raise HarnessError(f"--kueue-patch {p}: {e.strerror}") from None
        h.update(data + b"\0")
        parts.append({"file": Path(p).name, "sha256": hashlib.sha256(data).hexdigest()})
    return h.hexdigest()[:12], tuple(parts)


def _apply_patches(wt: Path, patches: tuple[str, ...], what: str) -> None:
    for p in patches:
        r = subprocess.run(["git", "-C", str(wt), "apply", "--whitespace=nowarn", p], capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"--kueue-patch {p} does not apply to {what}: {r.stderr.strip()[-600:]} "
                             "(make the patch with `git diff` in a tree at that version, or pick the version it was made for)")


def _from_git(repo_git: Path, sha: str, version: str | None, entry: Path, source: str,
              progress: Progress, patches: tuple[str, ...] = (), race: bool = False) -> KueueBuild:
    """Check `sha` out into the repository's one worktree, apply `patches` (in order), and build it there."""
    wt = repo_git.parent / "worktree"
    with _lock(f"worktree-{repo_git.parent.name}", progress):
        if not (wt / ".git").exists():
            shutil.rmtree(wt, ignore_errors=True)
            _git("--git-dir", str(repo_git), "worktree", "prune")
            _git("--git-dir", str(repo_git), "worktree", "add", "--detach", "--force", str(wt), sha)
        else:
            _git("-C", str(wt), "checkout", "--quiet", "--detach", "--force", sha)
            _git("-C", str(wt), "clean", "-ffdxq")
        describe = _describe(["-C", str(wt)])
        version = version or describe or f"v0.0.0-{sha[:12]}"
        base = _base_tag(describe) if describe else None
        versions.kueue_profile(base)  # refuse too-old versions before a long build
        digest, applied = patch_digest(patches) if patches else ("", ())
        if patches:
            _apply_patches(wt, patches, f"{version} ({sha[:10]})")
            version = f"{version}+patch.{digest[:8]}"  # what the binary reports: never a bare release tag
            source += " + " + ", ".join(p["file"] for p in applied)
        t0 = time.monotonic()
        entry.mkdir(parents=True, exist_ok=True)
        _go_build(wt, entry / "kueue", version, sha, f"building Kueue {version} ({sha[:10]})", f"kueue-{entry.name}.log",
                  progress, race)
        _copy_config(wt, entry)
    return _save_entry(entry, KueueBuild(entry / "kueue", entry, version, sha, source, base, repo_git,
                                         time.monotonic() - t0, applied, _race_of(entry / "kueue", race)))


def source_key(tree: Path) -> tuple[str, str | None, str | None, str]:
    """(version, commit, base tag, content hash) of a local Kueue tree, uncommitted changes included.

    In a git work tree the hash covers HEAD, `git diff HEAD` and the untracked files (not ignored ones);
    elsewhere every file under the tree except .git/ and bin/. The version is `git describe --dirty`
    (or "source") plus "+" and 8 hex digits of that hash.
    """
    h = hashlib.sha256()
    top = _git("-C", str(tree), "rev-parse", "--show-toplevel", check=False)
    if top and Path(top).resolve() == tree.resolve():
        head = _git("-C", str(tree), "rev-parse", "HEAD", check=False) or None
        h.update((head or "no-head").encode())
        h.update(subprocess.run(["git", "-C", str(tree), "diff", "HEAD", "--binary"], capture_output=True).stdout)
        untracked = subprocess.run(["git", "-C", str(tree), "ls-files", "--others", "--exclude-standard", "-z"],
                                   capture_output=True).stdout.split(b"\0")
        for rel in sorted(u for u in untracked if u):
            h.update(rel + b"\0")
            p = tree / rel.decode()
            if p.is_file():
                h.update(p.read_bytes())
        describe = _git("-C", str(tree), "describe", "--tags", "--match", "v[0-9]*", "--dirty", check=False) or None
        digest = h.hexdigest()
        label = describe or (f"v0.0.0-{head[:12]}" if head else "source")
        return f"{label}+{digest[:8]}", head, _base_tag(describe), digest
    for p in sorted(tree.rglob("*")):
        rel = p.relative_to(tree)
        if rel.parts[0] in (".git", "bin", "_output") or not p.is_file() or p.is_symlink():
            continue
        h.update(str(rel).encode() + b"\0")
        h.update(p.read_bytes())
    digest = h.hexdigest()
    return f"source+{digest[:8]}", None, None, digest


def build(spec: KueueSpec, progress: Progress = _default_progress) -> KueueBuild:
    """The Kueue build `spec` names, from the cache or built now.

    Tags come from the Go module proxy where it serves them, else from the git repository (`spec.repo`,
    KUEUE_HARNESS_KUEUE_REPO, or upstream); refs always from the repository; source trees in place.
    KUEUE_HARNESS_KUEUE_BINARY (with KUEUE_HARNESS_KUEUE_SOURCE for its config/components) overrides all.
    Raises UnservedVersion (unknown tag/ref, too old), BuildError (Go or git failed), HarnessError.
    """
    override = os.environ.get("KUEUE_HARNESS_KUEUE_BINARY")
    if override:
        p = Path(override)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise HarnessError(f"KUEUE_HARNESS_KUEUE_BINARY={override} is not an executable file.")
        # Its CRDs and webhooks: KUEUE_HARNESS_KUEUE_SOURCE, else the module of the tag asked for (looked up
        # by binaries.ensure_all, only when an environment needs them).
        src = os.environ.get("KUEUE_HARNESS_KUEUE_SOURCE")
        tag = spec.version
        return KueueBuild(p, Path(src) if src else None, tag or "unknown (KUEUE_HARNESS_KUEUE_BINARY)",  # type: ignore[arg-type]
                          None, f"binary {p}", tag, None)
    root = cache_root() / "kueue"
    race = "+race" if spec.race else ""  # a race build is cached apart from the plain one
    if spec.source:
        tree = Path(spec.source)
        if not (tree / "cmd" / "kueue").is_dir():
            raise HarnessError(f"--kueue-source {tree} is not a Kueue source tree (no cmd/kueue/): pass the "
                               "folder that holds Kueue's go.mod")
        version, commit, base, digest = source_key(tree)
        versions.kueue_profile(base)
        entry = root / f"src-{digest[:12]}{race}"
        with _lock(f"entry-{entry.name}", progress):
            done = _load_entry(entry, progress)
            if done:
                return done
            t0 = time.monotonic()
            entry.mkdir(parents=True, exist_ok=True)
            _go_build(tree, entry / "kueue", version, commit or "unknown", f"building Kueue {version} from {tree}",
                      f"kueue-{entry.name}.log", progress, spec.race)
            _copy_config(tree, entry)
            repo = Path(_git("-C", str(tree), "rev-parse", "--absolute-git-dir", check=False) or "") if commit else None
            return _save_entry(entry, KueueBuild(entry / "kueue", entry, version, commit, f"source tree {tree}", base,
                                                 repo, time.monotonic() - t0, race=_race_of(entry / "kueue", spec.race)))
    suffix = (f"+patch-{patch_digest(spec.patches)[0]}" if spec.patches else "") + race
    if spec.version and spec.patches:  # a patched tag: always from the repository's tree
        tag = versions.check_tag(spec.version)
        repo_git = repo_dir(spec.repo, progress)
        sha = resolve(repo_git, tag, progress)
        entry = root / f"{tag}{suffix}"
        with _lock(f"entry-{entry.name}", progress):
            return _load_entry(entry, progress) or _from_git(repo_git, sha, tag, entry, f"git {_origin(repo_git)} tag {tag}",
                                                   progress, spec.patches, spec.race)
    if spec.version:
        tag = versions.check_tag(spec.version)
        entry = root / f"{tag}{race}"
        with _lock(f"entry-{entry.name}", progress):
            done = _load_entry(entry, progress)
            if done:
                return done
            repo_git = _optional_repo(spec, progress)
            try:  # the tag's commit, for the binary to report; a missing git only costs that
                sha = _tag_commit(repo_git, tag) if repo_git else None
            except HarnessError:
                sha = None
            b = _from_module_proxy(tag, entry, sha, progress, spec.race)
            if b is not None:
                return b
            if repo_git is None:
                try:
                    repo_git = repo_dir(spec.repo, progress)
                except BuildError as e:
                    raise UnservedVersion(
                        f"Kueue {tag} is not served by the Go module proxy, and the Kueue repository "
                        f"{spec.repo or os.environ.get('KUEUE_HARNESS_KUEUE_REPO') or versions.UPSTREAM_KUEUE_REPO} "
                        f"could not be cloned ({str(e).splitlines()[0][-300:]}). Point --kueue-repo "
                        "(KUEUE_HARNESS_KUEUE_REPO) at a Kueue repository or a .tar of one, or pick a tag the module "
                        f"proxy served here: {', '.join(versions.MODULE_PROXY_SERVED)}.") from None
            sha = resolve(repo_git, tag, progress)
            return _from_git(repo_git, sha, tag, entry, f"git {_origin(repo_git)} tag {tag}", progress, race=spec.race)
    repo_git = repo_dir(spec.repo, progress)
    sha = resolve(repo_git, spec.ref or "", progress)
    entry = root / f"git-{sha[:12]}{suffix}"
    with _lock(f"entry-{entry.name}", progress):
        return _load_entry(entry, progress) or _from_git(repo_git, sha, None, entry,
                                               f"git {_origin(repo_git)} ref {spec.ref} ({sha[:10]})", progress,
                                               spec.patches, spec.race)


def _origin(repo_git: Path) -> str:
    f = repo_git.parent / "origin"
    return f.read_text().strip() if f.is_file() else str(repo_git)


def _optional_repo(spec: KueueSpec, progress: Progress) -> Path | None:
    """The repository when one is configured and local (no network just to learn a tag's commit)."""
    repo = spec.repo or os.environ.get("KUEUE_HARNESS_KUEUE_REPO")
    if not repo or not Path(repo).expanduser().exists():
        return None
    try:
        return repo_dir(repo, progress)
    except HarnessError:
        return None


def _tag_commit(repo_git: Path, tag: str) -> str | None:
    return _git("--git-dir", str(repo_git), "rev-parse", "--verify", "--quiet", f"{tag}^{{commit}}", check=False) or None


def binary_race(binary: Path) -> bool | None:
    """Whether a Go binary was built with the race detector, from its own build information (`go version -m`:
    the `build -race=true` setting); None when Go cannot read it. What ran, not what a flag asked for."""
    try:
        r = subprocess.run([go_binary(), "version", "-m", str(binary)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired, HarnessError):
        return None
    if r.returncode != 0:
        return None
    return any(line.split() == ["build", "-race=true"] for line in r.stdout.splitlines())


def _race_of(binary: Path, asked: bool) -> bool:
    """The race setting of a binary just built; BuildError when it is not what was asked for."""
    got = binary_race(binary)
    if got is not None and got != asked:
        raise BuildError(f"{binary} was built {'with' if got else 'without'} -race, but "
                         f"{'-race' if asked else 'no -race'} was asked for: remove it and build again")
    return asked if got is None else got
