"""Known root causes muted in explore (issue 36 item 1): a bug.yaml `signature` tested on a perturbed run's writes
(harness/kueue/signatures.py); a violation it explains is counted as that bug, never a finding; which bugs are
muted by default (those that affect the build) and by `--known` / `--no-known`."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.common.errors import HarnessError
from harness.explore import driver
from harness.explore.command import known_bugs
from harness.explore.trace import Trace
from harness.kueue import bugs, signatures
from harness.kueue.versions import BuildIdentity
from tests.unit.test_explore import NS, WL1, Events, late_admission_run, reference

LATE = {"late_write": {"write": "admission", "strict": False, "after": ["eviction", "quota_release"]}}


def test_the_signature_of_11480_is_a_loose_admission_applied_after_the_eviction() -> None:
    why = signatures.matches(LATE, late_admission_run())
    assert why and f"loose admission of Workload {WL1}" in why and "before its eviction was applied" in why
    assert signatures.matches(LATE, reference()) is None  # admitted, then evicted: no late write
    e = Events()
    held = e.write(WL1, "admission", answer=False, strict=True)
    e.write(WL1, "eviction")
    e.answer(held, WL1, "admission", "13")
    assert signatures.matches(LATE, e.out) is None  # a strict admission would have been refused (409), not applied
    assert signatures.matches({"late_write": {**LATE["late_write"], "strict": True}}, e.out)


def test_a_signature_is_checked_where_it_is_declared() -> None:
    assert signatures.check({**LATE, "violates": ["quota"]}, "b.yaml") == {**LATE, "violates": ["quota"]}
    for bad in ({"late_write": {"write": "admission"}}, {"early_write": {}}, {**LATE, "also": 1},
                {"late_write": {**LATE["late_write"], "strict": "no"}}, {**LATE, "violates": "quota"}):
        with pytest.raises(HarnessError, match="b.yaml"):
            signatures.check(bad, "b.yaml")
    assert signatures.explains({**LATE, "violates": ["liveness"]}, "liveness:job2:stuck")
    assert not signatures.explains({**LATE, "violates": ["liveness"]}, "quota:cq")
    assert signatures.explains(LATE, "quota:cq")


def _ident(version: str) -> BuildIdentity:
    return BuildIdentity(version, None, version, None)


def test_the_bugs_that_affect_the_build_are_muted_by_default() -> None:
    assert set(known_bugs(_ident("v0.17.0"), None, False)) == {"kubernetes-sigs/kueue#11480",
                                                              "kubernetes-sigs/kueue#11480-oversubscription"}
    assert set(known_bugs(_ident("v0.19.2"), None, False)) == {"kubernetes-sigs/kueue#11480-oversubscription"}
    assert known_bugs(_ident("v0.19.2"), None, True) == {}
    assert set(known_bugs(None, ["kubernetes-sigs/kueue#11480"], False)) == {"kubernetes-sigs/kueue#11480"}
    with pytest.raises(HarnessError, match="with a signature"):
        known_bugs(None, ["kubernetes-sigs/kueue#9428"], False)
    with pytest.raises(HarnessError, match="contradict"):
        known_bugs(None, ["kubernetes-sigs/kueue#11480"], True)


def test_a_known_violation_is_counted_as_the_bug_and_never_minimised(tmp_path: Path) -> None:
    class Spec:
        wanted = "v0.19.2"

        def cli_args(self):
            return ["--kueue-version", "v0.19.2"]

    quota = {"check": "quota", "result": "violated", "summary": "ClusterQueue cq holds 2 of 1 cpu"}
    batches: list[list[str]] = []

    def fake_batch(items, refill=None):
        batches.append([rid for rid, _, _ in items])
        return {rid: {"events": late_admission_run(), "namespace": NS, "jobs": ["job1", "job2"], "findings": [quota],
                      "verdict": "reproduced", "seconds": 1.0, "evidence": str(tmp_path), "bundle": ""}
                for rid, cand, case in items}

    known = {k: b for k, b in bugs.load().items() if k == "kubernetes-sigs/kueue#11480-oversubscription"}
    ex = driver.Explorer(["c.py::test_x_control"], Spec(), tmp_path, batch=3, noop_every=1000, max_runs=3,
                         min_runs=2, known=known, say=lambda s: None)
    ex.run_batch = fake_batch  # type: ignore[method-assign]
    trace = Trace.from_events(reference(), NS, ["job1", "job2"])
    ex.seed({"c.py::test_x_control": trace})
    ex.search({"c.py::test_x_control": trace})
    assert ex.findings == {} and not [r for b in batches for r in b if r.startswith("m")]  # nothing confirmed or minimised
    assert ex.known.counts() == {"kubernetes-sigs/kueue#11480-oversubscription": 3} and ex.counts()["known"] == 3
    result = ex.write()
    assert result["known"] == {"kubernetes-sigs/kueue#11480-oversubscription": 3}
    assert "Known bugs muted" in driver.render_summary(result)
