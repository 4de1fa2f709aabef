"""write_count and log_count on synthetic histories (shapes as tests/unit/test_lifecycle_checkers.py): counts
per object, role and case, max/min, answered writes only, windows, subjects never seen, bad parameters."""

from __future__ import annotations

import pytest

from harness.checkers import REGISTRY, Selection, compose
from harness.checkers.log_count import LogCount, most_within
from harness.checkers.write_count import WriteCount
from tests.unit.test_lifecycle_checkers import judge, results
from tests.unit.test_report import NS, ev

VICTIM, OTHER = "job-victim-aaaaa", "job-other-bbbbb"


def req(dt, name, write="eviction", flow=1, kind="Workload"):
    return ev(dt, "proxy", "request", flow=flow, method="PATCH", path=f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{name}/status",
              write={"kind": kind, "namespace": NS, "name": name, "write": write, "method": "PATCH"})


def resp(dt, flow, status=200, name=VICTIM):
    return ev(dt, "proxy", "response", flow=flow, status=status, namespace=NS, name=name, write="eviction")


def log(dt, msg, name=VICTIM, field="workload", **more):
    return ev(dt, "kueue", "log", msg=msg, fields={field: {"name": name, "namespace": NS}, **more})


def start(end: float = 30.0) -> list[dict]:
    """A case that started at 0 and reached its verdict at `end`, every source seen up to then."""
    return [ev(0, "harness", "case_started", case="cases/t.py::t", namespace=NS),
            ev(end, "harness", "verdict", invariant="x", held=True, verdict="passed", reason="",
               seen={s: 1e6 + end for s in ("harness", "monitor", "proxy", "kueue")})]


def evictions(n, name=VICTIM, first_flow=1):
    return [req(1 + i * 0.1, name, flow=first_flow + i) for i in range(n)]


def test_registered():
    assert REGISTRY["write_count"].kind == "invariant" and REGISTRY["log_count"].kind == "invariant"


def test_several_eviction_patches_of_one_victim_violate_at_most_one():
    c = WriteCount(write="eviction", max=1, objects=["victim"])
    found = judge(c, start() + evictions(3) + evictions(1, OTHER, 10))
    assert results(found) == ["violated"]
    assert "victim: 3 eviction" in found[0].evidence and "t=1.000s, t=1.100s, t=1.200s" in found[0].evidence
    assert c.decided(sorted(start() + evictions(3), key=lambda e: e["ts"]), {}, _names(start() + evictions(3)))
    assert results(judge(c, start() + evictions(1))) == ["held"]


def _names(h):
    from harness.history.names import Names
    return Names(sorted(h, key=lambda e: e["ts"]))


def test_exactly_one_needs_the_victim_evicted_and_a_victim_never_seen_is_inconclusive():
    c = WriteCount(write="eviction", min=1, max=1, objects=["victim"])
    seen_only = start() + [req(1, VICTIM, write="admission")]
    assert results(judge(c, seen_only)) == ["violated"]  # admitted, never evicted
    assert results(judge(c, start())) == ["inconclusive"]  # nothing names it: cannot be judged
    assert not c.decided(sorted(seen_only, key=lambda e: e["ts"]), {}, _names(seen_only))


def test_per_object_without_names_judges_every_written_object():
    found = judge(WriteCount(write="eviction", max=1), start() + evictions(2) + evictions(1, OTHER, 10))
    assert sorted(results(found)) == ["held", "violated"]
    assert results(judge(WriteCount(write="eviction", max=1), start())) == ["held"]  # none sent: ≤ 1 holds


def test_per_case_and_any_write_and_verbs():
    h = start() + evictions(2) + [req(2, OTHER, write="admission", flow=20)]
    assert results(judge(WriteCount(write="any", per="case", max=2), h)) == ["violated"]
    assert results(judge(WriteCount(write="any", per="case", min=3), h)) == ["held"]
    job = [req(3, "victim", write="patch", flow=30, kind="Job")]
    assert results(judge(WriteCount(write="patch", kind="Job", per="case", min=1), start() + job)) == ["held"]
    assert results(judge(WriteCount(write="patch", kind="Job", per="case", min=1), start())) == ["violated"]


def test_answered_ok_counts_only_applied_writes():
    h = start() + evictions(3) + [resp(1.05, 1), resp(1.15, 2, 409), resp(1.25, 3, 200)]
    assert results(judge(WriteCount(write="eviction", max=1, objects=["victim"]), h)) == ["violated"]
    assert results(judge(WriteCount(write="eviction", max=2, objects=["victim"], answered="ok"), h)) == ["held"]
    assert results(judge(WriteCount(write="eviction", max=1, objects=["victim"], answered="ok"), h)) == ["violated"]


def test_per_role_merges_recreated_workloads_and_globs_match():
    h = start() + evictions(1) + evictions(1, "job-victim-ccccc", 5)
    assert results(judge(WriteCount(write="eviction", max=1, objects=["victim"], per="role"), h)) == ["violated"]
    assert sorted(results(judge(WriteCount(write="eviction", max=1, objects=["job-victim-*"]), h))) == ["held", "held"]


def test_events_after_the_verdict_do_not_count():
    h = start(end=5) + evictions(1) + [req(9, VICTIM, flow=9)]
    assert results(judge(WriteCount(write="eviction", max=1, objects=["victim"]), h)) == ["held"]


@pytest.mark.parametrize("kw, text", [
    (dict(write="evict", max=1), "write must be one of"),
    (dict(write="eviction"), "give max"),
    (dict(write="eviction", min=2, max=1), "above max"),
    (dict(write="eviction", max=-1), "whole number"),
    (dict(write="eviction", min=1), "needs `objects`"),
    (dict(write="eviction", max=1, per="job"), "per must be"),
    (dict(write="eviction", max=1, answered="yes"), "answered must be"),
])
def test_write_count_refuses_bad_parameters(kw, text):
    with pytest.raises(ValueError, match=text):
        WriteCount(**kw)


def test_a_case_selection_builds_it_by_name_and_composes():
    sel = Selection({"write_count": {"write": "eviction", "max": 1, "objects": ["victim"]}})
    h = sorted(start() + evictions(4), key=lambda e: e["ts"])
    v = compose(sel, h, {})
    assert v.verdict == "reproduced" and "victim: 4 eviction" in v.reason


# ---- log_count -----------------------------------------------------------------------------------------

REQUEUED = "Workload re-queued"


def test_most_within_a_sliding_window():
    assert most_within([], 1.0) == (0, 0.0, 0.0)
    assert most_within([0, 0.5, 0.9, 3, 3.1], 1.0) == (3, 0, 0.9)
    assert most_within([0, 0.5, 0.9, 3, 3.1], None) == (5, 0, 3.1)


def test_log_count_per_object_and_window():
    lines = [log(1 + 0.2 * i, REQUEUED) for i in range(10)] + [log(1, REQUEUED, OTHER)]
    assert results(judge(LogCount(msg="^Workload re-queued$", max=3, window=1.0, objects=["victim"]), start() + lines)) \
        == ["violated"]
    assert results(judge(LogCount(msg=REQUEUED, max=6, window=1.0, objects=["victim"]), start() + lines)) == ["held"]
    assert sorted(results(judge(LogCount(msg=REQUEUED, max=1), start() + lines))) == ["held", "violated"]
    assert results(judge(LogCount(msg=REQUEUED, max=10, per="case"), start() + lines)) == ["violated"]


def test_log_count_min_field_and_what_cannot_be_judged():
    h = start() + [log(1, "Preempted", VICTIM, field="targetWorkload"), log(1.1, REQUEUED, OTHER)]
    assert results(judge(LogCount(msg="^Preempted$", min=1, objects=["victim"]), h)) == ["held"]
    assert results(judge(LogCount(msg="^Preempted$", min=1, objects=["victim"], field="workload"), h)) == ["violated"]
    assert results(judge(LogCount(msg="^Preempted$", min=1, objects=["other"]), h)) == ["violated"]
    assert results(judge(LogCount(msg="^Not recorded$", min=1, objects=["other"]), h)) == ["inconclusive"]
    assert results(judge(LogCount(msg="^Preempted$", max=0, objects=["nobody"]), h)) == ["inconclusive"]


def test_log_count_fields_pick_the_lines_with_those_values():
    # kubernetes-sigs/kueue#9591 (cases/kueue_9591): the scheduler's requeue found the Workload already queued.
    h = start() + [log(1, REQUEUED, added=True), log(1.1, REQUEUED, added=False), log(1.2, REQUEUED, added=True),
                   log(1.3, REQUEUED, OTHER, added=0)]
    c = LogCount(msg="^Workload re-queued$", fields={"added": False}, max=0, objects=["victim"])
    assert results(judge(c, h)) == ["violated"]
    assert "added=false" in judge(c, h)[0].summary
    assert results(judge(LogCount(msg=REQUEUED, fields={"added": True}, max=2, objects=["victim"]), h)) == ["held"]
    # 0 is not false, a missing field is no match.
    assert results(judge(LogCount(msg=REQUEUED, fields={"added": False}, max=0, objects=["other"]), h)) == ["held"]
    assert results(judge(LogCount(msg=REQUEUED, fields={"nope": 1}, max=0, objects=["victim"]), h)) == ["held"]


@pytest.mark.parametrize("kw, text", [
    (dict(msg="x", max=1, fields=[1]), "fields must map"), (dict(msg="x", max=1, fields={"a": [1]}), "fields must map"),
    (dict(msg=""), "msg must be"), (dict(msg="(", max=1), "not a regular expression"),
    (dict(msg="x"), "give max"), (dict(msg="x", max=1, window=0), "window must be"),
    (dict(msg="x", min=1), "needs `objects`"), (dict(msg="x", max=1, per="role"), "per must be"),
])
def test_log_count_refuses_bad_parameters(kw, text):
    with pytest.raises(ValueError, match=text):
        LogCount(**kw)


# ---- from explore: --oracle ----------------------------------------------------------------------------

def test_explore_oracles_parse_and_join_the_selection():
    from harness.explore.plugin import explore_selection, parse_oracles

    o = parse_oracles(['write_count={"write": "eviction", "max": 1}', "log_count={\"msg\": \"^Preempted$\", \"max\": 3}"])
    assert o == {"write_count": {"write": "eviction", "max": 1}, "log_count": {"msg": "^Preempted$", "max": 3}}
    sel = explore_selection({"liveness": {"jobs": ["job2"]}}, o)
    assert sel["write_count"] == {"write": "eviction", "max": 1} and sel["liveness"] == {"jobs": ["job2"]}
    # The case's own parameters win over an oracle of the same name.
    assert explore_selection({"write_count": {"write": "admission", "min": 1, "per": "case"}}, o)["write_count"]["write"] == "admission"
    for bad, text in (("write_count=[1]", "JSON object"), ("write_count={", "JSON object"),
                      ("nope", "no checker named"), ('write_count={"write": "x", "max": 1}', "write must be one of")):
        with pytest.raises(pytest.UsageError, match=text):
            parse_oracles([bad])


def test_at_least_without_a_bound_above_decides_once_reached():
    c = WriteCount(write="admission", min=1, objects=["victim"])
    h = sorted(start() + [req(1, VICTIM, write="admission")], key=lambda e: e["ts"])
    assert c.decided(h, {}, _names(h)) and results(judge(c, h)) == ["held"]
    h = sorted(start() + [req(1, VICTIM, write="pending")], key=lambda e: e["ts"])
    assert not c.decided(h, {}, _names(h)) and results(judge(c, h)) == ["violated"]


def test_log_count_until_admitted_ends_the_count_at_the_admission_not_at_a_timer():
    """kubernetes-sigs/kueue#9889 slept 16 s for re-queues to pass; with until_admitted the count is final once w1
    is Admitted (fixed Kueue: at once), or over max (affected: the 3rd re-queue, backoff 1, 2, 4 s)."""
    from harness.history.names import Names

    c = LogCount(msg="^Workload re-queued for second pass$", objects=["w1"], max=2, until_admitted=True)
    h = start() + [log(1, "Workload re-queued for second pass", name="w1")]
    pending = {"workloads": [{"metadata": {"namespace": NS, "name": "w1"}, "status": {}}]}
    admitted = {"workloads": [{"metadata": {"namespace": NS, "name": "w1"},
                               "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}]}
    assert not c.decided(h, pending, Names(h)) and c.decided(h, admitted, Names(h))
    three = h + [log(3, "Workload re-queued for second pass", name="w1"), log(7, "Workload re-queued for second pass", name="w1")]
    assert c.decided(three, pending, Names(three))
    with pytest.raises(ValueError, match="until_admitted"):
        LogCount(msg="x", max=1, until_admitted=True)
