"""A session bundle's verdict composes the assumptions a case's does (a tester's report: `kueue-harness bundle`
said "passed (every invariant held)" after a create step was answered 422, after a wait step timed out, and
after Kueue was SIGKILLed while `status` showed "kueue pid … EXITED"): steps_done over the session's plan
steps, and kueue_not_restarted_unasked from Kueue's state the bundle records (the pid in processes.json, the
"Initializing" lines of kueue.log, the session's own restart process faults since its Nemesis took over).
A stand-in session as in test_session_bundle.py: its record, proxy events, Kueue log; the objects handed in.
The re-check (`kueue-harness report`) agrees each time."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.cli import bundle as from_session
from harness.cli import commands as cli
from harness.common.procs import proc_start_time
from tests.unit.test_report import CQ, NS, T0, WL1, workload

STEP = {"id": "bad-wl", "action": "create", "create": [{"kind": "Workload", "metadata": {"name": "bad-wl"}}]}
WAIT = {"id": "never", "action": "wait", "wait": {"log": "xyzzy"}, "timeout": 3}
RESTART = {"id": "restart", "action": "restart_kueue", "kill": True}


def _ev(dt: float, event: str, **f) -> dict:
    return {"ts": T0 + dt, "source": "proxy", "event": event, **f}


def _zap(dt: float, msg: str, **f) -> str:
    stamp = datetime.fromtimestamp(T0 + dt, timezone.utc).isoformat().replace("+00:00", "Z")
    return json.dumps({"level": "info", "ts": stamp, "msg": msg, **f}) + "\n"


#: A quiet session: job1's Workload got quota; nothing else (every invariant holds).
ADMITTED = [
    _ev(0.5, "watch_event", flow=3, type="MODIFIED", namespace=NS, name=WL1, resource_version="12",
        conditions={"QuotaReserved": "True", "Admitted": "True"}, admission=True),
]


def _dead_pid() -> tuple[int, int | None]:
    p = subprocess.Popen(["sleep", "30"])
    start = proc_start_time(p.pid)
    p.kill()
    p.wait()
    return p.pid, start


def _session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, events: list[dict], starts: int = 1,
             kueue: tuple[int, int | None] | None = None, baseline: dict | None = None) -> dict:
    """Session "s1" with `events` in its proxy-events.jsonl, `starts` Kueue starts in its kueue.log, and Kueue's
    process record `kueue` (pid, start; default: this process, which runs). Returns the objects to judge."""
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    art, state = tmp_path / "art", tmp_path / "state"
    (art / "env").mkdir(parents=True)
    state.mkdir()
    (art / "env" / "proxy-events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (art / "env" / "kueue.log").write_text("".join(_zap(-1 + 2 * i, "Initializing", gitVersion="v0.17.0")
                                                   for i in range(starts)))
    (art / "env" / "flows.mitm").write_bytes(b"")
    pid, start = kueue or (os.getpid(), proc_start_time(os.getpid()))
    (state / "processes.json").write_text(json.dumps({"owner": {"pid": os.getpid()}, "procs": [
        {"name": "kube-apiserver", "pid": os.getpid(), "pgid": os.getpid(), "start": proc_start_time(os.getpid())},
        {"name": "kueue", "pid": pid, "pgid": pid, "start": start}]}))
    d = tmp_path / "cache" / "sessions" / "s1"
    d.mkdir(parents=True)
    (d / "session.json").write_text(json.dumps({
        "name": "s1", "phase": "running", "supervisor": {"pid": os.getpid(), "start": proc_start_time(os.getpid())},
        "kueue_version": "v0.17.0", "artifacts": str(art), "state": str(state), "kueue_log": str(art / "env" / "kueue.log"),
        "admin_kubeconfig": str(state / "admin.kubeconfig"), "started": "2026-11-30T12:00:00",
        "kueue_baseline": baseline or {"starts": 1, "since": T0}}))
    return {"workloads": [workload(WL1, True)], "jobs": [], "clusterqueues": [CQ]}


def _bundle(tmp_path: Path, objs: dict, capsys: pytest.CaptureFixture, out: str = "b") -> from_session.SessionBundle:
    b = from_session.bundle_session("s1", namespace=NS, out=tmp_path / out, objects=objs)
    # The offline re-check composes the same checkers over the same history: it agrees.
    assert cli.main(["report", str(b.archive), "--out", str(tmp_path / f"{out}-re")]) == 0
    assert f"verdict: {b.verdict} (recorded at run time: {b.verdict}) — agrees" in capsys.readouterr().out
    return b


def test_a_quiet_session_passes_with_kueue_running(tmp_path, monkeypatch, capsys) -> None:
    b = _bundle(tmp_path, _session(tmp_path, monkeypatch, ADMITTED), capsys)
    assert b.verdict == "passed", b.reason
    meta = json.loads((b.folder / "bundle.json").read_text())
    assert meta["checkers"]["steps_done"] == {} and meta["checkers"]["kueue_not_restarted_unasked"] == {"scope": "session"}
    assert "Kueue (pid" in (b.folder / "report.md").read_text()  # kept running, with its pid


def test_a_step_kube_apiserver_refused_makes_the_session_verdict_error(tmp_path, monkeypatch, capsys) -> None:
    # /work/breaker/bad/live_422.yaml: a create step with count -1, answered 422 by kube-apiserver.
    events = ADMITTED + [
        _ev(1.0, "rule_added", rule=STEP, plan="live-422", load=1),
        _ev(1.01, "signalled", rule="bad-wl", action="create", why="loaded"),
        _ev(1.05, "signal_done", rule="bad-wl", action="create", ok=False, since_signalled=0.04,
            error="StepError: create Workload case-1/bad-wl: kube-apiserver answered 422 Invalid: "
                  "spec.podSets[0].count: Invalid value: -1"),
    ]
    b = _bundle(tmp_path, _session(tmp_path, monkeypatch, events), capsys)
    assert b.verdict == "error", b.reason
    assert "1 plan step(s) did not run to success" in b.reason, b.reason
    md = (b.folder / "report.md").read_text()
    assert "step bad-wl (create) failed: StepError: create Workload" in md and "422 Invalid" in md, md


def test_a_wait_step_that_timed_out_or_still_runs_makes_it_error(tmp_path, monkeypatch, capsys) -> None:
    events = ADMITTED + [
        _ev(1.0, "rule_added", rule=WAIT, plan="live-wait-timeout", load=1),
        _ev(1.01, "signalled", rule="never", action="wait", why="loaded"),
        _ev(4.02, "signal_done", rule="never", action="wait", ok=False, since_signalled=3.01,
            error="TimeoutError: not seen within 3 s"),
    ]
    b = _bundle(tmp_path, _session(tmp_path, monkeypatch, events), capsys)
    assert b.verdict == "error" and "plan step" in b.reason, b.reason
    # Still waiting when the bundle is made: the verdict at that time cannot stand either.
    b = _bundle(tmp_path, _session(tmp_path / "2", monkeypatch, events[:-1]), capsys, out="b2")
    assert b.verdict == "error", b.reason
    assert "step never was still running when the case was judged" in (b.folder / "report.md").read_text()


def test_kueue_killed_during_the_session_makes_it_error(tmp_path, monkeypatch, capsys) -> None:
    pid, start = _dead_pid()
    b = _bundle(tmp_path, _session(tmp_path, monkeypatch, ADMITTED, kueue=(pid, start)), capsys)
    assert b.verdict == "error" and b.reason == "kueue_not_restarted_unasked: Kueue exited during the session", b.reason
    md = (b.folder / "report.md").read_text()
    assert f"Kueue (pid {pid}) was not running when the session was judged" in md, md


def test_a_restart_the_session_did_not_ask_for_makes_it_error_one_it_asked_for_does_not(
        tmp_path, monkeypatch, capsys) -> None:
    b = _bundle(tmp_path, _session(tmp_path, monkeypatch, ADMITTED, starts=2), capsys)
    assert b.verdict == "error" and "restarted during the session without the session asking" in b.reason, b.reason
    # The session's own process fault (a plan's restart_kueue, done by its Nemesis) explains the second start.
    asked = ADMITTED + [_ev(1.0, "rule_added", rule=RESTART, plan="p", load=1),
                        _ev(1.01, "signalled", rule="restart", action="restart_kueue", why="loaded", kill=True),
                        _ev(2.5, "signal_done", rule="restart", action="restart_kueue", ok=True, since_signalled=1.49,
                            kill=True, seconds=1.49)]
    b = _bundle(tmp_path, _session(tmp_path / "2", monkeypatch, asked, starts=2), capsys, out="b2")
    assert b.verdict == "passed", b.reason
    # A restart before the session's Nemesis took over (a case of `run --keep-env`) is in its baseline.
    b = _bundle(tmp_path, _session(tmp_path / "3", monkeypatch, ADMITTED, starts=2,
                                   baseline={"starts": 2, "since": T0 + 0.2}), capsys, out="b3")
    assert b.verdict == "passed", b.reason
