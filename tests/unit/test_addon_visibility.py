"""What the proxy tells about its holds and rules (issue 16, items 2 and 5): a hold's age, max_hold and time
left; holds that expired (GET /state `expired`, and a release or fail of one answered 410 saying when it
expired); rules that match nothing although a write they could have matched came by (`rule_unmatched`, the
rule's `warning`); whether a rule's flow reached a state (GET /rules/ID/reached, for `kueue-harness wait`)."""

from __future__ import annotations

import asyncio

from mitmproxy.test import taddons

from tests.unit.addon_flows import (
    ADMISSION,
    EVICTION,
    NS,
    WL1,
    WL2,
    KueueFaults,
    add_rule,
    events,
    held,
    run,
    server_response,
    status_patch,
)


def test_a_hold_shows_its_max_hold_and_when_it_expires() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="adm", match={"write": "admission"}, max_hold=30,
                     release={"timeout": 10, "after": []})
            task, hid = await held(addon, addon.request(status_patch()))
            (h,) = addon._handle("GET", "/state", {})[1]["holds"]
            assert h["id"] == hid and h["max_hold"] == 30
            assert 29 < h["expires_in"] <= 30 and abs(h["expires_in"] - (30 - h["age"])) < 0.01
            assert 9 < h["timeout_in"] <= 10
            addon._handle("POST", "/release-all", {})
            await asyncio.wait_for(task, 1)

    run(scenario())


def test_an_expired_hold_is_listed_and_release_of_it_says_when_it_expired() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="short", match={"write": "admission"}, max_hold=0.05)
            await asyncio.wait_for(addon.request(status_patch(WL1, ADMISSION)), 1)
            (ev,) = events(addon, "hold_expired")
            assert ev["max_hold"] == 0.05 and ev["since"] <= ev["ts"]
            state = addon._handle("GET", "/state", {})[1]
            assert state["holds"] == []
            (exp,) = state["expired"]
            assert (exp["id"], exp["rule"], exp["how"]) == (ev["hold"], "short", "expired")
            assert exp["label"].startswith(f"admission {NS}/{WL1}") and exp["at"].count(":") == 2
            for action in ("release", "fail"):
                code, payload = addon._handle("POST", f"/holds/{ev['hold']}/{action}", {})
                assert code == 410, payload
                assert payload["error"].startswith(f"hold {ev['hold']} expired at {exp['at']} (")
                assert "max_hold of 0.05 s" in payload["error"] and "rule short" in payload["error"]
            assert addon._handle("POST", "/holds/h999/release", {})[0] == 404

    run(scenario())


def test_a_hold_released_before_says_so_and_is_not_listed_as_expired() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="adm", match={"write": "admission"})
            task, hid = await held(addon, addon.request(status_patch()))
            assert addon._handle("POST", f"/holds/{hid}/release", {"why": "by hand"})[0] == 200
            await asyncio.wait_for(task, 1)
            code, payload = addon._handle("POST", f"/holds/{hid}/release", {})
            assert code == 410 and f"hold {hid} was released at " in payload["error"] and "by hand" in payload["error"]
            assert addon._handle("GET", "/state", {})[1]["expired"] == []

    run(scenario())


def test_a_rule_that_names_the_workload_wrongly_gets_one_warning_until_it_matches() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="adm-job1", match={"write": "admission", "name": "job1"}, action="observe")
            add_rule(addon, id="evict-job2", match={"write": "eviction", "name": "job-job2-*"}, action="observe")
            add_rule(addon, id="any", match={"write": "admission"}, action="observe", times=None)  # no name: no warning
            for wl in (WL2, WL1, WL1):  # job2's admission first: another object, not a misspelling of job1
                await addon.request(status_patch(wl, ADMISSION))
            (warn,) = events(addon, "rule_unmatched")
            assert warn["rule"] == "adm-job1" and warn["seen"] == {"name": WL1} and warn["want"] == {"name": "job1"}
            assert warn["label"].startswith(f"admission {NS}/{WL1}")
            assert "match.name 'job-job1-*'" in warn["hint"], warn["hint"]
            rules = {r["rule"]["id"]: r for r in addon._handle("GET", "/state", {})[1]["rules"]}
            assert rules["adm-job1"]["hits"] == 0 and rules["adm-job1"]["warning"]["rule"] == "adm-job1"
            assert "near_miss" not in rules["adm-job1"]
            assert "warning" not in rules["evict-job2"] and "near_miss" not in rules["evict-job2"]
            assert rules["any"]["hits"] == 3
            # An eviction of another Workload is the same kind of write, another object: a note, no warning.
            await addon.request(status_patch("job-job3-00000", EVICTION))
            assert [e["rule"] for e in events(addon, "rule_unmatched")] == ["adm-job1"]
            rules = {r["rule"]["id"]: r for r in addon._handle("GET", "/state", {})[1]["rules"]}
            assert rules["evict-job2"]["near_miss"]["seen"] == {"name": "job-job3-00000"}
            assert "warning" not in rules["evict-job2"]
            # Once the rule matches, the warning goes.
            await addon.request(status_patch("job1", ADMISSION))
            rules = {r["rule"]["id"]: r for r in addon._handle("GET", "/state", {})[1]["rules"]}
            assert rules["adm-job1"]["hits"] == 1 and "warning" not in rules["adm-job1"]

    run(scenario())


def test_a_field_manager_that_is_part_of_the_real_one_is_a_likely_mistake() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="fm", match={"write": "admission", "field_manager": "admission"}, action="observe")
            await addon.request(status_patch(WL1, ADMISSION))
            (warn,) = events(addon, "rule_unmatched")
            assert warn["seen"] == {"field_manager": "kueue-admission"} and "match.field_manager" in warn["hint"]

    run(scenario())


def test_a_reloaded_rule_may_warn_again() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="r", match={"write": "admission", "name": "job1"}, action="observe")
            await addon.request(status_patch(WL1, ADMISSION))
            addon._handle("DELETE", "/rules/r", {})
            add_rule(addon, id="r", match={"write": "admission", "name": "job1"}, action="observe")
            await addon.request(status_patch(WL1, ADMISSION))
            assert [e["seen"]["name"] for e in events(addon, "rule_unmatched")] == [WL1, WL1]

    run(scenario())


def test_reached_answers_as_a_trigger_would() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="adm", match={"write": "admission"})
            add_rule(addon, id="obs", match={"write": "eviction"}, action="observe")
            get = lambda q: addon._handle("GET", q, {})  # noqa: E731
            assert get("/rules/adm/reached?state=held") == (200, {"reached": False, "hits": 0, "warning": None,
                                                                 "near_miss": None})
            f = status_patch()
            task, hid = await held(addon, addon.request(f))
            assert get("/rules/adm/reached?state=held")[1]["reached"] is True
            assert get("/rules/adm/reached?state=released")[1]["reached"] is False
            addon._handle("POST", f"/holds/{hid}/release", {})
            await asyncio.wait_for(task, 1)
            assert get("/rules/adm/reached?state=released")[1]["reached"] is True
            f.response = server_response(b'{"metadata": {"resourceVersion": "7"}}', 409)
            await addon.response(f)
            assert get("/rules/adm/reached?state=answered&status=409")[1]["reached"] is True
            assert get("/rules/adm/reached?state=answered&status=200")[1]["reached"] is False
            code, payload = get("/rules/obs/reached?state=held")
            assert code == 400 and "never reaches state held" in payload["error"] and "answered" in payload["error"]
            code, payload = get("/rules/nope/reached?state=held")
            assert code == 404 and "no rule nope is loaded" in payload["error"] and "adm, obs" in payload["error"]

    run(scenario())
