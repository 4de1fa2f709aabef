"""Unit tests for harness.history.History: immediate flush of own events, and the time-ordered merge of
proxy events and Kueue log milestones in finalize()."""

from __future__ import annotations

import json
import types
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.history import record as history_mod
from harness.history.record import History
from harness.kueue import log as kueue_log

T0 = 1_750_000_000.0  # the fake clock's start; History.started


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock(T0)
    # Only harness.history's view of `time` is replaced; the real module stays intact.
    monkeypatch.setattr(history_mod, "time", types.SimpleNamespace(time=c.time))
    return c


def _rfc3339(t: float) -> str:
    whole = int(t)
    frac = round((t - whole) * 1e9)
    return datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def test_record_flushes_immediately(tmp_path: Path) -> None:
    h = History(tmp_path / "case" / "history.jsonl")
    try:
        own = tmp_path / "case" / "harness-events.jsonl"
        ev = h.record("create", kind="Job", name="a")
        got = _jsonl(own)  # read before finalize, while the file is still open
        assert got == [json.loads(json.dumps(ev))]
        assert got[0]["event"] == "create" and got[0]["source"] == "harness"
        assert got[0]["kind"] == "Job" and isinstance(got[0]["ts"], float)
        h.record("invariant", source="monitor", detail={"cq": "cq1"})
        got = _jsonl(own)
        assert [e["event"] for e in got] == ["create", "invariant"]
        assert got[1]["source"] == "monitor" and got[1]["detail"] == {"cq": "cq1"}
        assert not (tmp_path / "case" / "history.jsonl").exists()
    finally:
        h.finalize([], None, set())


def test_record_serializes_unjsonable_values(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl")
    try:
        h.record("step", path=tmp_path)
        assert _jsonl(tmp_path / "harness-events.jsonl")[0]["path"] == str(tmp_path)
    finally:
        h.finalize([], None, set())


def test_record_appends_to_existing_own_file(tmp_path: Path) -> None:
    (tmp_path / "harness-events.jsonl").write_text(json.dumps({"ts": 1.0, "event": "earlier"}) + "\n")
    h = History(tmp_path / "history.jsonl")
    h.record("now")
    h.finalize([], None, set())
    assert [e["event"] for e in _jsonl(tmp_path / "harness-events.jsonl")] == ["earlier", "now"]


def test_finalize_merges_filters_and_orders(tmp_path: Path, clock: FakeClock) -> None:
    keys = {"ns/high", "ns/low"}
    h = History(tmp_path / "history.jsonl")
    assert h.started == T0
    clock.now = T0 + 1.0
    h.record("create_job", name="high")
    clock.now = T0 + 5.0
    h.record("check")

    proxy = [
        {"ts": T0 - 1.0, "source": "proxy", "event": "request", "namespace": "ns", "name": "high"},  # too early
        {"ts": T0 + 0.5, "source": "proxy", "event": "request", "namespace": "ns", "name": "high", "id": "p1"},
        {"ts": T0 + 2.0, "source": "proxy", "event": "held", "namespace": "ns", "name": "unrelated", "id": "p2"},
        {"ts": T0 + 3.0, "source": "proxy", "event": "response", "namespace": "kueue-system", "name": "x",
         "write": {"namespace": "ns", "name": "low"}, "id": "p3"},
        {"ts": T0 + 4.0, "source": "proxy", "event": "request", "namespace": "ns", "name": "unrelated"},  # other key
        {"ts": T0 + 4.2, "source": "proxy", "event": "watch", "namespace": "ns2", "name": "high"},  # other ns
        {"source": "proxy", "event": "request", "namespace": "ns", "name": "high"},  # no ts: treated as 0
    ]

    log = tmp_path / "kueue.log"
    log.write_text("\n".join([
        "not json",
        json.dumps({"ts": _rfc3339(T0 - 2.0), "msg": kueue_log.PREEMPTED, "targetWorkload":
                    {"name": "low", "namespace": "ns"}}),  # before the case
        json.dumps({"ts": _rfc3339(T0 + 2.5), "level": "info", "caller": "preemption.go:191",
                    "msg": kueue_log.PREEMPTION_WAITING, "workload": {"name": "high", "namespace": "ns"}}),
        json.dumps({"ts": _rfc3339(T0 + 3.5), "msg": "Scheduling cycle starts",
                    "workload": {"name": "high", "namespace": "ns"}}),  # not a milestone
        json.dumps({"ts": _rfc3339(T0 + 4.5), "msg": kueue_log.ADMITTED,
                    "workload": {"name": "other", "namespace": "ns2"}}),  # another namespace's Workload
        json.dumps({"ts": _rfc3339(T0 + 4.6), "msg": kueue_log.ADMITTED,
                    "job": {"name": "j", "namespace": "ns"}}),  # the case's namespace: a Job of the case
        json.dumps({"ts": _rfc3339(T0 + 6.0), "msg": kueue_log.PREEMPTED,
                    "targetWorkload": {"name": "low", "namespace": "ns"}}),
    ]) + "\n")

    merged = h.finalize(proxy, log, keys)

    order = [(e["source"], e["event"], e.get("id") or e.get("msg") or e.get("name")) for e in merged]
    assert order == [
        ("proxy", "request", "p1"),
        ("harness", "create_job", "high"),
        ("proxy", "held", "p2"),  # hold/release events are kept whatever the object
        ("kueue", "log", kueue_log.PREEMPTION_WAITING),
        ("proxy", "response", "p3"),  # kept: its write touches ns/low
        ("kueue", "log", kueue_log.ADMITTED),  # about an object of the case's namespace (its Job)
        ("harness", "check", None),
        ("kueue", "log", kueue_log.PREEMPTED),
    ]
    ts = [e["ts"] for e in merged]
    assert ts == sorted(ts)
    assert all(t >= T0 for t in ts)

    waiting = merged[3]
    assert waiting["ts"] == pytest.approx(T0 + 2.5, abs=1e-6)
    assert waiting["fields"] == {"level": "info", "workload": {"name": "high", "namespace": "ns"}}

    # history.jsonl holds exactly the merged list, in order.
    assert _jsonl(tmp_path / "history.jsonl") == json.loads(json.dumps(merged))


def test_finalize_without_kueue_log(tmp_path: Path, clock: FakeClock) -> None:
    h = History(tmp_path / "history.jsonl")
    clock.now = T0 + 2
    h.record("b")
    merged = h.finalize(
        [{"ts": T0 + 1, "event": "released", "namespace": "x", "name": "y"}], None, {"ns/a"}
    )
    assert [e["event"] for e in merged] == ["released", "b"]


def test_finalize_missing_kueue_log_file(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl")
    h.record("a")
    merged = h.finalize([], tmp_path / "no-such.log", {"ns/a"})
    assert [e["event"] for e in merged] == ["a"]


def test_record_after_finalize_does_not_raise(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl")
    h.record("a")
    h.finalize([], None, set())
    h.record("late")  # e.g. a monitor thread still running
    assert [e["event"] for e in _jsonl(tmp_path / "harness-events.jsonl")] == ["a"]
    assert [e["event"] for e in _jsonl(tmp_path / "history.jsonl")] == ["a"]


def test_a_scenario_declares_extra_log_milestones(tmp_path: Path, clock: FakeClock) -> None:
    """@pytest.mark.kueue_log("...") widens what the history keeps; other lines stay out."""
    key = "ns/job-a-12345"
    line = {"ts": _rfc3339(T0 + 1), "msg": "Workload is stuck in a new way", "workload": {"name": "job-a-12345",
                                                                                         "namespace": "ns"}}
    plain = History(tmp_path / "a" / "history.jsonl")
    assert plain.merged([], [line], {key}) == [e for e in plain.events]
    wide = History(tmp_path / "b" / "history.jsonl", (*kueue_log.MILESTONES, "Workload is stuck in a new way"))
    merged = wide.merged([], [line], {key})
    assert [e["msg"] for e in merged if e["source"] == "kueue"] == ["Workload is stuck in a new way"]
