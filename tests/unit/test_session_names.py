"""Session names (harness/cli/records.py check_name): no name is the default session; an empty one is refused."""

import pytest

from harness.cli.records import DEFAULT_NAME, check_name
from harness.common.errors import HarnessError


def test_no_name_is_the_default_session_and_an_empty_one_is_refused() -> None:
    assert check_name(None) == DEFAULT_NAME and check_name("old") == "old"
    with pytest.raises(HarnessError, match="session name '' is not usable"):
        check_name("")  # `up --name ''` started the default session (a breaker's report, issue 39)
