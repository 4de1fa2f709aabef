"""harness/proxy/addons WatchTap: Workload watch streams pass byte for byte and every Workload event Kueue
receives is recorded (`delivered`); other watches stream untapped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.addon_flows import (
    ADMISSION,
    EVICTION,
    NS,
    WATCH_PATH,
    WL1,
    WL2,
    KueueFaults,
    cond,
    events,
    get_flow,
)

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


def test_other_watches_stream_unread_without_a_rule_and_plain_gets_do_not_stream() -> None:
    """Every watch is tapped (a rule loaded later acts on a watch Kueue opened at start), but a non-Workload
    stream with no watch rule on its resource goes out as it came, unread and unrecorded."""
    addon = KueueFaults()
    pods = get_flow(f"/api/v1/namespaces/{NS}/pods?watch=true", response=True)
    addon.responseheaders(pods)
    data = b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}}\n'
    assert callable(pods.response.stream) and pods.response.stream(data[:10]) + pods.response.stream(data[10:]) == data
    get = get_flow(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads", response=True)
    addon.responseheaders(get)
    assert get.response.stream is False
    assert events(addon, "watch_open") == []


def test_a_watch_rule_on_another_resource_drops_its_events() -> None:
    """kueue PR #13785's race is Kueue's ProvisioningRequest informer lagging its own create: a rule with
    match.resource drops (or delays) events on that watch, as on Workload watches; only what it acted on is
    recorded, with the resource."""
    from tests.unit.addon_flows import add_rule

    addon = KueueFaults()
    prs = get_flow(f"/apis/autoscaling.x-k8s.io/v1beta1/namespaces/{NS}/provisioningrequests?watch=true", response=True)
    addon.responseheaders(prs)
    add_rule(addon, id="pr-unseen", action="drop_watch_events",
             match={"resource": "provisioningrequests", "name": "w1-prov-*", "event_type": "ADDED"})

    def line(name: str) -> bytes:
        return json.dumps({"type": "ADDED", "object": {"kind": "ProvisioningRequest", "metadata": {
            "name": name, "namespace": NS, "resourceVersion": "7"}}}).encode() + b"\n"

    out = prs.response.stream(line("w1-prov-1") + line("other"))
    assert out == line("other")
    [dropped] = events(addon, "watch_event_dropped")
    assert dropped["rule"] == "pr-unseen" and dropped["resource"] == "provisioningrequests" and dropped["name"] == "w1-prov-1"
    assert events(addon, "watch_event") == []  # other resources' deliveries are not recorded


def test_delivered_holds_for_another_resource_once_its_watch_delivered_the_created_object() -> None:
    """`{delivered: ID}` on a rule of another resource (kueue PR #13785's control: go on once Kueue's
    ProvisioningRequest informer has the request it created): that resource's watch is read while such a trigger
    is loaded, and what it delivered is keyed by kind, apart from Workloads of the same name."""
    from mitmproxy.test import taddons, tflow, tutils

    from harness.plan.triggers import Trigger, trigger_satisfied
    from tests.unit.addon_flows import add_rule, run, server_response

    addon = KueueFaults()
    add_rule(addon, id="pr-create", action="observe", match={"resource": "provisioningrequests", "method": "POST"})
    add_rule(addon, id="after", action="hold", match={"resource": "configmaps"},
             release={"after": [{"delivered": "pr-create"}]})
    assert addon.rules.delivered_resources() == {"provisioningrequests"}
    body = json.dumps({"kind": "ProvisioningRequest", "apiVersion": "autoscaling.x-k8s.io/v1",
                       "metadata": {"name": "w1-prov-1", "namespace": NS}}).encode()
    path = f"/apis/autoscaling.x-k8s.io/v1/namespaces/{NS}/provisioningrequests"
    create = tflow.tflow(req=tutils.treq(method=b"POST", path=path.encode(), content=body,
                                         headers=http_headers(len(body))))
    created = json.dumps({"kind": "ProvisioningRequest", "metadata": {"name": "w1-prov-1", "namespace": NS,
                                                                      "resourceVersion": "7"}}).encode()

    async def answered() -> None:
        with taddons.context(addon):
            await addon.request(create)
            create.response = server_response(created, 201)
            await addon.response(create)

    run(answered())
    t = Trigger.from_dict({"delivered": "pr-create"}, "test")
    assert not trigger_satisfied(t, addon.state.rule_flows, addon.delivered_rv)

    prs = get_flow(f"{path}?watch=true", response=True)
    addon.responseheaders(prs)

    def line(kind: str, rv: str) -> bytes:
        return json.dumps({"type": "ADDED", "object": {"kind": kind, "metadata": {
            "name": "w1-prov-1", "namespace": NS, "resourceVersion": rv}}}).encode() + b"\n"

    wls = get_flow(WATCH_PATH, response=True)
    addon.responseheaders(wls)
    wls.response.stream(line("Workload", "9"))  # a Workload of the same name is not the request
    assert not trigger_satisfied(t, addon.state.rule_flows, addon.delivered_rv)
    assert prs.response.stream(line("ProvisioningRequest", "7")) == line("ProvisioningRequest", "7")
    assert trigger_satisfied(t, addon.state.rule_flows, addon.delivered_rv)
    assert addon.delivered_rv[f"ProvisioningRequest:{NS}/w1-prov-1"] == 7
    assert [e["name"] for e in events(addon, "watch_event")] == ["w1-prov-1"]  # the Workload's; the request's unlogged


def http_headers(length: int):
    from mitmproxy import http

    return http.Headers(content_type="application/json", content_length=str(length))
