"""`kueue-harness bundle` on a stand-in session: a session record whose supervisor is this process, the
session's proxy events, Kueue log and flow file as a stuck preemption leaves them, and the final objects
handed in (no cluster). The bundle has every file a case bundle has, judges the stuck preemption as
reproduced, `kueue-harness report` agrees, and no token of the session is in it. The real session:
tests/integration/test_session_bundle.py."""

from __future__ import annotations

import json
import os
import re
import tarfile
from datetime import datetime, timezone

import pytest

from harness.cli import bundle as from_session
from harness.cli import commands as cli
from harness.common.errors import HarnessError
from harness.common.procs import proc_start_time
from harness.common.waiting import wait_for
from tests.unit.test_report import CQ, NS, WL1, WL2, stuck_history, workload
from tests.unit.test_report_race import TOKEN, _owner, _session_flows

ADMIN = "adm1n-t0ken-abcdefghijklmnop"


def _zap(e: dict) -> str:
    stamp = datetime.fromtimestamp(e["ts"], timezone.utc).isoformat().replace("+00:00", "Z")
    return json.dumps({"level": "info", "ts": stamp, "msg": e["msg"], **e["fields"]}) + "\n"


@pytest.fixture
def fake_session(tmp_path, monkeypatch):
    """Session "s1": its record, artifacts/env (proxy events, kueue.log, flows.mitm) and state (tokens)."""
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    art, state = tmp_path / "art", tmp_path / "state"
    (art / "env").mkdir(parents=True)
    state.mkdir()
    (state / "tokens.csv").write_text(f'{ADMIN},kueue-harness-admin,1,"system:masters"\n')
    (state / "control.token").write_text(TOKEN)
    h = stuck_history()
    (art / "env" / "proxy-events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in h if e["source"] == "proxy") + '{"ts": 1, "event": "half wr')
    (art / "env" / "kueue.log").write_text("".join(_zap(e) for e in h if e["source"] == "kueue"))
    _session_flows(art / "env" / "flows.mitm")
    d = tmp_path / "cache" / "sessions" / "s1"
    d.mkdir(parents=True)
    (d / "session.json").write_text(json.dumps({
        "name": "s1", "phase": "running", "supervisor": {"pid": os.getpid(), "start": proc_start_time(os.getpid())},
        "kueue_version": "v0.17.0", "artifacts": str(art), "state": str(state), "kueue_log": str(art / "env" / "kueue.log"),
        "admin_kubeconfig": str(state / "admin.kubeconfig"), "started": "2026-11-30T12:00:00"}))
    wl1 = workload(WL1, True)
    wl1["metadata"]["managedFields"] = [_owner("QuotaReserved", "Admitted")]
    return {"workloads": [wl1, workload(WL2, False)], "jobs": [], "clusterqueues": [CQ]}


def test_a_session_bundle_is_a_full_bundle_that_report_rechecks(tmp_path, fake_session, capsys):
    b = from_session.bundle_session("s1", out=tmp_path / "out" / "demo", objects=fake_session)
    assert b.namespace == NS and b.verdict == "reproduced", b.reason
    names = {p.name for p in b.folder.iterdir()}
    assert {"report.md", "history.jsonl", "objects.yaml", "managed-fields.yaml", "kueue.log", "kueue-excerpt.log",
            "flows.mitm", "flows.har", "writes.json", "timeline.mmd", "bundle.json"} <= names, names
    assert "managedFields" not in (b.folder / "objects.yaml").read_text()
    meta = json.loads((b.folder / "bundle.json").read_text())
    assert meta["checkers"] == from_session.SESSION_CHECKERS and meta["session"]["name"] == "s1"
    # The plan the session loaded (its rule_added events; recorded before plan_source: named as shipped).
    assert meta["rerun"] == "kueue-harness up --name s1 --kueue-version v0.17.0 && kueue-harness plan load --name s1 " \
                            "stuck-preemption"
    md = (b.folder / "report.md").read_text()
    assert "## The writes that decided the verdict" in md and "log ×" in md
    with tarfile.open(b.archive) as tf:
        blob = b"".join(tf.extractfile(m).read() for m in tf.getmembers() if m.isfile())
    assert TOKEN.encode() not in blob and ADMIN.encode() not in blob
    assert cli.main(["report", str(b.archive), "--out", str(tmp_path / "re")]) == 0
    assert "verdict: reproduced (recorded at run time: reproduced) — agrees" in capsys.readouterr().out


def test_bundle_cli_needs_a_namespace_when_there_are_several(tmp_path, fake_session, capsys, monkeypatch):
    other = workload("job-x-ccccc", False)
    other["metadata"]["namespace"] = "elsewhere"
    fake_session["workloads"].append(other)
    with pytest.raises(HarnessError, match="several namespaces"):
        from_session.bundle_session("s1", out=tmp_path / "o", objects=fake_session)
    monkeypatch.setattr(from_session, "_Objects", lambda kubeconfig: _Stub(fake_session))
    assert cli.main(["bundle", "--name", "s1", "--namespace", NS, "--out", str(tmp_path / "o2")]) == 0
    out = capsys.readouterr().out
    assert f"namespace {NS}" in out and "kueue-harness report" in out
    assert cli.main(["bundle", "--name", "s1", "--namespace", NS, "--out", str(tmp_path / "o2")]) == 2
    assert "already exists" in capsys.readouterr().err


class _Stub:
    def __init__(self, objs):
        self.objs = objs

    def cluster_wide(self):
        return {"workloads": self.objs["workloads"], "clusterqueues": self.objs["clusterqueues"]}

    def jobs(self, namespace):
        return []


def test_bundle_says_what_it_does_meanwhile(tmp_path, fake_session):
    """Issue 24 item 9: `bundle` of a long session took about a minute in silence; it now says each step, and
    how long it took (and "still …" every 20 s while one lasts)."""
    lines: list[str] = []
    from_session.bundle_session("s1", out=tmp_path / "out" / "demo", objects=fake_session, say=lines.append)
    steps = [line for line in lines if line.endswith(" …")]
    assert [s.split(" ")[1] for s in steps] == ["reading", "reading", "judging", "cutting"], lines
    assert all(re.search(r": \d+\.\d s$", line) for line in lines if not line.endswith(" …")), lines
    assert len(lines) == 2 * len(steps)


def test_a_long_step_says_still(tmp_path):
    lines: list[str] = []
    with from_session._step(lines.append, "cutting flows", interval=0.05):
        wait_for(lambda: any(line.startswith("bundle: still cutting flows (") for line in lines), timeout=10,
                 what="a 'still' line")
    assert lines[0] == "bundle: cutting flows …" and lines[-1].startswith("bundle: cutting flows: ")
