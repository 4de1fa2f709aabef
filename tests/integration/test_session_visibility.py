"""Issue 16, items 2 and 5, on a real session (real Kueue through the real proxy, driven by the CLI): a hold
that reaches its max_hold is no longer silent (`holds` showed the time it had left, the session log and
`status` name it, `release` of it says when it expired and exits 7; `wait` follows it), and a plan whose
rule names the Workload as `job1` instead of `job-job1-*` is flagged (its hits stay 0, a WARNING in
`status` and in the session log). `plan validate` needs no session.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from harness.common.waiting import wait_for
from tests.integration.test_cli_session import CLI, EXAMPLES, ROOT, Session

PLAN = """\
apiVersion: kueue-harness/v1
kind: FaultPlan
name: visibility
rules:
  - id: admission-job1
    match: {write: admission, name: "job-job1-*"}
    action: hold
    max_hold: 20   # long enough for `holds`, a new Python process (seconds at load ~12), to see it held
  - id: admission-job2
    match: {write: admission, name: "job2"}   # the mistake: the Workload is job-job2-<hash>
    action: hold
"""


def wait(session: Session, *args: str) -> subprocess.CompletedProcess:
    """`kueue-harness wait ARGS --name <the session>`."""
    return session.cli("wait", *args, "--name", session.name, check=False)


@pytest.fixture
def session(tmp_path, kueue_version):
    s = Session(tmp_path, kueue_version)
    yield s
    s.down()


def test_an_expired_hold_and_a_rule_that_matches_nothing_are_told(session: Session, tmp_path: Path) -> None:
    plan = tmp_path / "visibility.yaml"
    plan.write_text(PLAN)
    valid = subprocess.run([*CLI, "plan", "validate", str(plan)], capture_output=True, text=True, cwd=ROOT,
                           env=session.env, timeout=60)
    assert valid.returncode == 0 and "valid, plan visibility" in valid.stdout, valid.stderr
    session.up(str(plan))
    session.kubectl("apply", "-f", str(EXAMPLES / "seed-queues.yaml"))
    session.kubectl("create", "-f", str(EXAMPLES / "job1.yaml"))
    assert wait(session, "admission-job1", "--state", "held", "--timeout", "30").returncode == 0
    holds = session.cli("holds").stdout
    m = re.search(r"^(h\d+)\s+([\d.]+)\s+([\d.]+)\s+request\s+admission-job1\s+admission demo/job-job1-", holds, re.M)
    assert m, holds
    hid, age, left = m.group(1), float(m.group(2)), float(m.group(3))
    assert abs(age + left - 20) < 0.2, holds
    # The hold expires: wait sees its end, `holds` and `status` list it, `release` says when it expired.
    assert wait(session, "admission-job1", "--state", "released", "--timeout", "60").returncode == 0
    holds = session.cli("holds").stdout
    assert holds.startswith("nothing is held") and "EXPIRED holds" in holds, holds
    assert re.search(rf"{hid}\s+rule admission-job1, admission demo/job-job1-\S+ .*: expired at \S+ \(\d+ s ago\) "
                     r"after 20 s", holds), holds
    refused = session.cli("release", hid, check=False)
    assert refused.returncode == 7, refused.stderr
    assert f"hold {hid} expired at " in refused.stderr and "max_hold of 20 s" in refused.stderr, refused.stderr
    # The misnamed rule: job2's admission goes through unheld, and the harness says why.
    session.kubectl("create", "-f", str(EXAMPLES / "job2.yaml"))
    timed_out = wait(session, "admission-job2", "--timeout", "20")
    assert timed_out.returncode == 1, timed_out.stderr
    assert "match.name 'job-job2-*'" in timed_out.stderr, timed_out.stderr
    status = session.cli("status").stdout
    assert re.search(r"admission-job2\s+hold\s+0 of 1", status), status
    assert "WARNING: rule admission-job2 has matched nothing, but admission demo/job-job2-" in status, status
    assert "EXPIRED holds" in status and hid in status, status
    log = Path(session.info["log"])

    def told() -> list[str]:
        lines = log.read_text().splitlines()
        found = [line for line in lines if f"hold {hid} EXPIRED: rule admission-job1" in line
                 or "warning: rule admission-job2 has matched nothing" in line]
        return found if len(found) == 2 else []

    wait_for(told, timeout=10, what="the session log to tell the expiry and the warning",
             describe=lambda: log.read_text().splitlines()[-5:])
    assert json.loads(session.cli("holds", "--json").stdout) == []
