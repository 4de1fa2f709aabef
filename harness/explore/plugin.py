"""pytest side of explore, and of replaying any plan on a control case (registered by
harness/scenarios/plugin.py).

`--plan FILE` loads FILE into every selected case before its body runs (`pytest
cases/kueue_11480/test_stuck_preemption.py::test_stuck_preemption_control --plan found.yaml` replays what
explore found); `--explore-runs FILE` (written by `kueue-harness explore`) makes one item per perturbation
of a case (`test_x_control[p0042]`), all in one pytest session, so one environment serves them all.

A case under such a plan is a *perturbed run*:

- its step waits (harness/scenarios/setups.py `wait_workload`) pace it instead of judging it: a step ends when
  its condition holds, when the plan holds a request (Kueue acted; the plan delays the effect), or after
  EXPLORE_STEP seconds, and never fails the run (`step_skipped` in the history says which ended how);
  under a plan that restarts Kueue a step also waits for a restart it triggered to finish;
- an invariant monitor watches its ClusterQueues throughout (a transient oversubscription counts);
- after its body, the run waits until the plan holds nothing, then observes until an invariant is
  violated, or liveness decided and SETTLE seconds passed (bounded by LIVENESS_BOUND);
- it is judged by its own checkers plus `plan_happened` (a rule that never acted, a hold that ended by
  its timeout: verdict error, the run is discarded), `watch_caught_up` (Kueue saw every Workload whose
  watch events were dropped as it finally was), `liveness`, `quota` and `log_flood`, and the oracles the
  driver chose for the case from its reference run (harness/explore/oracles.py; the runs file's
  `oracles`, minus its `not_judged`);
- `explore.json` in its evidence folder holds what the driver reads: the verdict, the findings, and the
  proxy's events of the case's namespace (harness/explore/trace.py), and a line is appended to
  <artifacts>/explore-progress.jsonl.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.checkers import REGISTRY, Selection
from harness.checkers.bounds import LIVENESS_BOUND
from harness.common.waiting import WaitTimeout, wait_for
from harness.explore import PROGRESS_FILE, RESULT_FILE

#: Seconds a step of a perturbed case waits at most (the plain bound is 30 s: a step the plan blocks
#: would otherwise cost that much; the reference runs take well under a second per step).
EXPLORE_STEP = 8.0
#: Seconds a perturbed run keeps observing after its body returned and the plan held nothing any more,
#: when no invariant is violated: Kueue reacts to a late write within ~0.1-1 s (a late admission's
#: oversubscription shows within ~100 ms: cases/kueue_11480/plans/quota-oversubscription.yaml).
SETTLE = 2.0
#: Seconds without any proxy event (and no flow held) after which a perturbed run is *quiet*: a plan step
#: it still waits for is not waited for longer (PerturbedRun.quiet). Above Kueue's 1 s status batch period
#: and its first requeue backoffs. Only the case's wait ends: the step may still run while the run settles,
#: and `steps_done` judges whether it did.
PLAN_QUIET = 6.0
#: Seconds a step of a case under a plan that restarts Kueue waits for a restart to begin, and at most for
#: it to finish (a restart takes 0.4-1.4 s: docs/fault-plans.md, "Process faults").
RESTART_GRACE = 0.3
RESTART_WAIT = 60.0
#: The checkers every perturbed run is judged by besides the case's own.
EXPLORE_CHECKERS = ("plan_happened", "watch_caught_up", "liveness", "quota", "log_flood")


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("kueue-harness")
    g.addoption("--plan", dest="kh_plan", default=None, metavar="FILE",
                help="load this fault plan (a file, or a shipped plan's name) into every selected case before "
                     "its body, and judge it as a perturbed run (harness/explore/plugin.py): replays a plan "
                     "`kueue-harness explore` found on the control case it came from")
    g.addoption("--explore-runs", dest="kh_explore_runs", default=None, metavar="FILE",
                help="(written by `kueue-harness explore`) JSON list of {id, case, plan}: one item per plan")
    g.addoption("--explore-stream", dest="kh_explore_stream", default=None, metavar="DIR",
                help="(written by `kueue-harness explore`) take runs one at a time from the driver through DIR: one "
                     "environment for the whole search (harness/explore/stream.py)")
    g.addoption("--oracle", dest="kh_oracles", action="append", default=[], metavar="NAME[=JSON]",
                help="perturbed runs: judge them also by this checker, with these parameters (repeatable), e.g. "
                     "--oracle 'write_count={\"write\": \"eviction\", \"max\": 1}' (docs/checkers.md)")
    g.addoption("--explore-bundles", dest="kh_explore_bundles", choices=("all", "violations"), default="all",
                help="perturbed runs: write the evidence bundle for every run (default) or only for runs that "
                     "violated an invariant (explore's setting: a bundle costs about a second)")


def pytest_configure(config: pytest.Config) -> None:
    """Validate `--oracle`s and `--plan FILE` before any environment starts, as `up --plan` does: a usage
    error with every `file:line:` problem. A bare name that is neither a file nor a shipped plan may be a plan
    next to a case (`<case folder>/plans/<name>.yaml`): it is validated when the cases are collected."""
    from harness.plan.load import PlanError, load_plan, shipped_plans

    parse_oracles(config.getoption("kh_oracles") or [])
    plan = config.getoption("kh_plan")
    if not plan:
        return
    p = Path(plan)
    if not p.exists() and not p.suffix and "/" not in plan and plan not in shipped_plans():
        config._kh_plan_near = True  # type: ignore[attr-defined]
        return
    try:
        load_plan(plan)
    except PlanError as e:
        raise pytest.UsageError(f"--plan {plan}: {e}") from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--plan NAME` that only a case's folder may hold: every selected case must find it there, valid.
    Under `--explore-stream`: the slots of the cases interleaved (slot 1 of each case, then slot 2, ...)."""
    if config.getoption("kh_explore_stream"):
        from harness.explore import stream

        items[:] = stream.interleave(items)
    if not getattr(config, "_kh_plan_near", False):
        return
    from harness.plan.load import PlanError, load_plan

    plan = config.getoption("kh_plan")
    checked: set[Path] = set()
    for item in items:
        folder = Path(str(item.path)).parent
        if "case" not in getattr(item, "fixturenames", ()) or folder in checked:
            continue
        checked.add(folder)
        if not (folder / "plans" / f"{plan}.yaml").is_file():
            raise pytest.UsageError(f"--plan {plan}: no such file, no shipped plan of that name, and no "
                                    f"{folder / 'plans' / (plan + '.yaml')} next to {item.nodeid}; give a plan "
                                    "file or a shipped plan's name (`kueue-harness plan validate` lists problems)")
        try:
            load_plan(plan, near=folder)
        except PlanError as e:
            raise pytest.UsageError(f"--plan {plan}: {e}") from None


def _runs(config: pytest.Config) -> list[dict[str, Any]]:
    cached = getattr(config, "_kh_explore_runs", None)
    if cached is None:
        path = config.getoption("kh_explore_runs")
        try:
            cached = json.loads(Path(path).read_text())["runs"] if path else []
        except (OSError, ValueError, KeyError) as e:
            raise pytest.UsageError(f"--explore-runs {path}: not a runs file of kueue-harness explore ({e})") from None
        config._kh_explore_runs = cached  # type: ignore[attr-defined]
    return cached


def same_case(a: str, b: str) -> bool:
    """Whether two node ids name the same test function, whatever their parameters or root folder
    ("cases/x/test_a.py::test_b" and "/abs/cases/x/test_a.py::test_b[p1]")."""
    def norm(n: str) -> tuple[str, str]:
        path, _, func = n.partition("::")
        return Path(path).name, func.split("[")[0]

    pa, pb = a.partition("::")[0], b.partition("::")[0]
    return norm(a) == norm(b) and (pa.endswith(pb) or pb.endswith(pa) or Path(pa).name == Path(pb).name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    folder = metafunc.config.getoption("kh_explore_stream")
    if folder and "kh_perturbation" in metafunc.fixturenames:
        from harness.explore import stream

        cases = json.loads((Path(folder) / "stream.json").read_text()).get("cases") or []
        if any(same_case(c, metafunc.definition.nodeid) for c in cases):
            ids = stream.slot_ids()
            metafunc.parametrize("kh_perturbation", [{"slot": i} for i in ids], ids=ids, indirect=True)
        return
    if "kh_perturbation" not in metafunc.fixturenames or not metafunc.config.getoption("kh_explore_runs"):
        return
    mine = [r for r in _runs(metafunc.config) if same_case(r["case"], metafunc.definition.nodeid)]
    if mine:
        metafunc.parametrize("kh_perturbation", mine, ids=[r["id"] for r in mine], indirect=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A slot of `--explore-stream`: ask the driver for its run before anything of the case is set up; skip
    the slot (nothing created) when there is none for this case now, and stop the session when told."""
    folder = item.config.getoption("kh_explore_stream")
    param = getattr(getattr(item, "callspec", None), "params", {}).get("kh_perturbation")
    if not folder or not isinstance(param, dict) or "slot" not in param:
        return
    from harness.explore import stream

    worker = Path(getattr(item.config, "_kh_artifacts", "") or "").name  # p01, p02, ...: the driver's name for it
    answer = stream.ask(Path(folder), item.nodeid, param["slot"], worker=worker)
    if "run" in answer:
        item._kh_run = answer["run"]  # type: ignore[attr-defined]
        return
    if "stop" in answer:
        item.session.shouldstop = f"explore: {answer['stop']}"
    item._kh_not_run = True  # type: ignore[attr-defined] - no verdict entry for it (scenarios/verdicts.py)
    pytest.skip(str(answer.get("skip") or answer.get("stop")))


@pytest.fixture(autouse=True)
def kh_perturbation(request: pytest.FixtureRequest):
    """The perturbed run of a case under `--plan`, `--explore-runs` or `--explore-stream` (module docstring);
    None otherwise."""
    run = getattr(request.node, "_kh_run", None) or getattr(request, "param", None) or {}
    plan = run.get("plan") or request.config.getoption("kh_plan")
    if not plan or "case" not in request.fixturenames:
        yield None
        return
    ctx = request.getfixturevalue("case")
    p = PerturbedRun(ctx, str(plan), run, request.config)
    request.node._kh_perturbed = p  # type: ignore[attr-defined]
    p.begin()
    try:
        yield p
    finally:
        p.end(request.node.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """After a perturbed case's body returned (and before the plugin judges it): let the plan finish and
    observe until the checkers can decide."""
    res = yield
    p = getattr(pyfuncitem, "_kh_perturbed", None)
    if p is not None:
        p.settle()
    return res


def explore_selection(declared: dict[str, dict[str, Any]], oracles: dict[str, dict[str, Any]] | None = None,
                      not_judged: list[str] | tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The case's checkers plus EXPLORE_CHECKERS plus the run's `oracles` (harness/explore/oracles.py: chosen
    from the reference run), the case's parameters winning (its liveness jobs stay); minus `not_judged`
    (the progress invariants a write failed every time makes unjudgeable)."""
    out = {k: dict(v or {}) for k, v in declared.items()}
    for name in EXPLORE_CHECKERS:
        out.setdefault(name, {})
    for name, params in (oracles or {}).items():
        out.setdefault(name, dict(params or {}))
    for name in not_judged:
        out.pop(name, None)
    return out


def parse_oracles(values: list[str]) -> dict[str, dict[str, Any]]:
    """`--oracle` values ("NAME" or "NAME=JSON object") as {name: params}; each is built once, so a wrong
    name or parameter is a UsageError naming it. Raises pytest.UsageError."""
    out: dict[str, dict[str, Any]] = {}
    for v in values:
        name, _, raw = v.partition("=")
        try:
            params = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            raise pytest.UsageError(f"--oracle {v}: the parameters after = must be a JSON object ({e})") from None
        if not isinstance(params, dict):
            raise pytest.UsageError(f"--oracle {v}: the parameters after = must be a JSON object, e.g. {{\"max\": 1}}")
        try:
            Selection({name.strip(): params}).build()
        except TypeError as e:
            import inspect

            takes = [p for p in inspect.signature(REGISTRY[name.strip()]).parameters if p not in ("self", "args", "kwargs")]
            raise pytest.UsageError(f"--oracle {v}: {e}; {name.strip()} takes "
                                    f"{', '.join(takes) or 'no parameters'} (docs/checkers.md)") from None
        except (KeyError, ValueError) as e:
            raise pytest.UsageError(f"--oracle {v}: {e}") from None
        out[name.strip()] = params
    return out


class PerturbedRun:
    """One case run under a plan (module docstring). `ctx`: the case's CaseContext; `plan`: its file;
    `run`: the driver's record ({id, case, plan, moves, …}; empty under `--plan`)."""

    def __init__(self, ctx: Any, plan: str, run: dict[str, Any], config: pytest.Config) -> None:
        self.ctx, self.plan_file, self.run, self.config = ctx, plan, run, config
        self.rule_ids: set[str] = set()
        self.timeouts: list[float] = []
        self.monitor: Any = None
        self.started = time.time()
        self.skipped: list[dict[str, Any]] = []
        self.restarts = False
        self.acts = False
        #: The plan's `delay` rules (salvage's replays): `_holding` reads the proxy's events for them only.
        self.delay_ids: set[str] = set()

    # ---- before the body -----------------------------------------------------------------------
    def begin(self) -> None:
        from harness.plan.load import load_plan

        ctx = self.ctx
        plan = load_plan(self.plan_file, namespace=ctx.ns, near=ctx.case_folder)
        self.rule_ids = {r.id for r in plan.rules}
        #: The plan acts (not the observe-only plan of a reference or no-op run): the control's `wait` steps
        #: pace it (steps_done waits_pace) as its case waits do.
        self.acts = bool(plan.steps_after or plan.deletes_as) or any(r.action != "observe" for r in plan.rules)
        self.timeouts = [r.release.timeout for r in plan.rules if r.release is not None and r.release.timeout]
        self.restarts = any(r.action == "restart_kueue" for r in plan.rules)
        self.delay_ids = {r.id for r in plan.rules if r.action == "delay"}
        self.monitor = ctx.monitor(ctx.prefix)  # a context manager (the plugin's own monitor, when it runs one)
        self.monitor.__enter__()
        ctx.record("perturbed_run", run=self.run.get("id", ""), plan=plan.name, file=str(self.plan_file),
                   moves=self.run.get("words", ""))
        if plan.steps_after:  # steps of the case's own plan run on other triggers (CaseContext.load_plan)
            ctx.steps_after = dict(plan.steps_after)
            ctx.record("steps_after_asked", steps=sorted(plan.steps_after))
        if plan.deletes_as:  # delete steps of the case's own plan deleting otherwise (CaseContext.load_plan)
            ctx.deletes_as = dict(plan.deletes_as)
            ctx.record("deletes_as_asked", steps=sorted(plan.deletes_as))
        ctx.load_plan(self.plan_file)
        ctx.perturbed_plan = str(Path(self.plan_file).resolve())
        ctx.step_wait = self.step_wait
        ctx.plan_quiet = self.quiet

    def _holding(self) -> bool:
        """Whether the proxy holds a flow of this run's plan now — held until its triggers, or delayed and
        its delay not over (a `delay` rule: salvage replays a timed-out hold as one, and a case's step must
        be paced by it as by the hold it stands for) — or a process fault of it is under way."""
        st = self.ctx.proxy.state()
        if any(h.get("rule") in self.rule_ids for h in st.get("holds") or []):
            return True
        now = time.time()
        if self.delay_ids and any(e.get("event") == "delayed" and e.get("rule") in self.delay_ids
                                  and now < float(e.get("ts") or 0.0) + float(e.get("seconds") or 0.0)
                                  for e in self.ctx.proxy.case_events()):
            return True
        nem = getattr(self.ctx, "nemesis", None)
        return bool(nem is not None and getattr(nem, "busy", lambda: False)())

    def quiet(self, after: float = PLAN_QUIET) -> str | None:
        """Why this run went quiet — the plan holds no flow and no process fault is under way, and no
        proxy event came for `after` seconds (PLAN_QUIET; CaseContext.observe asks for OBSERVE_QUIET) — or None. A plan step still waiting then waits for
        triggers the perturbation blocked (a held admission that never lets the preemptor in): the case's
        `wait_plan` stops waiting for it (CaseContext.plan_quiet), and `steps_done` judges the run."""
        if self._holding():
            return None
        last = max((float(e.get("ts") or 0.0) for e in self.ctx.proxy.case_events()), default=self.started)
        idle = time.time() - max(last, self.started)
        return f"nothing reached the proxy for {idle:.1f}s and the plan held nothing" if idle >= after else None

    def step_wait(self, read: Callable[[], Any], pred: Callable[[Any], bool], timeout: float, what: str) -> Any:
        """A case's step under the plan: return `read()` once `pred` holds, or once the plan holds a flow,
        or after min(`timeout`, EXPLORE_STEP) seconds; never raises (the skip is recorded)."""
        t0 = time.time()
        last: dict[str, Any] = {}

        def probe() -> str | None:
            obj = read()
            last["obj"] = obj
            if pred(obj):
                return "held"
            return "plan holds a request" if self._holding() else None

        try:
            how = wait_for(probe, timeout=min(timeout, EXPLORE_STEP), interval=0.05, what=what)
        except WaitTimeout:
            how = "timeout"
        if self.restarts:
            self._restart_quiet()
        if how != "held":
            rec = {"what": what, "why": how, "after": round(time.time() - t0, 3)}
            self.skipped.append(rec)
            self.ctx.record("step_skipped", **rec)
        return last.get("obj")

    def _restart_quiet(self) -> None:
        """Under a plan that restarts Kueue: let a restart its last step triggered begin (the Nemesis reads
        the proxy's `signalled` within RESTART_GRACE) and finish, so that the case's next step does not
        meet Kueue's webhooks down (a Job create fails while they are) — as a user would wait and retry."""
        nem = getattr(self.ctx, "nemesis", None)
        if nem is None:
            return
        t0 = time.time()
        try:
            wait_for(lambda: time.time() - t0 >= RESTART_GRACE and not nem.busy(), timeout=RESTART_WAIT,
                     interval=0.05, what="a restart of Kueue the plan triggered to finish")
        except WaitTimeout:
            self.ctx.record("settle_problem", problem=f"a restart of Kueue took more than {RESTART_WAIT:g}s")

    # ---- after the body ------------------------------------------------------------------------
    def settle(self) -> None:
        """Wait (bounded) until the plan holds nothing, then observe until an invariant is violated or
        liveness decided and SETTLE seconds passed; then the run is judged with explore_selection."""
        ctx = self.ctx
        bound = max(self.timeouts, default=0.0) + 5.0
        try:
            wait_for(lambda: not self._holding(), timeout=bound, interval=0.1,
                     what="the plan's holds and process faults to end")
        except WaitTimeout:
            ctx.record("settle_problem", problem=f"the plan still held a flow after {bound:g}s")
        oracles = {**(self.run.get("oracles") or {}), **parse_oracles(self.config.getoption("kh_oracles") or [])}
        sel = explore_selection(ctx.selection.checkers, oracles, self.run.get("not_judged") or ())
        if self.acts:
            sel["steps_done"] = {**sel.get("steps_done", {}), "waits_pace": True}
        ctx.selection = Selection(sel)
        checkers = [c for c in ctx.selection.build() if REGISTRY[c.name].kind == "invariant"]
        t0 = time.time()

        def done() -> bool:
            h = ctx.snapshot()
            objs, names = ctx.objects(), ctx.names(h)
            found = {c.name: c.check(h, objs, names) for c in checkers}
            # A violation ends the settling, unless its checker says it may still clear (`may_clear`: a window
            # younger than its persistence bound, running_pods_within_quota.decided).
            violated = [c for c in checkers if any(f.result == "violated" for f in found[c.name])]
            if violated and all(c.decided(h, objs, names) for c in violated if getattr(c, "may_clear", False)):
                return True
            live = found.get("liveness") or []
            decided = all(f.result in ("held", "violated", "not applicable", "error") for f in live)
            return decided and time.time() - t0 >= SETTLE

        try:
            wait_for(done, timeout=LIVENESS_BOUND + 2.0, interval=0.2, what="the checkers to decide")
        except WaitTimeout:
            pass  # the checkers decide on what was seen

    # ---- after the verdict ---------------------------------------------------------------------
    def end(self, nodeid: str) -> None:
        """Stop the monitor; write explore.json and a progress line (best effort: evidence, not verdict)."""
        if self.monitor is not None:
            self.monitor.__exit__(None, None, None)
        ctx = self.ctx
        judged = getattr(ctx, "judged", None)
        if self.config.getoption("kh_explore_bundles") == "violations" and (
                judged is None or judged.verdict != "reproduced"):
            ctx.write_bundle = False
        try:
            result = self.result(nodeid)
            (ctx.dir / RESULT_FILE).write_text(json.dumps(result, indent=1, default=str))
            art = getattr(self.config, "_kh_artifacts", None)
            if art is not None:
                line = {k: result[k] for k in ("run", "case", "verdict", "reason", "seconds", "evidence")}
                line["assumption_failed"] = any(f["assumption"] and f["result"] in ("violated", "inconclusive")
                                                for f in result["findings"])
                with open(Path(art) / PROGRESS_FILE, "a") as fh:
                    fh.write(json.dumps(line) + "\n")
        except Exception as e:  # noqa: BLE001 - the verdict stands without it; the driver says so
            ctx.record("explore_result_not_written", error=f"{type(e).__name__}: {e}")

    def unrun_steps(self) -> list[str]:
        """The steps of the plans the case loaded (CaseContext.loaded_steps) that never ran: the proxy never
        signalled them before the verdict (their triggers never held: the perturbation may have blocked them)."""
        ran = {e.get("rule") for e in self.ctx.proxy.case_events() if e.get("event") == "signalled"}
        return [sid for sid in self.ctx.loaded_steps if sid not in ran]

    def result(self, nodeid: str) -> dict[str, Any]:
        """What the driver reads (module docstring)."""
        ctx = self.ctx
        verdict = next((e for e in ctx.history.events if e.get("event") == "verdict"), None)
        judged = getattr(ctx, "judged", None)
        until = verdict["ts"] if verdict else time.time()
        keep = ("held", "released", "failed", "hold_timeout", "hold_expired", "signalled", "signal_done", "delayed",
                "reset")
        events = []
        for e in ctx.proxy.case_events():
            if e.get("ts", 0) < ctx.history.started or e.get("ts", 0) > until:
                continue
            ev = e.get("event")
            w = e.get("write") if isinstance(e.get("write"), dict) else None
            if ev == "request" and w and w.get("namespace") == ctx.ns:
                events.append({"ts": e["ts"], "event": ev, "flow": e.get("flow"), "write": {
                    k: w.get(k) for k in ("kind", "namespace", "name", "write", "method", "subresource", "strict",
                                          "suspend", "field_manager")}})
            elif ev == "response" and e.get("namespace") == ctx.ns:
                events.append({k: e.get(k) for k in ("ts", "event", "flow", "status", "resource_version", "write",
                                                     "namespace", "name")})
            elif ev in ("watch_event", "watch_event_dropped", "watch_event_delayed") and e.get("namespace") == ctx.ns:
                events.append({k: e.get(k) for k in ("ts", "event", "type", "namespace", "name", "resource_version",
                                                     "conditions", "admission", "rule")})
            elif ev in keep and e.get("rule") in self.rule_ids:
                events.append({k: e.get(k) for k in ("ts", "event", "rule", "flow", "stage", "status", "why", "ok")})
        jobs = [str(e.get("job", "")).split("/")[-1] for e in ctx.history.events if e.get("event") == "job_created"]
        findings = [{"check": f.check, "result": f.result, "summary": f.summary, "assumption": f.assumption,
                     "evidence": f.evidence[:600]} for f in (judged.findings if judged is not None else [])]
        return {
            "run": self.run.get("id", ""), "case": nodeid, "plan": str(self.plan_file),
            "verdict": verdict.get("verdict") if verdict else "error",
            "reason": verdict.get("reason") if verdict else "no verdict (the case body failed)",
            "findings": findings, "namespace": ctx.ns, "jobs": jobs, "steps_skipped": self.skipped,
            "checkers": sorted(ctx.selection.checkers), "kueue_version": getattr(ctx.env, "kueue_version", None),
            "deleting": any(e.get("source") == "monitor" and e.get("event") == "object_deleting"
                            for e in ctx.history.events),
            "steps": ctx.loaded_steps, "unrun_steps": self.unrun_steps(),
            "seconds": round(time.time() - self.started, 2), "events": events, "evidence": str(ctx.dir),
        }
