"""A session bundle's report says how the session ran: its "run it again" line names the plan `up --plan`
loaded and every later `plan load` (from the proxy's `rule_added` events, which record the plan's file,
namespace and the command that loaded it); its fault table says a hold was released by hand when
`kueue-harness release` (or `fail`) let it go, as the control channel records it, and "by the test" for a
case's own `proxy.release(h)`. The proxy addon runs in mitmproxy's test context; the CLI talks to it
through a stand-in for the control channel's socket; no cluster."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from mitmproxy.test import taddons

from harness.cli import manual as cli
from harness.cli.bundle import rerun_commands
from harness.history.names import Names
from harness.plan.load import load_plan, shipped_plans
from harness.proxy.addons import KueueFaults
from harness.proxy.client import Proxy
from harness.report.markdown import _fault_rules, render_report
from tests.unit.addon_flows import ADMISSION, WL1, add_rule, events, held, run, status_patch

ROOT = Path(__file__).resolve().parents[2]


class _Bridge(Proxy):
    """The harness's control-channel client with the socket replaced by the addon's own handler."""

    def __init__(self, addon: KueueFaults) -> None:  # noqa: D107 - no process, no port
        self.addon = addon

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        code, payload = self.addon._handle(method, path, body or {})
        assert code < 300, payload
        return payload


def _ended(how) -> list[dict[str, Any]]:
    """The proxy's events of one held admission that `how(bridge, hold_id)` ends."""
    async def scenario() -> list[dict[str, Any]]:
        addon = KueueFaults()
        with taddons.context(addon):
            add_rule(addon, id="hold-adm", match={"write": "admission", "name": WL1})
            task, hold_id = await held(addon, addon.request(status_patch(WL1, ADMISSION)))
            how(_Bridge(addon), hold_id)
            await asyncio.wait_for(task, 1)
            return [dict(e, source="proxy") for e in addon.log.events]

    return run(scenario())


def _release_cell(evs: list[dict[str, Any]], session: bool) -> str:
    (row,) = _fault_rules(evs, Names(evs), session=session)
    return row[3]


def test_a_cli_release_is_said_by_hand_and_a_case_release_by_the_test(monkeypatch):
    def by_cli(bridge, hold_id):
        monkeypatch.setattr(cli, "_attach", lambda args: bridge)
        assert cli._cmd_release(argparse.Namespace(all=False, id=hold_id, name=None)) == 0

    by_hand = _ended(by_cli)
    (r,) = [e for e in by_hand if e["event"] == "released"]
    assert r["why"] == "kueue-harness release"  # what the control channel records for the CLI
    assert _release_cell(by_hand, session=True) == "by hand (`kueue-harness release`)"
    assert _release_cell(by_hand, session=False) == "by hand (`kueue-harness release`)"

    by_case = _ended(lambda bridge, hold_id: bridge.release(hold_id))  # a case's proxy.release(h)
    (r,) = [e for e in by_case if e["event"] == "released"]
    assert r["why"] == "test"
    assert _release_cell(by_case, session=False) == "by the test"


def test_a_cli_fail_and_release_all_are_said_by_hand(monkeypatch):
    def fail(bridge, hold_id):
        monkeypatch.setattr(cli, "_attach", lambda args: bridge)
        cli._cmd_fail(argparse.Namespace(id=hold_id, name=None, status=409, reason="Conflict", message="m"))

    failed = _ended(fail)
    (f,) = [e for e in failed if e["event"] == "failed"]
    assert (f["why"], f["status"]) == ("kueue-harness fail", 409)
    assert _release_cell(failed, session=True) == "by hand (`kueue-harness fail`)"

    def release_all(bridge, hold_id):
        monkeypatch.setattr(cli, "_attach", lambda args: bridge)
        cli._cmd_release(argparse.Namespace(all=True, id=None, name=None))

    assert _release_cell(_ended(release_all), session=True) == "by hand (`kueue-harness release --all`)"


def test_a_hold_still_held_in_a_session_is_not_yet_released_and_end_of_case_is_said():
    def rule_added(**extra):
        return {"ts": 1.0, "source": "proxy", "event": "rule_added",
                "rule": {"id": "r", "match": {"write": "admission"}, "action": "hold", "stage": "request"}, **extra}

    held_ev = {"ts": 2.0, "source": "proxy", "event": "held", "flow": 3, "hold": "h1", "rule": "r", "stage": "request",
               "label": "a"}
    assert _release_cell([rule_added(), held_ev], session=True) == "not yet (still held when the bundle was made)"
    assert _release_cell([rule_added()], session=True) == "by hand"
    assert _release_cell([rule_added()], session=False) == "by the test"
    end = {"ts": 3.0, "source": "proxy", "event": "released", "flow": 3, "hold": "h1", "rule": "r",
           "stage": "request", "label": "a", "why": "end of case"}
    assert _release_cell([rule_added(), held_ev, end], session=False).startswith("at the end of the case")
    # A rule with triggers, one of whose holds was let go by hand first: both are said.
    trig = rule_added()
    trig["rule"]["release"] = {"after": [{"rule": "x", "state": "answered"}]}
    by_hand = dict(end, why="kueue-harness release")
    cell = _release_cell([trig, held_ev, by_hand], session=True)
    assert cell == "x answered; a hold of it ended otherwise: by hand (`kueue-harness release`)"


def test_report_md_of_a_session_says_by_hand():
    evs = _ended(lambda bridge, hold_id: bridge.release(hold_id, why="kueue-harness release"))
    md, _, _ = render_report({"case": "kueue-harness up session default, namespace team-a", "verdict": "passed",
                              "namespace": "team-a", "session": {"name": "default"}}, evs, {})
    row = next(ln for ln in md.splitlines() if ln.startswith("| `hold-adm`"))
    assert "by hand (`kueue-harness release`)" in row and "by the test" not in row


# ---- "run it again" -------------------------------------------------------------------------------------

def _loaded(plan_name_or_file: str, by: str | None, namespace: str | None = None) -> list[dict[str, Any]]:
    """The proxy's events when the harness's client loads a plan (`by`: "up --plan", "plan load")."""
    plan = load_plan(plan_name_or_file, namespace=namespace)
    addon = KueueFaults()

    async def scenario() -> None:
        with taddons.context(addon):
            _Bridge(addon).load_plan(plan, by=by)

    run(scenario())
    return [dict(e, source="proxy") for e in events(addon, "rule_added")]


def test_rerun_names_the_up_plan_and_each_plan_load_in_order():
    up = _loaded("stuck-preemption", "up --plan")
    assert up[0]["plan_source"] == {"file": str(shipped_plans()["stuck-preemption"].resolve()), "by": "up --plan"}
    later = _loaded("quota-oversubscription", "plan load", namespace="demo")
    assert later[0]["plan_source"]["namespace"] == "demo"
    rec = {"name": "s1", "kueue_version": "v0.17.0"}
    line, notes = rerun_commands(rec, up + later)
    up_file = shipped_plans()["stuck-preemption"].resolve().relative_to(ROOT)
    later_file = shipped_plans()["quota-oversubscription"].resolve().relative_to(ROOT)
    assert line == (f"kueue-harness up --name s1 --kueue-version v0.17.0 --plan {up_file} && "
                    f"kueue-harness plan load --name s1 {later_file} --namespace demo")
    assert notes == []


def test_rerun_without_plans_is_the_up_line_and_notes_what_it_cannot_say():
    rec = {"name": "default", "kueue_version": "v0.17.4"}
    assert rerun_commands(rec, []) == ("kueue-harness up --kueue-version v0.17.4", [])
    # A proxy from before plan_source: the plan by its name (plan load finds shipped plans by name);
    # a plan that is not shipped is noted; rules added one at a time are noted.
    old = [{"ts": 1.0, "source": "proxy", "event": "rule_added", "plan": "stuck-preemption", "rule": {"id": "a"}},
           {"ts": 1.0, "source": "proxy", "event": "rule_added", "plan": "stuck-preemption", "rule": {"id": "b"}},
           {"ts": 2.0, "source": "proxy", "event": "rule_added", "plan": "my-own", "rule": {"id": "c"}},
           {"ts": 3.0, "source": "proxy", "event": "rule_added", "rule": {"id": "d"}}]
    line, notes = rerun_commands(rec, old)
    assert line == ("kueue-harness up --kueue-version v0.17.4 && kueue-harness plan load stuck-preemption && "
                    "kueue-harness plan load my-own")
    assert len(notes) == 2 and "plan my-own's file was not recorded" in notes[0] and "1 rule(s)" in notes[1]


def test_a_plan_loaded_twice_is_loaded_twice():
    first = _loaded("stuck-preemption", "plan load")
    line, _ = rerun_commands({"name": "default", "kueue_version": "v0.17.0"}, first + first)
    assert line.count("plan load") == 2 and " --plan " not in line
