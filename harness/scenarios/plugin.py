"""pytest plugin (entry point `kueue_harness`): options, the session's environment, the `case` fixture (a
CaseContext per case: namespace, history, Nemesis, monitor; at the end holds released, rules removed, objects
deleted, the history closed, the bundle written). What a case declares is read in markers.py, what it is
made of is case.py, and its verdict, the verdict table and summary.json are verdicts.py.

Verdicts: "reproduced" (the case's invariant was violated: InvariantViolation), "passed", "error"
(anything else: environment, timeouts, Kueue crash, a fault that never happened).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness.common.errors import HarnessError
from harness.common.waiting import WaitTimeout, wait_for
from harness.history.record import History
from harness.kueue import log as kueue_log
from harness.kueue import versions
from harness.objects import Cluster
from harness.scenarios.case import CaseContext, case_dir
from harness.scenarios.markers import (
    _SPEC_KEY,
    _VERDICTS_KEY,
    _bug,
    _declared_kueue_config,
    _expect_on,
    _pods_nodes,
    _selection,
)

# The verdict hooks are this plugin's too (pytest registers the hooks a plugin module holds).
from harness.scenarios.verdicts import (  # noqa: F401
    _dump_objects,
    _write_bundle,
    pytest_runtest_call,
    pytest_runtest_makereport,
    install_stop_signals,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_unconfigure,
)

#: Process faults of plans and watch-delay ticks around every case body (harness/nemesis/runner.py); `--plan` and
#: explore's perturbed runs (harness/explore/plugin.py).
pytest_plugins = ("harness.nemesis.runner", "harness.explore.plugin")


#: An environment to run the cases on instead of starting one, left running afterwards: set by the session
#: supervisor of `kueue-harness run --keep-env` (harness/cli/session.py), which owns and later stops it.
PROVIDED_ENV: Any = None


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kueue-harness")
    g.addoption("--kueue-version", default=None,
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
    g.addoption("--kueue-race", action="store_true", default=False,
                help="build Kueue with Go's race detector (env KUEUE_HARNESS_KUEUE_RACE=1): every case is judged by "
                     "no_data_race too (docs/kueue-builds.md); local target only")
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
                help="node image for a kind cluster created here, e.g. kindest/node:v1.35.0 where a registry is "
                     "reachable (default: one made here offline from harness-built binaries: docs/kind.md)")
    g.addoption("--kueue-manifests", default=os.environ.get("KUEUE_HARNESS_KUEUE_MANIFESTS"),
                help="kind target: URL or file of Kueue's published manifests, installed as they are (default: the "
                     "build under test, its image made here, its manifests rendered from its config/)")
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
                                      config.getoption("--kueue-patch"), config.getoption("--kueue-race"))
    except HarnessError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[_SPEC_KEY] = spec
    if spec.race and config.getoption("--target") != "local":
        raise pytest.UsageError("--kueue-race runs on the local target only: a race build links the C library (cgo), "
                                "which the kind target's Kueue image does not hold; drop --target or --kueue-race")
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
    install_stop_signals(config)  # SIGTERM/SIGHUP stop the run as Ctrl-C does (verdicts.py)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        _bug(item)  # an unknown issue is a usage error now, not a KeyError mid-run
        _declared_kueue_config(item)  # so is a bad @pytest.mark.kueue_config
        _pods_nodes(item)  # and a bad @pytest.mark.pods
        if not config.stash[_SPEC_KEY].race and any("no_data_race" in (*m.args, *m.kwargs)
                                                    for m in item.iter_markers("checkers")):
            # Judged by Go's race detector alone: on a plain build it could only say `error`.
            item.add_marker(pytest.mark.skip(reason="judged by Go's race detector (no_data_race): run with --kueue-race "
                                                    "(docs/kueue-builds.md)"))


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


def say_uncaptured(config: pytest.Config):
    """A `say` for the environment whose lines reach the terminal during a case too (pytest captures a case's
    stderr): a build of kwok or kube-scheduler a Pods case waits for — or another process's build lock it waits
    on — says so every 20 s instead of leaving a case silent for minutes."""
    capman = config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        if capman is None:
            print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)
            return
        with capman.global_and_fixture_disabled():
            print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)

    return say


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
    say = say_uncaptured(request.config)
    if target == "local":
        from harness.env.local import LocalEnvironment

        env = LocalEnvironment.start(kueue_spec, artifacts=artifacts_dir / "env", say=say)
    else:
        from harness.env import start_target

        env = start_target(target, request.config.getoption, kueue_version, artifacts_dir / "env", kueue_spec, say=say)
    request.config._kh_env = env  # type: ignore[attr-defined]
    yield env
    # In a cluster the routing is always undone (the proxy ends with the session); --keep-env keeps a
    # kind cluster created here (harness/env/__init__.py).
    env.stop()


@pytest.fixture(scope="session")
def cluster(kueue_env) -> Cluster:
    """Direct admin access to kube-apiserver (never through the proxy)."""
    return Cluster(kueue_env.api_client())


@pytest.fixture
def case(request: pytest.FixtureRequest, kueue_env, cluster: Cluster, artifacts_dir: Path, repetition: int):
    """A fresh namespace and history for one case; at the end every hold is released (and recorded),
    every rule removed, the history merged, and the final objects written next to it."""
    if not kueue_env.kueue_alive():
        # The case during which it exited is already `error` (teardown_problem); this one starts on a Kueue
        # started again (on a cluster: a new Pod, re-attached, its log followed, its webhooks answering).
        tail = "\n".join(kueue_log.last_lines(kueue_env.kueue_log))
        if not hasattr(kueue_env, "restart_kueue"):
            raise HarnessError(f"Kueue is not running (it exited earlier in this session). Last log lines:\n{tail}")
        warnings.warn(f"kueue-harness: Kueue was not running before {request.node.nodeid} (it exited earlier); "
                      "starting it again first")
        try:
            kueue_env.restart_kueue()
        except Exception as e:  # noqa: BLE001 - said with what Kueue last logged
            raise HarnessError(f"Kueue is not running (it exited earlier in this session) and did not start again "
                               f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Last log lines:\n"
                               f"{tail}") from None
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
               checkers=ctx.selection.checkers, **({"kueue_race": True} if _race_build(kueue_env) else {}))
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
        why = kueue_log.last_error(kueue_env.kueue_log)
        problems.append(f"Kueue exited during the case without the case asking for it{f' ({why})' if why else ''}, "
                        f"so its verdict means nothing. Last log lines:\n{tail}")
        ctx.record("teardown_problem", problem=problems[-1])
    # The objects are deleted before the history closes, so their deletion is in the record too.
    if not (ctx.dir / "objects.yaml").exists():
        _dump_objects(ctx)
    not_deleted = _delete_case_objects(ctx)
    if not_deleted:
        # Listed in summary.json beside the case's verdict: a user's cluster is left as found, or told what stays.
        entry = request.config.stash[_VERDICTS_KEY].get(request.node.nodeid)
        if entry is not None:
            entry["not_deleted"] = not_deleted
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


def _race_build(env: Any) -> bool:
    """Whether the environment's Kueue binary was built with Go's race detector (its build information)."""
    return bool(getattr(getattr(getattr(env, "bins", None), "kueue_build", None), "race", False))


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
    # A race build starts every case with a new Kueue: its race detector reports a pair of accesses once per
    # process, so a race an earlier case already reported would go unseen (a `passed` on an affected build).
    res = env.configure_kueue(cfg, fresh=True) if _race_build(env) else env.configure_kueue(cfg)
    ctx.record("kueue_configured", why="case", declared=cfg.to_json(), summary=cfg.summary(), **res,
               feature_gates=dict(getattr(env, "kueue_reported_gates", {}) or {}))
    item._kh_kueue_config = {"declared": cfg.to_json(), "restarted": res["restarted"],  # type: ignore[attr-defined]
                             "restart_seconds": res["seconds"],
                             **({"if_known": res["if_known"]} if "if_known" in res else {})}


#: Cluster-scoped Kueue kinds a case may make (named with its prefix), in the order teardown deletes them
#: (AdmissionChecks after the ClusterQueues naming them).
CASE_CLUSTER_KINDS = (("ClusterQueue", "clusterqueues"), ("ResourceFlavor", "resourceflavors"),
                      ("WorkloadPriorityClass", "workloadpriorityclasses"), ("Cohort", "cohorts"),
                      ("AdmissionCheck", "admissionchecks"), ("ProvisioningRequestConfig", "provisioningrequestconfigs"),
                      ("Topology", "topologies"))


def _delete_case_objects(ctx: CaseContext) -> list[str]:
    """Delete the case's namespace (its Jobs and Workloads) and its cluster-scoped Kueue objects, once the
    objects the verdict was judged on are in objects.yaml and before the history closes (so the deletion
    is recorded): a wedged ClusterQueue left behind keeps Kueue's scheduler logging "Preemption already
    issued" every few milliseconds for the rest of the session; on a user's own cluster (`--target kubeconfig`)
    nothing of the case may stay behind. Each object on its own: a 404 (gone already) is success, and one
    failure never skips the rest; what could not be deleted is recorded (`case_objects_deleted`'s
    `not_deleted`, with the error) and the session summary lists it."""
    from kubernetes.client.exceptions import ApiException

    c = ctx.cluster
    failed: list[str] = []

    def attempt(what: str, call: Any) -> bool:
        try:
            call()
            return True
        except ApiException as e:
            if e.status == 404:
                return True
            failed.append(f"{what}: {e.status} {e.reason}")
        except Exception as e:  # noqa: BLE001 - clean-up goes on with the rest whatever one object does
            failed.append(f"{what}: {type(e).__name__}: {e}")
        return False

    jobs: list[Any] = []
    attempt(f"Jobs of {ctx.ns}", lambda: jobs.extend(c.batch.list_namespaced_job(ctx.ns).items))
    for job in jobs:
        attempt(f"Job {ctx.ns}/{job.metadata.name}", lambda job=job: c.batch.delete_namespaced_job(
            job.metadata.name, ctx.ns, propagation_policy="Background"))
    wls: list[Any] = []
    attempt(f"Workloads of {ctx.ns}", lambda: wls.extend(c.list("Workload", ctx.ns)))
    for wl in wls:
        name = wl["metadata"]["name"]
        attempt(f"Workload {ctx.ns}/{name}", lambda name=name: c.custom.delete_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", ctx.ns, "workloads", name))
    attempt(f"Namespace {ctx.ns}", lambda: c.core.delete_namespace(ctx.ns))
    wedged = []
    for kind, plural in CASE_CLUSTER_KINDS:
        objs: list[Any] = []
        try:
            objs = [o for o in c.list(kind) if o["metadata"]["name"].startswith(ctx.prefix)]
        except ApiException as e:
            if e.status != 404:  # 404: a Kueue without this kind
                failed.append(f"{kind} list: {e.status} {e.reason}")
            continue
        except Exception as e:  # noqa: BLE001 - as above
            failed.append(f"{kind} list: {type(e).__name__}: {e}")
            continue
        for obj in objs:
            name = obj["metadata"]["name"]
            if obj["metadata"].get("deletionTimestamp") and obj["metadata"].get("finalizers"):
                # Already Terminating before teardown: wedged by the case (kueue#10759's ClusterQueue).
                # Its finalizers go, or such objects pile up for the rest of the session.
                if attempt(f"{kind}/{name} finalizers", lambda plural=plural, name=name: c.custom.patch_cluster_custom_object(
                        "kueue.x-k8s.io", "v1beta2", plural, name, {"metadata": {"finalizers": None}})):
                    wedged.append(f"{kind}/{name}")
                continue
            attempt(f"{kind}/{name}", lambda plural=plural, name=name: c.custom.delete_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", plural, name))
    if failed:
        ctx.record("case_objects_not_deleted", error="; ".join(failed)[:2000], not_deleted=failed)
    else:
        ctx.record("case_objects_deleted", namespace=ctx.ns, **({"finalizers_removed": wedged} if wedged else {}))
    return failed


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
    if hasattr(ctx.env, "keep_pods_on_case_nodes"):  # a cluster target: its real Nodes take Pods again
        try:
            ctx.record("real_nodes_untainted", nodes=ctx.env.keep_pods_on_case_nodes(False))
        except ApiException as e:
            ctx.record("case_objects_not_deleted", error=f"the case-Pods taint of the real Nodes: {e.status} {e.reason}")
