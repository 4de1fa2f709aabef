"""A case's flows read from the session's flow file without a pass from its start (harness/report/flowfile.py):
the same flows a full pass gives, whatever order the flows finished in, while the file grows, and after it is
cut short. Synthetic flows (mitmproxy.test.tflow) in a temporary file."""

from __future__ import annotations

from pathlib import Path

import pytest
from mitmproxy import io as mio
from mitmproxy.test import tflow

from harness.report import flowfile

T0 = 1_800_000_000.0


def _flow(n: int, start: float, took: float):
    f = tflow.tflow(resp=True)
    f.request.path = f"/api/v1/namespaces/ns/pods/p{n}"
    f.request.timestamp_start, f.request.timestamp_end = start, start + 0.001
    f.response.timestamp_start = f.response.timestamp_end = start + took
    f.metadata["kh_flow"] = n
    return f


def _append(path: Path, flows) -> None:
    with open(path, "ab") as fh:
        w = mio.FlowWriter(fh)
        for f in flows:
            w.add(f)


def _full(path: Path, start: float) -> list[int]:
    with open(path, "rb") as fh:
        return [f.metadata["kh_flow"] for f in mio.FlowReader(fh).stream() if f.request.timestamp_start >= start]


def _since(path: Path, start: float) -> list[int]:
    return [f.metadata["kh_flow"] for f in flowfile.flows_since(path, start) if f.request.timestamp_start >= start]


@pytest.fixture(autouse=True)
def _fresh():
    flowfile.forget()
    yield
    flowfile.forget()


def test_a_window_gets_exactly_the_flows_a_full_pass_gives_and_skips_what_finished_before(tmp_path):
    p = tmp_path / "flows.mitm"
    # written in the order they finished; flow 3 (a held request) started early and finished late
    _append(p, [_flow(1, T0, 0.1), _flow(2, T0 + 1, 0.1), _flow(4, T0 + 2, 0.1), _flow(3, T0 + 0.5, 9.0),
                _flow(5, T0 + 10, 0.1), _flow(6, T0 + 11, 0.1)])
    assert _since(p, 0) == _full(p, 0) == [1, 2, 4, 3, 5, 6]  # the first pass remembers the offsets
    for start in (T0 + 0.5, T0 + 1.5, T0 + 10, T0 + 10.5, T0 + 99):
        assert _since(p, start) == _full(p, start), start
    # the read for a late window starts after flow 3, the last one that finished before it
    read = [f.metadata["kh_flow"] for f in flowfile.flows_since(p, T0 + 10)]
    assert read == [5, 6]
    # a window starting between flow 4's and flow 3's finish must still read flow 3
    assert 3 in [f.metadata["kh_flow"] for f in flowfile.flows_since(p, T0 + 5)]


def test_a_growing_file_is_read_on_from_where_it_was_and_a_cut_file_from_its_start(tmp_path):
    p = tmp_path / "flows.mitm"
    _append(p, [_flow(1, T0, 0.1), _flow(2, T0 + 1, 0.1)])
    assert _since(p, T0) == [1, 2]
    _append(p, [_flow(3, T0 + 2, 0.1), _flow(4, T0 + 3, 0.1)])
    assert _since(p, T0 + 1.5) == _full(p, T0 + 1.5) == [3, 4]
    assert _since(p, T0) == [1, 2, 3, 4]
    p.write_bytes(b"")  # the same path cut short (same inode)
    _append(p, [_flow(7, T0 + 5, 0.1)])
    assert _since(p, T0) == [7]


def test_a_half_written_last_flow_ends_the_read_and_is_read_once_complete(tmp_path):
    p = tmp_path / "flows.mitm"
    _append(p, [_flow(1, T0, 0.1)])
    whole = tmp_path / "one.mitm"
    _append(whole, [_flow(2, T0 + 1, 0.1)])
    data = whole.read_bytes()
    with open(p, "ab") as fh:
        fh.write(data[: len(data) // 2])
    assert _since(p, T0) == [1]
    with open(p, "ab") as fh:
        fh.write(data[len(data) // 2:])
    assert _since(p, T0 + 0.5) == [2]


def test_finished_at_is_the_latest_time_the_flow_records():
    f = _flow(1, T0, 2.5)
    assert flowfile.finished_at(f) == T0 + 2.5
    f.response = None
    assert flowfile.finished_at(f) == T0 + 0.001
