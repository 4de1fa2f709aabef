"""Unit tests for proxy_addons.kueue_faults.KueueFaults, driven through its mitmproxy hooks with synthetic flows
(mitmproxy.test.taddons/tflow/tutils): pass-through, fail, hold/release/fail, hold expiry, the watch tap and
the control channel. No network except a loopback control server on port 0.

Each test is a plain sync test running one `asyncio.run(...)`: the taddons context must be created inside the
running loop, and holds are asyncio tasks on it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils

from harness.faults import kubernetes_status
from harness.faultproxy import KueueFaults

T = TypeVar("T")

NS = "team-a"
WL1 = "job-job1-3f2a1"
WL2 = "job-job2-9c8b7"
CQ = "cq"
WATCH_PATH = (
    "/apis/kueue.x-k8s.io/v1beta2/workloads?allowWatchBookmarks=true&resourceVersion=100"
    "&timeoutSeconds=412&watch=true"
)

# ---------------------------------------------------------------------------------------------------------
# Builders


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


def cond(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "",
            "observedGeneration": 1, "lastTransitionTime": "2025-06-01T10:00:00Z"}


ADMISSION = {
    "admission": {"clusterQueue": CQ, "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"},
                                                             "resourceUsage": {"cpu": "1"}, "count": 1}]},
    "conditions": [cond("QuotaReserved", "True", "QuotaReserved"), cond("Admitted", "True", "Admitted")],
}
EVICTION = {
    "admission": ADMISSION["admission"],
    "conditions": ADMISSION["conditions"] + [cond("Evicted", "True", "Preempted"),
                                             cond("Preempted", "True", "InClusterQueue")],
}


def status_patch(name: str = WL1, status: dict[str, Any] = ADMISSION, *, rv: str | None = None) -> http.HTTPFlow:
    """Kueue's SSA status PATCH for Workload `name` (loose unless `rv` is given)."""
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": "u-" + name, "generation": 1}
    if rv:
        meta["resourceVersion"] = rv
    body = json.dumps({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2", "metadata": meta,
                       "status": status}).encode()
    req = tutils.treq(
        method=b"PATCH",
        path=f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{name}/status"
             "?fieldManager=kueue-admission&force=true".encode(),
        headers=http.Headers(
            content_type="application/apply-patch+yaml",
            user_agent="kueue/v0.17.0 (linux/amd64) 5c1a2b3",
            content_length=str(len(body)),
        ),
        content=body,
    )
    return tflow.tflow(req=req)


def get_flow(path: str, *, response: bool = False) -> http.HTTPFlow:
    req = tutils.treq(method=b"GET", path=path.encode(), headers=http.Headers(accept="application/json"),
                      content=b"")
    return tflow.tflow(req=req, resp=server_response(b"") if response else False)


def server_response(body: bytes, status: int = 200) -> http.Response:
    return tutils.tresp(status_code=status, content=body,
                        headers=http.Headers(content_type="application/json"))


def workload_json(name: str, rv: str) -> bytes:
    return json.dumps({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
                       "metadata": {"name": name, "namespace": NS, "resourceVersion": rv},
                       "status": ADMISSION}).encode()


def add_rule(addon: KueueFaults, **rule: Any) -> None:
    code, payload = addon._handle("POST", "/rules", rule)
    assert code == 201, payload


def event_names(addon: KueueFaults) -> list[str]:
    return [e["event"] for e in addon.log.events]


def events(addon: KueueFaults, name: str) -> list[dict[str, Any]]:
    return [e for e in addon.log.events if e["event"] == name]


async def until(pred: Callable[[], Any], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


async def held(addon: KueueFaults, hook: Awaitable[None]) -> tuple[asyncio.Task[None], str]:
    """Run `hook` as a task until it parks; return the task and the hold id."""
    task = asyncio.ensure_future(hook)
    await until(lambda: addon.holds or task.done())
    assert not task.done(), "the hook finished instead of holding"
    (hold_id,) = addon.holds
    return task, hold_id


def status_body(flow: http.HTTPFlow) -> dict[str, Any]:
    assert flow.response is not None
    assert flow.response.headers["content-type"] == "application/json"
    return json.loads(flow.response.content)


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


# ---------------------------------------------------------------------------------------------------------
# Control channel (_handle)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ({"id": "r1", "match": {"write": "admitted"}}, ["match.write", "admitted"]),
        ({"id": "r1", "match": {"write": "admission"}, "acton": "fail"}, ["unknown key", "acton"]),
        ({"id": "r1", "match": {"write": "admission"}, "stage": "later"}, ["stage", "later"]),
        ({"id": "r1", "match": {"write": "admission"}, "times": "2"}, ["times"]),
        ({"match": {"write": "admission"}}, ["id"]),
        ({"id": "r1", "match": "admission"}, ["match"]),
    ],
)
def test_control_rejects_a_bad_rule_with_400(rule: dict[str, Any], words: list[str]) -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/rules", rule)
    assert code == 400
    for w in words:
        assert w in payload["error"]
    assert addon.rules.rules == {}
    assert events(addon, "rule_added") == []


def test_control_rule_lifecycle() -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/rules", {"id": "r1", "match": {"write": "eviction"}, "action": "fail"})
    assert code == 201 and payload["match"] == {"write": "eviction"}
    code, payload = addon._handle("POST", "/rules", {"id": "r1", "match": {}})
    assert code == 400 and "already loaded" in payload["error"]
    code, state = addon._handle("GET", "/state", {})
    assert [(r["rule"]["id"], r["hits"]) for r in state["rules"]] == [("r1", 0)]
    assert addon._handle("DELETE", "/rules/r1", {}) == (200, {"removed": "r1"})
    assert addon.rules.rules == {}
    assert event_names(addon) == ["rule_added", "rule_removed"]
    code, _ = addon._handle("GET", "/nope", {})
    assert code == 404


def test_control_events_since() -> None:
    addon = KueueFaults()
    for i in range(3):
        addon.log.write("x", i=i)
    code, payload = addon._handle("GET", "/events?since=1", {})
    assert code == 200
    assert [e["i"] for e in payload["events"]] == [1, 2]
    assert payload["next"] == 3


# ---------------------------------------------------------------------------------------------------------
# Watch tap


def watch_stream() -> bytes:
    def line(type_: str, obj: dict[str, Any]) -> bytes:
        return json.dumps({"type": type_, "object": obj}).encode() + b"\n"

    def wl(name: str, rv: str, status: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
                "metadata": {"name": name, "namespace": NS, "resourceVersion": rv}, "status": status}

    return b"".join([
        line("ADDED", wl(WL1, "100", {})),
        line("MODIFIED", wl(WL1, "120", ADMISSION)),
        line("ADDED", wl(WL2, "121", {"conditions": [cond("QuotaReserved", "False", "Pending")]})),
        line("BOOKMARK", {"kind": "Workload", "metadata": {"resourceVersion": "130"}}),
        line("MODIFIED", wl(WL1, "140", EVICTION)),
    ])


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])
def test_watch_tap_passes_bytes_unchanged_and_records_workload_events(size: int) -> None:
    addon = KueueFaults()
    f = get_flow(WATCH_PATH, response=True)
    addon.responseheaders(f)
    tap = f.response.stream
    assert callable(tap)

    data = watch_stream()
    chunks = chunked(data, size)
    out = [tap(c) for c in chunks]
    assert out == chunks  # chunk for chunk, byte for byte
    assert tap(b"") == b""  # end of stream

    assert set(addon.delivered) == {f"{NS}/{WL1}", f"{NS}/{WL2}"}  # the BOOKMARK has no name
    wl1 = addon.delivered[f"{NS}/{WL1}"]
    assert (wl1["type"], wl1["resource_version"], wl1["admission"]) == ("MODIFIED", "140", True)
    assert wl1["conditions"]["Evicted"] == "True"
    assert addon.delivered[f"{NS}/{WL2}"]["resource_version"] == "121"
    assert [(e["name"], e["resource_version"]) for e in events(addon, "watch_event")] == [
        (WL1, "100"), (WL1, "120"), (WL2, "121"), (WL1, "140"),
    ]
    assert len(events(addon, "watch_open")) == 1


def test_watch_tap_records_an_event_only_once_its_line_is_complete() -> None:
    addon = KueueFaults()
    f = get_flow(WATCH_PATH, response=True)
    addon.responseheaders(f)
    first_line = watch_stream().split(b"\n")[0] + b"\n"
    head, tail = first_line[:-10], first_line[-10:]
    assert f.response.stream(head) == head
    assert addon.delivered == {}
    assert f.response.stream(tail) == tail
    assert addon.delivered[f"{NS}/{WL1}"]["resource_version"] == "100"


def test_watch_tap_survives_garbage_lines() -> None:
    addon = KueueFaults()
    f = get_flow(WATCH_PATH, response=True)
    addon.responseheaders(f)
    data = b'not json\n{"type": "ADDED", "object": "x"}\n' + watch_stream()
    assert f.response.stream(data) == data
    assert addon.delivered[f"{NS}/{WL1}"]["resource_version"] == "140"


def test_delivered_query_filters_by_name_glob() -> None:
    addon = KueueFaults()
    f = get_flow(WATCH_PATH, response=True)
    addon.responseheaders(f)
    f.response.stream(watch_stream())
    code, payload = addon._handle("GET", f"/delivered?name={NS}/job-job2-*", {})
    assert code == 200 and list(payload) == [f"{NS}/{WL2}"]


def test_other_watches_stream_without_tap_and_plain_gets_do_not_stream() -> None:
    addon = KueueFaults()
    pods = get_flow(f"/api/v1/namespaces/{NS}/pods?watch=true", response=True)
    addon.responseheaders(pods)
    assert pods.response.stream is True
    get = get_flow(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads", response=True)
    addon.responseheaders(get)
    assert get.response.stream is False
    assert events(addon, "watch_open") == []


# ---------------------------------------------------------------------------------------------------------
# Event file and the control server (_serve)


def test_events_are_appended_to_the_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"

    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, kh_events=str(path))
            add_rule(addon, id="fail-adm", match={"write": "admission"}, action="fail")
            await addon.request(status_patch())
            lines = [json.loads(x) for x in path.read_text().splitlines()]  # flushed per event
            assert [e["event"] for e in lines] == ["rule_added", "request", "failed"]
            assert all(e["source"] == "proxy" for e in lines)
            addon.log.close()

    run(scenario())


async def http_call(port: int, method: str, path: str, token: str | None, body: bytes = b"") -> tuple[int, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    writer.write(head.encode() + b"\r\n" + body)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 2)
    writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(payload)


def test_control_server_requires_the_bearer_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")

    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, kh_token_file=str(token_file))
            server = await asyncio.start_server(addon._serve, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            try:
                rule = json.dumps({"id": "r1", "match": {"write": "admission"}}).encode()
                code, payload = await http_call(port, "POST", "/rules", "wrong", rule)
                assert code == 401 and "token" in payload["error"]
                assert (await http_call(port, "POST", "/rules", None, rule))[0] == 401
                assert addon.rules.rules == {}  # nothing happened

                code, payload = await http_call(port, "GET", "/state", "s3cret")
                assert code == 200 and payload["rules"] == []
                assert (await http_call(port, "POST", "/rules", "s3cret", rule))[0] == 201
                assert list(addon.rules.rules) == ["r1"]
                code, payload = await http_call(port, "POST", "/rules", "s3cret", b"{not json")
                assert code == 400 and "bad JSON" in payload["error"]
            finally:
                server.close()
                await server.wait_closed()

    run(scenario())


def test_control_server_without_a_token_rejects_everything() -> None:
    async def scenario() -> None:
        addon = KueueFaults()  # no kh_token_file: the empty token must not authorize "Bearer "
        server = await asyncio.start_server(addon._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            assert (await http_call(port, "GET", "/state", ""))[0] == 401
        finally:
            server.close()
            await server.wait_closed()

    run(scenario())
