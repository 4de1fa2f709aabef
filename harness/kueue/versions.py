"""The one table of pinned component versions, the Kueue settings that depend on its version, and which
Kueue builds a known bug affects (by release range, or by git ancestry of its fix commits).

Every build and every version check reads from here; change versions in this file only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from packaging.version import Version

from harness.common.errors import UnservedVersion

#: k8s.io/kubernetes release that provides kube-apiserver and kube-controller-manager. 1.35 matches the
#: client libraries of Kueue 0.17 (its go.mod requires k8s.io/client-go v0.35.x).
KUBERNETES_VERSION = "v1.35.4"
#: The k8s.io/* staging modules are tagged v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
KUBERNETES_STAGING_VERSION = "v0.35.4"
#: go.etcd.io/etcd/server/v3, the version k8s.io/kubernetes v1.35.4 itself requires.
ETCD_VERSION = "v3.6.5"
#: sigs.k8s.io/kwok, the fake-node controller of the optional Pods part (harness/env/pods.py). The Go module
#: proxy here serves v0.6.1, v0.7.0 and v0.8.0 (2026-11-30); v0.8.0 is the one whose Kubernetes libraries are
#: nearest the pinned kube-apiserver: k8s.io/client-go v0.36.1 (v0.7.0: v0.33.0, v0.6.1: v0.30.4), within the
#: one-minor client skew Kubernetes supports. Its go.mod says `go 1.26.0`.
KWOK_VERSION = "v0.8.0"
#: The ProvisioningRequest API (autoscaling.x-k8s.io/v1, cluster-autoscaler's CRD) every local environment
#: installs beside Kueue's CRDs, so Kueue's ProvisioningRequest admission check controller starts
#: (cmd/kueue/main.go `provisioning.ServerSupportsProvisioningRequest`): the Go module and the version that
#: Kueue v0.16.1-v0.19.2's go.mod all name.
PROVISIONING_REQUEST_MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
PROVISIONING_REQUEST_VERSION = "v0.0.0-20240830133931-adfbe7e45277"
#: The Go toolchain the builds need (Kueue 0.17's go.mod says `go 1.25.0`).
MIN_GO = (1, 25)

DEFAULT_KUEUE_VERSION = "v0.17.0"

#: Where Kueue's source comes from when a tag is not served by the Go module proxy, or for --kueue-ref:
#: a URL, a local repository, or a .tar of a bare repository (env KUEUE_HARNESS_KUEUE_REPO).
UPSTREAM_KUEUE_REPO = "https://github.com/kubernetes-sigs/kueue"

#: Tags of sigs.k8s.io/kueue the Go module proxy reachable here served on 2026-11-30 (measured with
#: `go list -m sigs.k8s.io/kueue@<tag>`); informational: every build asks the proxy (or the repository).
MODULE_PROXY_SERVED = ("v0.14.0", "v0.15.0", "v0.16.1", "v0.16.2", "v0.16.6", "v0.17.0", "v0.17.1")


@dataclass(frozen=True)
class KueueProfile:
    """Settings that depend on the Kueue version, keyed by the first tag they apply to.

    `config_api`: the Configuration apiVersion the manager reads (apis/config/); `storage_version`: the
    Workload version its CRDs store (config/components/crd/bases, `storage: true`).
    """

    since: str
    config_api: str
    storage_version: str
    note: str = ""


#: Oldest first. Read off Kueue's tree at each tag: from v0.16.0 to main (2026-08-22) the Configuration
#: is read as v1beta2 and Workloads are stored as v1beta2; the flags, the "Initializing" log line and
#: the scheduler's log lines the checkers count did not move.
KUEUE_PROFILES: tuple[KueueProfile, ...] = (
    KueueProfile("v0.16.0", "config.kueue.x-k8s.io/v1beta2", "v1beta2"),
)
#: Why versions before the first profile are refused.
TOO_OLD = ("stores Workloads as v1beta1; the harness writes and reads v1beta2 objects, which need Kueue's "
           "conversion webhook there")

_TAG = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?$")


def normalize(version: str) -> str:
    """"0.17.0" -> "v0.17.0" (module tags carry the v; users often leave it out)."""
    version = version.strip()
    return version if version.startswith("v") else "v" + version


def is_release_tag(version: str) -> bool:
    """True for a plain release tag such as "v0.17.4" (not "v0.17.0-226-g2f5004ff" or "v0.18.0-rc.1")."""
    return re.fullmatch(r"v\d+\.\d+\.\d+", version) is not None


def check_tag(version: str) -> str:
    """Validate a `--kueue-version` value and return it normalized ("v0.17.4").

    Raises UnservedVersion when it is not a tag (use --kueue-ref) or older than the first profile.
    """
    tag = normalize(version)
    m = _TAG.match(tag)
    if not m:
        raise UnservedVersion(
            f"{version!r} is not a Kueue release tag such as v0.17.4. For a branch or commit use "
            "--kueue-ref REF; for a local working tree, --kueue-source DIR.")
    kueue_profile(tag)
    return tag


def kueue_profile(base_tag: str | None) -> KueueProfile:
    """The settings for a build whose nearest tag (`git describe`) is `base_tag`.

    None (an untagged build, e.g. a shallow clone of main) gets the newest profile. Raises
    UnservedVersion, with the reason, for versions older than the first profile.
    """
    if base_tag is None:
        return KUEUE_PROFILES[-1]
    m = _TAG.match(normalize(base_tag))
    if not m:
        return KUEUE_PROFILES[-1]
    v = Version(".".join(m.groups()))
    chosen = None
    for prof in KUEUE_PROFILES:
        if v >= Version(prof.since.lstrip("v")):
            chosen = prof
    if chosen is None:
        raise UnservedVersion(
            f"Kueue {base_tag} is older than {KUEUE_PROFILES[0].since}, the oldest version this harness runs: "
            f"it {TOO_OLD}. Pick {KUEUE_PROFILES[0].since} or newer.")
    return chosen


@dataclass(frozen=True)
class BuildIdentity:
    """What a Kueue build is, for deciding whether a known bug affects it.

    `version`: what the binary reports (its `gitVersion`: a tag, or `git describe` output such as
    "v0.17.0-226-g6b0c7a1d" or "v0.17.4-dirty+1a2b3c4d"); `commit`: full sha or None; `base_tag`: the
    nearest tag (None when the history has no tag, e.g. a shallow clone of main); `contains`: callable
    `(sha) -> bool | None` answering "is commit `sha` an ancestor of this build" (None: cannot tell);
    `patches`: sha256 hex digests of the patch files applied on top of `commit` (`--kueue-patch`).
    """

    version: str
    commit: str | None = None
    base_tag: str | None = None
    contains: Callable[[str], bool | None] | None = None
    patches: tuple[str, ...] = ()
