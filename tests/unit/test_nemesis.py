"""harness/nemesis/runner.py without an environment: a fake proxy (an events file the test appends to, and a
recorder for signal_done), a fake restart, and `tick` replaced by a recorder. Waits are bounded
(harness.common.waiting.wait_for)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.common.waiting import wait_for
from harness.nemesis.runner import Nemesis


class FakeProxy:
    def __init__(self, path: Path) -> None:
        self.events_file = path
        self.done: list[tuple[str, bool, dict[str, Any]]] = []

    def append(self, event: str, **fields: Any) -> None:
        with open(self.events_file, "a") as fh:
            fh.write(json.dumps({"ts": time.time(), "source": "proxy", "event": event, **fields}) + "\n")

    def signal_done(self, rule_id: str, ok: bool = True, **detail: Any) -> dict[str, Any]:
        self.done.append((rule_id, ok, detail))
        return {}


@pytest.fixture
def proxy(tmp_path: Path) -> FakeProxy:
    p = FakeProxy(tmp_path / "proxy-events.jsonl")
    p.append("proxy_ready")
    return p


def test_events_before_start_are_not_acted_on(proxy: FakeProxy) -> None:
    calls: list[Any] = []
    proxy.append("signalled", rule="old", action="restart_kueue", why="loaded", kill=False)
    nem = Nemesis(proxy, restart=lambda kill, rule: calls.append(rule)).start()
    try:
        proxy.append("rule_added", rule={"id": "x"})
        nem.settle(5)
    finally:
        nem.stop(5)
    assert calls == [] and proxy.done == []


@pytest.mark.parametrize("kill", [True, False])
def test_a_signalled_restart_is_performed_and_reported_done(proxy: FakeProxy, kill: bool) -> None:
    calls: list[tuple[bool, str]] = []
    nem = Nemesis(proxy, restart=lambda k, rule: calls.append((k, rule))).start()
    try:
        proxy.append("signalled", rule="restart-kueue", action="restart_kueue", why="triggers: a answered", kill=kill)
        wait_for(lambda: proxy.done, timeout=5, what="signal_done")
    finally:
        nem.stop(5)
    assert calls == [(kill, "restart-kueue")]
    ((rule, ok, detail),) = proxy.done
    assert (rule, ok, detail["kill"]) == ("restart-kueue", True, kill)
    assert detail["seconds"] >= 0
    assert nem.done[0]["event"] == "kueue_restart"


def test_a_restart_that_cannot_be_done_is_reported_failed(proxy: FakeProxy) -> None:
    nem = Nemesis(proxy, restart=None).start()
    try:
        proxy.append("signalled", rule="r", action="restart_kueue", why="loaded", kill=False)
        wait_for(lambda: proxy.done, timeout=5, what="signal_done")
    finally:
        nem.stop(5)
    ((rule, ok, detail),) = proxy.done
    assert rule == "r" and ok is False and "cannot restart Kueue" in detail["error"]


def test_stop_waits_for_a_restart_in_progress(proxy: FakeProxy) -> None:
    started, finish = threading.Event(), threading.Event()

    def slow(kill: bool, rule: str) -> None:
        started.set()
        finish.wait(5)

    nem = Nemesis(proxy, restart=slow).start()
    proxy.append("signalled", rule="r", action="restart_kueue", why="loaded", kill=False)
    wait_for(started.is_set, timeout=5, what="the restart to begin")
    assert nem.settle(0.05) is False  # still running
    threading.Timer(0.1, finish.set).start()
    assert nem.stop(5) is True
    assert [d[0] for d in proxy.done] == ["r"]


def test_a_tick_at_each_due_time(proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: list[float] = []
    nem = Nemesis(proxy, restart=None)
    monkeypatch.setattr(nem, "tick", lambda: ticks.append(time.time()))
    nem.start()
    try:
        due1 = time.time() + 0.2
        proxy.append("watch_event_delayed", rule="d", seconds=0.2, due=due1, name="w1", namespace="ns")
        proxy.append("watch_event_delayed", rule="d", seconds=0.2, due=due1 + 0.001, name="w2", namespace="ns")
        due2 = due1 + 0.3
        proxy.append("watch_event_delayed", rule="d", seconds=0.5, due=due2, name="w3", namespace="ns")
        wait_for(lambda: len(ticks) >= 2, timeout=5, what="two ticks")
    finally:
        nem.stop(5)
    assert len(ticks) == 2  # due times within 5 ms share one tick
    assert due1 <= ticks[0] < due1 + 0.1
    assert due2 <= ticks[1] < due2 + 0.1


def test_a_failed_tick_is_retried(proxy: FakeProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[float] = []

    def flaky() -> None:
        tries.append(time.time())
        if len(tries) == 1:
            raise RuntimeError("apiserver said no")

    said: list[str] = []
    nem = Nemesis(proxy, restart=None, say=said.append)
    monkeypatch.setattr(nem, "tick", flaky)
    nem.start()
    try:
        proxy.append("watch_event_delayed", rule="d", seconds=0.1, due=time.time() + 0.05, name="w", namespace="ns")
        wait_for(lambda: len(tries) >= 2, timeout=5, what="the retry")
    finally:
        nem.stop(5)
    assert tries[1] - tries[0] >= 0.19
    assert any("retrying" in s for s in said)


def test_tick_without_an_api_client_is_an_error(proxy: FakeProxy) -> None:
    with pytest.raises(RuntimeError):
        Nemesis(proxy).tick()


def test_the_tick_workload_is_prepared_when_a_delay_rule_is_loaded(proxy: FakeProxy,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ticks: list[float] = []
    nem = Nemesis(proxy, restart=None, api_client=object(), tick_namespace="ns-tick")
    monkeypatch.setattr(nem, "tick", lambda: ticks.append(time.time()))
    nem.start()
    try:
        proxy.append("rule_added", rule={"id": "hold-it", "action": "hold"})
        proxy.append("rule_added", rule={"id": "slow", "action": "delay_watch_events", "delay": 2})
        wait_for(lambda: ticks, timeout=5, what="the tick Workload to be prepared")
        nem.settle(1)
    finally:
        nem.stop(5)
    assert len(ticks) == 1
