"""Release triggers: harness.plan.rules.trigger_satisfied on its own, then the proxy addon
(proxy_addons/kueue_faults.py) evaluating a loaded plan's triggers over synthetic flows (mitmproxy's
taddons/tflow/tutils, as in test_addon_inject.py): the shipped stuck-preemption plan driven in the seed order,
all-or-nothing `/plan`, `release.timeout` with `on_timeout`, and drop_watch_events on the watch tap.

Each addon test is a plain sync test running one `asyncio.run(...)`: holds are asyncio tasks on that loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils

from harness.plan.load import load_plan, parse_plan
from harness.plan.rules import FlowRecord, Trigger, kubernetes_status, trigger_satisfied
from harness.proxy.addons import KueueFaults

T = TypeVar("T")

NS = "team-a"
WL1 = "job-job1-3f2a1"
WL2 = "job-job2-9c8b7"
KEY1 = f"{NS}/{WL1}"
WATCH_PATH = (
    "/apis/kueue.x-k8s.io/v1beta2/workloads?allowWatchBookmarks=true&resourceVersion=100"
    "&timeoutSeconds=412&watch=true"
)

# ---------------------------------------------------------------------------------------------------------
# trigger_satisfied


def rec(flow: int = 1, *, ns: str = NS, name: str = WL1, **kw: Any) -> FlowRecord:
    return FlowRecord(flow, ns, name, **kw)


@pytest.mark.parametrize(
    ("trigger", "record", "expected"),
    [
        (Trigger(rule="r", state="held"), rec(), False),
        (Trigger(rule="r", state="held"), rec(held=True), True),  # a request hold: no status
        (Trigger(rule="r", state="held", status=200), rec(held=True), False),
        (Trigger(rule="r", state="held", status=200), rec(held=True, held_status=200), True),
        (Trigger(rule="r", state="held", status=200), rec(held=True, held_status=409), False),
        (Trigger(rule="r", state="held"), rec(held=True, held_status=409), True),
        (Trigger(rule="r", state="released"), rec(held=True), False),
        (Trigger(rule="r", state="released"), rec(held=True, released=True), True),
        (Trigger(rule="r", state="released", status=200), rec(released=True), True),  # status: held/answered only
        (Trigger(rule="r", state="answered"), rec(), False),
        (Trigger(rule="r", state="answered"), rec(answered_status=409), True),
        (Trigger(rule="r", state="answered", status=200), rec(answered_status=409), False),
        (Trigger(rule="r", state="answered", status=200), rec(answered_status=200), True),
        (Trigger(rule="r"), rec(answered_status=500), True),  # state defaults to answered
        (Trigger(rule="r", state="answered"), rec(held=True, released=True), False),
    ],
)
def test_rule_state_triggers(trigger: Trigger, record: FlowRecord, expected: bool) -> None:
    assert trigger_satisfied(trigger, {"r": [record]}, {}) is expected


@pytest.mark.parametrize(
    ("answered_status", "answered_rv", "delivered", "expected"),
    [
        (200, "10", {KEY1: 10}, True),
        (200, "10", {KEY1: 11}, True),
        (200, "10", {KEY1: 9}, False),
        (200, "9", {KEY1: 10}, True),  # integers: as strings "9" > "10"
        (200, "10", {}, False),  # nothing delivered yet
        (200, "10", {f"{NS}/{WL2}": 50, f"other/{WL1}": 50}, False),  # other objects
        (201, "10", {KEY1: 10}, True),  # a create (Kueue creating a Workload): any 2xx
        (409, "10", {KEY1: 10}, False),  # the answer was not a success
        (None, None, {KEY1: 10}, False),  # not answered
        (200, None, {KEY1: 10}, False),  # answered without a resourceVersion
        (200, "not-a-number", {KEY1: 10}, False),
    ],
)
def test_delivered_trigger(answered_status: int | None, answered_rv: str | None, delivered: dict[str, int],
                           expected: bool) -> None:
    flows = {"adm": [rec(answered_status=answered_status, answered_rv=answered_rv)]}
    assert trigger_satisfied(Trigger(delivered="adm"), flows, delivered) is expected


def test_delivered_needs_rv_at_least_the_answer_not_string_order() -> None:
    flows = {"adm": [rec(answered_status=200, answered_rv="10")]}
    assert "9" > "10"  # what a string comparison would get wrong
    assert not trigger_satisfied(Trigger(delivered="adm"), flows, {KEY1: 9})


def test_any_flow_of_a_rule_counts() -> None:
    flows = {"r": [rec(1), rec(2, name=WL2, held=True, released=True, answered_status=200, answered_rv="30")]}
    assert trigger_satisfied(Trigger(rule="r", state="held"), flows, {})
    assert trigger_satisfied(Trigger(rule="r", state="released"), flows, {})
    assert trigger_satisfied(Trigger(rule="r", state="answered", status=200), flows, {})
    # delivered: the second flow's object (job2) at its answered rv
    assert trigger_satisfied(Trigger(delivered="r"), flows, {f"{NS}/{WL2}": 30})
    assert not trigger_satisfied(Trigger(delivered="r"), flows, {KEY1: 30})


def test_delivered_any_flow_with_a_successful_answer() -> None:
    flows = {"r": [rec(1, answered_status=409, answered_rv="5"), rec(2, answered_status=200, answered_rv="7")]}
    assert not trigger_satisfied(Trigger(delivered="r"), flows, {KEY1: 6})
    assert trigger_satisfied(Trigger(delivered="r"), flows, {KEY1: 7})


@pytest.mark.parametrize("trigger", [Trigger(rule="nope", state="held"), Trigger(rule="nope", state="released"),
                                     Trigger(rule="nope"), Trigger(delivered="nope")])
def test_unknown_rule_is_false(trigger: Trigger) -> None:
    flows = {"r": [rec(held=True, released=True, answered_status=200, answered_rv="1")]}
    assert trigger_satisfied(trigger, flows, {KEY1: 100}) is False
    assert trigger_satisfied(trigger, {}, {}) is False


# ---------------------------------------------------------------------------------------------------------
# Addon builders


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def cond(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "",
            "observedGeneration": 1, "lastTransitionTime": "2025-06-01T10:00:00Z"}


ASSIGNMENT = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"},
                                                          "resourceUsage": {"cpu": "1"}, "count": 1}]}
ADMISSION = {"admission": ASSIGNMENT,
             "conditions": [cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "True", "Admitted")]}
EVICTION = {"admission": ASSIGNMENT,
            "conditions": ADMISSION["conditions"] + [cond("Evicted", "True", "Preempted"),
                                                     cond("Preempted", "True", "InClusterQueue")]}
QUOTA_RELEASE = {"conditions": [cond("QuotaReserved", "False", "Pending"), cond("Evicted", "True", "Preempted")]}


def status_patch(name: str, status: dict[str, Any], *, ns: str = NS, rv: str | None = None,
                 manager: str = "kueue-admission") -> http.HTTPFlow:
    """Kueue's SSA status PATCH for Workload `name` (loose unless `rv` is given: then strict)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": "u-" + name, "generation": 1}
    if rv:
        meta["resourceVersion"] = rv
    body = json.dumps({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": meta,
                       "status": status}).encode()
    req = tutils.treq(
        method=b"PATCH",
        path=f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads/{name}/status"
             f"?fieldManager={manager}&force=true".encode(),
        headers=http.Headers(content_type="application/apply-patch+yaml",
                             user_agent="kueue/v0.17.0 (linux/amd64) 5c1a2b3", content_length=str(len(body))),
        content=body,
    )
    return tflow.tflow(req=req)


def server_response(body: bytes, status: int = 200) -> http.Response:
    return tutils.tresp(status_code=status, content=body, headers=http.Headers(content_type="application/json"))


def workload_json(name: str, rv: str, status: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
                       "metadata": {"name": name, "namespace": NS, "resourceVersion": rv},
                       "status": status}).encode()


def watch_line(type_: str, name: str | None, rv: str, status: dict[str, Any] | None = None) -> bytes:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if name is not None:
        meta.update(name=name, namespace=NS)
    obj = {"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": meta, "status": status or {}}
    return json.dumps({"type": type_, "object": obj}).encode() + b"\n"


def watch_flow(addon: KueueFaults) -> Callable[[bytes], bytes]:
    req = tutils.treq(method=b"GET", path=WATCH_PATH.encode(), headers=http.Headers(accept="application/json"),
                      content=b"")
    f = tflow.tflow(req=req, resp=server_response(b""))
    addon.responseheaders(f)
    assert callable(f.response.stream)
    return f.response.stream


def events(addon: KueueFaults, *names: str) -> list[dict[str, Any]]:
    return [e for e in addon.log.events if e["event"] in names]


async def until(pred: Callable[[], Any], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


def held_by(addon: KueueFaults, rule_id: str) -> bool:
    return any(h.rule_id == rule_id for h in addon.holds.values())


async def settle() -> None:
    """Let every ready task run (a released hold resumes on the next loop iterations)."""
    for _ in range(20):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------------------------------
# The shipped stuck-preemption plan, driven in the seed order


def test_stuck_preemption_plan_releases_each_hold_by_its_trigger_in_order() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            plan = load_plan("stuck-preemption", namespace=NS)
            code, payload = addon._handle("POST", "/plan", plan.to_wire())
            assert code == 201, payload
            assert payload == {"loaded": ["admission-job1", "quota-release-job1", "eviction-job1"],
                               "plan": "stuck-preemption"}
            assert [e["plan"] for e in events(addon, "rule_added")] == ["stuck-preemption"] * 3

            # The same write in another namespace is not the case's: it passes (namespace= injected).
            other = status_patch(WL1, ADMISSION, ns="team-b")
            await asyncio.wait_for(addon.request(other), 1)
            assert other.response is None and addon.holds == {}

            # 1. job1's admission PATCH is held at the request stage.
            adm = status_patch(WL1, ADMISSION)
            adm_task = asyncio.ensure_future(addon.request(adm))
            await until(lambda: held_by(addon, "admission-job1"))

            # 2. job1's eviction reaches kube-apiserver (not held at the request stage) ...
            ev = status_patch(WL1, EVICTION)
            await asyncio.wait_for(addon.request(ev), 1)
            assert ev.response is None
            await settle()
            assert not adm_task.done()  # nothing released the admission yet
            # ... and its 200 answer is held: that is the admission's trigger.
            ev_answer = workload_json(WL1, "205", EVICTION)
            ev.response = server_response(ev_answer)
            ev_task = asyncio.ensure_future(addon.response(ev))
            await asyncio.wait_for(adm_task, 1)  # 3. the admission goes on to kube-apiserver
            assert adm.response is None
            assert held_by(addon, "eviction-job1") and not ev_task.done()

            # 4. job1's strict quota release is held until the admission was answered.
            qr = status_patch(WL1, QUOTA_RELEASE, rv="205")
            qr_task = asyncio.ensure_future(addon.request(qr))
            await until(lambda: held_by(addon, "quota-release-job1"))
            adm.response = server_response(workload_json(WL1, "210", ADMISSION))
            await asyncio.wait_for(addon.response(adm), 1)
            await asyncio.wait_for(qr_task, 1)
            assert qr.response is None  # released, not failed: kube-apiserver answers the conflict
            conflict = json.dumps(kubernetes_status(409, "Conflict", "the object has been modified")).encode()
            qr.response = server_response(conflict, 409)
            await asyncio.wait_for(addon.response(qr), 1)

            # 5. The eviction's answer waits for Kueue's watch to deliver job1 at >= 210.
            tap = watch_flow(addon)
            early = watch_line("MODIFIED", WL1, "205", EVICTION)
            assert tap(early) == early
            other_wl = watch_line("MODIFIED", WL2, "999", ADMISSION)
            assert tap(other_wl) == other_wl
            await settle()
            assert not ev_task.done()
            late = watch_line("MODIFIED", WL1, "210", ADMISSION)
            assert tap(late) == late
            await asyncio.wait_for(ev_task, 1)
            assert ev.response.status_code == 200 and ev.response.content == ev_answer
            assert addon.holds == {}

            steps = [(e["event"], e["rule"], e.get("stage"), e.get("why"))
                     for e in events(addon, "held", "released", "failed", "hold_timeout", "hold_expired")]
            assert steps == [
                ("held", "admission-job1", "request", None),
                ("held", "eviction-job1", "response", None),
                ("released", "admission-job1", "request", "triggers: eviction-job1 held"),
                ("held", "quota-release-job1", "request", None),
                ("released", "quota-release-job1", "request", "triggers: admission-job1 answered"),
                ("released", "eviction-job1", "response",
                 "triggers: Kueue's watch delivered admission-job1's object"),
            ]
            (ev_held,) = [e for e in events(addon, "held") if e["rule"] == "eviction-job1"]
            assert (ev_held["status"], ev_held["resource_version"]) == (200, "205")
            answers = [(e["write"], e["status"], e["resource_version"]) for e in events(addon, "response")]
            assert answers == [("admission", 200, "210"), ("quota_release", 409, None),
                               ("eviction", 200, "205")]
            assert addon.delivered_rv[KEY1] == 210
            assert {s.rule.id: s.hits for s in addon.rules.rules.values()} == {
                "admission-job1": 1, "quota-release-job1": 1, "eviction-job1": 1}

    run(scenario())


def test_held_trigger_with_status_ignores_a_failed_answer() -> None:
    # The admission waits for the eviction held *with 200*: a 409 answer to the eviction does not count.
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/plan", load_plan("stuck-preemption").to_wire())[0] == 201
            adm_task = asyncio.ensure_future(addon.request(status_patch(WL1, ADMISSION)))
            await until(lambda: held_by(addon, "admission-job1"))
            ev = status_patch(WL1, EVICTION)
            await addon.request(ev)
            ev.response = server_response(json.dumps(kubernetes_status(409, "Conflict", "x")).encode(), 409)
            ev_task = asyncio.ensure_future(addon.response(ev))
            await until(lambda: held_by(addon, "eviction-job1"))
            await settle()
            assert not adm_task.done()
            addon._handle("POST", "/release-all", {})
            await asyncio.wait_for(asyncio.gather(adm_task, ev_task), 1)
            assert {e["why"] for e in events(addon, "released")} == {"release-all"}

    run(scenario())


def test_reloading_a_plan_starts_from_fresh_trigger_state() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            # Run 1: the eviction's answer is held with 200 (the admission's trigger), then everything ends.
            assert addon._handle("POST", "/plan", load_plan("stuck-preemption", namespace=NS).to_wire())[0] == 201
            adm_task = asyncio.ensure_future(addon.request(status_patch(WL1, ADMISSION)))
            await until(lambda: held_by(addon, "admission-job1"))
            ev = status_patch(WL1, EVICTION)
            await addon.request(ev)
            ev.response = server_response(workload_json(WL1, "205", EVICTION))
            ev_task = asyncio.ensure_future(addon.response(ev))
            await asyncio.wait_for(adm_task, 1)
            addon._handle("POST", "/release-all", {"why": "end of case"})
            await asyncio.wait_for(ev_task, 1)
            for rid in list(addon.rules.rules):  # what the pytest plugin does at the end of a case
                assert addon._handle("DELETE", f"/rules/{rid}", {})[0] == 200

            # Run 2, a new case namespace: job1's admission must be held until *this* run's eviction.
            assert addon._handle("POST", "/plan", load_plan("stuck-preemption", namespace="team-b").to_wire())[0] == 201
            adm2 = asyncio.ensure_future(addon.request(status_patch(WL1, ADMISSION, ns="team-b")))
            await until(lambda: held_by(addon, "admission-job1") or adm2.done())
            await settle()
            done_early = adm2.done()
            addon._handle("POST", "/release-all", {})
            await asyncio.wait_for(adm2, 1)
            assert not done_early, f"released by a stale trigger: {events(addon, 'released')[-1]['why']}"

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# /plan is all or nothing


def loaded(addon: KueueFaults) -> list[str]:
    return list(addon.rules.rules)


@pytest.mark.parametrize(
    ("rules", "words"),
    [
        ([{"id": "p1", "match": {"write": "admission"}}, {"id": "p2", "match": {"write": "admitted"}}],
         ["match.write", "admitted"]),
        ([{"id": "p1", "match": {}, "release": {"after": [{"rule": "nope", "state": "held"}]}}],
         ["unknown rule 'nope'"]),
        ([{"id": "p1", "match": {}, "release": {"after": [{"rule": "p2", "state": "answered"}]}},
          {"id": "p2", "match": {}, "release": {"after": [{"rule": "p1", "state": "released"}]}}],
         ["cycle: p1 -> p2 -> p1"]),
        ([{"id": "p1", "match": {}}, {"id": "p1", "match": {}}], ["p1", "given twice"]),
        ([{"id": "p1", "match": {}}, "not-a-rule"], ["id"]),
        ([], ["non-empty"]),
    ],
    ids=["bad-value", "unknown-trigger", "cycle", "duplicate", "not-a-dict", "empty"],
)
def test_bad_plan_loads_nothing(rules: list[Any], words: list[str]) -> None:
    addon = KueueFaults()
    assert addon._handle("POST", "/rules", {"id": "before", "match": {"write": "eviction"}})[0] == 201
    n_events = len(addon.log.events)
    code, payload = addon._handle("POST", "/plan", {"name": "bad", "rules": rules})
    assert code == 400
    for w in words:
        assert w in payload["error"]
    assert loaded(addon) == ["before"]
    assert len(addon.log.events) == n_events  # no rule_added


def test_plan_whose_ids_clash_with_loaded_rules_loads_nothing() -> None:
    addon = KueueFaults()
    assert addon._handle("POST", "/plan", load_plan("stuck-preemption").to_wire())[0] == 201
    second = parse_plan(
        "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: second\nrules:\n"
        "  - id: brand-new\n    action: observe\n"
        "  - id: eviction-job1\n    action: observe\n")
    code, payload = addon._handle("POST", "/plan", second.to_wire())
    assert code == 400
    assert "eviction-job1" in payload["error"] and "already loaded" in payload["error"]
    assert loaded(addon) == ["admission-job1", "quota-release-job1", "eviction-job1"]
    assert [e["plan"] for e in events(addon, "rule_added")] == ["stuck-preemption"] * 3
    # The shipped plan twice: every id clashes.
    assert addon._handle("POST", "/plan", load_plan("stuck-preemption").to_wire())[0] == 400
    assert len(loaded(addon)) == 3



def test_the_proxy_names_every_problem_of_a_refused_plan() -> None:
    # Issue 16 item 5: all problems at once, one per line, not the first only.
    addon = KueueFaults()
    assert addon._handle("POST", "/plan", load_plan("stuck-preemption").to_wire())[0] == 201
    code, payload = addon._handle("POST", "/plan", {"name": "bad", "rules": [
        {"id": "p1", "match": {"write": "admitted"}}, "not-a-rule", {"id": "p3", "times": 0}]})
    assert code == 400
    assert len(payload["errors"]) == 3 and payload["error"] == "\n".join(payload["errors"])
    assert "admitted" in payload["errors"][0] and "rules[1]" in payload["errors"][1] and "times" in payload["errors"][2]
    # Every id of the shipped plan clashes: three problems.
    code, payload = addon._handle("POST", "/plan", load_plan("stuck-preemption").to_wire())
    assert code == 400 and len(payload["errors"]) == 3, payload


def test_plan_triggers_may_name_rules_loaded_before() -> None:
    addon = KueueFaults()
    assert addon._handle("POST", "/rules", {"id": "obs", "match": {"write": "eviction"}, "action": "observe"})[0] == 201
    code, payload = addon._handle("POST", "/plan", {"name": "p", "rules": [
        {"id": "h", "match": {"write": "admission"}, "release": {"after": [{"rule": "obs", "state": "answered"}]}}]})
    assert code == 201, payload


# ---------------------------------------------------------------------------------------------------------
# release.timeout and max_hold


def test_release_timeout_with_on_timeout_fail_answers_with_the_given_status() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            # The trigger names an observe rule that never sees a flow: only the timeout ends the hold.
            assert addon._handle("POST", "/rules", {"id": "never", "match": {"write": "finish"},
                                                    "action": "observe"})[0] == 201
            code, payload = addon._handle("POST", "/rules", {
                "id": "adm", "match": {"write": "admission"},
                "release": {"after": [{"rule": "never", "state": "answered"}], "timeout": 0.05,
                            "on_timeout": "fail", "status": 409, "reason": "Conflict", "message": "too late"}})
            assert code == 201, payload
            f = status_patch(WL1, ADMISSION)
            await asyncio.wait_for(addon.request(f), 2)
            assert f.response is not None and f.response.status_code == 409
            assert json.loads(f.response.content) == kubernetes_status(409, "Conflict", "too late")
            assert [e["event"] for e in events(addon, "held", "hold_timeout", "failed", "released", "hold_expired")] \
                == ["held", "hold_timeout", "failed"]
            (to,) = events(addon, "hold_timeout")
            assert (to["rule"], to["then"]) == ("adm", "fail")
            (failed,) = events(addon, "failed")
            assert (failed["rule"], failed["status"], failed["stage"]) == ("adm", 409, "request")
            assert addon.holds == {}

    run(scenario())


def test_release_timeout_with_on_timeout_release_lets_the_flow_go() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/rules", {"id": "adm", "match": {"write": "admission"},
                                                    "release": {"timeout": 0.05}})[0] == 201
            f = status_patch(WL1, ADMISSION)
            await asyncio.wait_for(addon.request(f), 2)
            assert f.response is None
            (to,) = events(addon, "hold_timeout")
            assert to["then"] == "release"
            (rel,) = events(addon, "released")
            assert rel["why"] == "release.timeout 0.05s"
            assert events(addon, "hold_expired") == []

    run(scenario())


def test_max_hold_below_the_plan_timeout_is_refused() -> None:
    # The proxy would end the hold at max_hold, so the plan's timeout (and its fail) could never come.
    addon = KueueFaults()
    with taddons.context(addon):
        code, body = addon._handle("POST", "/rules", {"id": "adm", "match": {"write": "admission"}, "max_hold": 0.05,
                                                      "release": {"timeout": 30, "on_timeout": "fail"}})
        assert code == 400 and "longer than max_hold" in json.dumps(body)


def test_max_hold_is_the_safety_net_of_a_hold_nothing_releases() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/rules", {"id": "never", "match": {"write": "eviction"}, "action": "hold"})[0] == 201
            assert addon._handle("POST", "/rules", {"id": "adm", "match": {"write": "admission"}, "max_hold": 0.05,
                                                    "release": {"after": [{"rule": "never", "state": "released"}]}})[0] == 201
            f = status_patch(WL1, ADMISSION)
            await asyncio.wait_for(addon.request(f), 2)
            assert f.response is None  # released by the safety net, not failed
            assert len(events(addon, "hold_expired")) == 1
            assert events(addon, "hold_timeout") == []
            assert "max_hold" in events(addon, "released")[0]["why"]

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# drop_watch_events


def stream() -> list[bytes]:
    return [
        watch_line("ADDED", WL1, "100"),
        watch_line("MODIFIED", WL2, "110", ADMISSION),
        watch_line("MODIFIED", WL1, "120", ADMISSION),
        watch_line("BOOKMARK", None, "130"),
        b"not json at all\n",
        watch_line("MODIFIED", WL1, "140", EVICTION),
        # irregular spacing: whatever passes must pass byte for byte
        b'{"type":"MODIFIED",  "object": {"kind":"Workload","metadata":{"name":"' + WL2.encode()
        + b'","namespace":"' + NS.encode() + b'","resourceVersion":"150"},"status":{}}}\n',
    ]


@pytest.mark.parametrize("size", [1, 7, 64, 100_000])
def test_drop_watch_events_drops_exactly_times_matching_lines(size: int) -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/rules", {"id": "drop", "action": "drop_watch_events",
                                                     "match": {"name": "job-job1-*", "namespace": NS},
                                                     "times": 2})
    assert code == 201, payload
    tap = watch_flow(addon)
    lines = stream()
    data = b"".join(lines)
    out = b"".join(tap(data[i:i + size]) for i in range(0, len(data), size)) + tap(b"")
    kept = [lines[1], lines[3], lines[4], lines[5], lines[6]]  # job1 @100 and @120 dropped
    assert out == b"".join(kept)
    dropped = events(addon, "watch_event_dropped")
    assert [(e["rule"], e["name"], e["resource_version"]) for e in dropped] == [
        ("drop", WL1, "100"), ("drop", WL1, "120")]
    assert [(e["name"], e["resource_version"]) for e in events(addon, "watch_event")] == [
        (WL2, "110"), (WL1, "140"), (WL2, "150")]
    # A dropped event was not delivered, so it cannot satisfy a `delivered` trigger.
    assert addon.delivered_rv == {KEY1: 140, f"{NS}/{WL2}": 150}
    assert addon.rules.rules["drop"].hits == 2


def test_drop_watch_events_leaves_other_namespaces_and_partial_lines_alone() -> None:
    addon = KueueFaults()
    assert addon._handle("POST", "/rules", {"id": "drop", "action": "drop_watch_events",
                                            "match": {"name": WL1, "namespace": "elsewhere"}, "times": None})[0] == 201
    tap = watch_flow(addon)
    line = watch_line("MODIFIED", WL1, "100")
    # While a drop rule is loaded, a partial line waits for its newline, then goes out whole.
    assert tap(line[:10]) == b""
    assert tap(line[10:]) == line
    assert tap(b'{"partial') == b""
    assert tap(b"") == b'{"partial'  # end of stream flushes what was held back
    assert events(addon, "watch_event_dropped") == []


def test_every_trigger_kind_is_a_registered_class_a_field_and_a_documented_row() -> None:
    """Triggers are a registry like fault kinds (issue "A house a newcomer lives in"): one class a kind, one
    evaluator that dispatches; a kind nobody registered, or one the docs do not list, fails here."""
    import inspect
    from pathlib import Path

    from harness.plan import triggers

    classes = [c for _, c in inspect.getmembers(triggers, inspect.isclass)
               if issubclass(c, triggers.TriggerKind) and c is not triggers.TriggerKind]
    assert sorted(c.name for c in classes) == sorted(triggers.TRIGGERS) == sorted(triggers.TRIGGER_KINDS)
    assert all(type(triggers.TRIGGERS[c.name]) is c for c in classes)
    fields = set(triggers.Trigger.__dataclass_fields__)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "fault-plans.md").read_text()
    for name, kind in triggers.TRIGGERS.items():
        assert name in fields and kind.takes <= fields, name
        assert f"`{{{name}: " in doc, f"docs/fault-plans.md has no row for the `{name}` trigger"
