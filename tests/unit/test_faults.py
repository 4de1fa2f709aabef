"""Unit tests for harness.plan.rules: Match/Rule validation (the control channel's input), matching, and the
RuleBook's `times` accounting, stage separation and first-rule-wins order."""

from __future__ import annotations

from typing import Any

import pytest

from harness.kueue.api import KueueWrite
from harness.plan.rules import Match, Rule, RuleBook, RuleError, kubernetes_status

NS = "team-a"
STATUS_PATH = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{name}/status?fieldManager={mgr}&force=true"

# ---------------------------------------------------------------------------------------------------------
# Builders


def kw(
    write: str = "admission",
    name: str = "job-job1-3f2a1",
    namespace: str = NS,
    kind: str = "Workload",
    field_manager: str | None = "kueue-admission",
    method: str = "PATCH",
) -> KueueWrite:
    """A classified write as kueue_api.classify_request returns it."""
    return KueueWrite(
        kind=kind, namespace=namespace, name=name, write=write, method=method,
        subresource="status" if kind == "Workload" else None, field_manager=field_manager,
        patch_type="apply", strict=False, resource_version=None,
    )


def path_of(w: KueueWrite) -> str:
    return STATUS_PATH.format(ns=w.namespace, name=w.name, mgr=w.field_manager)


def matches(match: dict[str, Any], w: KueueWrite | None, method: str = "PATCH", path: str | None = None) -> bool:
    if path is None:
        path = path_of(w) if w else "/apis/kueue.x-k8s.io/v1beta2/workloads?watch=true"
    return Match.from_dict(match).matches(w, method, path)


def rule(rule_id: str = "r1", **kw_: Any) -> Rule:
    d: dict[str, Any] = {"id": rule_id, "match": {"write": "admission"}}
    d.update(kw_)
    return Rule.from_dict(d)


def take(book: RuleBook, w: KueueWrite, stage: str = "request") -> str | None:
    r = book.first(w, w.method, path_of(w), stage)
    return r.id if r else None


# ---------------------------------------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(
    ("d", "words"),
    [
        ({"id": "r1", "match": {}, "acton": "fail"}, ["rule r1", "unknown key", "acton", "allowed"]),
        ({"id": "r1", "match": {"wirte": "admission"}}, ["match", "unknown key", "wirte"]),
        ({"id": "r1", "match": {"write": "admitted"}}, ["match.write", "'admitted'"]),
        ({"id": "r1", "match": {"path_regex": "/workloads/(unclosed"}}, ["match.path_regex"]),
        ({"id": "r1", "match": {}, "action": "drop"}, ["rule r1", "action 'drop'", "hold"]),
        ({"id": "r1", "match": {}, "stage": "both"}, ["rule r1", "stage 'both'", "response"]),
        ({"id": "r1", "match": {}, "times": 0}, ["rule r1", "times"]),
        ({"id": "r1", "match": {}, "times": -3}, ["rule r1", "times"]),
        ({"id": "r1", "match": {}, "times": "2"}, ["rule r1", "times"]),
        ({"id": "r1", "match": {}, "action": "fail", "status": 99}, ["rule r1", "got 99"]),
        ({"id": "r1", "match": {}, "status": 500}, ["rule r1", "status applies to action fail only"]),
        ({"id": "r1", "match": {}, "action": "fail", "status": 600}, ["rule r1", "got 600"]),
        ({"id": "r1", "match": {}, "status": "409"}, ["rule r1", "status"]),
        ({"id": "r1", "match": {}, "delay": "1s"}, ["rule r1", "delay"]),
        ({"id": "r1", "match": {}, "max_hold": -1}, ["rule r1", "max_hold"]),
        ({"id": "r1", "match": {}, "delay": -0.5}, ["rule r1", "delay"]),
        ({"id": "r1", "match": {}, "times": True}, ["rule r1", "times"]),
        ({"id": "r1", "match": {"name": 5}}, ["match.name"]),
        ({"id": "r1", "match": {"method": ["PATCH"]}}, ["match.method"]),
        ({"id": "r1", "match": "admission"}, ["rule r1", "match"]),
        ({"match": {}}, ["`id` is required"]),
        ({"id": "", "match": {}}, ["`id` is required"]),
    ],
)
def test_bad_rules_are_rejected_with_a_message_naming_the_problem(d: dict[str, Any], words: list[str]) -> None:
    with pytest.raises(RuleError) as ei:
        Rule.from_dict(d)
    for w in words:
        assert w in str(ei.value)


@pytest.mark.parametrize("write", ["admission", "eviction", "quota_release", "pending", "finish", "other",
                                   "patch", "post", "put", "delete"])
def test_every_write_class_and_verb_is_accepted(write: str) -> None:
    assert Match.from_dict({"write": write}).write == write


def test_rule_defaults_and_round_trip_through_to_dict() -> None:
    r = Rule.from_dict({"id": "hold-adm", "match": {"write": "admission", "name": "job-job1-*"}})
    assert (r.action, r.stage, r.times, r.param("max_hold")) == ("hold", "request", 1, 600.0)
    assert "status" not in r.to_dict()  # fail owns status, reason and message
    d = r.to_dict()
    assert d["match"] == {"write": "admission", "name": "job-job1-*"}  # None fields are left out
    assert Rule.from_dict(d) == r


def test_times_null_means_every_match() -> None:
    assert Rule.from_dict({"id": "r", "match": {}, "times": None}).times is None


def test_kubernetes_status_body() -> None:
    assert kubernetes_status(409, "Conflict", "the object has been modified") == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the object has been modified", "reason": "Conflict", "code": 409,
    }


# ---------------------------------------------------------------------------------------------------------
# Matching


def test_empty_match_matches_everything_including_reads() -> None:
    assert matches({}, kw())
    assert matches({}, None, "GET")


def test_match_by_write_class() -> None:
    assert matches({"write": "admission"}, kw("admission"))
    assert not matches({"write": "admission"}, kw("eviction"))
    assert matches({"write": "eviction"}, kw("eviction"))


def test_match_by_name_glob() -> None:
    m = {"name": "job-job1-*"}
    assert matches(m, kw(name="job-job1-3f2a1"))
    assert not matches(m, kw(name="job-job10-3f2a1"))
    assert not matches(m, kw(name="job-job2-3f2a1"))
    assert not matches({"name": "JOB-job1-*"}, kw(name="job-job1-3f2a1"))  # case-sensitive
    assert matches({"name": "job-job?-3f2a1"}, kw(name="job-job2-3f2a1"))


def test_match_by_namespace_glob() -> None:
    assert matches({"namespace": "team-*"}, kw(namespace="team-a"))
    assert not matches({"namespace": "team-*"}, kw(namespace="kueue-system"))
    assert matches({"namespace": "team-a"}, kw(namespace="team-a"))


def test_match_by_field_manager_is_exact() -> None:
    assert matches({"field_manager": "kueue-admission"}, kw(field_manager="kueue-admission"))
    assert not matches({"field_manager": "kueue"}, kw(field_manager="kueue-admission"))
    assert not matches({"field_manager": "kueue-admission"}, kw(field_manager="kueue-job-controller-PodsReady"))
    assert not matches({"field_manager": "kueue-admission"}, kw(field_manager=None))


def test_match_by_kind() -> None:
    job = kw(write="patch", name="job1", kind="Job", field_manager=None)
    assert matches({"kind": "Job", "write": "patch"}, job, path=f"/apis/batch/v1/namespaces/{NS}/jobs/job1")
    assert not matches({"kind": "Workload"}, job, path=f"/apis/batch/v1/namespaces/{NS}/jobs/job1")


def test_match_by_method_is_case_insensitive() -> None:
    assert matches({"method": "patch"}, kw(), "PATCH")
    assert matches({"method": "PATCH"}, kw(), "patch")
    assert not matches({"method": "PUT"}, kw(), "PATCH")


def test_match_by_path_regex_searches_path_and_query() -> None:
    w = kw()
    assert matches({"path_regex": r"/workloads/[^/]+/status"}, w)
    assert matches({"path_regex": "fieldManager=kueue-admission"}, w)  # the query is part of it
    assert not matches({"path_regex": "^/api/v1/"}, w)
    assert not matches({"path_regex": "fieldManager=kueue-reclaimable-pods"}, w)


def test_all_given_fields_must_match() -> None:
    m = {"write": "admission", "name": "job-job1-*", "namespace": NS, "field_manager": "kueue-admission",
         "method": "PATCH", "path_regex": "/status"}
    assert matches(m, kw())
    assert not matches({**m, "namespace": "other"}, kw())
    assert not matches({**m, "method": "PUT"}, kw())
    assert not matches({**m, "write": "eviction"}, kw())


def test_write_fields_never_match_an_unclassified_request() -> None:
    # A GET has no classification (write None): a rule on a write field cannot apply to it ...
    assert not matches({"write": "admission"}, None, "GET")
    assert not matches({"name": "*"}, None, "GET")
    # ... while method/path_regex-only rules can.
    assert matches({"method": "GET", "path_regex": "watch=true"}, None, "GET")


# ---------------------------------------------------------------------------------------------------------
# RuleBook


def test_times_limits_a_rule_to_its_first_n_matches() -> None:
    book = RuleBook()
    book.add(rule("twice", times=2))
    adm = kw("admission")
    assert [take(book, adm) for _ in range(3)] == ["twice", "twice", None]
    assert book.rules["twice"].hits == 2


def test_non_matching_requests_do_not_use_up_times() -> None:
    book = RuleBook()
    book.add(rule("once", times=1))
    assert take(book, kw("eviction")) is None
    assert take(book, kw("pending")) is None
    assert book.rules["once"].hits == 0
    assert take(book, kw("admission")) == "once"
    assert take(book, kw("admission")) is None


def test_times_none_matches_forever() -> None:
    book = RuleBook()
    book.add(rule("always", times=None))
    assert all(take(book, kw()) == "always" for _ in range(50))
    assert book.rules["always"].hits == 50


def test_stages_are_separate() -> None:
    book = RuleBook()
    book.add(rule("req", stage="request"))
    book.add(rule("resp", stage="response"))
    adm = kw("admission")
    # Asking at one stage neither returns nor uses up the other stage's rule.
    assert take(book, adm, "response") == "resp"
    assert take(book, adm, "response") is None
    assert book.rules["req"].hits == 0
    assert take(book, adm, "request") == "req"
    assert take(book, adm, "request") is None


def test_first_rule_in_insertion_order_wins_then_the_next_takes_over() -> None:
    book = RuleBook()
    book.add(rule("first", times=1))
    book.add(rule("second", times=1))
    adm = kw("admission")
    assert take(book, adm) == "first"
    assert book.rules["second"].hits == 0  # not consumed while "first" acted
    assert take(book, adm) == "second"
    assert take(book, adm) is None


def test_more_specific_later_rule_does_not_override_earlier_one() -> None:
    book = RuleBook()
    book.add(Rule.from_dict({"id": "any-admission", "match": {"write": "admission"}, "times": None}))
    book.add(Rule.from_dict({"id": "job1", "match": {"write": "admission", "name": "job-job1-*"}}))
    assert take(book, kw(name="job-job1-3f2a1")) == "any-admission"


def test_duplicate_id_is_rejected_and_remove_unloads() -> None:
    book = RuleBook()
    book.add(rule("r1"))
    with pytest.raises(RuleError, match="r1.*already loaded"):
        book.add(rule("r1", action="fail"))
    book.remove("r1")
    book.remove("not-there")  # no error
    assert take(book, kw()) is None
    book.add(rule("r1"))  # the id is free again
    assert take(book, kw()) == "r1"
