"""Unit tests for harness.kueue.log on a synthetic zap-JSON Kueue log.

Line shape follows Kueue v0.17 (zap JSON encoder, RFC3339Nano `ts`, klog.KObj values as
{"name": ..., "namespace": ...}).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from harness.kueue import log as kueue_log
from harness.kueue.log import ADMITTED, PREEMPTED, PREEMPTION_WAITING, count, excerpt, lines, parse_ts

T0 = datetime(2025, 3, 4, 5, 6, 7, tzinfo=timezone.utc).timestamp()


def _ts(offset: float) -> str:
    """RFC3339Nano with Z, nanosecond digits like Go prints them."""
    whole = int(T0 + offset)
    frac = round((T0 + offset - whole) * 1e9)
    base = datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z" if frac else f"{base}Z"


def _kobj(name: str, namespace: str | None = None) -> dict[str, str]:
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


LOG_LINES = [
    "I0304 05:06:06.000000       1 main.go:123] starting (klog text, not JSON)",
    json.dumps({"ts": _ts(0.1), "level": "info", "logger": "scheduler", "caller": "preemption/preemption.go:191",
                "msg": PREEMPTION_WAITING, "workload": _kobj("a", "ns"), "targetWorkload": _kobj("low", "ns"),
                "clusterQueue": _kobj("cq")}),
    "",
    '{"ts": "broken json line',
    json.dumps({"ts": _ts(0.2), "level": "info", "msg": PREEMPTION_WAITING, "workload": _kobj("a", "ns"),
                "targetWorkload": _kobj("other-low", "ns"), "clusterQueue": _kobj("cq")}),
    json.dumps({"ts": _ts(0.3), "level": "info", "msg": PREEMPTION_WAITING, "workload": _kobj("b", "ns"),
                "targetWorkload": _kobj("low", "ns"), "clusterQueue": _kobj("cq2")}),
    "   {\"indented\": true}",
    json.dumps({"ts": _ts(1.5), "level": "info", "msg": PREEMPTED, "targetWorkload": _kobj("low", "ns"),
                "preemptingWorkload": _kobj("a", "ns")}),
    json.dumps({"ts": _ts(2.0), "level": "info", "msg": ADMITTED, "workload": _kobj("a", "ns2"),
                "clusterQueue": _kobj("cq")}),
    # A message naming the key must not count as a mention; only KObj-like fields do.
    json.dumps({"ts": _ts(2.5), "level": "info", "msg": "ns/a", "caller": "ns/a", "logger": "ns/a"}),
    # String-valued fields (e.g. `key` in controller-runtime lines) do count.
    json.dumps({"ts": _ts(3.0), "level": "debug", "msg": "Reconciling", "key": "ns/a"}),
    json.dumps({"level": "info", "msg": "no timestamp", "workload": _kobj("a", "ns")}),
]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    p = tmp_path / "kueue.log"
    p.write_text("\n".join(LOG_LINES) + "\n")
    return p


def test_lines_skips_non_json(log: Path) -> None:
    got = list(lines(log))
    assert len(got) == 8
    assert all(isinstance(l, dict) and "msg" in l for l in got)


def test_lines_missing_file_is_empty(tmp_path: Path) -> None:
    assert list(lines(tmp_path / "absent.log")) == []


def test_lines_tolerates_undecodable_bytes(tmp_path: Path) -> None:
    p = tmp_path / "k.log"
    p.write_bytes(b"\xff\xfe garbage\n" + json.dumps({"msg": "ok"}).encode() + b"\n")
    assert [l["msg"] for l in lines(p)] == ["ok"]


def test_count_by_message(log: Path) -> None:
    assert count(log, PREEMPTION_WAITING) == 3
    assert count(log, PREEMPTED) == 1
    assert count(log, "never logged") == 0


def test_count_filters_on_kobj_fields(log: Path) -> None:
    assert count(log, PREEMPTION_WAITING, workload="ns/a") == 2
    assert count(log, PREEMPTION_WAITING, workload="ns/b") == 1
    assert count(log, PREEMPTION_WAITING, workload="ns/a", targetWorkload="ns/low") == 1
    assert count(log, PREEMPTION_WAITING, workload="a") == 0  # namespace is part of the key
    assert count(log, PREEMPTION_WAITING, workload="ns2/a") == 0
    assert count(log, ADMITTED, workload="ns2/a") == 1
    # Cluster-scoped KObj (no namespace) is keyed by name alone.
    assert count(log, PREEMPTION_WAITING, clusterQueue="cq") == 2
    assert count(log, PREEMPTION_WAITING, missingField="ns/a") == 0


def test_count_missing_file(tmp_path: Path) -> None:
    assert count(tmp_path / "absent.log", PREEMPTION_WAITING) == 0


def test_excerpt_selects_lines_mentioning_keys(log: Path) -> None:
    got = excerpt(log, {"ns/a"})
    msgs = [(l["msg"], l.get("ts")) for l in got]
    assert msgs == [
        (PREEMPTION_WAITING, _ts(0.1)),
        (PREEMPTION_WAITING, _ts(0.2)),
        (PREEMPTED, _ts(1.5)),  # via preemptingWorkload
        ("Reconciling", _ts(3.0)),  # via a string field
        ("no timestamp", None),
    ]


def test_excerpt_several_keys_and_no_match(log: Path) -> None:
    got = excerpt(log, {"ns/low", "ns2/a"})
    assert [l["ts"] for l in got] == [_ts(0.1), _ts(0.3), _ts(1.5), _ts(2.0)]
    assert excerpt(log, {"nobody/x"}) == []
    assert excerpt(log, set()) == []


def test_excerpt_since_drops_earlier_lines(log: Path) -> None:
    got = excerpt(log, {"ns/a"}, since=T0 + 1.0)
    assert [l["msg"] for l in got] == [PREEMPTED, "Reconciling", "no timestamp"]
    got = excerpt(log, {"ns/a"}, since=T0 + 0.2)  # inclusive bound
    assert [l.get("ts") for l in got][:1] == [_ts(0.2)]


def test_mentions_ignores_message_and_metadata_fields() -> None:
    line = {"msg": "ns/a", "ts": "ns/a", "level": "ns/a", "logger": "ns/a", "caller": "ns/a"}
    assert not kueue_log.mentions(line, "ns/a")
    assert kueue_log.mentions({**line, "workload": {"name": "a", "namespace": "ns"}}, "ns/a")
    assert not kueue_log.mentions({"workload": {"namespace": "ns"}}, "ns/")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-04T05:06:07Z", T0),
        ("2025-03-04T05:06:07.5Z", T0 + 0.5),
        ("2025-03-04T05:06:07.123456789Z", T0 + 0.123456),  # nanoseconds truncated to micro
        ("2025-03-04T07:06:07.25+02:00", T0 + 0.25),
    ],
)
def test_parse_ts_rfc3339nano(text: str, expected: float) -> None:
    got = parse_ts(text)
    assert got is not None
    assert got == pytest.approx(expected, abs=1e-6)


def test_parse_ts_epoch_and_garbage() -> None:
    assert parse_ts(1741064767.25) == 1741064767.25
    assert parse_ts(1741064767) == 1741064767.0
    assert isinstance(parse_ts(1741064767), float)
    assert parse_ts("yesterday") is None
    assert parse_ts(None) is None
    assert parse_ts({"t": 1}) is None


def test_synthetic_ts_helper_round_trips() -> None:
    assert parse_ts(_ts(1.5)) == pytest.approx(T0 + 1.5, abs=1e-6)


def test_last_lines(log: Path, tmp_path: Path) -> None:
    assert kueue_log.last_lines(log, 2) == LOG_LINES[-2:]
    assert kueue_log.last_lines(tmp_path / "absent.log") == []


def test_tail_reads_only_what_is_appended(tmp_path) -> None:
    from harness.kueue.log import Tail

    log = tmp_path / "kueue.log"
    log.write_text('{"msg": "old"}\n')
    t = Tail(log, from_end=True)
    assert t.new_lines() == []
    with open(log, "a") as fh:
        fh.write('{"msg": "new"}\n{"msg": "part')
    assert t.new_lines() == [{"msg": "new"}]
    with open(log, "a") as fh:
        fh.write('ial"}\n')
    assert t.new_lines() == [{"msg": "partial"}]
    assert Tail(log).new_lines()[0] == {"msg": "old"}


def test_mentions_controller_runtime_lines_with_separate_namespace_and_name() -> None:
    """controller-runtime's reconciler lines carry the object as top-level namespace and name keys."""
    line = {"msg": "Reconciling", "controller": "workload", "namespace": "ns", "name": "a"}
    assert kueue_log.mentions(line, "ns/a")
    assert not kueue_log.mentions(line, "ns/b") and not kueue_log.mentions(line, "ns")
    assert kueue_log.mentions({"msg": "Reconcile ClusterQueue", "name": "cq"}, "cq")  # cluster-scoped


def test_count_since_counts_only_later_lines(log: Path) -> None:
    assert count(log, PREEMPTION_WAITING) == 3
    assert count(log, PREEMPTION_WAITING, since=T0 + 0.2) == 2  # inclusive
    assert count(log, PREEMPTION_WAITING, since=T0 + 0.25, workload="ns/b") == 1
    assert count(log, "no timestamp", since=T0) == 0  # a line without a time is not "since" anything


def test_last_error_is_the_reason_a_case_gives_when_kueue_exited(tmp_path) -> None:
    import json

    from harness.kueue import log as kueue_log

    p = tmp_path / "kueue.log"
    p.write_text("\n".join([json.dumps({"level": "info", "msg": "Starting"}),
                            json.dumps({"level": "error", "msg": "Failed to update lease", "error": "Client.Timeout"}),
                            json.dumps({"level": "info", "msg": "failed to renew lease"}),
                            json.dumps({"level": "error", "msg": "leader election lost"}), "not json"]) + "\n")
    assert kueue_log.last_error(p) == "leader election lost"
    p.write_text(json.dumps({"level": "info", "msg": "ok"}) + "\n")
    assert kueue_log.last_error(p) is None
