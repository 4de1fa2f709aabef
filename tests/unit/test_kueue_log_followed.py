"""The assumption kueue_log_followed (harness/checkers/assumptions.py) on synthetic histories: Kueue's state
recorded at the case's start and verdict carries the log follower's health on the kind and kubeconfig
targets (harness/env/pod_logs.py); a follower that failed during the case, stopped, or wrote nothing voids
the verdict; the local target records no health and is not judged."""

from __future__ import annotations

from harness.checkers import Selection, compose, selection_with_defaults
from harness.checkers.assumptions import DEFAULT_ASSUMPTIONS, KueueLogFollowed
from harness.history.names import Names


def _state(ts: float, event: str, log: dict | None) -> dict:
    kueue = {"starts": 1, "alive": True}
    if log is not None:
        kueue["log"] = log
    return {"ts": ts, "source": "harness", "event": event, "kueue": kueue}


def _history(first: dict | None, last: dict | None) -> list[dict]:
    return [_state(1.0, "case_started", first), _state(5.0, "verdict", last)]


def _check(h):
    return KueueLogFollowed().check(h, {}, Names(h))


def _health(problems=0, bytes_=100, alive=True, last=None):
    return {"problems": problems, "last": last, "bytes": bytes_, "alive": alive}


def test_it_is_a_default_assumption():
    assert "kueue_log_followed" in DEFAULT_ASSUMPTIONS


def test_followed_log_holds():
    [f] = _check(_history(_health(bytes_=10), _health(bytes_=5000)))
    assert f.result == "held" and "5000 bytes" in f.evidence


def test_a_failure_during_the_case_voids_it():
    [f] = _check(_history(_health(problems=1), _health(problems=3, last="the log request failed: TypeError: x")))
    assert f.result == "violated" and "2 failure(s)" in f.summary and "TypeError" in f.evidence


def test_failures_before_the_case_do_not_count_once_it_streams():
    [f] = _check(_history(_health(problems=4), _health(problems=4)))
    assert f.result == "held"


def test_an_empty_log_voids_it():
    """The bug of issue 22: the follower never wrote a line (and said nothing)."""
    [f] = _check(_history(_health(bytes_=0), _health(bytes_=0)))
    assert f.result == "violated" and "no line" in f.summary


def test_a_stopped_follower_voids_it():
    [f] = _check(_history(_health(), _health(alive=False)))
    assert f.result == "violated"


def test_local_target_is_not_judged():
    assert _check(_history(None, None)) == []


def test_composed_verdict_is_error():
    h = _history(_health(), _health(problems=1, last="boom"))
    v = compose(Selection(selection_with_defaults({})), h, {})
    assert v.verdict == "error" and "kueue_log_followed" in v.reason
