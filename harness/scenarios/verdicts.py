"""The verdict of each case and of the run: `_decide` composes the case's checkers the moment its body returns
(pytest_runtest_call), the report hook records verdict, expected verdict and seconds, the evidence bundle is
written, and at the end summary.json, the offline re-check of every bundle and the verdict table.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness.checkers import REGISTRY, Selection, compose
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
        # How the environment's start was spent (seconds; the kind target: engine, images, cluster, install).
        "environment_timings": {k: round(float(v), 2) for k, v in env.started.items()} if env else None,
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
