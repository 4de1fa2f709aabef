"""`run` resolves which cases it runs before anything is built (issue 24 item 2): pytest's own collection
of cases/, in-process, with -k and the options after `--`."""

from __future__ import annotations

import pytest

from harness.cli import commands as cli
from harness.common.errors import HarnessError


def test_collection_names_the_cases_a_k_expression_selects() -> None:
    ids = cli.select_cases([str(cli.CASES_DIR), "-k", "stuck_preemption_control"], ["--target=local"])
    assert ids and all("test_stuck_preemption_control" in i for i in ids), ids
    assert cli.select_cases([str(cli.CASES_DIR), "-k", "nomatch"], ["--target=local"]) == []


def test_collection_is_forced_into_this_process_under_xdist() -> None:
    pytest.importorskip("xdist")
    ids = cli.select_cases([str(cli.CASES_DIR), "-k", "stuck_preemption_control"], ["-n", "2"])
    assert ids, "with -n 2 the items are collected by workers unless -n0 is forced"


def test_options_pytest_refuses_are_an_error_before_any_build(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(HarnessError, match="pytest refused the options"):
        cli.select_cases([str(cli.CASES_DIR)], ["--no-such-pytest-option"])
    assert "--no-such-pytest-option" in capsys.readouterr().err
