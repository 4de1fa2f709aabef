"""pytest plugin (entry point `kueue_harness`): options, the session's local environment, a per-case
context (namespace, history, proxy rules released at the end), the `kueue_bug` marker, and the verdict
table + artifacts/<run-id>/summary.json.

Verdicts: "reproduced" (the case's invariant was violated: InvariantViolation), "passed", "error"
(anything else: environment, timeouts, Kueue crash, a fault that never happened).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.kueue import log as kueue_log
from harness.kueue import bugs, versions
from harness.common.errors import HarnessError
from harness.checkers import REGISTRY, Selection, bounds, compose, selection_with_defaults
from harness.history.record import History
from harness.history.names import Names
from harness.common.waiting import WaitTimeout, wait_for
from harness.objects import Cluster

#: Process faults of plans and watch-delay ticks around every case body (harness/nemesis/runner.py); `--plan` and
#: explore's perturbed runs (harness/explore/plugin.py).
pytest_plugins = ("harness.nemesis.runner", "harness.explore.plugin")


class InvariantViolation(AssertionError):
    """The invariant a case checks does not hold: the bug reproduced. Message = the evidence."""



#: An environment to run the cases on instead of starting one, left running afterwards: set by the session
#: supervisor of `kueue-harness run --keep-env` (harness/cli/session.py), which owns and later stops it.
PROVIDED_ENV: Any = None

_VERDICTS_KEY = pytest.StashKey[dict]()
_SPEC_KEY = pytest.StashKey[Any]()
#: Per case: (status, reason) of its kueue_bug on the Kueue that actually runs (bugs.Expectation).
_EXPECT_KEY = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kueue-harness")
    g.addoption("--kueue-version", default=os.environ.get("KUEUE_HARNESS_KUEUE_VERSION", versions.DEFAULT_KUEUE_VERSION),
                help=f"Kueue release tag to run (env KUEUE_HARNESS_KUEUE_VERSION; default {versions.DEFAULT_KUEUE_VERSION}): "
                     "from the Go module proxy where served, else built from --kueue-repo")
    g.addoption("--kueue-ref", default=None,
                help="a branch, tag or commit of --kueue-repo to build and run instead (env KUEUE_HARNESS_KUEUE_REF)")
    g.addoption("--kueue-source", default=None,
                help="a local Kueue working tree to build and run, uncommitted changes included "
                     "(env KUEUE_HARNESS_KUEUE_SOURCE_DIR)")
    g.addoption("--kueue-repo", default=None,
                help=f"Kueue git repository: URL, path, or .tar of a bare repository (env KUEUE_HARNESS_KUEUE_REPO; "
                     f"default {versions.UPSTREAM_KUEUE_REPO})")
    g.addoption("--kueue-patch", action="append", default=None, metavar="FILE",
                help="a unified diff applied on top of --kueue-version/--kueue-ref before building (repeatable; "
                     "env KUEUE_HARNESS_KUEUE_PATCH)")
    g.addoption("--artifacts-dir", default=os.environ.get("KUEUE_HARNESS_ARTIFACTS"),
                help="where runs write evidence (env KUEUE_HARNESS_ARTIFACTS; default artifacts/<run-id>); a folder "
                     "that already holds a run is not written over: the run goes to <folder>/<run-id>, and says so")
    g.addoption("--keep-env", action="store_true", default=False,
                help="--target kind: keep a kind cluster created here. A local environment cannot outlive pytest "
                     "(its processes die with it): use `kueue-harness run --keep-env`, which runs the cases "
                     "inside a session that stays up")
    g.addoption("--recheck-bundles", action="store_true", default=bool(os.environ.get("KUEUE_HARNESS_RECHECK")),
                help="at the end, re-check every bundle offline (`kueue-harness report`) and fail the run if a "
                     "re-checked verdict differs from the live one (env KUEUE_HARNESS_RECHECK=1; `make test` sets it)")
    g.addoption("--no-verdict-table", action="store_true", default=False,
                help="do not print the verdict table (kueue-harness run prints its own)")
    g.addoption("--repeat", type=int, default=1,
                help="run every case N times in the same environment (determinism measurements)")
    # Targets other than local: harness/env/incluster.py, harness/env/kind.py, docs/kind.md.
    g.addoption("--target", choices=("local", "kind", "kubeconfig"), default=os.environ.get("KUEUE_HARNESS_TARGET", "local"),
                help="where Kueue runs (env KUEUE_HARNESS_TARGET): local processes (default), a kind cluster from "
                     "Kueue's release manifests, or the cluster of --kubeconfig where Kueue is installed")
    g.addoption("--kind-cluster", default=os.environ.get("KUEUE_HARNESS_KIND_CLUSTER", "kueue-harness"),
                help="kind cluster to reuse, or to create (and delete afterwards unless --keep-env)")
    g.addoption("--kind-image", default=os.environ.get("KUEUE_HARNESS_KIND_IMAGE"),
                help="node image for a kind cluster created here (default: the kind release's own)")
    g.addoption("--kueue-manifests", default=os.environ.get("KUEUE_HARNESS_KUEUE_MANIFESTS"),
                help="kind target: URL or file of Kueue's manifests (default: the GitHub release of --kueue-version)")
    g.addoption("--kubeconfig", dest="kh_kubeconfig", default=os.environ.get("KUEUE_HARNESS_KUBECONFIG"),
                help="kubeconfig target: admin kubeconfig of the cluster (default $KUBECONFIG, ~/.kube/config)")
    g.addoption("--kube-context", default=os.environ.get("KUEUE_HARNESS_KUBE_CONTEXT"),
                help="kubeconfig target: context to use (default: the current context)")
    g.addoption("--proxy-listen-host", default=os.environ.get("KUEUE_HARNESS_PROXY_LISTEN_HOST"),
                help="kind/kubeconfig: address of this machine the proxy listens on, reachable from Pods "
                     "(kind default: the gateway of the kind network)")
    g.addoption("--proxy-server-host", default=os.environ.get("KUEUE_HARNESS_PROXY_SERVER_HOST"),
                help="kind/kubeconfig: address Pods use to reach the proxy, if not --proxy-listen-host")


def pytest_configure(config: pytest.Config) -> None:
    from harness.build.kueue import KueueSpec

    config.stash[_VERDICTS_KEY] = {}
    try:
        spec = KueueSpec.from_options(config.getoption("--kueue-version"), config.getoption("--kueue-ref"),
                                      config.getoption("--kueue-source"), config.getoption("--kueue-repo"),
                                      config.getoption("--kueue-patch"))
    except HarnessError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[_SPEC_KEY] = spec
    if config.getoption("--keep-env") and config.getoption("--target") == "local" and PROVIDED_ENV is None:
        # The local environment's processes get SIGKILL when this process ends (PR_SET_PDEATHSIG): pytest
        # itself cannot leave them running. A session supervisor can (harness/cli/session.py).
        raise pytest.UsageError(
            "--keep-env cannot keep a local environment from pytest: its processes die with the pytest process "
            "(PR_SET_PDEATHSIG). Run `kueue-harness run --keep-env [-k EXPR]` instead: it runs the cases inside a "
            "session that stays up (`kueue-harness status`, `holds`, `down`). With --target kind, --keep-env "
            "keeps the kind cluster")
    # What was asked for, until the environment knows what runs (summary.json records the latter).
    config.option.kueue_version = spec.wanted
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    base = config.getoption("--artifacts-dir")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if PROVIDED_ENV is not None:
        # `run --keep-env`: the session that runs the cases made this folder and already writes env/ there.
        art = Path(base) if base else Path("artifacts") / run_id
    else:
        from harness.env.runs import run_folder

        # pytest -n N: each worker has its own environment, ports and evidence folder.
        art, note = run_folder(Path(base) / worker if base and worker else base, run_id)
        if worker and not base:
            art = art / worker
        if note:
            # A folder that holds an earlier run is never written over: this run goes beside it, inside.
            print(f"kueue-harness: {note}", file=sys.stderr, flush=True)
    config._kh_artifacts = art  # type: ignore[attr-defined]


def _bug_key(item: pytest.Item) -> str | None:
    """The key a case's @pytest.mark.kueue_bug names ("kubernetes-sigs/kueue#14863"; a bug.yaml `key`), or None."""
    m = item.get_closest_marker("kueue_bug")
    return str(m.args[0]) if m is not None and m.args else None


def _bug(item: pytest.Item) -> "bugs.KnownBug | None":
    m = item.get_closest_marker("kueue_bug")
    if m is None:
        return None
    from harness.kueue import bugs

    key = m.args[0] if m.args else ""
    found = bugs.KNOWN_BUGS.get(key) or bugs.load([Path(str(item.path)).parent]).get(key)
    if found is None:
        raise pytest.UsageError(f"{item.nodeid}: kueue_bug({key!r}) names no bug of a bug.yaml next to the case "
                                f"or under cases/ (known: {', '.join(bugs.KNOWN_BUGS)})")
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        _bug(item)  # an unknown issue is a usage error now, not a KeyError mid-run
        _declared_kueue_config(item)  # so is a bad @pytest.mark.kueue_config
        _pods_nodes(item)  # and a bad @pytest.mark.pods


def _declared_kueue_config(item: pytest.Item):
    """The case's `@pytest.mark.kueue_config(feature_gates={...}, fair_sharing=..., wait_for_pods_ready=...,
    integrations=[...], overrides={...})` as a harness.kueue.config.KueueConfig (DEFAULT without the marker).
    Raises pytest.UsageError naming every problem."""
    from harness.kueue import config as kueue_config

    m = item.get_closest_marker("kueue_config")
    if m is None:
        return kueue_config.DEFAULT
    where = f"{item.nodeid}: @pytest.mark.kueue_config"
    if m.args:
        raise pytest.UsageError(f"{where}: takes keywords only (feature_gates=, fair_sharing=, wait_for_pods_ready=, "
                                "integrations=, overrides=)")
    try:
        return kueue_config.parse(dict(m.kwargs), where)
    except kueue_config.KueueConfigError as e:
        raise pytest.UsageError(str(e)) from None


def _pods_nodes(item: pytest.Item) -> list[Any] | None:
    """The Nodes of the case's `@pytest.mark.pods(nodes=[harness.objects.node(...), ...])` (one default Node,
    "node-1", for a bare `@pytest.mark.pods`), or None without the marker. Raises pytest.UsageError for
    anything but a list of Node builders."""
    from harness import objects as o

    m = item.get_closest_marker("pods")
    if m is None:
        return None
    where = f"{item.nodeid}: @pytest.mark.pods"
    if m.args or set(m.kwargs) - {"nodes"}:
        raise pytest.UsageError(f"{where}: takes one keyword, nodes=[harness.objects.node(name, ...), ...]")
    nodes = m.kwargs.get("nodes", [o.node("node-1")])
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, o.NodeBuilder) for n in nodes):
        raise pytest.UsageError(f"{where}: nodes= is a list of harness.objects.node(...) builders, got {nodes!r}")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise pytest.UsageError(f"{where}: two Nodes named alike in {names}")
    return list(nodes)


def _expect_on(item: pytest.Item, env: Any) -> None:
    """Decide, on the Kueue that actually runs, whether the case's known bug should reproduce; where it
    should, the case becomes a strict expected failure (it must reproduce). Kept in the item's stash."""
    bug = _bug(item)
    if bug is None:
        return
    ident = env.kueue_identity() if hasattr(env, "kueue_identity") else versions.BuildIdentity(env.kueue_version)
    exp = bug.expectation(ident)
    item.stash[_EXPECT_KEY] = exp
    if exp.status == "affected":
        item.add_marker(pytest.mark.xfail(
            strict=True, raises=InvariantViolation,
            reason=f"{bug.issue} affects Kueue {ident.version} ({bug.summary}; {exp.reason}): the case must reproduce it",
        ))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    n = metafunc.config.getoption("--repeat")
    if n < 1:
        raise pytest.UsageError(f"--repeat must be 1 or more, got {n}")
    if n > 1 and "repetition" in metafunc.fixturenames:
        metafunc.parametrize("repetition", range(n), indirect=True, ids=lambda i: f"r{i}")


@pytest.fixture
def repetition(request: pytest.FixtureRequest) -> int:
    """Which repetition of the case this is (0 unless --repeat N)."""
    return getattr(request, "param", 0)


@pytest.fixture(scope="session")
def kueue_version(request: pytest.FixtureRequest) -> str:
    """The Kueue build asked for ("v0.17.0", "ref release-0.17", "source /path"); the environment's
    `kueue_version` is what actually runs."""
    return request.config.option.kueue_version


@pytest.fixture(scope="session")
def kueue_spec(request: pytest.FixtureRequest):
    """The Kueue build asked for, as a harness.build.kueue.KueueSpec."""
    return request.config.stash[_SPEC_KEY]


@pytest.fixture(scope="session")
def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    """This run's artifacts folder (created)."""
    p: Path = request.config._kh_artifacts  # type: ignore[attr-defined]
    p.mkdir(parents=True, exist_ok=True)
    return p


@pytest.fixture(scope="session")
def kueue_env(request: pytest.FixtureRequest, kueue_version: str, kueue_spec, artifacts_dir: Path):
    """The session's environment, started once per session: `--target local` (etcd, kube-apiserver,
    kube-controller-manager, proxy, Kueue as processes; builds binaries on first use), `kind` or
    `kubeconfig` (Kueue in a cluster, routed through the proxy). Stopped at the end; a kind cluster created
    here is kept with --keep-env. PROVIDED_ENV, when set, is used instead and left running."""
    target = request.config.getoption("--target")
    if PROVIDED_ENV is not None:
        request.config._kh_env = PROVIDED_ENV  # type: ignore[attr-defined]
        yield PROVIDED_ENV
        return
    if target == "local":
        from harness.env.local import LocalEnvironment

        env = LocalEnvironment.start(kueue_spec, artifacts=artifacts_dir / "env")
    else:
        from harness.env import start_target

        env = start_target(target, request.config.getoption, kueue_version, artifacts_dir / "env")
    request.config._kh_env = env  # type: ignore[attr-defined]
    yield env
    # In a cluster the routing is always undone (the proxy ends with the session); --keep-env keeps a
    # kind cluster created here (harness/env/__init__.py).
    env.stop()


@pytest.fixture(scope="session")
def cluster(kueue_env) -> Cluster:
    """Direct admin access to kube-apiserver (never through the proxy)."""
    return Cluster(kueue_env.api_client())


class AssumptionFailed(HarnessError):
    """Something the case's verdict relies on did not happen (harness/checkers/assumptions.py): the verdict
    is "error", never "reproduced". The message names the failed assumption and its evidence."""


@dataclass
class CaseContext:
    """What one case works with. `ns`: its own namespace; `prefix`: for cluster-scoped names;
    `selection`: the checkers that decide its verdict (its `checkers` marker plus the default assumptions)."""

    name: str
    ns: str
    prefix: str
    dir: Path
    env: Any
    cluster: Cluster
    history: History
    workload_keys: set[str] = field(default_factory=set)
    #: Kueue restarts the case causes itself (process faults); any other restart makes the verdict "error".
    expected_kueue_restarts: int = 0
    selection: Selection = field(default_factory=lambda: Selection(selection_with_defaults({})))
    #: The folder of the case's test file (its plans/ and bug.yaml live there).
    case_folder: Path | None = None
    #: Set for a perturbed run (`--plan`, explore: harness/explore/plugin.py): how the case's step waits
    #: wait (harness/scenarios/setups.py wait_workload), as step_wait(read, pred, timeout, what) -> object.
    step_wait: Any = None
    #: The composed verdict (harness/checkers/base.Verdict) once the case was judged.
    judged: Any = None
    #: Whether its teardown writes the evidence bundle (explore's runs without a violation do not:
    #: `--explore-bundles violations`, harness/explore/plugin.py; their history and logs stay).
    write_bundle: bool = True
    #: The Kueue configuration the case declared (its kueue_config marker; harness/kueue/config.py).
    kueue_declared: Any = None
    #: Nodes the case created (its `pods` marker, add_nodes()): the name it gave → the Node's name.
    nodes: dict[str, str] = field(default_factory=dict)
    #: The harness side of the case's process faults, plan steps and facts (harness/nemesis/runner.py), started
    #: with the case, before any plan loads; stopped after the body.
    nemesis: Any = None
    #: The invariant monitor the plugin runs for checkers that read its facts (`needs_monitor`), or None.
    _monitor: Any = None
    _log_lines: list[dict[str, Any]] = field(default_factory=list)
    _tail: Any = None

    def restart_kueue(self, kill: bool = False, **fields: Any) -> None:
        """Process fault: restart Kueue (SIGKILL with `kill`), recorded in the history as `kueue_restart`
        with `fields` (a plan's process fault adds its `rule`: harness/nemesis/runner.py)."""
        self.record("kueue_restart", kill=kill, **fields)
        self.expected_kueue_restarts += 1
        self.env.restart_kueue(kill=kill)

    def configure_kueue(self, cfg: Any, why: str = "plan") -> dict[str, Any]:
        """Give Kueue the configuration `cfg` (a harness.kueue.config.KueueConfig) during the case, e.g. a
        plan's `kueue:` section. A restart it needs is recorded as `kueue_configured` (restarted=true) and
        counted as asked for (kueue_not_restarted_unasked). Returns env.configure_kueue()'s answer."""
        if not hasattr(self.env, "configure_kueue"):
            raise HarnessError(f"this target cannot change Kueue's configuration per case ({cfg.summary()}); "
                               "use --target local")
        res = self.env.configure_kueue(cfg)
        self.record("kueue_configured", why=why, declared=cfg.to_json(), summary=cfg.summary(), **res,
                    feature_gates=dict(getattr(self.env, "kueue_reported_gates", {}) or {}))
        if res["restarted"]:
            self.expected_kueue_restarts += 1
        return res

    # ---- Pods that run (harness/env/pods.py) ----------------------------------------------------
    def add_nodes(self, *nodes: Any) -> dict[str, str]:
        """Pods that run: start kube-scheduler and kwok if they are not running yet (env.start_pods(), kept
        for the session), create each Node (harness.objects.node builders) named "<prefix>-<name>" and wait
        until it is Ready and schedulable. Recorded as `nodes_created`; deleted at the end of the case.
        Returns {name: Node name}. Raises HarnessError on a target without them, WaitTimeout."""
        from harness.env import pods

        if not hasattr(self.env, "start_pods"):
            raise HarnessError("Pods that run (kube-scheduler + kwok Nodes) need --target local")
        part = self.env.start_pods()
        renamed = [n.renamed(f"{self.prefix}-{n.name}") for n in nodes]
        self.nodes.update({n.name: r.name for n, r in zip(nodes, renamed)})
        pods.create_nodes(self.cluster, renamed)
        self.record("nodes_created", nodes=[r.name for r in renamed],
                    labels={r.name: r.obj()["metadata"]["labels"] for r in renamed},
                    capacity={r.name: r.obj()["status"]["capacity"] for r in renamed},
                    kube_scheduler=part.versions.get("kube_scheduler"), kwok=part.versions.get("kwok"))
        return {n.name: r.name for n, r in zip(nodes, renamed)}

    def node_name(self, name: str) -> str:
        """The Node name of the case's Node `name` (as given to the pods marker or add_nodes()). Raises
        KeyError naming the Nodes it has."""
        if name not in self.nodes:
            raise KeyError(f"the case has no Node {name!r} (it has: {', '.join(self.nodes) or 'none'})")
        return self.nodes[name]

    def finish_pods(self, job: str, phase: str = "Succeeded") -> list[str]:
        """Finish the Pods of the case's batch/v1 Job `job` on demand ("Succeeded" or "Failed"): kwok ends
        each one that runs (harness/env/pods.finish_job_pods). Recorded as `pods_finished`; returns the Pods'
        names. The Job controller and Kueue then see them finish."""
        from harness.env import pods

        names = pods.finish_job_pods(self.cluster, self.ns, job, phase)
        self.record("pods_finished", job=f"{self.ns}/{job}", phase=phase, pods=names)
        return names

    @property
    def proxy(self):
        return self.env.proxy

    def record(self, event: str, **fields: Any) -> None:
        self.history.record(event, **fields)

    def kueue_state(self) -> dict[str, Any]:
        """{"starts": N, "alive": bool}: recorded at the start and at the verdict, so the assumption
        "Kueue not restarted unasked" can be re-checked from the history alone."""
        return {"starts": self.env.kueue_starts(), "alive": bool(self.env.kueue_alive())}

    # ---- what the checkers read ------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        """The case's history so far, merged (own events, the proxy's, Kueue's milestone log lines);
        reads only what is new since the last call."""
        if self._tail is None:
            self._tail = kueue_log.Tail(self.env.kueue_log, from_end=True)
        self._log_lines.extend(line for line in self._tail.new_lines() if line.get("msg") in self.history.milestones)
        events = self.proxy.events() if self.proxy is not None else []
        return self.history.merged(events, self._log_lines, self.workload_keys)

    def objects(self, managed_fields: bool = False) -> dict[str, list[dict[str, Any]]]:
        """The case's Workloads, Jobs and ClusterQueues now (direct reads); without metadata.managedFields
        unless `managed_fields` (the bundle keeps them apart: managed-fields.yaml)."""
        objs = {
            "workloads": self.cluster.list("Workload", self.ns),
            "jobs": [self.cluster.api.sanitize_for_serialization(j) for j in self.cluster.batch.list_namespaced_job(self.ns).items],
            "clusterqueues": [c for c in self.cluster.list("ClusterQueue") if c["metadata"]["name"].startswith(self.prefix)],
        }
        if self._monitor is not None:
            # The lifecycle checkers judge these too (running_pods_within_quota: Pods against their Workloads).
            objs["localqueues"] = self.cluster.list("LocalQueue", self.ns)
            objs["pods"] = [self.cluster.api.sanitize_for_serialization(p)
                            for p in self.cluster.core.list_namespaced_pod(self.ns).items]
        if not managed_fields:
            for group in objs.values():
                for o in group:
                    (o.get("metadata") or {}).pop("managedFields", None)
        return objs

    def names(self, history: list[dict[str, Any]]) -> Names:
        return Names(history, self.ns, self.prefix)

    def observe(self, timeout: float | None = None, interval: float = 0.2) -> None:
        """Keep the case running until every declared invariant that can decide early has decided (e.g.
        liveness: the Workload got quota, or is conclusively stuck), or `timeout` seconds (default: the
        largest declared bound plus one second). Never raises on timeout: the checkers then decide on what
        was seen."""
        checkers = [c for c in self.selection.build() if c.kind == "invariant" and hasattr(c, "decided")]
        if not checkers:
            return
        if timeout is None:
            timeout = max([getattr(c, "bound", 0.0) for c in checkers] + [bounds.SETTLE]) + 1.0

        def done() -> bool:
            h = self.snapshot()
            objs, names = self.objects(), self.names(h)
            return all(c.decided(h, objs, names) for c in checkers)

        try:
            wait_for(done, timeout=timeout, interval=interval,
                     what=f"the checkers {', '.join(c.name for c in checkers)} to decide")
        except WaitTimeout:
            pass

    # ---- steps shared by cases -------------------------------------------------------------------
    def load_plan(self, name: str) -> dict[str, Any]:
        """Load a plan (a file, or a shipped name) into the proxy, limited to the case's namespace; returns
        {rule id: RuleHandle}. The plan is recorded in the history."""
        from harness.plan.load import load_plan

        plan = load_plan(name, namespace=self.ns, near=self.case_folder)
        if getattr(plan, "kueue", None) is not None and not plan.kueue.is_default:
            # The plan's `kueue:` section over the case's own declaration (docs/kueue-config.md).
            from harness.kueue import config as kueue_config

            self.configure_kueue(plan.kueue.over(self.kueue_declared or kueue_config.DEFAULT), why=f"plan {plan.name}")
        handles = self.proxy.load_plan(plan)
        self.record("plan_loaded", plan=plan.name, rules=[r.id for r in plan.rules])
        return handles

    def wait_plan(self, rule_ids: list[str], timeout: float) -> None:
        """Wait (at most `timeout` seconds per rule) until each hold rule let its flow go, however it ended,
        and each plan step (or process fault) finished, ok or not; whether they ended by their triggers and
        succeeded is for the `forced` and `steps_done` assumption checkers to say."""
        for rid in rule_ids:
            try:
                ev = self.proxy.wait_event(lambda e, rid=rid: e["event"] in ("released", "hold_timeout", "failed",
                                                                             "hold_expired", "signal_done")
                                           and e.get("rule") == rid, timeout, f"plan rule {rid} to let its flow go")
                self.record("plan_step", rule=rid, why=ev.get("why"), label=ev.get("label"))
            except WaitTimeout:
                self.record("plan_step", rule=rid, why="did not end in time", label="")

    def monitor(self, cluster_queue_prefix: str):
        """The invariant monitor's watches for the case's ClusterQueues, recording into the history (use
        as a context manager)."""
        from contextlib import nullcontext

        from harness.checkers.monitor import InvariantMonitor

        if self._monitor is not None and cluster_queue_prefix.startswith(self._monitor.prefix):
            return nullcontext(self._monitor)  # the plugin's own, already watching these ClusterQueues
        return InvariantMonitor(self.cluster.api, self.history.record, cluster_queue_prefix)


def _slug(nodeid: str) -> str:
    """The case's folder name: its whole test name (parameters such as [r0] included), lower-case; names
    over 80 characters keep 71 and a hash of the rest, so two cases never share a folder."""
    name = nodeid.split("::")[-1]
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if len(slug) > 80:
        slug = f"{slug[:71]}-{hashlib.sha256(slug.encode()).hexdigest()[:8]}"
    return slug


def case_dir(artifacts_dir: Path, nodeid: str) -> Path:
    """A new folder for this case's evidence under artifacts_dir/cases/: never one an earlier case (or a
    repetition) of this run wrote; a second use of a name gets "-2", "-3" ..."""
    base = artifacts_dir / "cases" / _slug(nodeid)
    d, n = base, 1
    while d.exists() or d.with_name(d.name + ".tar.gz").exists():
        n += 1
        d = base.with_name(f"{base.name}-{n}")
    return d


@pytest.fixture
def case(request: pytest.FixtureRequest, kueue_env, cluster: Cluster, artifacts_dir: Path, repetition: int):
    """A fresh namespace and history for one case; at the end every hold is released (and recorded),
    every rule removed, the history merged, and the final objects written next to it."""
    if not kueue_env.kueue_alive():
        tail = "\n".join(kueue_log.last_lines(kueue_env.kueue_log))
        raise HarnessError(f"Kueue is not running (it exited earlier in this session). Last log lines:\n{tail}")
    cdir = case_dir(artifacts_dir, request.node.nodeid)
    slug = cdir.name
    uniq = f"{slug[:28].rstrip('-')}-{int(time.time() * 1000) % 100000}"
    # A scenario adds the Kueue log lines its story needs: @pytest.mark.kueue_log("message", ...).
    extra = [msg for m in request.node.iter_markers("kueue_log") for msg in m.args]
    ctx = CaseContext(slug, uniq, uniq, cdir, kueue_env, cluster,
                      History(cdir / "history.jsonl", (*kueue_log.MILESTONES, *extra)),
                      selection=_selection(request.node), case_folder=Path(str(request.node.path)).parent)
    request.node._kh_case = ctx  # type: ignore[attr-defined]
    _expect_on(request.node, kueue_env)
    _configure_kueue(request.node, kueue_env, ctx)
    nodes = _pods_nodes(request.node)
    if nodes is not None:
        # Pods that run: kube-scheduler and kwok start now, the first time a case asks; its Nodes before
        # anything else of it exists, so a failure here leaves nothing behind.
        try:
            ctx.add_nodes(*nodes)
        except BaseException:
            try:
                _delete_case_nodes(ctx, timeout=0)
            except Exception:  # noqa: BLE001 - the failure to start is what the case must report
                pass
            raise
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ctx.ns}})
    ctx._tail = kueue_log.Tail(kueue_env.kueue_log, from_end=True)  # this case's lines only, read as they come
    ctx.record("case_started", case=request.node.nodeid, namespace=ctx.ns, kueue=ctx.kueue_state(),
               checkers=ctx.selection.checkers)
    if kueue_env.proxy is not None:
        kueue_env.proxy.begin_case()
    if any(getattr(c, "needs_monitor", False) for c in ctx.selection.build()):
        # Checkers that judge object lifecycle facts (deletions, evictions, spec.active, Pods) read the
        # monitor's events: it runs for the whole case (harness/checkers/monitor.py, docs/history.md).
        from harness.checkers.monitor import InvariantMonitor

        ctx._monitor = InvariantMonitor(cluster.api, ctx.history.record, ctx.prefix, namespace=ctx.ns,
                                        lifecycle=True).__enter__()
    from harness.nemesis.runner import start_for_case, stop_for_case

    # Before anything loads a plan (`--plan` does while the case is set up): it must see every event.
    ctx.nemesis = start_for_case(ctx)
    yield ctx
    stop_for_case(ctx)  # already stopped after the body; not when the case's set-up failed after this fixture
    if ctx._monitor is not None:
        ctx._monitor.stop()
    proxy = kueue_env.proxy
    problems: list[str] = []
    if proxy is not None:
        released = proxy.release_all(why="end of case")
        if released:
            ctx.record("holds_released_at_end", holds=released)
        for r in proxy.state()["rules"]:
            proxy.remove_rule(r["rule"]["id"])
    if not kueue_env.kueue_alive():
        # Dead after the verdict (or a case that never reached one): no verdict of this case can stand.
        tail = "\n".join(kueue_log.last_lines(kueue_env.kueue_log, 10))
        problems.append(f"Kueue exited during the case without the case asking for it, so its verdict means "
                        f"nothing. Last log lines:\n{tail}")
        ctx.record("teardown_problem", problem=problems[-1])
    # The objects are deleted before the history closes, so their deletion is in the record too.
    if not (ctx.dir / "objects.yaml").exists():
        _dump_objects(ctx)
    _delete_case_objects(ctx)
    _delete_case_nodes(ctx)
    ctx.record("case_finished")
    ctx.history.finalize(proxy.events() if proxy else [], kueue_env.kueue_log, ctx.workload_keys)
    if problems and not kueue_env.kueue_alive() and hasattr(kueue_env, "restart_kueue"):
        kueue_env.restart_kueue()  # later cases get a working Kueue again
    if ctx.write_bundle or problems:
        _write_bundle(request, ctx, kueue_env, problems)
    if problems:
        # An error in teardown turns the case's verdict into "error", whatever the call phase said.
        raise HarnessError("; ".join(problems))


def _configure_kueue(item: pytest.Item, env: Any, ctx: CaseContext) -> None:
    """Before the case starts: give Kueue the configuration the case declares, or the harness's default back
    after a case that declared one. Kueue restarts only when the Configuration differs from the running one;
    that restart comes before `case_started` (whose Kueue start count it is already in), recorded as
    `kueue_configured`. Raises HarnessError on a target that cannot do it, KueueConfigError for a bad gate."""
    cfg = _declared_kueue_config(item)
    ctx.kueue_declared = cfg
    if not hasattr(env, "configure_kueue"):
        if not cfg.is_default:
            raise HarnessError(f"{item.nodeid} declares a Kueue configuration ({cfg.summary()}), which this target "
                               "cannot give Kueue per case; use --target local")
        return
    res = env.configure_kueue(cfg)
    ctx.record("kueue_configured", why="case", declared=cfg.to_json(), summary=cfg.summary(), **res,
               feature_gates=dict(getattr(env, "kueue_reported_gates", {}) or {}))
    item._kh_kueue_config = {"declared": cfg.to_json(), "restarted": res["restarted"],  # type: ignore[attr-defined]
                             "restart_seconds": res["seconds"],
                             **({"if_known": res["if_known"]} if "if_known" in res else {})}


def _delete_case_objects(ctx: CaseContext) -> None:
    """Delete the case's namespace (its Jobs and Workloads) and its cluster-scoped Kueue objects, once the
    objects the verdict was judged on are in objects.yaml and before the history closes (so the deletion
    is recorded): a wedged ClusterQueue left behind keeps Kueue's scheduler logging "Preemption already
    issued" every few milliseconds for the rest of the session. Best effort."""
    from kubernetes.client.exceptions import ApiException

    c = ctx.cluster
    try:
        for job in c.batch.list_namespaced_job(ctx.ns).items:
            c.batch.delete_namespaced_job(job.metadata.name, ctx.ns, propagation_policy="Background")
        for wl in c.list("Workload", ctx.ns):
            c.custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ctx.ns, "workloads",
                                                     wl["metadata"]["name"])
        c.core.delete_namespace(ctx.ns)
        wedged = []
        for kind, plural in (("ClusterQueue", "clusterqueues"), ("ResourceFlavor", "resourceflavors"),
                             ("WorkloadPriorityClass", "workloadpriorityclasses"), ("Cohort", "cohorts")):
            try:
                objs = [o for o in c.list(kind) if o["metadata"]["name"].startswith(ctx.prefix)]
            except ApiException as e:
                if e.status == 404:  # a Kueue without this kind
                    continue
                raise
            for obj in objs:
                name = obj["metadata"]["name"]
                if obj["metadata"].get("deletionTimestamp") and obj["metadata"].get("finalizers"):
                    # Already Terminating before teardown: wedged by the case (kueue#10759's ClusterQueue).
                    # Its finalizers go, or such objects pile up for the rest of the session.
                    c.custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name,
                                                         {"metadata": {"finalizers": None}})
                    wedged.append(f"{kind}/{name}")
                    continue
                c.custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural, name)
        ctx.record("case_objects_deleted", namespace=ctx.ns, **({"finalizers_removed": wedged} if wedged else {}))
    except ApiException as e:
        ctx.record("case_objects_not_deleted", error=f"{e.status} {e.reason}")


def _delete_case_nodes(ctx: CaseContext, timeout: float = 10.0) -> None:
    """Delete the case's Nodes once the Pods of its namespace are gone (at most `timeout` seconds): kwok
    removes a deleted Pod only while it manages the Pod's Node, so a Node deleted first would leave its Pods
    (and the namespace) terminating. Recorded as `case_nodes_deleted` with the Pods still there. Best effort."""
    from kubernetes.client.exceptions import ApiException

    if not ctx.nodes:
        return
    c = ctx.cluster
    left: list[str] = []

    def pods_gone() -> bool:
        left[:] = [p.metadata.name for p in c.core.list_namespaced_pod(ctx.ns).items]
        return not left

    try:
        wait_for(pods_gone, timeout=timeout, interval=0.1, what=f"the Pods of {ctx.ns} to be deleted")
    except WaitTimeout:
        pass  # the Nodes go anyway: the next case must not get them
    deleted = []
    for name in ctx.nodes.values():
        try:
            c.core.delete_node(name)
            deleted.append(name)
        except ApiException as e:
            if e.status != 404:
                ctx.record("case_objects_not_deleted", error=f"Node {name}: {e.status} {e.reason}")
    ctx.record("case_nodes_deleted", nodes=deleted, pods_left=list(left))


def _write_bundle(request: pytest.FixtureRequest, ctx: CaseContext, env: Any, problems: list[str]) -> None:
    """The case's evidence bundle (harness/report.py): report.md, logs, flows, <case>.tar.gz. Best effort:
    a bundle that cannot be written is a warning and `bundle_error` in summary.json, never a verdict."""
    from harness import report

    entry = request.config.stash[_VERDICTS_KEY].get(request.node.nodeid, {})
    target = request.config.getoption("--target", "local")
    try:
        rerun = report.write.rerun_command(request.node.nodeid, request.config.stash[_SPEC_KEY].cli_args(), target)
    except Exception:  # noqa: BLE001 - evidence is best effort
        rerun = None
    outcome = {**entry, "message": getattr(request.node, "_kh_message", ""), "target": target,
               "checkers": ctx.selection.checkers, "rerun": rerun}
    if hasattr(env, "kueue_config_info"):
        # What Kueue was given for this case: the declaration, the Configuration file, the gates it reported.
        outcome["kueue_config"] = env.kueue_config_info()
        entry["kueue_config"] = {**getattr(request.node, "_kh_kueue_config", {}),
                                 "feature_gates": outcome["kueue_config"]["feature_gates_reported"]}
    if problems:
        outcome.update(verdict="error", detail="; ".join(problems))
    bug = _bug(request.node)
    if bug is not None:
        outcome["bug"] = {"issue": bug.issue, "summary": bug.summary, "affected": list(bug.affected),
                          "fixed_in": list(bug.fixed_in), "fix_commits": dict(bug.fix_commits)}
        exp = request.node.stash.get(_EXPECT_KEY, None)
        if exp is not None:
            outcome["bug"]["on_this_build"] = {"status": exp.status, "reason": exp.reason}
    try:
        entry["bundle"] = str(report.write_case_bundle(ctx, env, outcome))
    except Exception as e:  # noqa: BLE001 - evidence must not change the verdict
        entry["bundle_error"] = f"{type(e).__name__}: {e}"
        warnings.warn(f"kueue-harness: no evidence bundle for {request.node.nodeid}: {entry['bundle_error']}")


def _dump_objects(ctx: CaseContext, objs: dict[str, Any] | None = None) -> None:
    """objects.yaml and managed-fields.yaml: the objects the verdict was judged on (or, for a case that
    reached no verdict, the objects at its end), their managedFields apart (harness/report/write.py)."""
    from harness.report.write import dump_objects

    try:
        objs = objs if objs is not None else ctx.objects(managed_fields=True)
        dump_objects(ctx.dir, objs)
    except Exception as e:  # noqa: BLE001 - evidence is best effort; the verdict is already decided
        (ctx.dir / "objects.yaml").write_text(f"# could not read final objects: {e}\n")


def _selection(item: pytest.Item) -> Selection:
    """The case's checkers: `@pytest.mark.checkers("quota", liveness={"jobs": ["job2"]})` plus the default
    assumptions. Raises pytest.UsageError for an unknown checker name."""
    declared: dict[str, Any] = {}
    m = item.get_closest_marker("checkers")
    if m is not None:
        declared.update({name: {} for name in m.args})
        declared.update(m.kwargs)
    sel = Selection(selection_with_defaults(declared))
    try:
        sel.build()
    except (KeyError, TypeError) as e:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.checkers: {e}") from None
    return sel


def _decide(item: pytest.Item, ctx: CaseContext, raised: BaseException | None = None) -> None:
    """The case's verdict, by its checkers, as soon as its body returned: record it (the history's
    `verdict` event ends the window the checkers judge), write the judged objects, and raise
    InvariantViolation (reproduced) or AssumptionFailed (error). When the body itself raised an
    InvariantViolation only the assumptions run: a void run must not count as a reproduction."""
    sel = ctx.selection
    if raised is not None:
        sel = Selection({k: v for k, v in sel.checkers.items() if REGISTRY[k].kind == "assumption"})
    history = ctx.snapshot()
    objs = ctx.objects(managed_fields=True)  # the checkers ignore managedFields; the bundle keeps them
    v = compose(sel, history, objs, ctx.names(history))
    ctx.judged = v
    invariants = [n for n in sel.checkers if REGISTRY[n].kind == "invariant"]
    # What the checkers saw, per source: Kueue's log and the proxy's events reach the harness a little late,
    # so the offline re-check judges exactly these events (harness/checkers/base.py within_case).
    seen: dict[str, float] = {}
    for e in history:
        seen[e["source"]] = max(seen.get(e["source"], e["ts"]), e["ts"])
    ctx.record("verdict", invariant=",".join(invariants) or "none", held=v.verdict == "passed", verdict=v.verdict,
               reason=v.reason, kueue=ctx.kueue_state(), seen=seen)
    _dump_objects(ctx, objs)
    detail = "\n".join(f"  {f.check}: {f.result}: {f.evidence}" for f in v.findings
                       if f.result not in ("held", "not applicable") or not f.assumption)
    if v.verdict == "error":
        raise AssumptionFailed(f"{v.reason}\n{detail}") from raised
    if raised is not None:
        return
    if v.verdict == "reproduced":
        raise InvariantViolation(f"{v.reason}\n{detail}")
    if v.verdict == "inconclusive":
        raise AssumptionFailed(f"inconclusive: {v.reason}\n{detail}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    ctx: CaseContext | None = getattr(item, "_kh_case", None)
    try:
        res = yield
    except InvariantViolation as e:
        if ctx is not None:
            _decide(item, ctx, raised=e)
        raise
    if ctx is not None:
        _decide(item, ctx)
    return res


def _expected(item: pytest.Item) -> tuple[str, str]:
    """(expected verdict, why): "reproduced" where the case's kueue_bug affects the Kueue that runs,
    "passed" where it is fixed or the case has no bug, "unknown" where that cannot be told."""
    exp = item.stash.get(_EXPECT_KEY, None)
    if exp is None:
        return ("passed", "") if _bug(item) is None else ("unknown", "the environment did not start")
    return {"affected": "reproduced", "fixed": "passed"}.get(exp.status, "unknown"), exp.reason


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    rep = yield
    if "case" not in getattr(item, "fixturenames", ()):
        return rep
    verdicts = item.config.stash[_VERDICTS_KEY]
    ctx: CaseContext | None = getattr(item, "_kh_case", None)
    entry = verdicts.setdefault(item.nodeid, {
        "case": item.nodeid, "kueue_version": item.config.option.kueue_version, "verdict": "error",
        "expected": "", "seconds": 0.0, "setup_seconds": 0.0, "teardown_seconds": 0.0,
        "detail": "",
    })
    # After set-up the environment knows which Kueue runs: the version it reported, and what to expect.
    env = getattr(item.config, "_kh_env", None)
    if env is not None:
        entry["kueue_version"] = env.kueue_version
    entry["expected"], entry["expected_reason"] = _expected(item)
    if _bug_key(item):
        entry["kueue_bug"] = _bug_key(item)  # `run`'s verdict table names the bugs of the cases that ran
    # "seconds" is the time to verdict (the case's own run); environment start-up (setup of the first
    # case) and evidence writing (teardown) are kept apart so the figures compare across cases.
    key = {"call": "seconds", "setup": "setup_seconds", "teardown": "teardown_seconds"}[rep.when]
    entry[key] = round(entry[key] + rep.duration, 2)
    if ctx is not None:
        entry["evidence"] = str(ctx.dir)
    if rep.when == "call":
        exc = call.excinfo
        item._kh_message = str(exc.value) if exc is not None else ""  # type: ignore[attr-defined]
        if exc is None:
            entry["verdict"], entry["detail"] = "passed", "invariant held"
        elif exc.errisinstance(InvariantViolation):
            entry["verdict"], entry["detail"] = "reproduced", str(exc.value).splitlines()[0]
        else:
            entry["verdict"], entry["detail"] = "error", f"{exc.typename}: {str(exc.value).splitlines()[0] if str(exc.value) else ''}"
    elif rep.failed:
        # Setup or teardown failed (environment, Kueue crash, an expired hold): no verdict can stand.
        entry["verdict"] = "error"
        exc = call.excinfo
        what = f"{exc.typename}: {str(exc.value).splitlines()[0] if str(exc.value) else ''}" if exc else "failed"
        entry["detail"] = f"{rep.when}: {what}"
    return rep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    verdicts = session.config.stash.get(_VERDICTS_KEY, {})
    if not verdicts:
        return
    art: Path = session.config._kh_artifacts  # type: ignore[attr-defined]
    art.mkdir(parents=True, exist_ok=True)
    for v in verdicts.values():
        if v["verdict"] == "error" and not v["detail"]:
            v["detail"] = ("did not finish: interrupted (Ctrl-C)" if exitstatus == pytest.ExitCode.INTERRUPTED
                           else "did not finish")
    if session.config.getoption("--recheck-bundles"):
        _recheck_bundles(session, verdicts.values(), art)
    env = getattr(session.config, "_kh_env", None)
    summary = {
        # What ran: the version the Kueue binary reported (its "Initializing" log line), never the flag.
        "kueue_version": env.kueue_version if env is not None else None,
        "kueue_requested": session.config.option.kueue_version,
        "kueue": env.kueue_build_info() if env is not None and hasattr(env, "kueue_build_info") else None,
        "kubernetes_version": getattr(env, "kubernetes_version", "") or (
            versions.KUBERNETES_VERSION if session.config.getoption("--target") == "local" else None),
        "target": session.config.getoption("--target"),
        "environment_ready_seconds": round(env.started.get("ready_seconds", 0), 2) if env else None,
        # kube-scheduler's and kwok's versions when a case asked for Pods that run (harness/env/pods.py).
        "pods": env.pods_info() if env is not None and hasattr(env, "pods_info") else None,
        "cases": list(verdicts.values()),
    }
    (art / "summary.json").write_text(json.dumps(summary, indent=2))


def _recheck_bundles(session: pytest.Session, entries, art: Path) -> None:
    """Re-check each case's bundle offline with the checkers it recorded; a verdict that differs from the
    live one fails the run (the live and offline verdicts come from one composition and must agree)."""
    import tempfile

    from harness import report

    differ = []
    with tempfile.TemporaryDirectory(prefix="kh-recheck-") as tmp:
        for i, v in enumerate(entries):
            if not v.get("bundle"):
                continue
            try:
                r = report.report_bundle(Path(v["bundle"]), out=Path(tmp) / str(i))
                v["recheck"] = r.verdict
            except HarnessError as e:
                v["recheck"] = f"failed: {str(e).splitlines()[0]}"
            if v["recheck"] != v["verdict"]:
                differ.append(f"{v['case']}: live {v['verdict']}, re-checked {v['recheck']}")
    if differ:
        (art / "recheck-differs.txt").write_text("\n".join(differ) + "\n")
        print("\nkueue-harness: the offline re-check differs from the live verdict:\n  " + "\n  ".join(differ))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    verdicts = config.stash.get(_VERDICTS_KEY, {})
    if not verdicts or config.getoption("--no-verdict-table"):
        return
    tr = terminalreporter
    tr.section("kueue-harness verdicts")
    width = max(len(v["case"]) for v in verdicts.values())
    tr.write_line(f"{'case':<{width}}  {'kueue':<8} {'verdict':<10} {'expected':<10} {'seconds':>7}  detail")
    for v in verdicts.values():
        tr.write_line(f"{v['case']:<{width}}  {v['kueue_version']:<8} {v['verdict']:<10} {v['expected']:<10} "
                      f"{v['seconds']:>7.1f}  {v['detail'][:90]}")
    art = config._kh_artifacts  # type: ignore[attr-defined]
    tr.write_line(f"evidence: {art}/ (summary.json, env/kueue.log, env/proxy-events.jsonl, cases/<case>/history.jsonl)")
    for v in verdicts.values():
        if v.get("bundle"):
            tr.write_line(f"  bundle {v['case'].split('::')[-1]}: {Path(v['bundle']).with_suffix('').with_suffix('')}/report.md "
                          f"(+ {Path(v['bundle']).name})")
        elif v.get("bundle_error"):
            tr.write_line(f"  bundle {v['case'].split('::')[-1]}: not written ({v['bundle_error'][:80]})")
