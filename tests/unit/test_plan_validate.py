"""`kueue-harness plan validate FILE...` (issue 16, item 5): offline, no session; exit 0 when every plan is
valid, 2 with every `file:line:` problem of every invalid one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import commands as cli

HEAD = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: p\n"


def test_valid_plans_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    # No session, and no cache a session could be found in: validate must not need one.
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "no-cache"))
    good = tmp_path / "good.yaml"
    good.write_text(HEAD + "rules:\n  - id: a\n    match: {write: admission, name: 'job-job1-*'}\n")
    assert cli.main(["plan", "validate", str(good), "stuck-preemption"]) == 0
    out = capsys.readouterr().out
    assert f"{good}: valid, plan p: a" in out and "plan stuck-preemption: admission-job1" in out
    assert not (tmp_path / "no-cache").exists()


def test_every_problem_of_every_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(HEAD + "rules:\n  - id: a\n    match: {write: admision}\n  - id: b\n    times: 0\n")
    two = tmp_path / "two.yaml"
    two.write_text(HEAD + "rules:\n  - id: c\n    action: explode\n")
    good = tmp_path / "good.yaml"
    good.write_text(HEAD + "rules:\n  - id: a\n")
    assert cli.main(["plan", "validate", str(one), str(good), str(two), str(tmp_path / "missing.yaml")]) == 2
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert [line for line in err if re.match(r".+\.yaml:\d+: ", line)] == [
        f"{one}:6: rule a: match.write: 'admision' is not one of admission, eviction, quota_release, pending, "
        "finish, other or a write verb",
        f"{one}:8: rule b: times must be >= 1 or null",
        f"{two}:6: rule c: action 'explode' is not one of hold, delay, fail, reset, observe, drop_watch_events, "
        "delay_watch_events, restart_kueue",
    ]
    assert any("missing.yaml: cannot read the plan" in line for line in err)
    assert err[-1] == "kueue-harness: 3 of 4 plans invalid (docs/fault-plans.md, Validation)"
    assert f"{good}: valid" in captured.out


@pytest.mark.parametrize("ns,why", [("Bad_NS!", "is not an RFC 1123 label"), ("-a", "is not an RFC 1123 label"),
                                    ("a-", "is not an RFC 1123 label"), ("a.b", "is not an RFC 1123 label"),
                                    ("x" * 64, "is longer than 63 characters"), ("", "is empty")])
def test_a_namespace_that_cannot_name_a_namespace_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture, ns: str, why: str) -> None:
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "no-cache"))
    assert cli.main(["plan", "validate", "stuck-preemption", f"--namespace={ns}"]) == 2
    err = capsys.readouterr().err
    assert f"namespace {ns!r} {why}: a Kubernetes namespace name has at most 63 lower-case letters" in err, err
    # `plan load` refuses it before it looks for a session (exit 2, nothing loaded).
    assert cli.main(["plan", "load", "stuck-preemption", f"--namespace={ns}"]) == 2
    assert f"namespace {ns!r} {why}" in capsys.readouterr().err
    assert cli.main(["plan", "validate", "stuck-preemption", "--namespace", "team-a" + "1" * 57]) == 0
