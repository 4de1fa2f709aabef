"""The one table of pinned component versions, and which Kueue versions a known bug affects.

Every build and every `--kueue-version` check reads from here; change versions in this file only.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from harness.errors import UnservedVersion

#: k8s.io/kubernetes release that provides kube-apiserver and kube-controller-manager. 1.35 matches the
#: client libraries of Kueue 0.17 (its go.mod requires k8s.io/client-go v0.35.x).
KUBERNETES_VERSION = "v1.35.4"
#: The k8s.io/* staging modules are tagged v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
KUBERNETES_STAGING_VERSION = "v0.35.4"
#: go.etcd.io/etcd/server/v3, the version k8s.io/kubernetes v1.35.4 itself requires.
ETCD_VERSION = "v3.6.5"
#: The Go toolchain the builds need (Kueue 0.17's go.mod says `go 1.25.0`).
MIN_GO = (1, 25)

DEFAULT_KUEUE_VERSION = "v0.17.0"


@dataclass(frozen=True)
class KueueRelease:
    """A Kueue release the harness can build and run.

    `version` is the module tag (e.g. "v0.17.0"); `config_api` the Configuration apiVersion it reads.
    """

    version: str
    config_api: str = "config.kueue.x-k8s.io/v1beta2"


#: Kueue versions this harness is pinned to and has run. Other tags the Go module proxy serves are
#: listed in the README (measured with `go list -m sigs.k8s.io/kueue@<tag>`), but are not run.
KUEUE_RELEASES: dict[str, KueueRelease] = {
    "v0.16.6": KueueRelease("v0.16.6"),
    "v0.17.0": KueueRelease("v0.17.0"),
    "v0.17.1": KueueRelease("v0.17.1"),
}


@dataclass(frozen=True)
class KnownBug:
    """An upstream Kueue bug and the versions it affects (PEP 440 specifier sets, any of which match)."""

    issue: str
    affected: tuple[str, ...]
    summary: str

    def affects(self, kueue_version: str) -> bool:
        """True if `kueue_version` ("v0.17.0" or "0.17.0") falls in any affected range."""
        v = Version(kueue_version.lstrip("v"))
        return any(v in SpecifierSet(spec) for spec in self.affected)


#: Source: kubernetes-sigs/kueue#11480; fixed (scenario 1) in v0.16.9, v0.17.4, v0.18.0 by
#: commit 2f5004ffce (`SatisfyPreemptionExpectation` after the admission PATCH succeeds).
KNOWN_BUGS: dict[str, KnownBug] = {
    "kubernetes-sigs/kueue#11480": KnownBug(
        issue="kubernetes-sigs/kueue#11480",
        affected=(">=0.16.0,<0.16.9", ">=0.17.0,<0.17.4"),
        summary="late admission PATCH overwrites the eviction: stuck preemption",
    ),
    # Scenario 2 of the same report. The scenario-1 fix only satisfies the preemption expectation; the
    # admission write is still a loose, forced server-side apply at HEAD, so no fixed release is known.
    # Lower bound from the report's affected range; versions before 0.16 are not run here.
    "kubernetes-sigs/kueue#11480-oversubscription": KnownBug(
        issue="kubernetes-sigs/kueue#11480 (scenario 2)",
        affected=(">=0.16.0",),
        summary="late admission PATCH re-admits an evicted Workload without a quota check",
    ),
}


def normalize(version: str) -> str:
    """"0.17.0" -> "v0.17.0" (module tags carry the v; users often leave it out)."""
    version = version.strip()
    return version if version.startswith("v") else "v" + version


def kueue_release(version: str) -> KueueRelease:
    """Return the pinned release for `version`.

    Raises UnservedVersion listing the versions this harness runs when `version` is not one of them.
    """
    version = normalize(version)
    try:
        return KUEUE_RELEASES[version]
    except KeyError:
        served = ", ".join(KUEUE_RELEASES)
        raise UnservedVersion(
            f"Kueue {version} is not a version this harness runs. Runnable here: {served}. "
            "The Go module proxy reachable from this machine serves only some Kueue tags "
            "(see README, 'Kueue versions'); pick one of the runnable ones with --kueue-version. To run "
            "another tag the proxy serves (`go list -m sigs.k8s.io/kueue@<tag>`), add it to KUEUE_RELEASES "
            "in harness/versions.py."
        ) from None
