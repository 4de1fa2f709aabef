"""Issue 24 item 5: every YAML problem of a plan is a `file:line` error (exit 2), in bounded time, from
`plan validate` and from `up --plan` alike: tags (`!!python/object…`), nesting deeper than MAX_DEPTH (checked
on YAML's event stream, before any node is built), and trigger chains of any length (the cycle search is
iterative and linear). The subprocess timeouts below are bounds, not speed targets (those are in bench/)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.plan.load import MAX_DEPTH, PlanError, parse_plan
from harness.plan.rules import _first_cycle

ROOT = Path(__file__).resolve().parents[2]
HEADER = "apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: t\n"
TAIL = "rules:\n  - id: r1\n    match: {write: admission}\n"


def _chain(n: int, cycle: bool = False) -> str:
    """n holds, each released after the next one is released (the last closes a cycle when asked)."""
    rules = []
    for i in range(n):
        nxt = i + 1 if i < n - 1 else (0 if cycle else None)
        rules.append(f"  - id: r{i}\n    match: {{write: admission, name: job-{i}-*}}"
                     + (f"\n    release:\n      after: [{{rule: r{nxt}, state: released}}]" if nxt is not None else ""))
    return HEADER + "rules:\n" + "\n".join(rules) + "\n"


PLANS = {
    "python-tag": (HEADER + "description: !!python/object/apply:os.system ['echo pwned']\n" + TAIL,
                   r"python\.yaml:4: YAML tag !!python/object/apply:os\.system is not allowed"),
    "custom-tag": (HEADER + "description: !secret x\n" + TAIL, r":4: YAML tag !secret is not allowed"),
    "deep-flow": (HEADER + "description: " + "[" * 3000 + "]" * 3000 + "\n" + TAIL,
                  rf":4: nested more than {MAX_DEPTH} levels deep"),
    "deep-mapping": (HEADER + "description: " + "{a: " * 3000 + "b" + "}" * 3000 + "\n" + TAIL,
                     rf":4: nested more than {MAX_DEPTH} levels deep"),
    "cycle-1200": (_chain(1200, cycle=True), r":\d+: release triggers form a cycle: r0 -> r1 -> .* -> r1199 -> r0"),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_parse_plan_says_file_and_line(name: str) -> None:
    text, pattern = PLANS[name]
    with pytest.raises(PlanError) as e:
        parse_plan(text, "python.yaml" if name == "python-tag" else f"{name}.yaml")
    assert re.search(pattern, str(e.value)), str(e.value)[:400]


def test_a_long_acyclic_chain_is_valid() -> None:
    plan = parse_plan(_chain(1200), "chain.yaml")
    assert len(plan.rules) == 1200


def test_the_cycle_search_is_iterative() -> None:
    n = 50_000  # far deeper than Python's stack
    graph = {f"r{i}": {f"r{i + 1}"} if i < n - 1 else set() for i in range(n)}
    assert _first_cycle(graph) is None
    graph[f"r{n - 1}"] = {"r0"}
    cycle = _first_cycle(graph)
    assert cycle is not None and cycle[0] == cycle[-1] == "r0" and len(cycle) == n + 1
    assert _first_cycle({"a": {"a"}}) == ["a", "a"]
    assert _first_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]


@pytest.mark.parametrize("command", [["plan", "validate"], ["up", "--plan"]])
@pytest.mark.parametrize("name", ["python-tag", "deep-flow", "cycle-1200"])
def test_the_cli_exits_2_with_file_and_line(tmp_path: Path, command: list[str], name: str) -> None:
    text, pattern = PLANS[name]
    plan = tmp_path / ("python.yaml" if name == "python-tag" else f"{name}.yaml")
    plan.write_text(text)
    r = subprocess.run([sys.executable, "-m", "harness.cli", *command, str(plan)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60, env={"PATH": "/usr/bin:/bin", "KUEUE_HARNESS_CACHE": str(tmp_path / "c"),
                                                  "HOME": str(tmp_path)})
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and re.search(str(plan).replace(".", r"\.") + pattern.split("yaml", 1)[-1]
                                                     if name == "python-tag" else re.escape(str(plan)) + pattern,
                                                     r.stderr), r.stderr[-1000:]


def test_a_literal_workload_name_that_can_never_match_is_warned_about_offline(tmp_path: Path) -> None:
    """Issue 24 item 8: `name: job1` for the Workload of Job job1 (job-job1-<hash>) is valid but matches
    nothing; `plan validate` says so (exit 0: a warning), with the fix; a glob, a non-Workload rule and a
    Workload the plan itself creates under that name are not warned about."""
    from harness.plan.lint import name_warnings
    from harness.plan.load import load_plan, shipped_plans

    plan = tmp_path / "job1.yaml"
    plan.write_text(HEADER + "rules:\n  - id: adm\n    match: {write: admission, name: job1}\n"
                    "  - id: glob\n    match: {write: eviction, name: job-job1-*}\n"
                    "  - id: job\n    match: {kind: Job, name: job1}\n")
    warned = name_warnings(load_plan(plan))
    assert len(warned) == 1 and warned[0].startswith(f"{plan}:5: WARNING: rule adm: match.name 'job1'"), warned
    assert "'job-job1-*'" in warned[0]
    r = subprocess.run([sys.executable, "-m", "harness.cli", "plan", "validate", str(plan)], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and warned[0] in r.stderr and "valid" in r.stdout, r
    for name, path in shipped_plans().items():
        assert name_warnings(load_plan(path)) == [], name
