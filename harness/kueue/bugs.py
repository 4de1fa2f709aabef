"""Known upstream Kueue bugs, declared next to their cases: `cases/<bug folder>/bug.yaml` (a list under
`bugs:` of key, issue, summary, affected ranges, fixed_in tags, fix_commits per branch). Adding a bug is
adding its folder; nothing here changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from harness.common import paths
from harness.common.errors import HarnessError
from harness.kueue.versions import _TAG, BuildIdentity, is_release_tag
from harness.kueue import signatures

CASES_DIR = paths.CASES_DIR
_FIELDS = {"key", "issue", "summary", "affected", "fixed_in", "fix_commits", "fix_patches", "signature"}


@dataclass(frozen=True)
class Expectation:
    """A known bug's status on a build: "affected", "fixed" (or never affected) or "unknown", and why."""

    status: str
    reason: str


@dataclass(frozen=True)
class KnownBug:
    """An upstream Kueue bug: the versions it affects (PEP 440 specifier sets, any of which match), the
    releases that fixed it, and its fix commit per branch (for builds that are not release tags)."""

    issue: str
    affected: tuple[str, ...]
    summary: str
    fixed_in: tuple[str, ...] = ()
    fix_commits: dict[str, str] = field(default_factory=dict)
    #: {file name: sha256 hex} of patches that fix the bug (bug.yaml `fix_patches`, files next to it):
    #: a build made with one of them (`--kueue-patch`) is "fixed" whatever its base.
    fix_patches: dict[str, str] = field(default_factory=dict)
    #: What a perturbed run's writes show when a violation is this bug (harness/kueue/signatures.py), or None:
    #: `kueue-harness explore` then records such a violation as this bug, not as a finding.
    signature: dict | None = None

    def affects(self, kueue_version: str) -> bool:
        """True if the release `kueue_version` ("v0.17.0" or "0.17.0") falls in any affected range."""
        v = Version(kueue_version.lstrip("v"))
        return any(v in SpecifierSet(spec) for spec in self.affected)

    def expectation(self, build: BuildIdentity) -> Expectation:
        """Whether this bug should reproduce on `build`.

        A release tag is judged by the affected ranges. Any other build is "fixed" when it contains one
        of the fix commits (git ancestry), "affected" when it does not and its nearest tag is affected,
        and "unknown" when neither can be told (no tag in its history, no repository to ask).
        """
        ranges = " or ".join(self.affected)
        for name, digest in self.fix_patches.items():
            if digest in build.patches:
                return Expectation("fixed", f"{build.version} was built with {name}, the fix")
        if build.patches:
            base = build.base_tag if build.base_tag and _TAG.match(build.base_tag) else None
            if base and self.affects(base):
                return Expectation("affected", f"{build.version} is {base} (affected) with patches that are not "
                                               f"a known fix of {self.issue}")
        if is_release_tag(build.version):
            if self.affects(build.version):
                return Expectation("affected", f"{build.version} is in the affected range {ranges}")
            fixed = f" (fixed in {', '.join(self.fixed_in)})" if self.fixed_in else ""
            return Expectation("fixed", f"{build.version} is outside the affected range {ranges}{fixed}")
        answers: dict[str, bool | None] = {}
        if build.commit and build.contains is not None:
            for branch, sha in self.fix_commits.items():
                answers[branch] = build.contains(sha)
                if answers[branch]:
                    return Expectation("fixed", f"{build.version} contains the fix {sha[:10]} ({branch})")
        # A "no" from git ancestry is trusted only when the build's history reaches a release tag: a
        # shallow history (a snapshot of main) cannot show that it lacks a commit.
        base = build.base_tag if build.base_tag and _TAG.match(build.base_tag) else None
        if base and not self.affects(base):
            return Expectation("fixed", f"{build.version} descends from {base}, outside the affected range {ranges}")
        if base and not self.fix_commits:
            return Expectation("affected", f"{build.version} descends from {base} (affected); no fix is known")
        if base and answers and all(a is False for a in answers.values()):
            shas = ", ".join(s[:10] for s in self.fix_commits.values())
            return Expectation("affected", f"{build.version} descends from {base} (affected) and contains none "
                                           f"of the fix commits ({shas})")
        if not base and not self.fix_commits and not self.fixed_in:
            return Expectation("affected", f"no fix of {self.issue} is known; {build.version} has no release tag "
                                           "in its history, so it is taken as newer than every affected release")
        return Expectation("unknown", f"cannot tell whether {build.version} contains a fix of {self.issue} (no "
                                      "release tag in its history, or no repository to ask): the case reports "
                                      "its plain verdict")



def parse(text: str, source: str) -> dict[str, KnownBug]:
    """The bugs of one bug.yaml text. `fix_patches` name patch files relative to `source`'s folder (read
    and hashed here). Raises HarnessError naming `source` and the bad entry or missing patch file."""
    try:
        doc: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise HarnessError(f"{source}: not valid YAML ({' '.join(str(e).replace('<unicode string>', source).split())}); fix or remove "
                           "that bug.yaml") from None
    if not isinstance(doc, dict):
        raise HarnessError(f"{source}: expected a mapping with a `bugs:` list")
    out: dict[str, KnownBug] = {}
    for i, b in enumerate(doc.get("bugs") or []):
        where = f"{source}: bugs[{i}]"
        if not isinstance(b, dict) or not {"key", "issue", "summary", "affected"} <= set(b):
            raise HarnessError(f"{where}: needs key, issue, summary and affected")
        unknown = set(b) - _FIELDS
        if unknown:
            raise HarnessError(f"{where}: unknown field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(_FIELDS))})")
        out[str(b["key"])] = KnownBug(issue=str(b["issue"]), affected=tuple(b["affected"]), summary=str(b["summary"]),
                                      fixed_in=tuple(b.get("fixed_in") or ()),
                                      fix_commits={str(k): str(v) for k, v in (b.get("fix_commits") or {}).items()},
                                      fix_patches=_patch_digests(b.get("fix_patches") or [], source, where),
                                      signature=signatures.check(b["signature"], where) if b.get("signature") else None)
    return out


def _patch_digests(names: list, source: str, where: str) -> dict[str, str]:
    out = {}
    for n in names:
        path = Path(source).parent / str(n)
        try:
            out[str(n)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            raise HarnessError(f"{where}: fix_patches names {n}, but {path} cannot be read") from None
    return out


def load(folders: list[Path] | None = None) -> dict[str, KnownBug]:
    """Every bug declared under `folders` (default: each folder of cases/ with a bug.yaml)."""
    out: dict[str, KnownBug] = {}
    for f in sorted(folders if folders is not None else CASES_DIR.glob("*/bug.yaml")):
        path = f if f.name == "bug.yaml" else f / "bug.yaml"
        if path.is_file():
            out.update(parse(path.read_text(), str(path)))
    return out


def __getattr__(name: str) -> Any:
    """`KNOWN_BUGS`: every bug declared in cases/*/bug.yaml, by the key cases name in `kueue_bug(...)`. Read
    on first use, not at import, so one broken bug.yaml fails only what needs the bugs (with HarnessError
    naming the file), never `kueue-harness down` or `--help`."""
    if name == "KNOWN_BUGS":
        found = load()
        globals()["KNOWN_BUGS"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
