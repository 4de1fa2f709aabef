"""Process faults in the proxy (harness/proxy/addons/state.py, control.py): a restart_kueue rule fires
(`signalled`) when loaded without triggers, when its triggers hold, or at its release.timeout; once;
`POST /signals/ID/done` marks it released for other rules' triggers; removing it cancels its timer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils

from harness.plan.load import parse_plan
from harness.proxy.addons import KueueFaults

NS = "team-a"
WL1 = "job-job1-3f2a1"
HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: restart-plan\n"


def events(addon: KueueFaults, *names: str) -> list[dict[str, Any]]:
    return [e for e in addon.log.events if e["event"] in names]


def admission(name: str = WL1) -> http.HTTPFlow:
    body = json.dumps({"kind": "Workload", "apiVersion": "kueue.x-k8s.io/v1beta2",
                       "metadata": {"name": name, "namespace": NS},
                       "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": []},
                                  "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}]}}
                      ).encode()
    req = tutils.treq(method=b"PATCH",
                      path=f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{name}/status"
                           "?fieldManager=kueue-admission&force=true".encode(),
                      headers=http.Headers(content_type="application/apply-patch+yaml", content_length=str(len(body))),
                      content=body)
    return tflow.tflow(req=req)


def answer(f: http.HTTPFlow, rv: str = "200") -> None:
    f.response = tutils.tresp(status_code=200, headers=http.Headers(content_type="application/json"),
                              content=json.dumps({"metadata": {"name": WL1, "namespace": NS,
                                                               "resourceVersion": rv}}).encode())


def test_a_restart_without_triggers_fires_when_loaded() -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/rules", {"id": "restart", "action": "restart_kueue", "kill": True})
    assert code == 201 and payload["kill"] is True
    (sig,) = events(addon, "signalled")
    assert (sig["rule"], sig["action"], sig["kill"], sig["why"]) == ("restart", "restart_kueue", True, "loaded")
    assert addon._handle("GET", "/state", {})[1]["signals"][0]["fired"] is not None


def test_a_plan_restart_fires_once_when_its_trigger_holds_and_done_releases_a_waiting_hold() -> None:
    plan = parse_plan(HEAD + """rules:
  - id: adm
    match: {write: admission, name: "job-job1-*"}
    action: observe
  - id: restart
    action: restart_kueue
    release:
      after: [{rule: adm, state: answered, status: 200}]
  - id: hold-after-restart
    match: {write: admission, name: "job-job2-*"}
    release:
      after: [{rule: restart, state: released}]
""", namespace=NS)

    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/plan", plan.to_wire())[0] == 201
            assert events(addon, "signalled") == []
            f = admission()
            await addon.request(f)
            assert events(addon, "signalled") == []  # observed, not answered yet
            answer(f)
            await addon.response(f)
            (sig,) = events(addon, "signalled")
            assert sig["why"] == "triggers: adm answered" and sig["kill"] is False

            # A hold that waits for the restart to be done.
            g = admission("job-job2-aaaaa")
            task = asyncio.ensure_future(addon.request(g))
            for _ in range(50):
                await asyncio.sleep(0)
            assert addon.holds and not task.done()
            code, done = addon._handle("POST", "/signals/restart/done", {"ok": True, "kill": False, "seconds": 3.2})
            assert code == 200 and done["event"] == "signal_done" and done["seconds"] == 3.2
            assert done["since_signalled"] >= 0
            await asyncio.wait_for(task, 1)
            (rel,) = events(addon, "released")
            assert rel["why"] == "triggers: restart released"

            # Once: a second answered admission does not fire it again.
            h = admission()
            await addon.request(h)
            answer(h, "300")
            await addon.response(h)
            assert len(events(addon, "signalled")) == 1

    asyncio.run(scenario())


def test_signal_done_errors() -> None:
    addon = KueueFaults()
    assert addon._handle("POST", "/signals/nope/done", {})[0] == 404
    assert addon._handle("POST", "/rules", {"id": "adm", "action": "observe", "match": {"write": "admission"}})[0] == 201
    assert addon._handle("POST", "/rules", {"id": "later", "action": "restart_kueue",
                                            "release": {"after": [{"rule": "adm", "state": "answered"}]}})[0] == 201
    code, payload = addon._handle("POST", "/signals/later/done", {})
    assert code == 409 and "not been signalled" in payload["error"]


def test_release_timeout_fires_a_restart_and_removing_the_rule_cancels_it() -> None:
    async def scenario() -> None:
        addon = KueueFaults()
        with taddons.context(addon):
            assert addon._handle("POST", "/rules", {"id": "timed", "action": "restart_kueue",
                                                    "release": {"timeout": 0.05}})[0] == 201
            assert addon._handle("POST", "/rules", {"id": "cancelled", "action": "restart_kueue",
                                                    "release": {"timeout": 0.05}})[0] == 201
            assert addon._handle("DELETE", "/rules/cancelled", {})[0] == 200
            await asyncio.sleep(0.2)
            (sig,) = events(addon, "signalled")
            assert (sig["rule"], sig["why"]) == ("timed", "release.timeout 0.05s")

    asyncio.run(scenario())


def test_a_bad_restart_rule_loads_nothing() -> None:
    addon = KueueFaults()
    code, payload = addon._handle("POST", "/plan", {"name": "p", "rules": [
        {"id": "ok", "action": "restart_kueue"},
        {"id": "bad", "action": "restart_kueue", "kill": "sometimes"}]})
    assert code == 400 and "kill must be true or false" in payload["error"]
    assert events(addon, "signalled", "rule_added") == []
