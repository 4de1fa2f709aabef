"""Findings with one key and two root causes (driver.Explorer.on_violation): a violation key broken by a plan
of another shape is a *variant*, kept with its own plan (kubernetes-sigs/kueue#14863: its preemptor s stuck
once by #11480's late admission, once by an eviction failed every time); a run of a known cause joins it.
Synthetic records; minimising is stubbed (it runs pytest)."""

from __future__ import annotations

from pathlib import Path

from harness.explore import driver
from harness.explore.findings import clusters, finding_header
from harness.explore.model import Move, Target, move_to_dict, step_move
from harness.explore.tables import render_summary

HOLD_S = Move("hold", Target("admission", "s", "s"))
FAIL_V2 = Move("fail", Target("eviction", "v2", "job-v2-*"), status=500, times=None)
RUN_S = step_move("s", [{"step": "p"}])


class Spec:
    wanted = "v0.17.0"

    def cli_args(self):
        return ["--kueue-version", "v0.17.0"]


def _explorer(tmp_path: Path) -> driver.Explorer:
    ex = driver.Explorer(["c.py::test_x_control"], Spec(), tmp_path, batch=1, noop_every=99, max_runs=9,
                         say=lambda s: None)
    ex.minimize_finding = lambda f, cand: f.update(minimal=f["moves"], minimal_words=f["plan"])
    return ex


def _rec(rid: str, moves: tuple[Move, ...], index: int) -> driver.RunRecord:
    return driver.RunRecord(rid, "c.py::test_x_control", "; ".join(m.words() for m in moves),
                            [move_to_dict(m) for m in moves], "x", len(moves), None, outcome="violation",
                            keys=["liveness:s:never"], index=index, at_minutes=float(index))


def test_a_key_broken_by_another_root_cause_is_a_variant_with_its_own_plan(tmp_path: Path) -> None:
    ex = _explorer(tmp_path)
    ex.on_violation("liveness:s:never", _rec("p0001", (HOLD_S,), 1), None)
    ex.on_violation("liveness:s:never", _rec("p0002", (HOLD_S,), 2), None)  # the same cause: a run of it
    ex.on_violation("liveness:s:never", _rec("p0003", (FAIL_V2, RUN_S), 3), None)
    assert list(ex.findings) == ["liveness:s:never", "liveness:s:never~2"]
    first, variant = ex.findings.values()
    assert first["runs"] == ["p0001", "p0002"] and variant["variant_of"] == "liveness:s:never"
    assert variant["causes"] == ["liveness:never | fail eviction (other), step step (subject)"]
    c = ex.counts()
    assert (c["distinct"], c["variants"]) == (1, 1)
    assert [g["keys"] for g in clusters(ex.findings.values())] == [["liveness:s:never"], ["liveness:s:never~2"]]
    ex.on_violation("liveness:s:never", _rec("p0004", (FAIL_V2, RUN_S), 4), None)
    assert variant["runs"] == ["p0003", "p0004"] and len(ex.findings) == 2


def test_the_table_and_the_finding_file_name_the_variant(tmp_path: Path) -> None:
    ex = _explorer(tmp_path)
    for i, moves in enumerate([(HOLD_S,), (FAIL_V2, RUN_S)], 1):
        ex.on_violation("liveness:s:never", _rec(f"p000{i}", moves, i), None)
    result = {"cases": ["c.py::test_x_control"], "kueue": "v0.17.0", "shard": [1, 1], "minutes": 3.0,
              "counts": {**ex.counts(), "tried": 4}, "findings": list(ex.findings.values()),
              "clusters": clusters(ex.findings.values())}
    table = render_summary(result)
    assert "| `liveness:s:never~2` (variant of `liveness:s:never`) |" in table
    f = {**ex.findings["liveness:s:never~2"], "confirmed": "5/5", "reproduced": "5/5", "bundle": "b.tar.gz"}
    text = finding_header(f, "v0.17.0", "c.py::test_x_control", "f.yaml", ["--kueue-version", "v0.17.0"], 5, 5)
    assert "(a variant of liveness:s:never: another root cause)" in text
    assert "up --plan" not in text  # it runs a step of the case's own plan: replayed on its case only


def test_how_a_step_deletes_is_part_of_the_root_cause() -> None:
    from harness.explore.findings import cluster_key
    from harness.explore.model import delete_as_move

    orphan = move_to_dict(delete_as_move("delete-j1", propagation="Orphan"))
    keep = move_to_dict(delete_as_move("delete-j1", keep_terminating=5.0))
    assert cluster_key("running_pods_within_quota:running", [orphan]) == \
        "running_pods_within_quota | delete_as Orphan step (other)"
    assert cluster_key("running_pods_within_quota:running", [keep]) == \
        "running_pods_within_quota | delete_as keep_terminating step (other)"
