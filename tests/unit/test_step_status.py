"""What `kueue-harness status` / `holds` and the session log say about plan steps (a new user's report: every
step read "create 0 of 1" after all had succeeded, and session.log named only failed steps): the proxy's
`GET /state` keeps each signal's outcome (signalled, signal_done: ok, seconds, error) and the triggers it
still waits for; the CLI shows waiting / running / done ok (seconds) / failed (error); the supervisor's
notices write one line per step done or failed, in the proxy's order."""

from __future__ import annotations

from harness.cli import manual as cli
from harness.plan.load import parse_plan
from harness.proxy.addons.state import ProxyState
from harness.proxy.notices import notice

PLAN = """apiVersion: kueue-harness/v1
kind: FaultPlan
name: t
rules:
  - id: admission-w1
    match: {write: admission, name: w1}
    action: hold
  - id: restart
    action: restart_kueue
    release: {after: [{step: w1}], timeout: 30}
steps:
  - id: queues
    create: {builder: resource_flavor, args: ["${namespace}-rf"]}
  - id: ready
    wait: {object: LocalQueue/lq, condition: Active}
  - id: w1
    after: [{step: ready}, {rule: admission-w1, state: held}]
    create: {builder: workload, args: {name: w1}}
"""


def _state() -> ProxyState:
    st = ProxyState()
    plan = parse_plan(PLAN, "t.yaml", namespace="team-a")
    st.add_rules(list(plan.rules), plan="t")
    return st


def _lines(st: ProxyState, now: float) -> dict[str, str]:
    view = st.view()
    return {line.split()[0]: line for line in cli._rule_lines(view, now=now)[1:] if not line.startswith(" ")}


def test_steps_show_their_state_not_hits() -> None:
    st = _state()
    lines = _lines(st, now=0)
    # `queues` fired on load; the others wait (w1 for two triggers, only the unmet ones are named).
    assert "running" in lines["queues"] and "0 of 1" not in lines["queues"]
    assert lines["ready"].endswith("waiting for triggers: step queues done")
    assert "waiting for triggers: step ready done, admission-w1 held" in lines["w1"]
    assert "0 of 1" in lines["admission-w1"]  # a hold still shows its hits

    fired = st.signals["queues"].fired
    assert f"running ({5.0:.1f} s)" in _lines(st, now=fired + 5)["queues"]
    st.signal_done("queues", True, {"seconds": 0.049, "objects": ["ResourceFlavor team-a-rf rv 7"]})
    lines = _lines(st, now=fired + 5)
    assert lines["queues"].endswith("done ok (0.049 s)")
    assert "running" in lines["ready"]  # {step: queues} holds now: ready fired
    assert lines["w1"].endswith("waiting for triggers: step ready done, admission-w1 held")

    st.signal_done("ready", False, {"error": "TimeoutError: not seen within 60 s (last observed: absent)"})
    lines = _lines(st, now=fired + 5)
    assert lines["ready"].endswith("failed (TimeoutError: not seen within 60 s (last observed: absent))")
    assert lines["restart"].endswith("waiting for triggers: step w1 done; fires after its release.timeout of 30 s")


def test_the_state_view_carries_each_signal_outcome() -> None:
    st = _state()
    st.signal_done("queues", True, {"seconds": 0.05})
    views = {v["rule"]: v for v in st.view()["signals"]}
    assert views["queues"]["ok"] is True and views["queues"]["result"] == {"seconds": 0.05}
    assert views["ready"]["fired"] is not None and "ok" not in views["ready"]
    assert views["w1"]["waiting_for"] == ["step ready done", "admission-w1 held"]


def test_each_step_done_or_failed_gets_one_session_log_line() -> None:
    st = _state()
    st.signal_done("queues", True, {"seconds": 0.049, "objects": ["ResourceFlavor team-a-rf rv 7"]})
    st.signal_done("ready", True, {"seconds": 0.0, "matched": {"observed": "Active=True(Ready) at rv 88",
                                                                "object": "LocalQueue lq"}})
    st.fire("w1", "test")
    st.signal_done("w1", False, {"error": "StepError: create Workload team-a/w1: kube-apiserver answered 409"})
    said = [line for line in (notice(e) for e in st.log.events) if line]
    assert said[:2] == ["[kueue-harness] step queues (create) done in 0.049 s: ResourceFlavor team-a-rf rv 7",
                        "[kueue-harness] step ready (wait) done in < 0.001 s: LocalQueue lq: Active=True(Ready) at rv 88"]
    assert len(said) == 3 and said[2].startswith("[kueue-harness] step w1 (create) FAILED after ")
    assert said[2].endswith(" s: StepError: create Workload team-a/w1: kube-apiserver answered 409")
    restart = {"event": "signal_done", "rule": "restart", "action": "restart_kueue", "ok": True, "seconds": 1.38}
    assert notice(restart) == "[kueue-harness] process fault restart (restart_kueue) done in 1.38 s"
