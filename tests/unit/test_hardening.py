"""Bad and hostile input found by trying to break the harness (docs/troubleshooting.md): each
gets a clear error and changes nothing, fast."""

from __future__ import annotations

import asyncio
import time

import pytest

from harness.plan.load import MAX_PLAN_BYTES, PlanError, load_plan, parse_plan
from harness.plan.match import _nested_repeat
from harness.plan.rules import Rule, RuleError

HEADER = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\n"


@pytest.mark.parametrize("regex", [r"^(.+)+Z$", r"(a+)+", r"(?:x*)*", r"(a*b)*c",
                                   r"(.*e){12}", r"(a|aa)+b"])
def test_regexes_that_backtrack_catastrophically_are_refused(regex):
    with pytest.raises(RuleError, match="nests an unbounded repeat"):
        Rule.from_dict({"id": "r", "match": {"path_regex": regex}, "action": "observe"})


@pytest.mark.parametrize("regex", [r"/workloads/[^/]+/status\b", r"(ab)+", r"x{2,}(y)?", r"^/apis/kueue",
                                   r"/(workloads|jobs)/[^/]+$", r"(a.*)?b", r"(ab){3}"])
def test_ordinary_regexes_are_accepted(regex):
    assert not _nested_repeat(regex)
    Rule.from_dict({"id": "r", "match": {"path_regex": regex}, "action": "observe"})


def test_yaml_aliases_are_refused_before_they_expand():
    bomb = HEADER + 'description: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f'b{i}: &b{i} [*{"a" if i == 0 else f"b{i-1}"}, *{"a" if i == 0 else f"b{i-1}"}]\n' for i in range(30))
    start = time.monotonic()
    with pytest.raises(PlanError, match="anchors and aliases are not allowed") as e:
        parse_plan(bomb, "bomb.yaml")
    assert time.monotonic() - start < 2
    assert str(e.value).startswith("bomb.yaml:4:")


def test_oversized_and_binary_plan_files_are_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text(HEADER + "#" * (MAX_PLAN_BYTES + 1))
    with pytest.raises(PlanError, match="too large"):
        load_plan(big)
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(PlanError, match="not a text file"):
        load_plan(garbage)


@pytest.mark.parametrize("field,value", [("max_hold", float("nan")), ("max_hold", float("inf")),
                                         ("delay", float("nan"))])
def test_non_finite_times_are_refused(field, value):
    with pytest.raises(RuleError, match="finite"):
        Rule.from_dict({"id": "r", "match": {}, "action": "hold", field: value})


def test_non_finite_release_timeout_is_refused():
    with pytest.raises(RuleError, match="seconds > 0"):
        Rule.from_dict({"id": "r", "match": {}, "action": "hold", "release": {"timeout": float("nan")}})


@pytest.mark.parametrize("rule_id", ["x/../y", "a?b", "a#b", "", " lead", "-dash", "x" * 64])
def test_rule_ids_that_cannot_travel_in_a_path_are_refused(rule_id):
    with pytest.raises(RuleError):
        Rule.from_dict({"id": rule_id, "match": {}, "action": "observe"})


def test_control_channel_drops_idle_clients(monkeypatch):
    """A client that connects and sends nothing is disconnected after the read timeout."""
    from harness.proxy.addons import KueueFaults, control

    monkeypatch.setattr(control, "CONTROL_READ_TIMEOUT", 0.2)
    addon = KueueFaults()
    addon._token = "t"

    async def scenario() -> bytes:
        server = await asyncio.start_server(addon._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(reader.read(), 5)  # EOF once the server gives up on us
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(scenario()) == b""


def test_deeply_nested_json_gets_a_400(monkeypatch):
    from proxy_addons import kueue_faults

    addon = kueue_faults.KueueFaults()
    addon._token = "t"
    body = b"[" * 100000 + b"]" * 100000

    async def scenario() -> bytes:
        server = await asyncio.start_server(addon._serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /rules HTTP/1.1\r\nAuthorization: Bearer t\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        try:
            return await asyncio.wait_for(reader.read(), 5)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    assert b" 400 " in asyncio.run(scenario()).split(b"\r\n")[0] + b" "


def test_only_unexplained_proxy_failures_void_a_verdict():
    from harness.checkers.assumptions import NoUnexplainedProxyFailure
    from harness.history.names import Names

    events = [
        {"source": "harness", "event": "case_started", "ts": 2, "namespace": "ns"},
        {"source": "proxy", "event": "flow_error", "ts": 5, "flow": 1, "error": "stream reset by client (CANCEL)"},
        {"source": "proxy", "event": "flow_error", "ts": 5, "flow": 2, "error": "peer closed connection"},
        {"source": "proxy", "event": "reset", "ts": 5, "flow": 3},
        {"source": "proxy", "event": "flow_error", "ts": 5, "flow": 3, "error": "killed by the addon"},
        {"source": "proxy", "event": "flow_error", "ts": 6, "flow": 5, "error": "Connection refused by upstream"},
        {"source": "harness", "event": "verdict", "ts": 7, "invariant": "none", "held": True},
        {"source": "proxy", "event": "flow_error", "ts": 8, "flow": 6, "error": "after the verdict: not judged"},
    ]
    [f] = NoUnexplainedProxyFailure().check(events, {}, Names(events))
    assert f.result == "violated" and f.assumption
    assert "flow 5:" in f.evidence and "flow 1:" not in f.evidence and "flow 3:" not in f.evidence
    assert "flow 6" not in f.evidence


@pytest.mark.parametrize("match, words", [
    ({"method": "FROB"}, "not an HTTP method"),
    ({"kind": "workload"}, "spelt 'Workload'"),
    ({"kind": "clusterqueues"}, "'clusterqueues', goes in match.resource"),
])
def test_a_match_that_could_never_match_is_refused(match, words):
    with pytest.raises(RuleError) as e:
        Rule.from_dict({"id": "r", "match": match, "action": "observe"})
    assert words in str(e.value)


def test_kinds_and_methods_as_kube_apiserver_spells_them_are_accepted():
    for m in ({"method": "patch"}, {"method": "PUT"}, {"kind": "ClusterQueue"}, {"kind": "PriorityClass"}):
        assert Rule.from_dict({"id": "r", "match": m, "action": "observe"}).match
