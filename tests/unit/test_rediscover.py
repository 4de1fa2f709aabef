"""bench/rediscover.py's pure parts: which finding keys name a bug, how one exploration is judged, and
`--add-to` keeping an earlier file's rows (explore itself stands in: these are not measurements)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import rediscover  # noqa: E402


def test_signature_hit_and_judge() -> None:
    assert rediscover.signature_hit(["liveness:s:never", "quota:cq", "liveness:sx:stuck"], ("liveness:s",)) == \
        ["liveness:s:never"]
    bug = rediscover.BUGS[0]
    res = {"findings": [{"key": "quota:cohort", "first_index": 3, "first_minutes": 1.0},
                        {"key": "liveness:s:stuck", "first_index": 9, "first_minutes": 4.25, "reproduced": "5/5"}],
           "counts": {"tried": 12}, "minutes": 5.0}
    j = rediscover.judge(bug, res)
    assert j["found"] is True and j["perturbation"] == 9 and j["minute"] == 4.25 and j["other_findings"] == ["quota:cohort"]
    assert rediscover.judge(bug, {"error": "no explore.json"})["found"] is None


def test_add_to_replaces_the_rows_of_the_bugs_run_again(tmp_path: Path, monkeypatch) -> None:
    earlier = tmp_path / "r.json"
    earlier.write_text(json.dumps({"command": "first", "evidence": "e0", "budget_minutes": 10,
                                   "load_before": {"loadavg_1m": 0.1}, "bugs": [
        {"bug": "kubernetes-sigs/kueue#14863", "found": False, "affected": {}},
        {"bug": "kubernetes-sigs/kueue#10759", "found": None, "affected": {"error": "reference did not pass"}}]}))
    calls = []

    def fake(control, version, patches, out, minutes, max_runs, stop_on=()):
        calls.append((version, max_runs))
        return {"findings": [{"key": "deletion_completes:cq", "file": "min.yaml"}] if version == "v0.17.0" else [],
                "counts": {"tried": 7, "false_positives": 0}, "minutes": 2.0}

    monkeypatch.setattr(rediscover, "explore", fake)
    replays = []
    monkeypatch.setattr(rediscover, "replay", lambda control, version, patches, plan, out: replays.append((version, plan))
                        or {"verdicts": {"passed": 5}, "runs": 5})
    monkeypatch.setattr(sys, "argv", ["rediscover.py", "--bugs", "10759", "--minutes", "2", "--add-to", str(earlier),
                                      "--out", str(tmp_path / "ev")])
    assert rediscover.main() == 0
    d = json.loads(earlier.read_text())
    assert [r["bug"] for r in d["bugs"]] == ["kubernetes-sigs/kueue#14863", "kubernetes-sigs/kueue#10759"]
    row = d["bugs"][1]
    assert row["found"] is True and row["gone_on_fixed"] is True and row["fixed_build"] == "v0.17.2"
    assert calls == [("v0.17.0", None), ("v0.17.2", 7)]  # the fixed build gets as many tries as it took
    assert replays == [("v0.17.2", "min.yaml")] and row["replay_fixed"]["verdicts"] == {"passed": 5}
    assert d["rediscovered"] == ["kubernetes-sigs/kueue#10759"]
    assert d["found"] == 1 and d["commands"][0] == "first" and len(d["commands"]) == 2
    assert d["evidence"] == ["e0", str(tmp_path / "ev")]
    assert d["replaced_rows"] == [{"bug": "kubernetes-sigs/kueue#10759", "found": None,
                                   "affected": {"error": "reference did not pass"}}]  # kept, not lost
    # Each run keeps its own budget and load; the rows say theirs.
    assert row["budget_minutes"] == 2 and d["budget_minutes"] == [2, 10] and "load_before" not in d
    assert [(r["command"], r["budget_minutes"]) for r in d["runs"]][0] == ("first", 10)
    assert d["runs"][0]["load_before"] == {"loadavg_1m": 0.1} and d["runs"][1]["bugs"] == ["kubernetes-sigs/kueue#10759"]


def test_merge_from_takes_the_rows_of_another_file_and_runs_nothing(tmp_path: Path, monkeypatch) -> None:
    main_file, other = tmp_path / "main.json", tmp_path / "rerun.json"
    main_file.write_text(json.dumps({"command": "a", "perturbations_per_minute": [4.0], "bugs": [
        {"bug": "kubernetes-sigs/kueue#14863", "found": False}, {"bug": "kubernetes-sigs/kueue#13662", "found": True},
        {"bug": "kubernetes-sigs/kueue#10759", "found": None}]}))
    other.write_text(json.dumps({"command": "b", "perturbations_per_minute": [5.0], "bugs": [
        {"bug": "kubernetes-sigs/kueue#10759", "found": True}]}))
    monkeypatch.setattr(rediscover, "explore", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    monkeypatch.setattr(sys, "argv", ["rediscover.py", "--merge-from", str(other), "--add-to", str(main_file)])
    assert rediscover.main() == 0
    d = json.loads(main_file.read_text())
    assert [r["found"] for r in d["bugs"]] == [False, True, True] and d["found"] == 2
    assert d["commands"] == ["a", "b"] and d["perturbations_per_minute"] == [4.0, 5.0]
    assert d["replaced_rows"] == [{"bug": "kubernetes-sigs/kueue#10759", "found": None}]


def test_a_finding_the_fix_leaves_in_place_is_not_a_rediscovery() -> None:
    rows = [{"bug": "a", "found": True, "gone_on_fixed": True}, {"bug": "b", "found": True, "gone_on_fixed": False},
            {"bug": "c", "found": False}, {"bug": "d", "found": True},  # d: no fixed build to judge by
            # e: the fixed build's exploration could not run; f: its minimal plan still reproduced there
            {"bug": "e", "found": True, "gone_on_fixed": None},
            {"bug": "f", "found": True, "gone_on_fixed": True, "replay_fixed": {"verdicts": {"reproduced": 2, "error": 3}}}]
    assert rediscover.rediscovered(rows) == ["a", "d"]


def test_a_full_budget_row_is_judged_per_root_cause() -> None:
    # kueue#14863 on v0.17.0: s stuck by #11480's late admission (kept by the backport) and by an eviction
    # failed every time (gone with it): the bug is rediscovered by the second cause.
    kept = {"id": "liveness:s:never", "cause": "liveness:never | hold admission (subject)", "gone": False}
    gone = {"id": "liveness:s:never~2", "cause": "liveness:never | fail eviction (other), step step (subject)",
            "gone": True}
    row = {"bug": "b", "found": True, "gone_on_fixed": False, "hits_fixed": [kept, gone]}
    assert rediscover.rediscovered([row]) == ["b"]
    assert rediscover.rediscovered([{**row, "hits_fixed": [kept]}]) == []
    assert rediscover.rediscovered([{**row, "found": False}]) == []
    h = rediscover.judge(rediscover.BUGS[0], {"findings": [
        {"key": "liveness:s:never", "id": "liveness:s:never", "first_index": 3, "first_minutes": 1.0,
         "moves": [{"kind": "hold", "target": {"cls": "admission", "role": "s"}}]},
        {"key": "liveness:s:never", "id": "liveness:s:never~2", "variant_of": "liveness:s:never", "first_index": 9,
         "first_minutes": 4.0, "minimal": [{"kind": "fail", "target": {"cls": "eviction", "role": "v2"}}],
         "file": "f.yaml"}]})
    assert [x["id"] for x in h["hits"]] == ["liveness:s:never", "liveness:s:never~2"]
    assert h["hits"][1]["cause"] == "liveness:never | fail eviction (other)" and h["perturbation"] == 3
