"""What one case works with: `CaseContext` (its namespace, history, proxy, Nemesis, monitor; the steps cases
share: load_plan, observe, restart_kueue, configure_kueue, add_nodes, finish_pods; what the checkers read:
snapshot, objects), the exceptions a verdict raises (InvariantViolation: reproduced; AssumptionFailed: error),
and the folder each case writes its evidence to.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checkers import Selection, bounds, selection_with_defaults
from harness.common.errors import HarnessError
from harness.common.waiting import WaitTimeout, wait_for
from harness.history.names import Names
from harness.history.record import History
from harness.kueue import log as kueue_log
from harness.objects import Cluster

#: Seconds of quiet (nothing reached the proxy, the plan holds nothing) after which `observe` ends in a
#: perturbed run; the run's settle observes SETTLE (2 s) more. Above Kueue's 1 s status batch period only with
#: the settle: a late write shows within ~0.1-1 s (harness/explore/plugin.py SETTLE).
OBSERVE_QUIET = 1.0


class InvariantViolation(AssertionError):
    """The invariant a case checks does not hold: the bug reproduced. Message = the evidence."""


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
    #: Set for a perturbed run too: plan_quiet() -> why the run went quiet (the plan holds nothing and
    #: nothing reached the proxy for a while), or None; `wait_plan` then stops waiting for a plan step or
    #: rule that has not ended (harness/explore/plugin.py PLAN_QUIET).
    plan_quiet: Any = None
    #: Set for a perturbed run whose plan moves steps of the case's own plan (`steps_after:`,
    #: docs/fault-plans.md "Moving a case's steps"): {step id: triggers}; `load_plan` applies them.
    steps_after: dict[str, Any] = field(default_factory=dict)
    #: Set for a perturbed run whose plan changes how delete steps of the case's own plan delete (`deletes_as:`):
    #: {step id: {propagation?, keep_terminating?}}; `load_plan` applies them.
    deletes_as: dict[str, Any] = field(default_factory=dict)
    #: The plan file a perturbed run (`--plan`, explore) loaded before the case's own: the evidence's re-run
    #: command gives it again (harness/scenarios/verdicts.py).
    perturbed_plan: str | None = None
    #: The steps of every plan the case loaded: {step id: {"plan": name, "after": its triggers as run (as the
    #: file writes them), "moved": bool, "action": create/patch/delete/wait/sleep, "previous": the step before
    #: it}} — what explore reads to move a step (harness/explore/generate.py earlier, unblocked).
    loaded_steps: dict[str, Any] = field(default_factory=dict)
    #: The composed verdict (harness/checkers/base.Verdict) once the case was judged.
    judged: Any = None
    #: Kueue's own view at a verdict other than passed (harness/scenarios/verdicts.py _kueue_view), for report.md.
    kueue_view: Any = None
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
                               "use --target local, kind or kubeconfig (each can)")
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
        until it is Ready and schedulable. Recorded as `nodes_created`; deleted at the end of the case. On a
        cluster target (kind, kubeconfig) kwok runs here against the cluster, whose kube-scheduler binds the
        Pods, and its real Nodes are tainted while the case runs (InClusterEnvironment
        .keep_pods_on_case_nodes), so the Pods go to the case's Nodes as on the local target.
        Returns {name: Node name}. Raises HarnessError on a target without them, WaitTimeout."""
        from harness.env import pods

        if not hasattr(self.env, "start_pods"):
            raise HarnessError(f"Pods that run (kwok Nodes) are not supported by target {type(self.env).__name__}")
        part = self.env.start_pods()
        if hasattr(self.env, "keep_pods_on_case_nodes") and not self.nodes:
            tainted = self.env.keep_pods_on_case_nodes(True)
            self.record("real_nodes_tainted", nodes=tainted, taint=pods.CASE_PODS_TAINT)
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
        """{"starts": N, "alive": bool[, "log": {...}]}: recorded at the start and at the verdict, so the
        assumptions "Kueue not restarted unasked" and "Kueue's log followed" can be re-checked from the
        history alone. "log" (targets that follow Kueue's log through the API: harness/env/pod_logs.py)
        is the follower's health: problems so far, the last one, bytes written, alive."""
        state: dict[str, Any] = {"starts": self.env.kueue_starts(), "alive": bool(self.env.kueue_alive())}
        health = getattr(self.env, "kueue_log_health", None)
        if health is not None:
            state["log"] = health()
        return state

    # ---- what the checkers read ------------------------------------------------------------------
    def snapshot(self) -> list[dict[str, Any]]:
        """The case's history so far, merged (own events, the proxy's, Kueue's milestone log lines and race reports);
        reads only what is new since the last call."""
        if self._tail is None:
            self._tail = kueue_log.Tail(self.env.kueue_log, from_end=True)
        self._log_lines.extend(line for line in self._tail.new_lines()
                               if line.get("msg") in self.history.milestones or line.get("race_read"))
        events = self.proxy.events() if self.proxy is not None else []
        return self.history.merged(events, self._log_lines, self.workload_keys)

    def objects(self, managed_fields: bool = False) -> dict[str, list[dict[str, Any]]]:
        """The case's Workloads, Jobs, ClusterQueues and Cohorts now (direct reads); without
        metadata.managedFields unless `managed_fields` (the bundle keeps them apart: managed-fields.yaml).
        Cohorts: those named with the case's prefix and those its ClusterQueues name, with their parents
        (harness/checkers/model/quota.py cohorts_in_scope): the quota checker judges the real tree."""
        from harness.checkers.model.quota import cohorts_in_scope

        cqs = [c for c in self.cluster.list("ClusterQueue") if c["metadata"]["name"].startswith(self.prefix)]
        objs = {
            "workloads": self.cluster.list("Workload", self.ns),
            "jobs": [self.cluster.api.sanitize_for_serialization(j) for j in self.cluster.batch.list_namespaced_job(self.ns).items],
            "clusterqueues": cqs,
            "cohorts": cohorts_in_scope(self._cohorts(), cqs, self.prefix),
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

    def _cohorts(self) -> list[dict[str, Any]]:
        """Every Cohort object ([] on a Kueue that serves no Cohort kind: 404)."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self.cluster.list("Cohort")
        except ApiException as e:
            if e.status == 404:
                return []
            raise

    def names(self, history: list[dict[str, Any]]) -> Names:
        return Names(history, self.ns, self.prefix)

    def observe(self, timeout: float | None = None, interval: float = 0.2) -> None:
        """Keep the case running until every declared invariant that can decide early has decided (e.g.
        liveness: the Workload got quota, or is conclusively stuck), or `timeout` seconds (default: the
        largest declared bound, plus bounds.GIVE_UP for a checker that counts its bound in the run's own pace
        (`paced`: harness/checkers/progress.py; it decides as soon as the evidence is in), plus one second). Never raises on timeout: the checkers then decide on what
        was seen. In a perturbed run (`plan_quiet` set: `--plan`, explore) it also ends once the run was quiet
        for OBSERVE_QUIET seconds (nothing reached the proxy, the plan holds nothing): the run's settle then
        observes SETTLE seconds more (harness/explore/plugin.py PerturbedRun.settle). Waiting for the whole
        bound there cost 6 s of a 9 s run in four controls (docs/benchmarks.md, "Explore: workers")."""
        checkers = [c for c in self.selection.build() if c.kind == "invariant" and hasattr(c, "decided")]
        if not checkers:
            return
        if timeout is None:
            # A checker that counts its bound in the run's pace (`paced`) may need up to GIVE_UP more on a slow run;
            # one that decides only on a violation (quota) waits the SETTLE window.
            timeout = max([getattr(c, "bound", 0.0) + (bounds.GIVE_UP if getattr(c, "paced", False) else 0.0)
                           for c in checkers] + [bounds.SETTLE]) + 1.0

        def done() -> bool:
            if self.plan_quiet is not None and self.plan_quiet(OBSERVE_QUIET):
                return True
            h = self.snapshot()
            objs, names = self.objects(), self.names(h)
            waiting = [c for c in checkers if not c.decided(h, objs, names)]
            return not waiting or (all(getattr(c, "settles_when_quiet", False) for c in waiting) and self._settled(h))

        try:
            wait_for(done, timeout=timeout, interval=interval,
                     what=f"the checkers {', '.join(c.name for c in checkers)} to decide")
        except WaitTimeout:
            pass

    def _settled(self, history: list[dict[str, Any]]) -> bool:
        """Nothing of the case moved for bounds.QUIET seconds counted in the run's pace (progress.last_activity)
        and the proxy holds nothing: the evidence a checker that decides on a violation alone waits for is in."""
        from harness.checkers import progress

        last = progress.last_activity(history)
        if last is None or time.time() - last < bounds.QUIET * progress.pace(history).factor:
            return False
        return self.proxy is None or not (self.proxy.state().get("holds") or [])

    # ---- steps shared by cases -------------------------------------------------------------------
    def load_plan(self, name: str) -> dict[str, Any]:
        """Load a plan (a file, or a shipped name) into the proxy, limited to the case's namespace; returns
        {rule id: RuleHandle}. The plan is recorded in the history."""
        from harness.plan.load import load_plan

        plan = load_plan(name, namespace=self.ns, near=self.case_folder)
        moved: list[str] = []
        changed: list[str] = []
        if (self.steps_after or self.deletes_as) and plan.steps:
            plan, moved, changed = self._moved(plan)
        self._note_steps(plan, moved)
        if getattr(plan, "kueue", None) is not None and not plan.kueue.is_default:
            # The plan's `kueue:` section over the case's own declaration (docs/kueue-config.md).
            from harness.kueue import config as kueue_config

            self.configure_kueue(plan.kueue.over(self.kueue_declared or kueue_config.DEFAULT), why=f"plan {plan.name}")
        handles = self.proxy.load_plan(plan)
        extra = {**({"steps_moved": {sid: self.steps_after[sid] for sid in moved}} if moved else {}),
                 **({"steps_changed": {sid: self.deletes_as[sid] for sid in changed}} if changed else {}),
                 **({"file": plan.source} if moved or changed else {})}
        self.record("plan_loaded", plan=plan.name, rules=[r.id for r in plan.rules], **extra)
        return handles

    def _moved(self, plan: Any) -> tuple[Any, list[str], list[str]]:
        """`plan` with the steps `steps_after` names run on its triggers and the delete steps `deletes_as` names
        deleting as it says — edits of the parsed plan (plan.data), never of its text — written as the plan that
        ran into the case's folder (plans-moved/<name>.yaml: the evidence says what actually ran) and checked as
        any plan file is; the ids moved and the ids changed. Raises PlanError when the result is not valid (a
        trigger names a rule it lacks: the message points at the line of that file)."""
        import yaml

        from harness.plan.load import parse_plan
        from harness.plan.moved import apply_deletes_as, apply_steps_after

        data, moved = apply_steps_after(plan.data, self.steps_after)
        data, changed = apply_deletes_as(data, self.deletes_as)
        if not moved and not changed:
            return plan, [], []
        out = self.dir / "plans-moved" / f"{Path(plan.source).stem}.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
        how = ([f"step(s) {', '.join(moved)} run on other triggers (steps_after)"] if moved else []) + (
            [f"step(s) {', '.join(changed)} deleting otherwise (deletes_as)"] if changed else [])
        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
        out.write_text(f"# {Path(plan.source).name} with {' and '.join(how)} of the perturbation's plan\n" + text)
        return parse_plan(out.read_text(), str(out), self.ns), moved, changed

    def _note_steps(self, plan: Any, moved: list[str]) -> None:
        """Remember the steps of `plan` as its file writes them (loaded_steps, from plan.data: parsed once): their
        triggers untemplated (`${namespace}` kept), a step without `after` as after the step before it; a delete
        step's `delete` spec too (explore's "deleted otherwise" family reads how it deletes)."""
        from harness.plan.actions import step_names

        previous = None
        for st in (plan.data or {}).get("steps") or []:
            if not isinstance(st, dict) or not isinstance(st.get("id"), str):
                continue
            after = st["after"] if "after" in st else ([{"step": previous}] if previous else [])
            kind = next((k for k in step_names() if k in st), "")
            self.loaded_steps[st["id"]] = {"plan": plan.name, "after": after, "moved": st["id"] in moved,
                                           "action": kind, "previous": previous,
                                           **({"delete": st["delete"]} if kind == "delete" else {})}
            previous = st["id"]

    def wait_plan(self, rule_ids: list[str], timeout: float) -> None:
        """Wait (at most `timeout` seconds per rule) until each hold rule let its flow go, however it ended,
        and each plan step (or process fault) finished, ok or not; whether they ended by their triggers and
        succeeded is for the `forced` and `steps_done` assumption checkers to say. In a perturbed run
        (`plan_quiet` set) a wait also ends once the run went quiet: a step whose triggers the perturbation
        blocked would otherwise be waited for `timeout` seconds; `steps_done` still judges it."""
        ends = ("released", "hold_timeout", "failed", "hold_expired", "signal_done")
        for rid in rule_ids:
            def ended(e: dict[str, Any], rid: str = rid) -> bool:
                return e["event"] in ends and e.get("rule") == rid

            what = f"plan rule {rid} to let its flow go"
            try:
                if self.plan_quiet is None:
                    ev = self.proxy.wait_event(ended, timeout, what)
                else:
                    def probe(ended=ended) -> dict[str, Any] | None:
                        e = next((e for e in self.proxy.case_events() if ended(e)), None)
                        if e is not None:
                            return e
                        why = self.plan_quiet()
                        return {"why": f"not ended: {why}", "label": ""} if why else None

                    ev = wait_for(probe, timeout=timeout, interval=0.2, what=what)
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
