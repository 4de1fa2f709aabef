"""The `watch_delayed` assumption on synthetic histories (shapes as docs/history.md, source proxy): the
DELETED event a delay_watch_events rule held went out on time and after the held admission's 404
(kubernetes-sigs/kueue#10759), and each way that can fail."""

from __future__ import annotations

import pytest

from harness.checkers import REGISTRY
from harness.checkers.watch_delayed import WatchDelayed
from harness.history.names import Names
from tests.unit.test_report import NS, ev


def story(out_at: float = 5.5, late: float = 0.05, answer_at: float = 0.6, status: int = 404) -> list[dict]:
    """The admission (flow 30) held, its answer at `answer_at`; wl's DELETED (watch flow 11) held at 0.5
    and sent at `out_at`; the verdict at 12."""
    return [ev(0, "harness", "case_started", case="cases/t.py::t", namespace=NS),
            ev(0.3, "proxy", "held", flow=30, hold="h1", rule="admission-wl", stage="request", label="admission"),
            ev(0.5, "proxy", "watch_event_delayed", flow=11, type="DELETED", namespace=NS, name="wl",
               resource_version="133", rule="wl-deleted-late", seconds=5.0, due=1e6 + 5.5),
            ev(answer_at - 0.01, "proxy", "released", flow=30, hold="h1", rule="admission-wl", why="triggers: x"),
            ev(answer_at, "proxy", "response", flow=30, status=status, name="wl", namespace=NS, write="admission"),
            ev(out_at, "proxy", "watch_event", flow=11, type="DELETED", namespace=NS, name="wl",
               resource_version="133", delayed=out_at - 0.5, delay_rule="wl-deleted-late", late=late),
            ev(12, "harness", "verdict", invariant="x", held=False, verdict="reproduced", reason="",
               seen={"harness": 1e6 + 12, "proxy": 1e6 + 12})]


def judge(h: list[dict], **kw) -> list:
    h = sorted(h, key=lambda e: e["ts"])
    return WatchDelayed(**{"rule": "wl-deleted-late", **kw}).check(h, {}, Names(h))


def test_registered_as_an_assumption():
    assert REGISTRY["watch_delayed"].kind == "assumption"


def test_held_when_the_event_went_out_on_time_after_the_404():
    (f,) = judge(story(), after="admission-wl", status=404)
    assert f.result == "held" and f.assumption
    assert "DELETED of wl (rv 133)" in f.evidence and "4.900s after admission-wl's answer (404)" in f.evidence


@pytest.mark.parametrize("kw, words", [
    (dict(late=-3.0), "went out 3.000s before its due time"),
    (dict(out_at=0.55), "went out 0.050s before admission-wl's answer"),
    (dict(status=200), "no flow of admission-wl was answered 404"),
])
def test_violated_when_the_delivery_was_not_as_planned(kw, words):
    (f,) = judge(story(**kw), after="admission-wl", status=404)
    assert f.result == "violated" and words in f.evidence, f.evidence


def test_lost_still_held_or_never_delayed():
    h = [e for e in story() if not (e["event"] == "watch_event" and e.get("delay_rule"))]
    (f,) = judge(h)
    assert f.result == "violated" and "still held at the verdict" in f.evidence
    h.append(ev(3, "proxy", "watch_events_undelivered", flow=11, lines=1))
    (f,) = judge(h)
    assert "was lost with its watch" in f.evidence
    h = [e for e in story() if e["event"] != "watch_event_delayed"]
    (f,) = judge(h)
    assert "delayed no watch event" in f.evidence


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="rule must name"):
        WatchDelayed(rule="")
    with pytest.raises(ValueError, match="status goes with after"):
        WatchDelayed(rule="r", status=404)
