"""Per-case Kueue configuration: what a case (`@pytest.mark.kueue_config(...)`), a plan's `kueue:` section or
`kueue-harness up --kueue-config FILE` declares (feature gates, fair sharing, waitForPodsReady, extra
integrations, raw Configuration keys), how it is laid over the harness's own Configuration, and the check
of feature gates against the Kueue build that runs (its pkg/features/kube_features.go).

Facts about Kueue's Configuration: docs/kueue-notes.md §2; the declaration format: docs/kueue-config.md.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.common.errors import HarnessError

#: Keys of a declaration: (marker keyword, YAML key as in Kueue's Configuration) -> canonical key.
KEYS = {
    "feature_gates": "featureGates", "featureGates": "featureGates",
    "fair_sharing": "fairSharing", "fairSharing": "fairSharing",
    "wait_for_pods_ready": "waitForPodsReady", "waitForPodsReady": "waitForPodsReady",
    "integrations": "integrations",
    "overrides": "overrides", "configuration": "overrides",
}
#: Configuration keys the harness owns: a Kueue outside a cluster needs them as the harness sets them
#: (docs/kueue-notes.md §2), so a case cannot override them.
HARNESS_OWNED = ("apiVersion", "kind", "namespace", "health", "metrics", "webhook", "leaderElection",
                 "internalCertManagement", "pprofBindAddress")
#: fairSharing.preemptionStrategies when a declaration says only `fair_sharing=True`: both strategies in
#: Kueue's order (one of validStrategySets, pkg/config/validation.go:313-327 at v0.17.0).
DEFAULT_PREEMPTION_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")
#: Frameworks Kueue v0.17.0 accepts in integrations.frameworks (apis/config/v1beta2/configuration_types.go:471-492).
KNOWN_FRAMEWORKS = (
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/rayservice", "ray.io/raycluster",
    "jobset.x-k8s.io/jobset", "kubeflow.org/paddlejob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob", "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper", "sparkoperator.k8s.io/sparkapplication", "pod", "deployment",
    "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset",
)
#: Gates every component-base feature gate knows besides the component's own (k8s.io/component-base/featuregate).
GENERIC_GATES = ("AllAlpha", "AllBeta")
#: A feature gate's value meaning "on where this Kueue build knows the gate, left out of the Configuration
#: elsewhere": for a fix behind a gate that exists only from some release on (PrioritizePreemptorWorkloads:
#: v0.18.6, v0.19.2, main; kubernetes-sigs/kueue#13662), since Kueue refuses to start with a gate it does not
#: know (cmd/kueue/main.go:166-169 at v0.17.0). Resolved per build by KueueConfig.resolve().
IF_KNOWN = "if-known"
_GATE_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$")


class KueueConfigError(HarnessError):
    """A Kueue configuration declaration is invalid, or names a feature gate the running Kueue does not
    know. `problems`: one line per problem, each naming the key and what to change."""

    exit_code = 2

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


@dataclass(frozen=True)
class KueueConfig:
    """A declared Kueue configuration. Empty (the default) means the harness's own Configuration exactly as
    `harness/env/local.py` writes it. `feature_gates`: gate -> bool; `fair_sharing`: Configuration.fairSharing
    or None; `wait_for_pods_ready`: Configuration.waitForPodsReady or None; `integrations`: frameworks added to
    batch/job; `overrides`: other top-level Configuration keys, merged last (mappings merged key by key).
    A gate may also be IF_KNOWN ("if-known"): on where the build knows it, absent elsewhere; `known_gates`
    (set by resolve(): the gates the build knows, None before) decides which, and apply() refuses an
    unresolved one."""

    feature_gates: Mapping[str, bool | str] = field(default_factory=dict)
    fair_sharing: Mapping[str, Any] | None = None
    wait_for_pods_ready: Mapping[str, Any] | None = None
    integrations: tuple[str, ...] = ()
    overrides: Mapping[str, Any] = field(default_factory=dict)
    known_gates: frozenset[str] | None = None

    @property
    def is_default(self) -> bool:
        return not self.to_json()

    @property
    def if_known(self) -> tuple[str, ...]:
        """The gates declared IF_KNOWN, sorted."""
        return tuple(sorted(k for k, v in self.feature_gates.items() if v == IF_KNOWN))

    def resolve(self, known: "Iterable[str]") -> "KueueConfig":
        """This declaration for a build whose feature table has the gates `known` (names): its IF_KNOWN gates
        become on where known and are left out elsewhere (effective_gates()). The declaration itself
        (to_json) keeps saying "if-known"; summary() says what each became."""
        return dataclasses.replace(self, known_gates=frozenset(known))

    def effective_gates(self) -> dict[str, bool]:
        """Gate -> bool as given to Kueue: the declared true/false, and each IF_KNOWN gate as true when the
        build knows it (left out when it does not). Raises KueueConfigError for an IF_KNOWN gate before
        resolve()."""
        if self.if_known and self.known_gates is None:
            raise KueueConfigError(f"feature gates {', '.join(self.if_known)} are declared {IF_KNOWN!r}, but nothing "
                                   "said which gates this Kueue build knows (KueueConfig.resolve)")
        return {k: (True if v == IF_KNOWN else bool(v)) for k, v in self.feature_gates.items()
                if v != IF_KNOWN or k in (self.known_gates or ())}

    def if_known_given(self) -> dict[str, bool]:
        """For the records: each IF_KNOWN gate -> whether it was given (on) to this build; {} before resolve()."""
        if self.known_gates is None:
            return {}
        return {k: k in self.known_gates for k in self.if_known}

    def to_json(self) -> dict[str, Any]:
        """The declaration in Kueue's spellings, only what was declared: {"featureGates": {...}, ...}."""
        out: dict[str, Any] = {}
        if self.feature_gates:
            out["featureGates"] = dict(sorted(self.feature_gates.items()))
        if self.fair_sharing is not None:
            out["fairSharing"] = copy.deepcopy(dict(self.fair_sharing))
        if self.wait_for_pods_ready is not None:
            out["waitForPodsReady"] = copy.deepcopy(dict(self.wait_for_pods_ready))
        if self.integrations:
            out["integrations"] = list(self.integrations)
        if self.overrides:
            out["overrides"] = copy.deepcopy(dict(self.overrides))
        return out

    def over(self, base: "KueueConfig") -> "KueueConfig":
        """This declaration laid over `base` (e.g. a plan's `kueue:` over the case marker's): gates and
        overrides merged key by key, the rest replaced where this one declares it."""
        return KueueConfig(  # unresolved: resolve() the result for the build that runs
            feature_gates={**base.feature_gates, **self.feature_gates},
            fair_sharing=self.fair_sharing if self.fair_sharing is not None else base.fair_sharing,
            wait_for_pods_ready=self.wait_for_pods_ready if self.wait_for_pods_ready is not None else base.wait_for_pods_ready,
            integrations=tuple(dict.fromkeys((*base.integrations, *self.integrations))),
            overrides=_deep_merge(dict(base.overrides), self.overrides),
        )

    def apply(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """The Configuration Kueue is given: `base` (the harness's own, a dict) with this declaration laid
        over it. featureGates (effective_gates(): IF_KNOWN ones as resolved) are merged over the base's;
        integrations.frameworks extended; overrides merged last. Does not change `base`. Raises
        KueueConfigError for an unresolved IF_KNOWN gate."""
        cfg = copy.deepcopy(dict(base))
        gates = self.effective_gates()
        if gates:
            cfg["featureGates"] = {**(cfg.get("featureGates") or {}), **gates}
        if self.fair_sharing is not None:
            cfg["fairSharing"] = copy.deepcopy(dict(self.fair_sharing))
        if self.wait_for_pods_ready is not None:
            cfg["waitForPodsReady"] = copy.deepcopy(dict(self.wait_for_pods_ready))
        if self.integrations:
            integ = dict(cfg.get("integrations") or {})
            integ["frameworks"] = list(dict.fromkeys([*(integ.get("frameworks") or []), *self.integrations]))
            cfg["integrations"] = integ
        return _deep_merge(cfg, self.overrides)

    def summary(self) -> str:
        """One line for logs and report.md: "featureGates PrioritizePreemptorWorkloads=true; fairSharing on";
        an IF_KNOWN gate reads "Gate=if-known (on: known to this build)" or "(left off: unknown to this
        build)" once resolved, "Gate=if-known" before."""
        parts = []
        given = self.if_known_given()

        def gate(k: str, v: bool | str) -> str:
            if v != IF_KNOWN:
                return f"{k}={str(v).lower()}"
            if k not in given:
                return f"{k}={IF_KNOWN}"
            return f"{k}={IF_KNOWN} ({'on: known to' if given[k] else 'left off: unknown to'} this build)"

        if self.feature_gates:
            parts.append("featureGates " + ", ".join(gate(k, v) for k, v in sorted(self.feature_gates.items())))
        if self.fair_sharing is not None:
            parts.append(f"fairSharing {', '.join(self.fair_sharing.get('preemptionStrategies') or []) or 'on'}")
        if self.wait_for_pods_ready is not None:
            parts.append(f"waitForPodsReady timeout {self.wait_for_pods_ready.get('timeout')}")
        if self.integrations:
            parts.append("integrations +" + ", +".join(self.integrations))
        if self.overrides:
            parts.append("overrides " + ", ".join(sorted(self.overrides)))
        return "; ".join(parts) or "the harness's default"


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _deep_merge(dict(out[k]), v)
        else:
            out[k] = copy.deepcopy(v)
    return out


DEFAULT = KueueConfig()


def parse(data: Any, where: str = "kueue config") -> KueueConfig:
    """Build a KueueConfig from a declaration: a mapping with any of feature_gates/featureGates,
    fair_sharing/fairSharing, wait_for_pods_ready/waitForPodsReady, integrations, overrides/configuration.

    - feature gates: {Name: true|false|"if-known"} ("if-known": on where the build knows the gate, left out
      elsewhere; IF_KNOWN);
    - fair sharing: true (both preemption strategies), false/null (off), or a Configuration.fairSharing
      mapping ({preemptionStrategies: [...]});
    - waitForPodsReady: a duration string ("30s": the timeout) or a mapping with `timeout`;
    - integrations: a list of frameworks added to batch/job (apis/config/v1beta2 Integrations);
    - overrides: other top-level Configuration keys (not the ones the harness owns: HARNESS_OWNED).

    Raises KueueConfigError listing every problem ("<where>: <key>: …"). `None` or {} is the default.
    """
    if data is None:
        return DEFAULT
    if not isinstance(data, Mapping):
        raise KueueConfigError(f"{where}: expected a mapping of {', '.join(sorted(set(KEYS.values())))}, got "
                               f"{type(data).__name__}")
    problems: list[str] = []
    seen: dict[str, Any] = {}
    for key, value in data.items():
        canon = KEYS.get(str(key))
        if canon is None:
            problems.append(f"{where}: unknown key {key!r}; allowed: feature_gates (featureGates), fair_sharing "
                            "(fairSharing), wait_for_pods_ready (waitForPodsReady), integrations, overrides "
                            "(configuration)")
            continue
        if canon in seen:
            problems.append(f"{where}: {key!r} is given twice (as {canon} and another spelling)")
            continue
        seen[canon] = value
    gates: dict[str, bool | str] = {}
    raw = seen.get("featureGates")
    if raw is not None:
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: featureGates must be a mapping of gate name to true/false/{IF_KNOWN!r}")
        else:
            for name, on in raw.items():
                if not isinstance(name, str) or not _GATE_NAME.match(name):
                    problems.append(f"{where}: featureGates: {name!r} is not a feature gate name (CamelCase, as in "
                                    "Kueue's pkg/features/kube_features.go)")
                elif not isinstance(on, bool) and on != IF_KNOWN:
                    problems.append(f"{where}: featureGates.{name} must be true, false or {IF_KNOWN!r} (on where the "
                                    f"Kueue build knows the gate), not {on!r}")
                else:
                    gates[name] = on
    fair = _fair_sharing(seen.get("fairSharing", None), "fairSharing" in seen, where, problems)
    wfpr = _wait_for_pods_ready(seen.get("waitForPodsReady"), where, problems)
    integrations: list[str] = []
    raw = seen.get("integrations")
    if raw is not None:
        if isinstance(raw, str) or not isinstance(raw, (list, tuple)):
            problems.append(f"{where}: integrations must be a list of frameworks, e.g. [pod]")
        else:
            for fw in raw:
                if fw not in KNOWN_FRAMEWORKS:
                    problems.append(f"{where}: integrations: {fw!r} is not a Kueue framework (known: "
                                    f"{', '.join(KNOWN_FRAMEWORKS)})")
                elif fw != "batch/job":
                    integrations.append(fw)
    overrides: dict[str, Any] = {}
    raw = seen.get("overrides")
    if raw is not None:
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: overrides must be a mapping of top-level Configuration keys")
        else:
            for k, v in raw.items():
                if k in HARNESS_OWNED:
                    problems.append(f"{where}: overrides.{k}: the harness sets {k} for a Kueue outside a cluster "
                                    "(docs/kueue-notes.md §2); it cannot be changed per case")
                else:
                    overrides[str(k)] = v
    if problems:
        raise KueueConfigError("\n".join(problems), problems)
    return KueueConfig(gates, fair, wfpr, tuple(dict.fromkeys(integrations)), overrides)


def _fair_sharing(raw: Any, given: bool, where: str, problems: list[str]) -> dict[str, Any] | None:
    if not given or raw is None or raw is False:
        return None
    if raw is True:
        return {"preemptionStrategies": list(DEFAULT_PREEMPTION_STRATEGIES)}
    if isinstance(raw, Mapping):
        strategies = raw.get("preemptionStrategies")
        if strategies is not None and (not isinstance(strategies, list) or not all(
                s in DEFAULT_PREEMPTION_STRATEGIES for s in strategies) or not strategies):
            problems.append(f"{where}: fairSharing.preemptionStrategies must be a non-empty list of "
                            f"{' / '.join(DEFAULT_PREEMPTION_STRATEGIES)} (pkg/config/validation.go)")
            return None
        out = dict(raw)
        out.setdefault("preemptionStrategies", list(DEFAULT_PREEMPTION_STRATEGIES))
        return out
    problems.append(f"{where}: fairSharing must be true, false or a mapping ({{preemptionStrategies: [...]}})")
    return None


def _wait_for_pods_ready(raw: Any, where: str, problems: list[str]) -> dict[str, Any] | None:
    if raw is None or raw is False:
        return None
    if isinstance(raw, str):
        raw = {"timeout": raw}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: waitForPodsReady must be a duration (\"30s\", the timeout) or a mapping with "
                        "`timeout`")
        return None
    timeout = raw.get("timeout")
    if not isinstance(timeout, str) or not _DURATION.match(timeout):
        problems.append(f"{where}: waitForPodsReady.timeout must be a Go duration such as \"30s\" or \"5m\" (Kueue "
                        "requires it: pkg/config/validation.go validateWaitForPodsReady)")
        return None
    return dict(raw)


def load_file(path: str | Path) -> KueueConfig:
    """Read a declaration from a YAML file: the mapping itself, or a document with a top-level `kueue:`
    (so a fault plan's section can be reused). Raises KueueConfigError naming the file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise KueueConfigError(f"{p}: cannot read the Kueue configuration ({e.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise KueueConfigError(f"{p}: not valid YAML: {e}") from None
    if isinstance(data, Mapping) and set(data) == {"kueue"}:
        data = data["kueue"]
    if isinstance(data, Mapping) and {"apiVersion", "kind"} <= set(data) and "kueue" in data:
        data = data["kueue"]  # a whole fault plan
    return parse(data, str(p))


# ---- feature gates known to a Kueue build ------------------------------------------------------------

FEATURES_FILE = "pkg/features/kube_features.go"


@dataclass(frozen=True)
class Gate:
    """A feature gate as Kueue's table gives it at the newest version it lists (the spec in force: Kueue
    sets no emulation version, and every Kueue version in the table is below component-base's 1.x)."""

    name: str
    default: bool
    stage: str  # Alpha | Beta | GA | Deprecated
    locked: bool
    since: str  # the table's version of that spec, "0.17"


def parse_gates(text: str) -> dict[str, Gate]:
    """Gate name -> Gate from the text of Kueue's pkg/features/kube_features.go: the versioned table
    (`defaultVersionedFeatureGates`, v0.10 on; e.g. v0.17.0 lines 367-546) or the older flat one
    (`defaultFeatureGates`). Raises ValueError when neither table is found."""
    versioned = re.search(r"defaultVersionedFeatureGates\s*=\s*map\[featuregate\.Feature\]featuregate\.VersionedSpecs\{",
                          text)
    out: dict[str, Gate] = {}
    if versioned:
        body = _block(text, versioned.end())
        for m in re.finditer(r"^\t(\w+):\s*\{(.*?)^\t\},?", body, re.S | re.M):
            specs = re.findall(r"\{([^{}]*Default:[^{}]*)\}", m.group(2))
            best: tuple[tuple[int, ...], Gate] | None = None
            for s in specs:
                ver = re.search(r'MustParse\("([\d.]+)"\)', s)
                g = _gate(m.group(1), s, ver.group(1) if ver else "")
                key = tuple(int(x) for x in g.since.split(".") if x.isdigit())
                if best is None or key >= best[0]:
                    best = (key, g)
            if best is not None:
                out[m.group(1)] = best[1]
        return out
    flat = re.search(r"defaultFeatureGates\s*=\s*map\[featuregate\.Feature\]featuregate\.FeatureSpec\{", text)
    if not flat:
        raise ValueError(f"no feature gate table in this {FEATURES_FILE}")
    for m in re.finditer(r"^\t(\w+):\s*\{([^{}]*)\}", _block(text, flat.end()), re.M):
        out[m.group(1)] = _gate(m.group(1), m.group(2), "")
    return out


def _block(text: str, start: int) -> str:
    depth, i = 1, start
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start:i]


def _gate(name: str, spec: str, since: str) -> Gate:
    default = re.search(r"Default:\s*(true|false)", spec)
    stage = re.search(r"PreRelease:\s*featuregate\.(\w+)", spec)
    locked = re.search(r"LockToDefault:\s*(true|false)", spec)
    return Gate(name, bool(default and default.group(1) == "true"), stage.group(1) if stage else "?",
                bool(locked and locked.group(1) == "true"), since)


def _git(repo: Path, *args: str, stdin: str | None = None) -> str | None:
    try:
        r = subprocess.run(["git", "--git-dir", str(repo), *args], input=stdin, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _cached_repos() -> list[Path]:
    from harness.common.paths import cache_root

    return sorted(p for p in (cache_root() / "kueue-git").glob("*/repo.git") if (p / "HEAD").is_file())


def features_text(build: Any) -> tuple[str, str] | None:
    """(text of pkg/features/kube_features.go, where it was read) for a Kueue build
    (harness/env/kueue_build.KueueBuild), or None when no copy of that tree is at hand. Looks, in order, at
    a source tree build's tree, the build's commit in its repository, the tag in the Go module cache, the
    tag in any repository the harness cached, KUEUE_HARNESS_KUEUE_SOURCE."""
    source = str(getattr(build, "source", "") or "")
    if source.startswith("source tree "):
        f = Path(source[len("source tree "):]) / FEATURES_FILE
        if f.is_file():
            return f.read_text(), str(f)
    commit, repo = getattr(build, "commit", None), getattr(build, "repo", None)
    if commit and repo:
        text = _git(Path(repo), "show", f"{commit}:{FEATURES_FILE}")
        if text:
            return text, f"{repo} {commit[:12]}:{FEATURES_FILE}"
    tag = getattr(build, "version", None) if re.fullmatch(r"v\d+\.\d+\.\d+", str(getattr(build, "version", ""))) else None
    if tag:
        mod = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod") / f"sigs.k8s.io/kueue@{tag}"
        if (mod / FEATURES_FILE).is_file():
            return (mod / FEATURES_FILE).read_text(), str(mod / FEATURES_FILE)
        for r in _cached_repos():
            text = _git(r, "show", f"{tag}:{FEATURES_FILE}")
            if text:
                return text, f"{r} {tag}:{FEATURES_FILE}"
    env_src = os.environ.get("KUEUE_HARNESS_KUEUE_SOURCE")
    if env_src and (Path(env_src) / FEATURES_FILE).is_file():
        return (Path(env_src) / FEATURES_FILE).read_text(), str(Path(env_src) / FEATURES_FILE)
    return None


_TAG_GATES: dict[str, dict[str, dict[str, Gate]]] = {}


def gates_by_tag() -> dict[str, dict[str, Gate]]:
    """tag -> the gates of that tag, for every release tag of the repositories the harness cached
    (~/.cache/kueue-harness/kueue-git/*/repo.git); {} when there is none. Read once per process."""
    for repo in _cached_repos():
        if str(repo) in _TAG_GATES:
            continue
        tags = (_git(repo, "tag", "--list", "v[0-9]*", "--sort=version:refname") or "").split()
        found: dict[str, dict[str, Gate]] = {}
        try:
            r = subprocess.run(["git", "--git-dir", str(repo), "cat-file", "--batch"], capture_output=True, timeout=120,
                               input="".join(f"{t}:{FEATURES_FILE}\n" for t in tags).encode())
            batch = r.stdout if r.returncode == 0 else b""
        except (OSError, subprocess.TimeoutExpired):
            batch = b""
        pos = 0
        for t in tags:  # each answer: "<sha> blob <size>\n<content>\n", or "<ref> missing\n"
            nl = batch.find(b"\n", pos)
            if nl < 0:
                break
            head = batch[pos:nl].split()
            pos = nl + 1
            if len(head) == 3 and head[1] == b"blob":
                size = int(head[2])
                body = batch[pos:pos + size].decode(errors="replace")
                pos += size + 1
                try:
                    found[t] = parse_gates(body)
                except ValueError:
                    pass
        _TAG_GATES[str(repo)] = found
    merged: dict[str, dict[str, Gate]] = {}
    for per_repo in _TAG_GATES.values():
        for t, g in per_repo.items():
            merged.setdefault(t, g)
    return merged


def _version_key(tag: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", tag))


def tags_with(gate: str, by_tag: Mapping[str, Mapping[str, Gate]] | None = None) -> list[str]:
    """The release tags (sorted) whose feature table has `gate`."""
    by_tag = gates_by_tag() if by_tag is None else by_tag
    return sorted((t for t, g in by_tag.items() if gate in g), key=_version_key)


def _ranges(tags: list[str], all_tags: list[str]) -> str:
    """"v0.18.6, v0.19.1–v0.19.2" for the tags, runs of consecutive tags (in `all_tags` order) joined."""
    idx = {t: i for i, t in enumerate(all_tags)}
    runs: list[list[str]] = []
    for t in tags:
        if runs and idx.get(t, -9) == idx.get(runs[-1][-1], -99) + 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)


def check_gates(gates: Mapping[str, bool], known: Mapping[str, Gate], kueue: str,
                by_tag: Mapping[str, Mapping[str, Gate]] | None = None) -> None:
    """Refuse gates Kueue `kueue` (a version label) would refuse at start: unknown to its table (component-base
    featuregate "unrecognized feature gate"), or set against a gate locked to its default (GA:
    "cannot set feature gate … feature is locked"). `known`: parse_gates() of that build. For an unknown gate
    the message names the cached release tags that have it. Raises KueueConfigError listing every problem."""
    problems = []
    for name, on in sorted(gates.items()):
        if name in GENERIC_GATES:
            continue
        g = known.get(name)
        if g is None:
            if by_tag is None:
                by_tag = gates_by_tag()
            have = tags_with(name, by_tag)
            all_tags = sorted(by_tag, key=_version_key)
            where = (f"it is in the feature table of {_ranges(have, all_tags)} (of the release tags in the cached "
                     "Kueue repository)" if have else
                     ("no release tag in the cached Kueue repository has it either" if by_tag else
                      "no cached Kueue repository was at hand to say which versions have it"))
            close = [k for k in known if k.lower() == name.lower()]
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"feature gate {name}{hint} is unknown to Kueue {kueue} ({FEATURES_FILE}), which refuses "
                            f"to start with it; {where}. Pick another Kueue (--kueue-version) or drop the gate")
        elif g.locked and on != g.default:
            problems.append(f"feature gate {name} is {g.stage} and locked to {str(g.default).lower()} in Kueue {kueue} "
                            f"(since {g.since}); Kueue refuses to start with {name}={str(on).lower()}. Drop it")
    if problems:
        raise KueueConfigError("\n".join(problems), problems)


def webhook_wanted(path: str, frameworks: list[str] | tuple[str, ...]) -> bool:
    """Whether the Kueue webhook at `path` (config/components/webhook/manifests.yaml, e.g.
    "/mutate-batch-v1-job", "/mutate--v1-pod") serves Kueue's own kinds or one of `frameworks`. Hooks of
    disabled integrations stay out: with failurePolicy Fail they turn Kueue's downtime into an outage of
    their kind (docs/kueue-notes.md §3)."""
    if "-kueue-x-k8s-io-" in path:
        return True
    for fw in frameworks:
        if fw == "pod":
            group, kind = "", "pod"
        elif fw in ("deployment", "statefulset"):
            group, kind = "apps", fw
        elif "/" in fw:
            group, kind = fw.split("/", 1)
        else:
            continue
        if re.search(rf"/(mutate|validate)-{re.escape(group.replace('.', '-'))}-v\w+-{re.escape(kind)}$", path):
            return True
    return False
