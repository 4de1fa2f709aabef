"""The verdict of each case and of the run: `_decide` composes the case's checkers the moment its body returns
(pytest_runtest_call), the report hook records verdict, expected verdict and seconds and rewrites summary.json
at once (each verdict is on disk the moment it is decided: a run stopped by SIGTERM, SIGKILL or a full disk
keeps the verdicts decided before), the evidence bundle is written, and at the end summary.json once more,
the offline re-check of every bundle and the verdict table. SIGTERM and SIGHUP stop a run as Ctrl-C does
(pytest's KeyboardInterrupt: the running case's teardown runs); no space left on the device stops it after
the running case, naming the path.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness.checkers import REGISTRY, Selection, compose, progress
from harness.checkers.base import within_case
from harness.common.errors import HarnessError
from harness.kueue import versions
from harness.scenarios.case import AssumptionFailed, CaseContext, InvariantViolation
from harness.scenarios.markers import _EXPECT_KEY, _SPEC_KEY, _VERDICTS_KEY, _bug, _bug_key, _expected


def _write_bundle(request: pytest.FixtureRequest, ctx: CaseContext, env: Any, problems: list[str]) -> None:
    """The case's evidence bundle (harness/report.py): report.md, logs, flows, <case>.tar.gz. Best effort:
    a bundle that cannot be written is a warning and `bundle_error` in summary.json, never a verdict."""
    from harness import report

    entry = request.config.stash[_VERDICTS_KEY].get(request.node.nodeid, {})
    target = request.config.getoption("--target", "local")
    try:
        plan = ["--plan", ctx.perturbed_plan] if ctx.perturbed_plan else []  # the perturbation is the run
        rerun = report.write.rerun_command(request.node.nodeid, [*request.config.stash[_SPEC_KEY].cli_args(), *plan],
                                           target)
    except Exception:  # noqa: BLE001 - evidence is best effort
        rerun = None
    outcome = {**entry, "message": getattr(request.node, "_kh_message", ""), "target": target,
               "checkers": ctx.selection.checkers, "rerun": rerun,
               **({"kueue_view": ctx.kueue_view} if getattr(ctx, "kueue_view", None) else {})}
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
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            _stop_for_space(request.session, e, ctx.dir)


def _kueue_view(ctx: CaseContext, history: list[dict[str, Any]]) -> None:
    """Kueue's own view at a verdict other than `passed` (its scheduler cache and queues, dumped on SIGUSR2, and its
    goroutine stacks: env.kueue_dump): kueue-dump.json and goroutines.txt in the case's folder, and for each
    Workload of the case what the dump says of it (ctx.kueue_view, shown in report.md). Best effort, never a
    verdict: a target without it (a cluster) says so."""
    from harness.kueue import dump as kdump

    if not hasattr(ctx.env, "kueue_dump"):
        ctx.kueue_view = {"problem": f"target {type(ctx.env).__name__} cannot dump Kueue's state"}
        return
    try:
        got = ctx.env.kueue_dump()
    except Exception as e:  # noqa: BLE001 - evidence is best effort
        got = {"problem": f"{type(e).__name__}: {e}"}
    if not got:
        ctx.kueue_view = {"problem": "Kueue was not running"}
        return
    view: dict[str, Any] = {k: got[k] for k in ("problem",) if got.get(k)}
    if got.get("dump"):
        (ctx.dir / "kueue-dump.json").write_text(json.dumps(got["dump"], indent=1, sort_keys=True))
        keys = sorted(ctx.workload_keys | {f"{e.get('namespace')}/{e.get('name')}" for e in history
                                           if e.get("source") == "proxy" and e.get("event") == "watch_event"})
        view["workloads"] = {k: kdump.where(got["dump"], k) for k in keys}
        view["cluster_queues"] = {cq: {x: d.get(x) for x in ("usage", "workloads", "pending", "inadmissible")}
                                  for cq, d in got["dump"]["cluster_queues"].items() if cq.startswith(ctx.prefix)}
    if got.get("goroutines"):
        (ctx.dir / "goroutines.txt").write_text(got["goroutines"])
        view["goroutines"] = got["goroutines"].count("\ngoroutine ") + 1
    ctx.kueue_view = view


def _dump_objects(ctx: CaseContext, objs: dict[str, Any] | None = None) -> None:
    """objects.yaml and managed-fields.yaml: the objects the verdict was judged on (or, for a case that
    reached no verdict, the objects at its end), their managedFields apart (harness/report/write.py)."""
    from harness.report.write import dump_objects

    try:
        objs = objs if objs is not None else ctx.objects(managed_fields=True)
        dump_objects(ctx.dir, objs)
    except Exception as e:  # noqa: BLE001 - evidence is best effort; the verdict is already decided
        (ctx.dir / "objects.yaml").write_text(f"# could not read final objects: {e}\n")


def _decide(item: pytest.Item, ctx: CaseContext, raised: BaseException | None = None) -> None:
    """The case's verdict, by its checkers, as soon as its body returned: record it (the history's
    `verdict` event ends the window the checkers judge), write the judged objects, and raise
    InvariantViolation (reproduced) or AssumptionFailed (error). When the body itself raised an
    InvariantViolation only the assumptions run: a void run must not count as a reproduction."""
    sel = ctx.selection
    if raised is not None:
        sel = Selection({k: v for k, v in sel.checkers.items() if REGISTRY[k].kind == "assumption"})
    # The judged window is the case's: it ends now, whatever each source last said (a quiet pending Workload
    # observed 16 s is judged on 16 s, not on the time of its last event). The objects read next are the read
    # made at that time (base.observed_until: the latest `seen` time, this event's for the harness).
    ctx.record("judging")
    history = ctx.snapshot()
    objs = ctx.objects(managed_fields=True)  # the checkers ignore managedFields; the bundle keeps them
    v = compose(sel, history, objs, ctx.names(history), require_invariant=raised is None)
    ctx.judged = v
    invariants = [n for n in sel.checkers if REGISTRY[n].kind == "invariant"]
    # What the checkers saw, per source: Kueue's log and the proxy's events reach the harness a little late,
    # so the offline re-check judges exactly these events (harness/checkers/base.py within_case).
    seen: dict[str, float] = {}
    for e in history:
        seen[e["source"]] = max(seen.get(e["source"], e["ts"]), e["ts"])
    ctx.record("verdict", invariant=",".join(invariants) or "none", held=v.verdict == "passed", verdict=v.verdict,
               reason=v.reason, kueue=ctx.kueue_state(), seen=seen, pace=progress.pace(within_case(history)).to_json())
    _dump_objects(ctx, objs)
    if v.verdict != "passed":
        _kueue_view(ctx, history)
    detail = "\n".join(f"  {f.check}: {f.result}: {f.evidence}" for f in v.findings
                       if f.result not in ("held", "not applicable") or not f.assumption)
    if v.verdict == "error":
        raise _verdict(AssumptionFailed(f"{v.reason}\n{detail}")) from raised
    if raised is not None:
        return
    if v.verdict == "reproduced":
        raise _verdict(InvariantViolation(f"{v.reason}\n{detail}"))
    if v.verdict == "inconclusive":
        raise _verdict(AssumptionFailed(f"inconclusive: {v.reason}\n{detail}"))


def _verdict(e: Exception) -> Exception:
    """Mark `e` as the checkers' verdict (raised by the harness, not by the case's own code): its report is its
    message, not the plugin's source (pytest_runtest_makereport)."""
    e._kh_verdict = True  # type: ignore[attr-defined]
    return e


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    rep = yield
    if "case" not in getattr(item, "fixturenames", ()) or getattr(item, "_kh_not_run", False):
        return rep  # not a case, or an `explore --explore-stream` slot that had no run (harness/explore/stream.py)
    verdicts = item.config.stash[_VERDICTS_KEY]
    if (rep.skipped and item.nodeid not in verdicts) or getattr(item, "_kh_skipped", False):
        item._kh_skipped = True  # type: ignore[attr-defined]
        return rep  # never run (a race-detector case on a plain build): no verdict, pytest says why it skipped
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
    if call.excinfo is not None and call.excinfo.errisinstance(OSError) and call.excinfo.value.errno == errno.ENOSPC:
        _stop_for_space(item.session, call.excinfo.value, item.config._kh_artifacts)  # type: ignore[attr-defined]
    if rep.when == "call" or rep.failed:
        item.config.stash.get(_STOP_KEY, {}).setdefault("decided", set()).add(item.nodeid)
    if rep.when == "call" and rep.failed and call.excinfo is not None and getattr(call.excinfo.value, "_kh_verdict", False):
        # The verdict's words, not ~20 lines of the plugin's source around the raise (a new user's report).
        rep.longrepr = f"{call.excinfo.typename}: {call.excinfo.value}"
    write_summary(item.session)  # this case's verdict, on disk now
    return rep


#: Signals that stop a run as Ctrl-C does (KeyboardInterrupt), name -> number.
STOP_SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP}
_STOP_KEY = pytest.StashKey[dict]()


def install_stop_signals(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt in pytest's main thread, so a `kill` or a closed terminal
    stops the run as Ctrl-C does: the running case's teardown stops its environment, summary.json and
    junit.xml are written with every verdict decided. Only where the signal still has its default action
    (a session supervisor that runs the cases keeps its own handlers) and only in the main thread."""
    state: dict = {"signal": None, "old": {}, "stopped": None}
    config.stash[_STOP_KEY] = state
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame) -> None:
        state["signal"] = signal.Signals(signum).name
        raise KeyboardInterrupt(f"interrupted by {state['signal']}")

    for name, sig in STOP_SIGNALS.items():
        if signal.getsignal(sig) is signal.SIG_DFL:
            state["old"][sig] = signal.signal(sig, handler)


def restore_stop_signals(config: pytest.Config) -> None:
    for sig, old in config.stash.get(_STOP_KEY, {}).get("old", {}).items():
        signal.signal(sig, old)


def _stop_for_space(session: pytest.Session, e: OSError, where: Path) -> None:
    """No space left on the device: stop the run after the running case (as -x does), naming the path."""
    path = os.fsdecode(e.filename) if e.filename else str(where)
    msg = (f"no space left on the device writing {path}: the run stopped after this case; the verdicts decided "
           f"before are in {session.config._kh_artifacts}/summary.json. Free space there or choose another "  # type: ignore[attr-defined]
           "folder with --artifacts-dir")
    state = session.config.stash.get(_STOP_KEY, None)
    if state is not None and not state.get("stopped"):
        state["stopped"] = msg
    session.shouldstop = msg


def _summary(session: pytest.Session, final: bool) -> dict:
    config = session.config
    verdicts = config.stash.get(_VERDICTS_KEY, {})
    env = getattr(config, "_kh_env", None)
    state = config.stash.get(_STOP_KEY, {})
    return {
        # What ran: the version the Kueue binary reported (its "Initializing" log line), never the flag.
        "kueue_version": env.kueue_version if env is not None else None,
        "kueue_requested": config.option.kueue_version,
        "kueue": env.kueue_build_info() if env is not None and hasattr(env, "kueue_build_info") else None,
        "kubernetes_version": getattr(env, "kubernetes_version", "") or (
            versions.KUBERNETES_VERSION if config.getoption("--target") == "local" else None),
        "target": config.getoption("--target"),
        "environment_ready_seconds": round(env.started.get("ready_seconds", 0), 2) if env else None,
        # How the environment's start was spent (seconds; the kind target: engine, images, cluster, install).
        "environment_timings": {k: round(float(v), 2) for k, v in env.started.items()} if env else None,
        # kube-scheduler's and kwok's versions when a case asked for Pods that run (harness/env/pods.py).
        "pods": env.pods_info() if env is not None and hasattr(env, "pods_info") else None,
        # False while the run goes on (or when it was killed): the cases below are the ones decided so far.
        "complete": final or bool(state.get("final")),
        "interrupted": state.get("signal") or ("SIGINT" if final and state.get("keyboard") else None),
        "stopped": state.get("stopped"),
        # While the run goes on, only the cases whose verdict is decided (a case being run is not in yet).
        "cases": [v for k, v in verdicts.items() if final or k in state.get("decided", ())],
    }


def write_summary(session: pytest.Session, final: bool = False) -> Path | None:
    """Write <artifacts>/summary.json atomically (a temporary file renamed over it: a kill or a full disk
    never leaves half a file, the last good one stays); returns its path, or None when it could not be
    written (said once as a warning, with the path and the reason; no space stops the run)."""
    if not session.config.stash.get(_VERDICTS_KEY, {}):
        return None
    art: Path = session.config._kh_artifacts  # type: ignore[attr-defined]
    path = art / "summary.json"
    tmp = art / f".summary.json.tmp-{os.getpid()}"
    try:
        art.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(_summary(session, final), indent=2))
        os.replace(tmp, path)
        if final:
            session.config.stash.setdefault(_STOP_KEY, {})["final"] = True
        return path
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno == errno.ENOSPC:
            _stop_for_space(session, OSError(e.errno, e.strerror, str(path)), art)
        state = session.config.stash.get(_STOP_KEY, {})
        if not state.get("warned"):
            state["warned"] = True
            warnings.warn(f"kueue-harness: could not write {path}: {e.strerror or e}")
        return None


def pytest_unconfigure(config: pytest.Config) -> None:
    restore_stop_signals(config)


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of what is left (an interrupted case's bundle)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    verdicts = session.config.stash.get(_VERDICTS_KEY, {})
    if not verdicts:
        return
    art: Path = session.config._kh_artifacts  # type: ignore[attr-defined]
    state = session.config.stash.get(_STOP_KEY, {})
    if exitstatus == pytest.ExitCode.INTERRUPTED and not state.get("signal") and not state.get("stopped"):
        state["keyboard"] = True
    why = (f"interrupted by {state['signal']}" if state.get("signal") else
           "stopped: no space left on the device" if state.get("stopped") else
           "interrupted (Ctrl-C)" if exitstatus == pytest.ExitCode.INTERRUPTED else "")
    for v in verdicts.values():
        if v["verdict"] == "error" and not v["detail"]:
            v["detail"] = f"did not finish: {why}" if why else "did not finish"
    if session.config.getoption("--recheck-bundles"):
        try:
            art.mkdir(parents=True, exist_ok=True)
            _recheck_bundles(session, verdicts.values(), art)
        except OSError as e:
            warnings.warn(f"kueue-harness: the offline re-check could not write under {art}: {e.strerror or e}")
    write_summary(session, final=True)


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
                departs = [n for n in r.notes if "departs from docs/history.md" in n]
                if departs:  # the harness's own writers and docs/history.md disagree (tests/unit/test_history_schema.py)
                    v["recheck_notes"] = departs
                    warnings.warn(f"kueue-harness: {v['case']}: {'; '.join(departs)}")
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
