"""Per-case Kueue configuration on the real components: a case that declares a feature gate and fair sharing
(`@pytest.mark.kueue_config`) gets a Kueue restarted with them, which reports the gate on and admits a Job;
the next case declaring the same gets no restart; a case naming a gate this Kueue does not know is an error
before Kueue is touched (the message names the versions that have it); a case without the marker gets the
harness's default back. The restarts are not "unasked" (every verdict is passed), and each bundle records
what Kueue was given. The cases run in a child pytest, as a user runs them.

Prints the restart seconds of each configuration change (docs/kueue-config.md).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from tests.integration.child import run_child_cases

CASES = textwrap.dedent('''
    import pytest
    from harness import objects as o, scenarios
    # A case with no invariant that applied is an error (harness/checkers/base.py compose): quota judges them all.
    pytestmark = pytest.mark.checkers("quota")

    DECLARED = dict(feature_gates={"ShortWorkloadNames": True}, fair_sharing=True)

    def admit_one(case):
        q = scenarios.preemption_queues(case)
        wl = scenarios.submit_job(case, q, "job1", q.low)
        scenarios.wait_workload(case, wl, lambda w: o.is_true(w, "QuotaReserved"), 60, "job1 admitted")

    @pytest.mark.kueue_config(**DECLARED)
    def test_1_declares_a_gate_and_fair_sharing(case):
        admit_one(case)

    @pytest.mark.kueue_config(**DECLARED)
    def test_2_same_declaration_no_restart(case):
        admit_one(case)

    @pytest.mark.kueue_config(feature_gates={"PrioritizePreemptorWorkloads": True})
    def test_3_unknown_gate(case):
        admit_one(case)

    def test_4_default_back(case):
        admit_one(case)
''')


def _history(case_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (case_dir / "history.jsonl").read_text().splitlines()]


def test_cases_get_their_kueue_configuration_and_the_next_gets_the_default_back(tmp_path: Path, kueue_version: str) -> None:
    run = run_child_cases(tmp_path, CASES, kueue_version)
    out, v = run.out, run.verdicts
    assert [v[n]["verdict"] for n in sorted(v)] == ["passed", "passed", "error", "passed"], out
    assert "PrioritizePreemptorWorkloads is unknown to Kueue" in v["test_3_unknown_gate"]["detail"], v["test_3_unknown_gate"]

    cases = {d.name: d for d in (tmp_path / "art" / "cases").iterdir() if d.is_dir()}
    first, second, default = (cases["test-1-declares-a-gate-and-fair-sharing"], cases["test-2-same-declaration-no-restart"],
                              cases["test-4-default-back"])
    conf = {n: next(e for e in _history(d) if e["event"] == "kueue_configured") for n, d in
            (("first", first), ("second", second), ("default", default))}
    assert conf["first"]["restarted"] is True and conf["first"]["feature_gates"]["ShortWorkloadNames"] is True, conf
    assert conf["second"]["restarted"] is False, conf
    assert conf["default"]["restarted"] is True and conf["default"]["feature_gates"]["ShortWorkloadNames"] is False, conf
    assert conf["default"]["declared"] == {}

    b1 = json.loads((first / "bundle.json").read_text())["kueue_config"]
    assert b1["configuration"]["featureGates"] == {"VisibilityOnDemand": False, "ShortWorkloadNames": True}
    assert b1["configuration"]["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    assert b1["feature_gates_reported"]["ShortWorkloadNames"] is True
    assert "ShortWorkloadNames=true" in (first / "report.md").read_text()
    b4 = json.loads((default / "bundle.json").read_text())["kueue_config"]
    assert b4["configuration"]["featureGates"] == {"VisibilityOnDemand": False} and "fairSharing" not in b4["configuration"]
    assert v["test_1_declares_a_gate_and_fair_sharing"]["kueue_config"]["declared"]["featureGates"] == {"ShortWorkloadNames": True}
    print("\nconfiguration restart seconds (declare, same again, back to default):",
          conf["first"]["seconds"], conf["second"]["seconds"], conf["default"]["seconds"])
