"""running_pods_within_quota's persistence bound and pending_accounting on synthetic histories and objects
(shapes as tests/unit/test_lifecycle_checkers.py)."""

from __future__ import annotations

import pytest

from harness.checkers.pods_quota import RunningPodsWithinQuota
from tests.unit.test_lifecycle_checkers import judge, results, start
from tests.unit.test_report import ev


def over(t0, t1=None, cq="cq"):
    out = [ev(t0, "monitor", "pods_over_quota_started", finding=f"ClusterQueue {cq}: …", cluster_queue=cq,
              resource="cpu", running_milli=2000, held_milli=1000, pods=["a", "b"])]
    if t1 is not None:
        out.append(ev(t1, "monitor", "pods_over_quota_cleared", finding="…", cluster_queue=cq, resource="cpu"))
    return out


def test_persist_counts_only_a_lasting_or_final_violation():
    short, long_ = start() + over(3, 4.5), start() + over(3, 8)
    assert results(judge(RunningPodsWithinQuota(), short)) == ["violated"]  # no bound: any window counts
    found = judge(RunningPodsWithinQuota(persist=2), short)
    assert [(f.result, f.bearing) for f in found] == [("held", False), ("held", True)]
    assert "for 1.50s (< 2s, not counted)" in found[0].evidence
    assert results(judge(RunningPodsWithinQuota(persist=2), long_)) == ["violated"]
    # Never cleared: it reaches the end of the case, whatever its length.
    assert results(judge(RunningPodsWithinQuota(persist=2), start(end=3.5) + over(3))) == ["violated"]


@pytest.mark.parametrize("bad", [0, -1, True, "2s"])
def test_persist_refuses_bad_values(bad):
    with pytest.raises(ValueError, match="persist must be seconds"):
        RunningPodsWithinQuota(persist=bad)
