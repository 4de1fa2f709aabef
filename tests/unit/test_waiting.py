"""Unit tests for harness.common.waiting.wait_for: first truthy value, bounded timeout, informative message."""

from __future__ import annotations

import time

import pytest

from harness.common.waiting import WaitTimeout, wait_for


def _sequence(*values):
    """A probe returning `values` in turn (raising the ones that are exceptions), then the last forever."""
    calls = []

    def probe():
        v = values[min(len(calls), len(values) - 1)]
        calls.append(v)
        if isinstance(v, BaseException):
            raise v
        return v

    probe.calls = calls  # type: ignore[attr-defined]
    return probe


def test_returns_first_truthy_value() -> None:
    probe = _sequence(0, None, "", [], {"phase": "Running"}, "later")
    assert wait_for(probe, timeout=5, what="x", interval=0.01) == {"phase": "Running"}
    assert len(probe.calls) == 5


def test_immediate_success_calls_probe_once() -> None:
    probe = _sequence(42)
    t0 = time.monotonic()
    assert wait_for(probe, timeout=5, what="x", interval=1) == 42
    assert len(probe.calls) == 1
    assert time.monotonic() - t0 < 0.5


def test_exceptions_count_as_not_yet() -> None:
    probe = _sequence(ConnectionError("refused"), KeyError("status"), "ok")
    assert wait_for(probe, timeout=5, what="x", interval=0.01) == "ok"
    assert len(probe.calls) == 3


def test_timeout_names_what_bound_and_last_value() -> None:
    probe = _sequence(None, 0)
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout) as exc:
        wait_for(probe, timeout=0.3, what="Workload ns/a admitted", interval=0.05)
    elapsed = time.monotonic() - t0
    msg = str(exc.value)
    assert "Workload ns/a admitted" in msg
    assert "0.3s" in msg
    assert msg.endswith("last seen: 0")
    assert 0.25 <= elapsed < 2.0
    assert len(probe.calls) >= 2


def test_timeout_reports_last_exception() -> None:
    probe = _sequence(ValueError("boom"))
    with pytest.raises(WaitTimeout) as exc:
        wait_for(probe, timeout=0.2, what="the apiserver", interval=0.05)
    msg = str(exc.value)
    assert "the apiserver" in msg
    assert "last seen: ValueError: boom" in msg
    assert exc.value.__cause__ is None


def test_timeout_reports_latest_observation_not_first() -> None:
    probe = _sequence(RuntimeError("first"), "", "")
    with pytest.raises(WaitTimeout) as exc:
        wait_for(probe, timeout=0.2, what="w", interval=0.02)
    assert "RuntimeError" not in str(exc.value)


def test_describe_replaces_last_value() -> None:
    described = []

    def describe():
        described.append(1)
        return "QuotaReserved=False(Pending)"

    with pytest.raises(WaitTimeout) as exc:
        wait_for(lambda: None, timeout=0.2, what="quota", interval=0.05, describe=describe)
    msg = str(exc.value)
    assert msg.endswith("last seen: QuotaReserved=False(Pending)")
    assert described == [1]  # only called once, at timeout


def test_describe_not_called_on_success() -> None:
    def describe():
        raise AssertionError("describe must only run on timeout")

    assert wait_for(lambda: "yes", timeout=1, what="x", describe=describe) == "yes"


def test_wait_progressing_goes_on_while_the_state_moves_and_says_so() -> None:
    """Bounded by progress: a slow cluster that keeps moving is waited for; one that stops moving fails fast,
    naming what it saw; a line every `every` seconds says what it waits for."""
    import itertools

    from harness.common.waiting import WaitTimeout, wait_progressing

    n = itertools.count()
    said: list[str] = []
    got = wait_progressing(lambda: next(n) >= 8, state=lambda: next(iter([object()])), stall=0.05, what="x",
                           interval=0.01, say=said.append, every=0.02)
    assert got is True and said and said[0].startswith("waiting for x (")
    with pytest.raises(WaitTimeout, match=r"gave up waiting for 3 CRDs after \d+s: nothing moved for 0s; last seen: 1 of 3"):
        wait_progressing(lambda: False, state=lambda: "1 of 3", stall=0.1, what="3 CRDs", interval=0.01)
