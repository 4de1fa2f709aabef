"""Evidence folders: every case, repetition and control gets its own (the 40-character cut made
`…_control[r0]` and `…_control[r1]` of long names share one, and the later bundle overwrote the earlier)."""

from __future__ import annotations

from pathlib import Path

from harness.scenarios.case import _slug, case_dir

LONG = "cases/test_x.py::test_quota_oversubscription_with_hierarchical_cohorts_control"


def test_repetitions_and_controls_get_distinct_slugs() -> None:
    names = [f"{LONG}[r0]", f"{LONG}[r1]", LONG, LONG.replace("_control", ""),
             "cases/test_stuck_preemption.py::test_stuck_preemption[r0]",
             "cases/test_stuck_preemption.py::test_stuck_preemption_control[r0]"]
    slugs = [_slug(n) for n in names]
    assert len(set(slugs)) == len(names), slugs
    assert _slug(f"{LONG}[r1]").endswith("-r1")


def test_very_long_names_stay_distinct_and_bounded() -> None:
    a = "x::test_" + "a" * 100 + "_one"
    b = "x::test_" + "a" * 100 + "_two"
    assert _slug(a) != _slug(b)
    assert len(_slug(a)) <= 80


def test_case_dir_never_reuses_a_folder(tmp_path: Path) -> None:
    first = case_dir(tmp_path, "x::test_a")
    first.mkdir(parents=True)
    second = case_dir(tmp_path, "x::test_a")
    assert second != first and second.name == "test-a-2"
    second.mkdir()
    (tmp_path / "cases" / "test-a-3.tar.gz").write_bytes(b"")  # an archive alone also reserves the name
    assert case_dir(tmp_path, "x::test_a").name == "test-a-4"
