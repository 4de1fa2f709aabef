"""Builders shared by the proxy addon's unit tests (test_addon_inject.py, test_addon_watch.py,
test_addon_control.py): synthetic mitmproxy flows of Kueue's requests (mitmproxy.test.tflow/tutils), rule
loading through the control channel, event lookups and a bounded `until`.

Each addon test is a plain sync test running one `asyncio.run(...)`: the taddons context must be created
inside the running loop, and holds are asyncio tasks on it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mitmproxy import http
from mitmproxy.test import tflow, tutils

from harness.proxy.addons import KueueFaults

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
