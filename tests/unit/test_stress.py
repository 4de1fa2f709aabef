"""bench/stress.py's pure parts: case names, what counts as a wrong verdict, the tally and the table."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import stress  # noqa: E402


def test_case_name_drops_the_file_and_repetition() -> None:
    assert stress.case_name("cases/kueue_13662/test_preemption_thrashing.py::test_preemption_thrashing[r3]") == \
        "test_preemption_thrashing"
    assert stress.case_name("x.py::t_control") == "t_control"


def test_classify_names_each_kind_of_wrong() -> None:
    assert stress.classify("reproduced", "reproduced") is None
    assert stress.classify("passed", "") is None  # a control: expected passed
    assert stress.classify("reproduced", "passed") == "false reproduction"
    assert stress.classify("passed", "reproduced") == "false pass"
    assert stress.classify("error", "passed") == "error"
    assert stress.classify("inconclusive", "reproduced") == "other"


def test_tally_and_table() -> None:
    runs = [
        {"cases": [{"case": "a.py::t", "verdict": "reproduced", "expected": "reproduced", "seconds": 3.0},
                   {"case": "a.py::t_control", "verdict": "passed", "expected": "passed", "seconds": 1.0}]},
        {"cases": [{"case": "a.py::t", "verdict": "passed", "expected": "reproduced", "seconds": 9.5}]},
    ]
    t = stress.tally(runs)
    assert t["wrong_verdicts"] == 1 and t["by_kind"] == {"false pass": 1}
    assert t["cases"]["t"] == {"expected": ["reproduced"], "actual": {"reproduced": 1, "passed": 1}, "wrong": 1,
                               "errors": 0, "error_reasons": [], "seconds_max": 9.5}
    assert t["missing"] == {"t_control": 1}  # absent from run 2: not silently a pass
    text = stress.table(t, 2)
    assert "t_control" in text and "passed 1/2, reproduced 1/2" in text
    assert "wrong verdicts: 1 (false pass 1)" in text
    assert stress.tally([])["wrong_verdicts"] == 0
    # An error claims nothing: counted apart with its reason, never a wrong verdict.
    slow = stress.tally([{"cases": [{"case": "a.py::t_control", "verdict": "error", "expected": "passed",
                                     "detail": "liveness: too slow to judge: p got no quota in 95.00s"}]}])
    assert slow["wrong_verdicts"] == 0 and slow["errors"] == 1 and slow["error_share"] == 1.0
    assert slow["cases"]["t_control"]["error_reasons"] == ["liveness: too slow to judge: p got no quota in 95.00s"]
    assert "t_control: liveness: too slow to judge" in stress.table(slow, 1)


def test_cases_from_bundles_of_a_run_stopped_early(tmp_path) -> None:
    import json

    d = tmp_path / "run-1" / "cases" / "test-x"
    d.mkdir(parents=True)
    (d / "bundle.json").write_text(json.dumps({"case": "c.py::test_x", "verdict": "reproduced",
                                               "expected": "reproduced", "seconds": 4.0, "detail": "d", "more": 1}))
    (tmp_path / "run-1" / "cases" / "broken").mkdir()
    (tmp_path / "run-1" / "cases" / "broken" / "bundle.json").write_text("{")
    assert stress.cases_from_bundles(tmp_path / "run-1") == [
        {"case": "c.py::test_x", "verdict": "reproduced", "expected": "reproduced", "seconds": 4.0, "detail": "d"}]


def test_combine_retallies_every_run_and_refuses_two_versions(tmp_path) -> None:
    import json

    import pytest

    def doc(version, verdicts, burners):
        return {"benchmark": "stress", "kueue_version": version, "runs": len(verdicts), "burners": burners,
                "wrong_verdicts": 0,
                "load_1m": {"min": 9.0 + burners, "max": 15.0 + burners},
                "run_details": [{"exit": 0, "cases": [{"case": "a.py::t", "verdict": v, "expected": "reproduced"}]}
                                for v in verdicts]}

    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(doc("v0.19.2", ["reproduced"], 16)))
    b.write_text(json.dumps(doc("v0.19.2", ["reproduced", "passed"], 8)))
    c.write_text(json.dumps(doc("v0.17.0", ["reproduced"], 16)))
    d = stress.combine([a, b])
    assert d["runs"] == 3 and d["wrong_verdicts"] == 1 and d["by_kind"] == {"false pass": 1}  # re-counted, not summed
    assert d["burners"] == [8, 16] and d["load_1m"] == {"min": 17.0, "max": 31.0}
    assert [s["file"] for s in d["sources"]] == ["a.json", "b.json"] and d["main_job_exits"] == [0, 0, 0]
    with pytest.raises(ValueError, match="different Kueue versions"):
        stress.combine([a, c])
    with pytest.raises(ValueError, match="given twice"):
        stress.combine([a, tmp_path / "." / "a.json"])
    for bad, words in (({"x": 1}, "not a results file of bench/stress.py"), ([1, 2], "not a results file"),
                       ({"benchmark": "stress", "kueue_version": "v1", "run_details": "oops"}, "run_details is not")):
        c.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=words):
            stress.combine([a, c])
        with pytest.raises(ValueError, match=words):
            stress.retally(c)  # refused before anything is written back
        assert json.loads(c.read_text()) == bad
