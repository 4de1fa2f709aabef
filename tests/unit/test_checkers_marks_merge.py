"""Every `checkers` mark of a case counts (harness/scenarios/markers.py `_selection`): a module's `pytestmark`
and the function's own, the closer one's parameters winning — so a file can give all its cases an invariant
that applies (a case with none is an error, never a pass)."""

from __future__ import annotations

import pytest

from harness.scenarios.markers import _selection


class Item:
    nodeid = "cases/x/test_x.py::test_x"

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.marks = [m.mark for m in marks]  # closest first, as pytest's iter_markers gives them

    def iter_markers(self, name: str):
        return [m for m in self.marks if m.name == name]


def test_module_and_function_marks_are_merged_the_closer_winning() -> None:
    function = pytest.mark.checkers(liveness={"jobs": ["job2"]}, bounded_evictions={"max": 5})
    module = pytest.mark.checkers("quota", "bounded_evictions")
    sel = _selection(Item(function, module)).checkers
    assert sel["liveness"] == {"jobs": ["job2"]}
    assert sel["bounded_evictions"] == {"max": 5}  # the function's parameters win over the module's bare name
    assert sel["quota"] == {}


def test_one_mark_is_what_it_was() -> None:
    sel = _selection(Item(pytest.mark.checkers("quota"))).checkers
    assert sel["quota"] == {}
