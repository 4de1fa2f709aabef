"""harness/proxy/addons Inject (with Classify and Record), driven through the addon's mitmproxy hooks with
synthetic flows: pass-through, fail, delay, hold/release/fail, holds at the response stage, hold expiry."""

from __future__ import annotations

import asyncio

import pytest
from mitmproxy.test import taddons

from harness.plan.rules import kubernetes_status
from tests.unit.addon_flows import (
    ADMISSION,
    EVICTION,
    NS,
    WL1,
    WL2,
    KueueFaults,
    add_rule,
    cond,
    event_names,
    events,
    get_flow,
    held,
    run,
    server_response,
    status_body,
    status_patch,
    until,
    workload_json,
)

# ---------------------------------------------------------------------------------------------------------
# Pass-through


def test_unmatched_patch_passes_unchanged() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon) as tctx:
            add_rule(addon, id="other-wl", match={"write": "admission", "name": WL2}, action="fail")
            add_rule(addon, id="evictions", match={"write": "eviction"}, action="hold")
            f = status_patch(WL1, ADMISSION)
            before = f.request.get_state()
            await tctx.cycle(addon, f)
            assert f.request.get_state() == before  # method, path, headers, body all untouched
            assert f.response is None
            assert f.error is None  # not killed
            assert addon.holds == {}
            assert [s.hits for s in addon.rules.rules.values()] == [0, 0]
            (req_ev,) = events(addon, "request")
            assert req_ev["write"]["write"] == "admission"
            assert req_ev["user_agent"].startswith("kueue/")
            assert not {"held", "failed", "delayed"} & set(event_names(addon))

    run(scenario())


def test_reads_are_not_logged_as_writes_and_pass() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon) as tctx:
            add_rule(addon, id="adm", match={"write": "admission"}, action="fail")
            f = get_flow(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{WL1}")
            await tctx.cycle(addon, f)
            assert f.response is None
            assert events(addon, "request") == []

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# fail / delay


@pytest.mark.parametrize(("status", "reason"), [(409, "Conflict"), (503, "ServiceUnavailable")])
def test_fail_rule_at_request_stage_answers_with_a_kubernetes_status(status: int, reason: str) -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="fail-adm", match={"write": "admission", "name": "job-job1-*"}, action="fail",
                     status=status, reason=reason, message="injected conflict")
            f = status_patch(WL1, ADMISSION)
            await addon.request(f)
            assert f.response is not None and f.response.status_code == status
            assert status_body(f) == kubernetes_status(status, reason, "injected conflict")
            (ev,) = events(addon, "failed")
            assert (ev["rule"], ev["stage"], ev["status"]) == ("fail-adm", "request", status)

            # times=1 (default): the next admission goes through untouched.
            g = status_patch(WL1, ADMISSION)
            await addon.request(g)
            assert g.response is None

    run(scenario())


def test_fail_rule_at_response_stage_replaces_the_server_answer() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="fail-evict-resp", match={"write": "eviction"}, action="fail", stage="response",
                     status=500, reason="InternalError", message="lost")
            f = status_patch(WL1, EVICTION)
            await addon.request(f)
            assert f.response is None  # forwarded at the request stage
            f.response = server_response(workload_json(WL1, "205"))
            await addon.response(f)
            assert f.response.status_code == 500
            assert status_body(f)["message"] == "lost"
            (resp_ev,) = events(addon, "response")
            assert resp_ev["status"] == 500 and resp_ev["write"] == "eviction"

    run(scenario())


def test_request_answered_by_the_proxy_is_not_acted_on_at_response_stage() -> None:
    # A response-stage rule is about the server's answer; a request the proxy already answered has none,
    # and must not use up the response rule's `times`.
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon) as tctx:
            add_rule(addon, id="fail-req", match={"write": "admission"}, action="fail", status=409,
                     reason="Conflict")
            add_rule(addon, id="fail-resp", match={"write": "admission"}, action="fail", stage="response",
                     status=500)
            f = status_patch(WL1, ADMISSION)
            await tctx.cycle(addon, f)  # request -> responseheaders -> response, as mitmproxy does it
            assert f.response is not None and f.response.status_code == 409
            assert [e["rule"] for e in events(addon, "failed")] == ["fail-req"]
            assert addon.rules.rules["fail-resp"].hits == 0

            g = status_patch(WL1, ADMISSION)
            await addon.request(g)
            assert g.response is None
            g.response = server_response(workload_json(WL1, "300"))
            await addon.response(g)
            assert g.response.status_code == 500  # the response rule still applies to a real answer

    run(scenario())


def test_delay_rule_waits_then_passes() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="slow", match={"write": "admission"}, action="delay", delay=0.05)
            f = status_patch(WL1, ADMISSION)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await addon.request(f)
            assert loop.time() - t0 >= 0.045  # asyncio may wake a clock tick early
            assert f.response is None
            (ev,) = events(addon, "delayed")
            assert (ev["rule"], ev["seconds"]) == ("slow", 0.05)

    run(scenario())


def test_fail_rule_with_delay_answers_after_waiting() -> None:
    # The pace of kubernetes-sigs/kueue#14863's sticky-preemptor plan: every retry failed, none sooner than
    # `delay` after it was sent (docs/fault-plans.md "a pace").
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="slow-fail", match={"write": "eviction"}, action="fail", delay=0.05, times=None)
            loop = asyncio.get_running_loop()
            for _ in range(2):
                f = status_patch(WL1, EVICTION)
                t0 = loop.time()
                await addon.request(f)
                assert loop.time() - t0 >= 0.045  # asyncio may wake a clock tick early
                assert f.response is not None and f.response.status_code == 500
            evs = events(addon, "failed")
            assert [(e["rule"], e["status"], e["after"]) for e in evs] == [("slow-fail", 500, 0.05)] * 2
            assert not events(addon, "delayed")  # one record per answer: the wait is the failure's `after`

    run(scenario())


# ---------------------------------------------------------------------------------------------------------
# hold


def test_hold_parks_the_request_until_released() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-adm", match={"write": "admission", "name": WL1})
            f = status_patch(WL1, ADMISSION)
            before = f.request.get_state()
            task, hold_id = await held(addon, addon.request(f))

            # Other traffic keeps flowing while the admission is parked.
            g = status_patch(WL2, ADMISSION)
            await asyncio.wait_for(addon.request(g), 1)
            assert g.response is None
            await asyncio.sleep(0.02)
            assert not task.done()

            code, state = addon._handle("GET", "/state", {})
            assert code == 200
            assert [(h["id"], h["rule"], h["stage"]) for h in state["holds"]] == [(hold_id, "hold-adm", "request")]
            assert state["holds"][0]["label"] == f"admission {NS}/{WL1} (kueue-admission, loose)"

            code, view = addon._handle("POST", f"/holds/{hold_id}/release", {})
            assert code == 200 and view["id"] == hold_id
            await asyncio.wait_for(task, 1)
            assert f.response is None
            assert f.request.get_state() == before
            assert addon.holds == {}

            (h,) = events(addon, "held")
            (r,) = events(addon, "released")
            assert h["hold"] == r["hold"] == hold_id
            assert h["flow"] == r["flow"]
            assert r["why"] == "control"
            names = event_names(addon)
            assert names.index("held") < names.index("released")

    run(scenario())


def test_hold_then_fail_answers_409_without_contacting_the_server() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-qr", match={"write": "quota_release"})
            f = status_patch(WL1, {"conditions": [cond("QuotaReserved", "False", "Pending")]}, rv="150")
            task, hold_id = await held(addon, addon.request(f))
            code, _ = addon._handle("POST", f"/holds/{hold_id}/fail",
                                    {"status": 409, "reason": "Conflict", "message": "the object has been modified"})
            assert code == 200
            await asyncio.wait_for(task, 1)
            assert f.response is not None and f.response.status_code == 409
            assert status_body(f) == kubernetes_status(409, "Conflict", "the object has been modified")
            (ev,) = events(addon, "failed")
            assert (ev["hold"], ev["status"]) == (hold_id, 409)
            assert events(addon, "released") == []

    run(scenario())


def test_hold_fail_with_a_bad_status_is_rejected_and_keeps_the_hold() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-adm", match={"write": "admission"})
            f = status_patch(WL1, ADMISSION)
            task, hold_id = await held(addon, addon.request(f))
            for bad in ({"status": "abc"}, {"status": 42}, {"status": None}):
                code, payload = addon._handle("POST", f"/holds/{hold_id}/fail", bad)
                assert code == 400, bad
                assert "status" in payload["error"]
            await asyncio.sleep(0.01)
            assert not task.done() and hold_id in addon.holds
            assert addon._handle("POST", f"/holds/{hold_id}/fail", {})[0] == 200  # default 500
            await asyncio.wait_for(task, 1)
            assert f.response.status_code == 500

    run(scenario())


def test_hold_at_response_stage_records_the_server_answer_and_passes_it_on_release() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-evict-resp", match={"write": "eviction"}, stage="response")
            f = status_patch(WL1, EVICTION)
            await asyncio.wait_for(addon.request(f), 1)  # not held at the request stage
            answer = workload_json(WL1, "205")
            f.response = server_response(answer)
            task, hold_id = await held(addon, addon.response(f))
            (ev,) = events(addon, "held")
            assert (ev["stage"], ev["status"], ev["resource_version"]) == ("response", 200, "205")
            assert events(addon, "response") == []  # logged only once the answer goes out
            addon._handle("POST", f"/holds/{hold_id}/release", {})
            await asyncio.wait_for(task, 1)
            assert f.response.status_code == 200 and f.response.content == answer
            (resp,) = events(addon, "response")
            assert resp["resource_version"] == "205"

    run(scenario())


def test_hold_expires_after_max_hold() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="short", match={"write": "admission"}, max_hold=0.05)
            f = status_patch(WL1, ADMISSION)
            await asyncio.wait_for(addon.request(f), 1)
            assert f.response is None
            assert addon.holds == {}
            assert len(events(addon, "hold_expired")) == 1
            (rel,) = events(addon, "released")
            assert "max_hold" in rel["why"]

    run(scenario())


def test_unknown_hold_is_404_and_names_current_holds() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-adm", match={"write": "admission"})
            task, hold_id = await held(addon, addon.request(status_patch()))
            code, payload = addon._handle("POST", "/holds/h999/release", {})
            assert code == 404
            assert "h999" in payload["error"] and hold_id in payload["error"]
            assert not task.done()
            code, payload = addon._handle("POST", "/release-all", {"why": "teardown"})
            assert (code, payload) == (200, {"released": [hold_id]})
            await asyncio.wait_for(task, 1)
            assert events(addon, "released")[0]["why"] == "teardown"

    run(scenario())


def test_done_releases_every_hold() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-all", match={"write": "admission"}, times=None)
            t1, _ = await held(addon, addon.request(status_patch(WL1)))
            t2 = asyncio.ensure_future(addon.request(status_patch(WL2)))
            await until(lambda: len(addon.holds) == 2)
            addon.done()
            await asyncio.wait_for(asyncio.gather(t1, t2), 1)
            assert [e["why"] for e in events(addon, "released")] == ["proxy shutting down"] * 2

    run(scenario())
