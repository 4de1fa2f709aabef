"""The session commands that make holds and rules visible (issue 16, items 2 and 5), through the real CLI
against the real proxy parts (tests/unit/live_proxy.py): `holds` with each hold's age and time left, the
rules' hits and warnings, and the holds that expired; `release` of an expired hold; `status`; `holds
--watch`; `wait`. The session log's lines come from harness/proxy/notices.py (tested here on an event file)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import commands as cli
from harness.common.waiting import wait_for
from harness.plan.load import parse_plan
from harness.proxy.addons.state import EndedHold
from harness.proxy.notices import EventFollower, notice
from tests.childproc import default_signals
from tests.unit.addon_flows import ADMISSION, NS, WL1, WL2, status_patch
from tests.unit.live_proxy import LiveProxy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(cache))
    monkeypatch.delenv("KUEUE_HARNESS_SESSION", raising=False)
    p = LiveProxy(cache, tmp_path)
    yield p
    p.close()


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _rule(live: LiveProxy, **rule) -> None:
    code, payload = live.handle("POST", "/rules", rule)
    assert code == 201, payload


def test_holds_shows_age_and_time_left_rules_hits_and_warnings(live: LiveProxy, capsys) -> None:
    _rule(live, id="adm-job1", match={"write": "admission", "name": "job-job1-*"}, max_hold=300)
    _rule(live, id="adm-typo", match={"write": "admission", "name": "job2"}, action="observe")
    _rule(live, id="adm-job3", match={"write": "admission", "name": "job-job3-*"}, action="observe")
    live.request(status_patch(WL1, ADMISSION))
    (hid,) = live.wait_held()
    live.request(status_patch(WL2, ADMISSION)).result(5)  # job2, misnamed in adm-typo: a warning
    code, out, _ = _cli(capsys, "holds")
    assert code == 0
    lines = out.splitlines()
    assert re.match(r"id\s+age s\s+expires in s\s+stage\s+rule\s+what", lines[0]), out
    m = re.match(rf"{hid}\s+(\d+\.\d)\s+(\d+\.\d)\s+request\s+adm-job1\s+admission {NS}/{WL1}", lines[1])
    assert m, out
    assert 299 <= float(m.group(1)) + float(m.group(2)) <= 300.1
    assert re.search(r"adm-job1\s+hold\s+1 of 1", out) and re.search(r"adm-typo\s+observe\s+0 of 1", out), out
    assert (f"WARNING: rule adm-typo has matched nothing, but admission {NS}/{WL2}" in out
            and "match.name 'job-job2-*'" in out), out
    # job3's rule has only seen other Workloads: a note, no warning.
    assert "adm-job3" in out and f"  note: nothing matched yet; admission {NS}/{WL1}" in out, out
    assert out.count("WARNING") == 1, out
    st = json.loads(_cli(capsys, "holds", "--json")[1])
    assert st[0]["id"] == hid and st[0]["max_hold"] == 300 and 0 < st[0]["expires_in"] <= 300


def test_an_expired_hold_is_shown_and_release_of_it_says_when_it_expired(live: LiveProxy, capsys) -> None:
    _rule(live, id="short", match={"write": "admission"}, max_hold=0.2)
    live.request(status_patch(WL1, ADMISSION)).result(5)  # held, then released by max_hold
    (ev,) = [e for e in live.addon.log.events if e["event"] == "hold_expired"]
    hid = ev["hold"]
    code, out, _ = _cli(capsys, "holds")
    assert code == 0 and out.startswith("nothing is held"), out
    assert "EXPIRED holds" in out and re.search(rf"{hid}\s+rule short, admission {NS}/{WL1}.*: expired at "
                                                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d \(\d+ s ago\) after 0.2 s", out), out
    code, out, err = _cli(capsys, "release", hid)
    assert code == 7, (out, err)  # docs/troubleshooting.md: a refused proxy command
    assert f"hold {hid} expired at " in err and "max_hold of 0.2 s" in err and "kueue-harness holds" in err, err
    assert _cli(capsys, "fail", hid)[0] == 7
    code, out, _ = _cli(capsys, "status")
    assert "EXPIRED holds" in out and f"{hid}" in out and "rule short" in out, out


def test_wait_until_a_rule_was_held_then_released(live: LiveProxy, capsys) -> None:
    _rule(live, id="adm", match={"write": "admission"})
    code, out, err = _cli(capsys, "wait", "adm", "--timeout", "0.5")
    assert code == 1, (out, err)
    assert "timed out after 0.5s waiting for rule adm to be held (it has 0 hit(s))" in err, err
    live.request(status_patch(WL1, ADMISSION))
    code, out, _ = _cli(capsys, "wait", "adm", "--state", "held", "--timeout", "5")
    assert code == 0 and out.startswith("rule adm: held"), out
    (hid,) = live.wait_held()
    assert _cli(capsys, "wait", "adm", "--state", "released", "--timeout", "0.3")[0] == 1
    live.handle("POST", f"/holds/{hid}/release", {})
    assert _cli(capsys, "wait", "adm", "--state", "released", "--timeout", "5")[0] == 0


def test_wait_refusals_and_the_near_miss_in_the_timeout(live: LiveProxy, capsys) -> None:
    _rule(live, id="obs", match={"write": "admission", "name": "job1"}, action="observe")
    code, _, err = _cli(capsys, "wait", "nope")
    assert code == 7 and "no rule nope is loaded; loaded: obs" in err, err
    code, _, err = _cli(capsys, "wait", "obs", "--state", "held")
    assert code == 7 and "never reaches state held" in err, err
    code, _, err = _cli(capsys, "wait", "obs", "--timeout", "0")
    assert code == 2 and "--timeout must be seconds above 0" in err
    live.request(status_patch(WL1, ADMISSION)).result(5)
    code, _, err = _cli(capsys, "wait", "obs", "--state", "answered", "--timeout", "0.3")
    assert code == 1 and "rule obs has matched nothing, but admission" in err and "job-job1-*" in err, err


def test_wait_on_a_failed_step_exits_1_and_says_it_failed(live: LiveProxy, capsys) -> None:
    # A step with no `after` fires when loaded; the harness reports it failed (as the Nemesis does when
    # kube-apiserver answers 422): `released` was reached, but what the script waits for did not happen.
    for sid in ("bad", "good"):
        plan = parse_plan(f"apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: {sid}\nsteps:\n"
                          f"  - {{id: {sid}, create: {{builder: local_queue, args: {{name: lq, cluster_queue: cq}}}}}}\n",
                          f"{sid}.yaml", namespace="team-a")
        code, payload = live.handle("POST", "/plan", plan.to_wire())
        assert code in (200, 201), payload
    live.handle("POST", "/signals/bad/done", {"ok": False, "error": "StepError: create LocalQueue team-a/lq: "
                                                                     "kube-apiserver answered 422 Invalid"})
    code, out, err = _cli(capsys, "wait", "bad", "--state", "released", "--timeout", "5")
    assert code == 1 and out == "", (out, err)
    assert "rule bad: released after" in err and "but it FAILED: StepError: create LocalQueue team-a/lq: " \
        "kube-apiserver answered 422 Invalid" in err and "kueue-harness holds" in err, err
    # A step that succeeded is a plain 0.
    live.handle("POST", "/signals/good/done", {"ok": True, "seconds": 0.01})
    code, out, _ = _cli(capsys, "wait", "good", "--state", "released", "--timeout", "5")
    assert code == 0 and out.startswith("rule good: released"), out


@pytest.mark.parametrize("status", ["999", "99", "600", "-1"])
def test_wait_refuses_a_status_that_is_no_http_status(live: LiveProxy, capsys, status: str) -> None:
    _rule(live, id="adm", match={"write": "admission"})
    code, _, err = _cli(capsys, "wait", "adm", "--state", "answered", f"--status={status}")
    assert code == 2 and f"--status must be an HTTP status code, 100 to 599, got {status}" in err, err
    assert _cli(capsys, "wait", "adm", "--state", "answered", "--status", "599", "--timeout", "0.2")[0] == 1


def test_holds_watch_refreshes_until_ctrl_c(live: LiveProxy, tmp_path: Path) -> None:
    env = {**os.environ, "KUEUE_HARNESS_CACHE": str(tmp_path / "cache")}
    env.pop("KUEUE_HARNESS_SESSION", None)
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "holds", "--watch", "--interval", "0.2"], cwd=ROOT,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        seen: list[str] = []

        def refreshed_twice() -> bool:
            seen.append(p.stdout.readline())
            return sum("every 0.2 s (Ctrl-C stops)" in line for line in seen) >= 2

        wait_for(refreshed_twice, timeout=20, what="two refreshes of holds --watch")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        assert p.returncode == 0, err
        assert "nothing is held" in "".join(seen)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    bad = subprocess.run([sys.executable, "-m", "harness.cli", "holds", "--watch", "--interval", "0.01"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--interval must be 0.2 to 60 seconds" in bad.stderr


def test_the_session_log_says_when_a_hold_expired_or_a_rule_missed(tmp_path: Path) -> None:
    from harness.proxy.addons.state import EventLog

    path = tmp_path / "proxy-events.jsonl"
    log = EventLog()
    log.open(str(path))
    log.write("request", flow=1)
    follower = EventFollower(path)  # from the end: what came before is not news
    log.write("hold_expired", flow=2, hold="h1", rule="adm", label="admission demo/job-job1-62dce (x)", max_hold=8.0,
              since=1.0)
    log.write("rule_unmatched", rule="adm2", label="admission demo/job-job2-aed91 (x)", seen={"name": "job-job2-aed91"},
              want={"name": "job2"}, hint="match.name 'job-job2-*'")
    log.write("released", flow=2)
    lines = [notice(e) for e in follower.read()]
    assert lines[0].startswith("[kueue-harness] hold h1 EXPIRED: rule adm held admission demo/job-job1-62dce (x) for "
                               "its max_hold of 8 s, and the proxy released it at ")
    assert lines[1] == ("[kueue-harness] warning: rule adm2 has matched nothing, but admission demo/job-job2-aed91 (x) "
                        "came by: match.name 'job-job2-*'")
    assert lines[2] is None and follower.read() == []
    log.close()


def test_an_ended_hold_sentence_names_its_end() -> None:
    e = EndedHold("h3", "r", "request", 1, "admission a/b", 0.0, 100.0, "released", "kueue-harness release", 600)
    assert e.sentence().startswith("hold h3 was released at ") and "kueue-harness release" in e.sentence()
