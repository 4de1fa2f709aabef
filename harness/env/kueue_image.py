"""The Kueue of the build under test, for a cluster: its image made here from the harness-built manager binary
(the same KueueSpec, hence the same binary, as the local target: a tag, a ref, a source tree, patches), and its
manifests rendered from that build's own `config/` with `kubectl kustomize config/default` (what Kueue's
`make` release target renders), the manager's image set to ours with `imagePullPolicy: IfNotPresent`
(`Always` would make the kubelet ask a registry).

The image: the node root filesystem (harness/env/kind_image.py, it has the glibc the binary links) plus the
binary at /manager, USER 65532 as Kueue's own image runs; tagged `kueue-harness/kueue:<version>-<hash of the
binary>`. Its tag is not a release tag, so the in-cluster environment checks the build, not the tag.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.common.errors import BuildError, HarnessError
from harness.common.paths import cache_root
from harness.env import kind_image

Say = Callable[[str], None]

KUEUE_REPO = "kueue-harness/kueue"
KUEUE_DOCKERFILE = """FROM {base}
COPY manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
"""
#: Kueue's manager container in config/components/manager (name `manager`, Deployment controller-manager).
MANAGER_CONTAINER = "manager"


def image_tag(version: str, binary_digest: str) -> str:
    """`kueue-harness/kueue:<version>-<12 hex>`; characters a tag cannot hold ("+") become "_"."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{version}-{binary_digest[:12]}")[:128]
    return f"{KUEUE_REPO}:{tag}"


def kueue_image(kb: Any, say: Say) -> str:
    """The image of KueueBuild `kb` (built when missing). Returns its tag. Raises BuildError."""
    ref = image_tag(kb.version, kind_image.file_digest(Path(kb.binary)))
    if kind_image.image_exists(ref):
        return ref
    base = kind_image.rootfs_image(say)
    kind_image.build_image(ref, KUEUE_DOCKERFILE.format(base=base), {"manager": Path(kb.binary)},
                           f"Kueue image {ref}", say)
    say(f"made Kueue image {ref} from {kb.binary}")
    return ref


def config_tree(kb: Any, dest: Path) -> Path:
    """The `config/` folder of the tree `kb` was built from, copied under `dest`: a source tree's own, the
    Go module's (a tag from the module proxy), else `git archive <commit> config` of its repository.
    Raises HarnessError when none can be found (a prebuilt KUEUE_HARNESS_KUEUE_BINARY without its tree).
    Patches applied to a build are not in the archive: a patch that changes config/ is not rendered."""
    from harness.build.go import _module_dir, go_binary

    src = str(kb.source or "")
    out = dest / "config"
    if src.startswith("source tree "):
        tree = Path(src[len("source tree "):])
        shutil.copytree(tree / "config", out)
        return out
    if src.startswith("Go module proxy "):
        mod, _, version = src[len("Go module proxy "):].partition("@")
        shutil.copytree(_module_dir(go_binary(), mod, version) / "config", out, copy_function=shutil.copy)
        for p in [out, *out.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)  # the module cache is read-only
        return out
    if kb.repo and kb.commit:
        archive = dest / "config.tar"
        p = subprocess.run(["git", "--git-dir", str(kb.repo), "archive", "-o", str(archive), kb.commit, "config"],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise BuildError(f"git archive {kb.commit} config of {kb.repo} failed: {p.stderr[-400:]}")
        with tarfile.open(archive) as t:
            t.extractall(dest, filter="data")
        return out
    raise HarnessError(f"cannot find the config/ of Kueue build {kb.source!r}: run a tag, a ref or a source tree "
                       "(KUEUE_HARNESS_KUEUE_BINARY has no tree), or pass --kueue-manifests")


def set_image(docs: list[dict[str, Any]], image: str) -> int:
    """Point every container named `manager` of the Deployments in `docs` at `image` with
    imagePullPolicy IfNotPresent. Returns how many were changed."""
    n = 0
    for d in docs:
        if d.get("kind") != "Deployment":
            continue
        for c in ((d.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
            if c.get("name") == MANAGER_CONTAINER:
                c["image"], c["imagePullPolicy"] = image, "IfNotPresent"
                n += 1
    return n


def render_manifests(kb: Any, image: str, kubectl: Path, say: Say) -> list[dict[str, Any]]:
    """Kueue's manifests of build `kb` (`kubectl kustomize config/default` of its config/), the manager's
    image set to `image`. Kept in <cache>/kind/manifests/<image tag>-<hash of the config tree>.yaml: a warm run
    reuses them (kustomize took 61 s of a loaded warm start), a build whose config/ differs renders anew.
    Raises BuildError."""
    import hashlib

    (cache_root() / "kind" / "work").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_root() / "kind" / "work", prefix="kueue-config-") as tmp:
        cfg = config_tree(kb, Path(tmp))
        digest = hashlib.sha256()
        for f in sorted(p for p in cfg.rglob("*") if p.is_file()):
            digest.update(str(f.relative_to(cfg)).encode() + b"\0" + f.read_bytes() + b"\0")
        out = cache_root() / "kind" / "manifests" / f"{image.split(':', 1)[1]}-{digest.hexdigest()[:12]}.yaml"
        if out.is_file():
            docs = [d for d in yaml.safe_load_all(out.read_text()) if d]
            say(f"reusing Kueue {kb.version}'s rendered manifests ({len(docs)} objects): {out}")
            return docs
        p = subprocess.run([str(kubectl), "kustomize", str(cfg / "default")], capture_output=True, text=True,
                           timeout=300)
    if p.returncode != 0:
        raise BuildError(f"`kubectl kustomize config/default` of Kueue {kb.version} failed: {p.stderr[-800:]}")
    docs = [d for d in yaml.safe_load_all(p.stdout) if d]
    if set_image(docs, image) != 1:
        raise BuildError(f"Kueue {kb.version}'s config/default has no single Deployment container "
                         f"{MANAGER_CONTAINER!r} to run {image}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_suffix(".tmp")
    tmp_out.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    tmp_out.replace(out)  # whole or absent: a run stopped mid-write leaves no half file to reuse
    say(f"rendered Kueue {kb.version}'s manifests from its config/default ({len(docs)} objects): {out}")
    return docs
