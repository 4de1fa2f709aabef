"""harness/proxy/addons Control: the control channel's routes (_handle), the JSONL event file, and the
loopback control server (_serve) with its bearer token. No network except a loopback server on port 0."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.test import taddons

from tests.unit.addon_flows import (
    KueueFaults,
    add_rule,
    event_names,
    events,
    run,
    status_patch,
)

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
