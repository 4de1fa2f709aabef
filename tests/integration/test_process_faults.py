"""Process faults in the plan language on the real components: a plan's `restart_kueue` rule fires when
its trigger (job1's admission answered 200) holds, harness/nemesis/runner.py restarts Kueue (SIGTERM, and
SIGKILL with `kill: true`), Kueue admits the next Job afterwards, and the case's verdict is "passed" —
not "error": the restart was one the case asked for. The cases run in a child pytest, the way a user
runs them, so that their verdicts can be read from summary.json.

Prints the restart timings it measured (signalled → done, and the environment's own restart time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

CASES = textwrap.dedent('''
    import pytest
    from harness import objects as o, scenarios
    from harness.plan.load import parse_plan
    # A case with no invariant that applied is an error (harness/checkers/base.py compose): quota judges them all.
    pytestmark = pytest.mark.checkers("quota")

    PLAN = """
    apiVersion: kueue-harness/v1
    kind: FaultPlan
    name: restart-after-admission
    rules:
      - id: admission-job1
        match: {write: admission, name: "job-job1-*"}
        action: observe
      - id: restart-kueue
        action: restart_kueue
        kill: KILL
        release:
          after: [{rule: admission-job1, state: answered, status: 200}]
    """

    @pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
    def test_a_plan_restarts_kueue_at_its_trigger(case, kill):
        q = scenarios.preemption_queues(case, cpu="2")
        plan = parse_plan(PLAN.replace("KILL", str(kill).lower()), "restart.yaml", namespace=case.ns)
        case.proxy.load_plan(plan)
        case.record("plan_loaded", plan=plan.name, rules=[r.id for r in plan.rules])
        starts = case.env.kueue_starts()
        scenarios.submit_job(case, q, "job1", q.low)
        done = case.proxy.wait_event(lambda e: e["event"] == "signal_done" and e.get("rule") == "restart-kueue",
                                     120, "the plan's Kueue restart to be done")
        assert done["ok"] and done["kill"] is kill, done
        assert case.env.kueue_alive() and case.env.kueue_starts() == starts + 1
        # The restarted Kueue works: a second Job gets quota.
        wl2 = scenarios.submit_job(case, q, "job2", q.low)
        scenarios.wait_workload(case, wl2, lambda w: o.is_true(w, "QuotaReserved"), 60, "quota after the restart")

    def test_a_case_that_ends_while_kueue_restarts_is_judged_after_the_restart(case):
        scenarios.setup_queues(case)
        # No triggers: the restart fires as the rule loads, and the body returns at once; the nemesis
        # finishes the restart before the plugin judges the case.
        case.proxy.load_plan(parse_plan(PLAN.replace("KILL", "false").split("release:")[0], "now.yaml"))
''')


def test_a_plan_restarts_kueue_and_the_verdict_is_not_error(tmp_path: Path, kueue_version: str) -> None:
    f = tmp_path / "test_child.py"
    f.write_text(CASES)
    p = subprocess.run([sys.executable, "-m", "pytest", str(f), "-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}",
                        f"--artifacts-dir={tmp_path / 'art'}", f"--kueue-version={kueue_version}"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    out = p.stdout
    summary = json.loads((tmp_path / "art" / "summary.json").read_text())
    verdicts = {c["case"].split("::")[-1]: c for c in summary["cases"]}
    assert set(verdicts) == {"test_a_plan_restarts_kueue_at_its_trigger[sigterm]",
                             "test_a_plan_restarts_kueue_at_its_trigger[sigkill]",
                             "test_a_case_that_ends_while_kueue_restarts_is_judged_after_the_restart"}, out
    for name, v in verdicts.items():
        assert v["verdict"] == "passed", (name, v, out)
    assert p.returncode == 0, out

    proxy_events = [json.loads(x) for x in (tmp_path / "art" / "env" / "proxy-events.jsonl").read_text().splitlines()]
    signalled = [e for e in proxy_events if e["event"] == "signalled"]
    done = [e for e in proxy_events if e["event"] == "signal_done"]
    assert [e["kill"] for e in signalled] == [False, True, False]
    assert [e["why"] for e in signalled] == ["triggers: admission-job1 answered"] * 2 + ["loaded"]
    assert len(done) == 3 and all(d["ok"] for d in done)
    timings = []
    for case_dir in sorted((tmp_path / "art" / "cases").iterdir()):
        if not case_dir.is_dir():
            continue
        history = [json.loads(x) for x in (case_dir / "history.jsonl").read_text().splitlines()]
        (restart,) = [e for e in history if e["event"] == "kueue_restart"]
        assert restart["source"] == "harness" and restart["rule"] == "restart-kueue"
        assert any(e["event"] == "signalled" for e in history) and any(e["event"] == "signal_done" for e in history)
    for s, d in zip(signalled, done):
        timings.append((s["kill"], round(d["ts"] - s["ts"], 2), d["seconds"]))
    print("\nrestart timings (kill, signalled->done s, environment restart s):", timings)
