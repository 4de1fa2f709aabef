"""Name globs in `wait` steps and `{object: …}` triggers (`Workload/job-a-*`: the Workload Kueue made for Job
a, whose name ends in a hash), with the rule of patch/delete steps — exactly one object — judged when it
matters (a matching object satisfies the fact, or is deleted, while another matches too: the fact can never
hold, the proxy logs `fact_problem` and a wait fails); and what an object fact says it observed: the value
that matched (`$.spec.suspend = false at rv 130`), not the object's unrelated conditions."""

from __future__ import annotations

import json
import threading
import time

import pytest

from harness.cli import manual as cli
from harness.nemesis import facts, kube
from harness.plan import steps
from harness.plan.load import PlanError, parse_plan
from harness.plan.rules import Trigger
from harness.proxy.addons.state import ProxyState
from harness.proxy.notices import notice
from tests.unit.test_steps import NS, FakeApi, FakeWatchRest

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\n"


@pytest.fixture(autouse=True)
def _plain_watch_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facts, "watch_events", lambda resp: resp)  # FakeWatchRest yields (type, object) pairs


def wl(name: str, rv: str, **conds: str) -> dict:
    return {"metadata": {"name": name, "namespace": NS, "resourceVersion": rv},
            "status": {"conditions": [{"type": k, "status": v, "reason": k} for k, v in conds.items()]}}


def job(suspend: bool, rv: str) -> dict:
    return {"metadata": {"name": "a", "namespace": NS, "resourceVersion": rv}, "spec": {"suspend": suspend},
            "status": {"conditions": [{"type": "Suspended", "status": str(suspend), "reason": "JobSuspended"}]}}


def observer(rest, problems: list | None = None) -> facts.FactObserver:
    return facts.FactObserver(rest, None, lambda k, d: None, NS,
                              report_problem=(lambda k, p: problems.append((k, p))) if problems is not None else None)


# ---------------------------------------------------------------------------------------------------------
# The loader takes globs where it refused them


def test_a_glob_in_a_wait_step_and_an_object_trigger_loads() -> None:
    plan = parse_plan(HEAD + """steps:
  - id: reserved
    wait: {object: Workload/job-a-*, condition: QuotaReserved}
  - id: gone
    after: [{object: "Workload/job-a-?????", deleted: true}]
    wait: {object: Job/a, field: '$.spec.suspend', equals: false}
""", "t.yaml", namespace=NS)
    by_id = {r.id: r for r in plan.rules}
    assert by_id["reserved"].param("wait")["object"] == "Workload/job-a-*"
    assert by_id["gone"].release.after[0].object == "Workload/job-a-?????"
    with pytest.raises(PlanError, match=r"t.yaml:8: step x: wait: object 'Workload/job-\[a-\*': glob 'job-\[a-\*' "
                                        r"has an unbalanced '\['"):
        parse_plan(HEAD + "steps:\n  - id: other\n    wait: {log: x}\n  - id: x\n"
                   "    wait: {object: 'Workload/job-[a-*', condition: QuotaReserved}\n", "t.yaml")
    assert Trigger.from_dict({"object": "Workload/job-a-*", "condition": "Admitted"}, "t").describe() \
        == "Workload/job-a-* Admitted=True"


def test_kube_rest_lists_and_watches_a_glob_by_kind_and_a_name_by_field_selector() -> None:
    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
    items = [{"metadata": {"name": n}} for n in ("job-a-1a2b3", "job-b-9f8e7")]
    api = FakeApi({("GET", path): (200, {"metadata": {"resourceVersion": "41"}, "items": items})})
    rest = kube.KubeRest(api)
    objs, rv = rest.list_objects({"object": "Workload/job-a-*", "namespace": NS}, NS)
    assert (len(objs), rv) == (2, "41") and api.calls[-1][1] == path  # every Workload; the observer picks
    rest.list_objects({"object": "Workload/w1", "namespace": NS}, NS)
    assert api.calls[-1][1] == path + "?fieldSelector=metadata.name%3Dw1"
    rest.watch_objects({"object": "Workload/job-a-*", "namespace": NS}, NS, "41")
    assert "fieldSelector" not in api.calls[-1][1] and "watch=true" in api.calls[-1][1]


# ---------------------------------------------------------------------------------------------------------
# FactObserver with globs


def test_a_glob_fact_holds_on_the_one_object_it_matches() -> None:
    rest = FakeWatchRest([wl("job-b-00000", "9", QuotaReserved="True")],  # another Job's Workload: not judged
                         [[("ADDED", wl("job-a-1a2b3", "11")),
                           ("MODIFIED", wl("job-b-00000", "12", QuotaReserved="True")),
                           ("MODIFIED", wl("job-a-1a2b3", "13", QuotaReserved="True"))]])
    obs = observer(rest)
    key = obs.register({"object": "Workload/job-a-*", "namespace": NS, "condition": "QuotaReserved"}, time.time(), "w")
    try:
        detail = obs.wait(key, 5, threading.Event())
    finally:
        obs.stop()
    assert detail["observed"] == "Workload team-a/job-a-1a2b3: QuotaReserved=True(QuotaReserved) at rv 13"
    assert detail["object"] == "Workload team-a/job-a-1a2b3" and detail["resource_version"] == "13"


def test_a_glob_that_matches_two_objects_when_it_matters_can_never_hold() -> None:
    # Jobs a and a-b: job-a-* takes both Workloads; job-a-b's is reserved first while job-a-'s exists.
    rest = FakeWatchRest([wl("job-a-1a2b3", "10"), wl("job-a-b-4c5d6", "11")],
                         [[("MODIFIED", wl("job-a-b-4c5d6", "12", QuotaReserved="True")),
                           ("DELETED", wl("job-a-b-4c5d6", "13")),
                           ("MODIFIED", wl("job-a-1a2b3", "14", QuotaReserved="True"))]])
    problems: list = []
    obs = observer(rest, problems)
    key = obs.register({"object": "Workload/job-a-*", "namespace": NS, "condition": "QuotaReserved"}, time.time(), "w")
    try:
        with pytest.raises(steps.StepError) as exc:
            obs.wait(key, 5, threading.Event())
    finally:
        obs.stop()
    msg = str(exc.value)
    assert msg.startswith("Workload/job-a-* matched 2 Workloads in namespace team-a when job-a-b-4c5d6 had "
                          "QuotaReserved=True(QuotaReserved) at rv 12 (job-a-1a2b3, job-a-b-4c5d6)"), msg
    assert "must match exactly one object" in msg and "job-a-?????" in msg
    assert problems == [(key, msg)]
    assert obs.seen(key) is None  # the later single match does not make it hold: the plan is ambiguous


def test_a_glob_deletion_counts_when_no_other_object_matches() -> None:
    rest = FakeWatchRest([wl("job-a-1a2b3", "10")], [[("DELETED", wl("job-a-1a2b3", "11"))]])
    obs = observer(rest)
    gone = obs.register({"object": "Workload/job-a-*", "namespace": NS, "deleted": True}, time.time(), "w")
    try:
        detail = obs.wait(gone, 5, threading.Event())
    finally:
        obs.stop()
    assert detail["observed"] == "Workload team-a/job-a-1a2b3 deleted (DELETED)"

    rest = FakeWatchRest([wl("job-a-1a2b3", "10"), wl("job-a-9f9f9", "10")], [[("DELETED", wl("job-a-1a2b3", "11"))]])
    problems: list = []
    obs = observer(rest, problems)
    gone = obs.register({"object": "Workload/job-a-*", "namespace": NS, "deleted": True}, time.time(), "w")
    try:
        with pytest.raises(steps.StepError, match=r"matched 2 Workloads in namespace team-a when job-a-1a2b3 was "
                                                   r"deleted \(DELETED\) \(job-a-1a2b3, job-a-9f9f9\)"):
            obs.wait(gone, 5, threading.Event())
    finally:
        obs.stop()


def test_a_glob_that_matches_nothing_says_so_when_it_times_out() -> None:
    obs = observer(FakeWatchRest([wl("job-b-00000", "9")], []))
    key = obs.register({"object": "Workload/job-a-*", "namespace": NS, "condition": "Admitted"}, time.time(), "w")
    try:
        with pytest.raises(TimeoutError, match=r"last observed: no Workload matches job-a-\* \(read\)"):
            obs.wait(key, 0.3, threading.Event())
    finally:
        obs.stop()


# ---------------------------------------------------------------------------------------------------------
# What a field fact says it observed


def test_a_field_wait_reports_the_value_that_matched_not_the_conditions() -> None:
    rest = FakeWatchRest(job(True, "129"), [[("MODIFIED", job(False, "130"))]])
    obs = observer(rest)
    key = obs.register({"object": "Job/a", "namespace": NS, "field": "$.spec.suspend", "equals": False}, time.time(), "w")
    try:
        detail = obs.wait(key, 5, threading.Event())
    finally:
        obs.stop()
    assert detail["observed"] == "$.spec.suspend = false at rv 130"  # was "rv 130: Suspended=True(JobSuspended)"
    assert detail["object"] == "Job team-a/a" and "Suspended" not in detail["observed"]


def test_a_field_wait_that_times_out_says_the_field_value_it_last_saw() -> None:
    obs = observer(FakeWatchRest(job(True, "129"), []))
    key = obs.register({"object": "Job/a", "namespace": NS, "field": "$.spec.suspend", "equals": False}, time.time(), "w")
    try:
        with pytest.raises(TimeoutError, match=r"last observed: \$\.spec\.suspend = true at rv 129\)"):
            obs.wait(key, 0.3, threading.Event())
    finally:
        obs.stop()
    assert facts._state_line({"field": "$.status.admission"}, job(True, "7")) == "$.status.admission not set at rv 7"


# ---------------------------------------------------------------------------------------------------------
# The proxy side of a fact that can never hold


def test_the_proxy_logs_a_fact_problem_once_and_shows_it() -> None:
    st = ProxyState()
    plan = parse_plan(HEAD + """rules:
  - id: admission-b
    match: {write: admission, name: "job-b-*"}
    action: hold
    release:
      after: [{object: Workload/job-a-*, condition: QuotaReserved}]
""", "t.yaml", namespace=NS)
    st.add_rules(list(plan.rules), plan="t")
    [key] = st.fact_keys()
    assert json.loads(key)["object"] == "Workload/job-a-*"
    ev = st.fact_problem(key, "Workload/job-a-* matched 2 Workloads …")
    assert (ev["event"], ev["rules"], ev["what"]) == ("fact_problem", ["admission-b"], "Workload/job-a-* QuotaReserved=True")
    assert st.fact_problem(key, "again")["known"] is True
    assert [e["event"] for e in st.log.events].count("fact_problem") == 1
    assert key not in st.facts  # it does not hold
    assert "PROBLEM: Workload/job-a-* matched 2 Workloads …" in cli._rule_lines(st.view())
    assert notice(ev) == "[kueue-harness] PROBLEM: Workload/job-a-* matched 2 Workloads … (waiting: admission-b)"
    with pytest.raises(KeyError):
        st.fact_problem('{"log": "nobody waits"}', "x")
    st.remove_rule("admission-b")
    assert st.view()["fact_problems"] == {}


def test_the_example_plan_of_the_docs_loads() -> None:
    """docs/examples/job-steps.yaml (the plan docs/fault-plans.md shows `holds` for) waits by a glob."""
    from pathlib import Path

    from harness.plan.load import load_plan

    plan = load_plan(Path(__file__).resolve().parents[2] / "docs" / "examples" / "job-steps.yaml", namespace=NS)
    by_id = {r.id: r for r in plan.rules}
    assert by_id["reserved"].param("wait")["object"] == "Workload/job-a-*"
    assert by_id["cleanup"].release.after[0].object == "Workload/job-a-*"
