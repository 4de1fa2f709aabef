"""`pytest CASE --plan FILE` validates FILE when pytest starts, before any environment does (as `up --plan`
does): a usage error (exit 4) with every `file:line:` problem; a bare name that is neither a file nor a
shipped plan must be a plan next to each selected case, checked when the cases are collected. No case runs
here (-k selects none), so no environment starts whatever happens. That the plan's first steps then run:
tests/integration/test_plan_option.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASE = "cases/kueue_11480/test_stuck_preemption.py"


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", CASE, "-q", "-p", "no:cacheprovider", "-k",
                           "no_case_has_this_name", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_an_invalid_plan_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: x\nsteps:\n  - id: a\n    wait: {log: x}\n"
                   "    timeout: 0\n  - id: b\n    after: [{step: nope}]\n    delete: LocalQueue/lq\n")
    r = _pytest(f"--plan={bad}")
    assert r.returncode == 4, r
    err = r.stdout + r.stderr
    assert f"--plan {bad}: {bad}:7: " in err and f"{bad}:9: " in err, err
    r = _pytest("--plan=/work/no/such/plan.yaml")
    assert r.returncode == 4 and "cannot read the plan (No such file or directory)" in r.stdout + r.stderr, r


def test_a_bare_name_must_be_a_plan_next_to_the_cases() -> None:
    r = _pytest("--plan=no-plan-has-this-name")
    assert r.returncode == 4, r
    assert "--plan no-plan-has-this-name: no such file, no shipped plan of that name, and no " \
           f"{ROOT / 'cases/kueue_11480/plans/no-plan-has-this-name.yaml'} next to" in r.stdout + r.stderr, r


def test_a_valid_plan_passes_to_collection() -> None:
    for plan in ("stuck-preemption", str(ROOT / "cases/kueue_11480/plans/quota-oversubscription.yaml")):
        r = _pytest(f"--plan={plan}")
        assert r.returncode == 5, r  # no case selected: pytest's "no tests ran", past the plan's validation
