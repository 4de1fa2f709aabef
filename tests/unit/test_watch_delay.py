"""delay_watch_events on the watch tap (harness/proxy/addons/watch.py), with a fake clock: a delayed line
and every line behind it wait until a chunk arrives at or after the due time; order and bytes are kept;
the end of the stream flushes early; an error loses what was held; `delivered` sees a line only once
it went out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.test import tflow, tutils

from harness.proxy.addons import KueueFaults
from harness.proxy.addons.state import ProxyState
from harness.proxy.addons.watch import WatchStream

NS = "team-a"
WL1, WL2 = "job-job1-3f2a1", "job-job2-9c8b7"
WATCH_PATH = "/apis/kueue.x-k8s.io/v1beta2/workloads?allowWatchBookmarks=true&watch=true"


def line(type_: str, name: str | None, rv: str, ns: str = NS) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if name is not None:
        meta.update(name=name, namespace=ns)
    return json.dumps({"type": type_, "object": {"kind": "Workload", "metadata": meta, "status": {}}}).encode() + b"\n"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def setup(**rule: Any) -> tuple[ProxyState, WatchStream, Clock]:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/rules", {"id": "slow", "action": "delay_watch_events", **rule})
    assert code == 201, payload
    clock = Clock()
    return addon.state, WatchStream(addon.state, 7, clock), clock


def events(state: ProxyState, *names: str) -> list[dict[str, Any]]:
    return [e for e in state.log.events if e["event"] in names]


def test_a_delayed_event_and_the_lines_behind_it_go_out_with_the_first_chunk_after_due() -> None:
    state, tap, clock = setup(delay=2, match={"name": "job-job1-*"})
    a, b, c, d = line("ADDED", WL1, "100"), line("ADDED", WL2, "101"), line("MODIFIED", WL2, "102"), \
        line("MODIFIED", WL2, "103")
    assert tap(a) == b""  # held
    (held,) = events(state, "watch_event_delayed")
    assert (held["rule"], held["seconds"], held["due"], held["name"], held["flow"]) == ("slow", 2, 1002.0, WL1, 7)
    clock.t = 1001.0
    assert tap(b) == b""  # behind it: a watch is ordered
    clock.t = 1001.999
    assert tap(c) == b""
    clock.t = 1002.010
    assert tap(d) == a + b + c + d  # all of it, in order, byte for byte
    got = events(state, "watch_event")
    assert [(e["name"], e["resource_version"]) for e in got] == [(WL1, "100"), (WL2, "101"), (WL2, "102"), (WL2, "103")]
    assert got[0]["delayed"] == pytest.approx(2.01) and got[0]["delay_rule"] == "slow"
    assert got[0]["late"] == pytest.approx(0.01)
    assert got[1]["delayed"] == pytest.approx(1.01) and "delay_rule" not in got[1]
    assert "delayed" not in got[3]
    assert state.delivered_rv[f"{NS}/{WL1}"] == 100


def test_delivered_counts_a_delayed_event_only_once_it_went_out() -> None:
    state, tap, clock = setup(delay=1, match={"name": WL1})
    tap(line("MODIFIED", WL1, "100"))
    assert f"{NS}/{WL1}" not in state.delivered_rv
    clock.t += 1
    tap(line("BOOKMARK", None, "120"))
    assert state.delivered_rv[f"{NS}/{WL1}"] == 100


def test_event_type_and_times_limit_what_is_delayed() -> None:
    state, tap, clock = setup(delay=5, times=1, match={"event_type": "MODIFIED"})
    added = line("ADDED", WL1, "100")
    assert tap(added) == added
    assert tap(line("MODIFIED", WL1, "101")) == b""
    clock.t += 5
    m2 = line("MODIFIED", WL1, "102")
    out = tap(m2)
    assert out == line("MODIFIED", WL1, "101") + m2  # times: 1 — the second MODIFIED is not delayed
    assert len(events(state, "watch_event_delayed")) == 1


def test_a_second_delayed_event_is_due_after_the_first() -> None:
    state, tap, clock = setup(delay=3, times=None, match={"name": "job-*"})
    tap(line("ADDED", WL1, "100"))
    clock.t += 1
    tap(line("ADDED", WL2, "101"))
    dues = [e["due"] for e in events(state, "watch_event_delayed")]
    assert dues == [1003.0, 1004.0]
    clock.t = 1003.5
    assert tap(line("BOOKMARK", None, "102")) == line("ADDED", WL1, "100")
    clock.t = 1004.0
    assert tap(line("BOOKMARK", None, "103")) == line("ADDED", WL2, "101") + line("BOOKMARK", None, "102") + \
        line("BOOKMARK", None, "103")


def test_partial_lines_wait_for_their_newline_while_a_watch_rule_is_loaded() -> None:
    state, tap, clock = setup(delay=1, match={"name": "nobody"})
    x = line("ADDED", WL1, "100")
    assert tap(x[:10]) == b""
    assert tap(x[10:]) == x


def test_end_of_stream_flushes_what_was_held_early() -> None:
    state, tap, clock = setup(delay=10, match={"name": WL1})
    a = line("ADDED", WL1, "100")
    tap(a)
    tap(b'{"partial')
    clock.t += 1
    assert tap(b"") == a + b'{"partial'
    (ev,) = events(state, "watch_event")
    assert ev["late"] == pytest.approx(-9.0)  # early: the stream ended before the due time


def test_the_tick_workload_is_never_delayed() -> None:
    state, tap, clock = setup(delay=10, match={})  # every Workload …
    tick = line("MODIFIED", "kueue-harness-tick", "100", ns="x-tick")
    assert tap(tick) == tick  # … but not the harness's own tick


def test_an_errored_watch_loses_what_it_held_and_says_so() -> None:
    addon = KueueFaults()
    assert addon._handle("POST", "/rules", {"id": "slow", "action": "delay_watch_events", "delay": 5,
                                            "match": {"name": WL1}})[0] == 201
    req = tutils.treq(method=b"GET", path=WATCH_PATH.encode(), headers=http.Headers(accept="application/json"),
                      content=b"")
    f = tflow.tflow(req=req, resp=tutils.tresp(status_code=200, content=b"",
                                               headers=http.Headers(content_type="application/json")))
    addon.responseheaders(f)
    assert f.response.stream(line("ADDED", WL1, "100") + line("ADDED", WL2, "101")) == b""
    addon.error(f)
    (lost,) = [e for e in addon.log.events if e["event"] == "watch_events_undelivered"]
    assert lost["lines"] == 2
