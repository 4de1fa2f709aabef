"""Go's race detector as an oracle (issue 36 item 2): a -race build is asked for, cached apart and recorded from the
binary's own build information; its reports are read from Kueue's log into the history (`data_race`), and
`no_data_race` judges them — `error` when the build cannot report races at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.build.go import GoTarget
from harness.build.kueue import KueueSpec
from harness.checkers import REGISTRY
from harness.history.names import Names
from harness.history.record import History
from harness.kueue import log as kueue_log

REPORT = """==================
WARNING: DATA RACE
Write at 0x00c000a1b2c0 by goroutine 412:
  sigs.k8s.io/kueue/pkg/cache/queue.(*stickyWorkload).set()
      sigs.k8s.io/kueue/pkg/cache/queue/cluster_queue.go:87 +0x64
  sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).RequeueIfNotPresent()
      sigs.k8s.io/kueue/pkg/cache/queue/cluster_queue.go:730 +0x1c4

Previous read at 0x00c000a1b2c0 by goroutine 988:
  sigs.k8s.io/kueue/pkg/cache/queue.(*stickyWorkload).matches()
      sigs.k8s.io/kueue/pkg/cache/queue/cluster_queue.go:79 +0x3c

Goroutine 412 (running) created at:
  sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).Start()
==================
"""


def _log(tmp_path: Path, *parts: str) -> Path:
    p = tmp_path / "kueue.log"
    p.write_text("".join(parts))
    return p


def _line(ts: float, msg: str = "x", **kw) -> str:
    return json.dumps({"ts": ts, "msg": msg, **kw}) + "\n"


def test_a_race_report_is_one_line_at_the_time_of_the_log_line_before_it(tmp_path: Path) -> None:
    cut = REPORT.index("\n", 150) + 1  # another goroutine's JSON line between two lines of the report
    lines = list(kueue_log.lines(_log(tmp_path, _line(10.0), REPORT[:cut], _line(10.5, "between"), REPORT[cut:],
                                      _line(11.0))))
    assert [ln.get("msg") for ln in lines] == ["x", "between", kueue_log.DATA_RACE, "x"]
    race = lines[2]
    assert race["ts"] == 10.5 and race["report"].startswith("WARNING: DATA RACE") and "Goroutine 412" in race["report"]
    assert kueue_log.race_accesses(race["report"]) == [
        "Write at 0x00c000a1b2c0 by goroutine 412: sigs.k8s.io/kueue/pkg/cache/queue.(*stickyWorkload).set()",
        "Previous read at 0x00c000a1b2c0 by goroutine 988: sigs.k8s.io/kueue/pkg/cache/queue.(*stickyWorkload).matches()"]


def test_the_live_tail_reads_a_report_split_across_reads(tmp_path: Path) -> None:
    p = _log(tmp_path, _line(5.0))
    tail = kueue_log.Tail(p)
    assert [ln["msg"] for ln in tail.read()] == ["x"]
    with open(p, "a") as fh:
        fh.write(REPORT[:150])
    assert tail.read() == []
    with open(p, "a") as fh:
        fh.write(REPORT[150:])
    (race,) = tail.read()
    assert race["msg"] == kueue_log.DATA_RACE and race["ts"] == 5.0


def test_history_keeps_every_race_since_the_case_started_whatever_it_is_about(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl")
    started = h.started
    lines = list(kueue_log.lines(_log(tmp_path, _line(started - 5), REPORT, _line(started + 1), REPORT)))
    merged = h.merged([], lines, {"ns/w"})
    races = [e for e in merged if e["event"] == "data_race"]
    assert len(races) == 1 and races[0]["ts"] == started + 1 and races[0]["source"] == "kueue"
    assert len(races[0]["accesses"]) == 2


def _judge(history: list[dict]) -> list:
    return REGISTRY["no_data_race"]().check(history, {}, Names(history))


def _started(race: bool) -> dict:
    return {"ts": 1.0, "source": "harness", "event": "case_started", "case": "c", "namespace": "ns",
            **({"kueue_race": True} if race else {})}


def test_no_data_race_says_error_when_the_build_cannot_see_races() -> None:
    (f,) = _judge([_started(False)])
    assert f.result == "error" and "--kueue-race" in f.evidence


def test_no_data_race_holds_on_a_race_build_without_reports_and_is_violated_per_report() -> None:
    assert [f.result for f in _judge([_started(True)])] == ["held"]
    race = {"ts": 2.0, "source": "kueue", "event": "data_race", "report": REPORT,
            "accesses": kueue_log.race_accesses(REPORT)}
    found = _judge([_started(True), race, {**race, "ts": 3.0}])
    assert [f.result for f in found] == ["violated", "violated"]
    assert "(*stickyWorkload).set()" in found[0].summary and "matches()" in found[0].evidence


def test_a_race_build_is_asked_for_cached_apart_and_named_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUEUE_HARNESS_KUEUE_RACE", raising=False)
    spec = KueueSpec.from_options("v0.17.0", race=True)
    assert spec.race and spec.wanted == "v0.17.0 -race" and "--kueue-race" in spec.cli_args()
    assert not KueueSpec.from_options("v0.17.0").race
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_RACE", "1")
    assert KueueSpec.from_options("v0.17.0").race
    t = GoTarget("kueue", "v0.17.0", "", (), None, None, "", "X")
    assert t.key == "kueue-v0.17.0" and GoTarget(*t.__dict__.values())  # frozen and rebuildable
    assert GoTarget("kueue", "v0.17.0", "", (), None, None, "", "X", race=True).key == "kueue-v0.17.0-race"


def test_the_visibility_certificate_is_written_once_and_kept(tmp_path: Path) -> None:
    from harness.env import visibility

    ca = visibility.ensure_certificate(tmp_path / "vis")
    crt = (tmp_path / "vis" / "tls.crt").read_bytes()
    assert ca == tmp_path / "vis" / "ca.crt" and (tmp_path / "vis" / "tls.key").stat().st_mode & 0o077 == 0
    assert visibility.ensure_certificate(tmp_path / "vis") == ca and (tmp_path / "vis" / "tls.crt").read_bytes() == crt
    assert visibility.enabled({"featureGates": {"VisibilityOnDemand": True}})
    assert not visibility.enabled({"featureGates": {"VisibilityOnDemand": False}}) and not visibility.enabled({})
