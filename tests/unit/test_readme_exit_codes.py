"""docs/troubleshooting.md, "When things go wrong" (README.md links to it): every row that can be provoked
cheaply is provoked through the real CLI, and its exit code must be the table's (the message must say what the
row quotes). Rows that cannot be provoked cheaply are listed in NOT_PROVOKED with the reason; a new row must go
in one or the other.

No Go and no real component runs: each provocation uses its own cache, fake binaries, fake session
records and, for the proxy rows, a stand-in control channel.
"""

from __future__ import annotations

import http.server
import json
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest

from harness.cli import commands as cli
from harness.common.procs import proc_start_time
from tests.unit.test_session import Fake, _dead_session, _script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"

NOT_PROVOKED = {
    "Kueue v0.17 needs /etc/kueue/metrics/certs": "needs a machine where /etc/kueue cannot be written (tests run as root)",
    "a case `error`": "needs a real environment and a case (tests/integration/test_verdicts.py)",
}


def table() -> list[tuple[str, list[int]]]:
    """(first cell, exit codes in the last cell, in order) for each row of the page's table."""
    text = PAGE.read_text()
    start = text.index("# When things go wrong")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("## "):
            break
        if not line.startswith("|") or line.startswith("|---") or line.startswith("| you see"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0], [int(n) for n in re.findall(r"(?<![\w-])\d+(?![\w-])", re.sub(r"\([^)]*\)", "", cells[-1]))]))
    return rows


# ---- provocations: each returns [(exit code, output)] in the order of the row's exit codes ----------------

Result = list[tuple[int, str]]


def _run(fake: Fake, *args: str, timeout: float = 60) -> tuple[int, str]:
    r = fake.cli(*args, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def bad_version(fake: Fake) -> Result:
    return [_run(fake, "build", "--kueue-version", "banana")]


def two_selectors(fake: Fake) -> Result:
    """Refused before anything is built or created (issue 24 item 6): the default's own spelling too."""
    code, out = _run(fake, "run", "--kueue-version", "v0.17.0", "--kueue-ref", "main",
                     "--artifacts-dir", str(fake.tmp / "art"))
    assert "--kueue-version v0.17.0 and --kueue-ref name two builds" in out, out
    assert not (fake.tmp / "art").exists()
    return [(code, out)]


def bisect_same_ref(fake: Fake) -> Result:
    code, out = _run(fake, "bisect", "--case", "test_stuck_preemption", "--good", "v0.17.0", "--bad", "v0.17.0",
                     "--out", str(fake.tmp / "bisect"))
    assert "--good and --bad are both v0.17.0" in out and not (fake.tmp / "bisect").exists(), out
    return [(code, out)]


def no_go(fake: Fake) -> Result:
    for var in ("KUEUE_HARNESS_KUEUE_BINARY", "KUEUE_HARNESS_KUEUE_SOURCE"):
        del fake.env[var]
    code, out = _run(fake, "build")
    assert "Go is not on PATH" in out, out
    return [(code, out)]


def _fake_go(fake: Fake) -> None:
    go = _script(fake.tmp / "go" / "go", """case "$1 $2" in
"env GOVERSION") echo go1.26.0 ;;
*) echo "go: module lookup disabled by GOPROXY=off" >&2; exit 1 ;;
esac""")
    fake.env["PATH"] = f"{go.parent}:/usr/bin:/bin"


def build_failed(fake: Fake) -> Result:
    _fake_go(fake)
    del fake.env["KUEUE_HARNESS_KUBE_APISERVER"]
    code, out = _run(fake, "build")
    assert "building kube-apiserver" in out and "failed" in out, out
    return [(code, out)]


def _etcd_exits(fake: Fake) -> None:
    _script(Path(fake.env["KUEUE_HARNESS_ETCD"]), "echo etcd cannot start >&2\nexit 1")


def component_exited(fake: Fake) -> Result:
    _etcd_exits(fake)
    code, out = _run(fake, "up", "--artifacts-dir", str(fake.tmp / "art"))
    assert "etcd exited during start-up" in out, out
    return [(code, out)]


class _ControlChannel(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"error": "no hold h9"}).encode()
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


def _live_session(fake: Fake, port: int) -> subprocess.Popen:
    """A running-session record: its "supervisor" is a sleep, its control channel `port`."""
    sup = subprocess.Popen(["sleep", "300"])
    token = fake.tmp / "control.token"
    token.write_text("t0ken")
    d = fake.cache / "sessions" / "default"
    d.mkdir(parents=True, exist_ok=True)
    (d / "session.json").write_text(json.dumps({
        "name": "default", "phase": "running", "supervisor": {"pid": sup.pid, "start": proc_start_time(sup.pid)},
        "kueue_version": "v0.17.0", "proxy_url": "https://127.0.0.1:1", "control_port": port,
        "control_token_file": str(token), "state": str(fake.tmp), "artifacts": str(fake.tmp / "art"),
        "started": "2026-01-01T00:00:00"}))
    fake.cleanup.append(sup.kill)
    return sup


def proxy_refused(fake: Fake) -> Result:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ControlChannel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.cleanup.append(server.shutdown)
    _live_session(fake, server.server_address[1])
    code, out = _run(fake, "release", "h9")
    assert "no hold h9" in out and "kueue-harness holds" in out, out
    return [(code, out)]


def control_channel_gone(fake: Fake) -> Result:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nobody listens there
    _live_session(fake, port)
    return [_run(fake, "holds")]


def _live_proxy(fake: Fake):
    """A running session named default whose control channel is the real proxy parts (tests/unit/live_proxy.py)."""
    from tests.unit.live_proxy import LiveProxy

    live = LiveProxy(fake.cache, fake.tmp / "live")
    fake.cleanup.append(live.close)
    return live


def hold_expired(fake: Fake) -> Result:
    from tests.unit.addon_flows import status_patch

    live = _live_proxy(fake)
    assert live.handle("POST", "/rules", {"id": "short", "match": {"write": "admission"}, "max_hold": 0.1})[0] == 201
    live.request(status_patch()).result(10)  # held, then released by max_hold
    code, out = _run(fake, "release", "h1")
    assert "hold h1 expired at" in out and "max_hold of 0.1 s" in out, out
    assert "EXPIRED holds" in _run(fake, "holds")[1]
    return [(code, out)]


def wait_timed_out(fake: Fake) -> Result:
    live = _live_proxy(fake)
    assert live.handle("POST", "/rules", {"id": "r", "match": {"write": "admission"}})[0] == 201
    code, out = _run(fake, "wait", "r", "--timeout", "0.3")
    assert "timed out after 0.3s waiting for rule r to be held (it has 0 hit(s))" in out, out
    return [(code, out)]


def wait_step_failed(fake: Fake) -> Result:
    live = _live_proxy(fake)
    code, payload = live.handle("POST", "/rules", {"id": "s", "action": "create", "create": [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq"}}]})
    assert code == 201, payload
    live.handle("POST", "/signals/s/done", {"ok": False, "error": "StepError: kube-apiserver answered 422"})
    code, out = _run(fake, "wait", "s", "--state", "released", "--timeout", "5")
    assert "rule s: released after" in out and "but it FAILED: StepError: kube-apiserver answered 422" in out, out
    return [(code, out)]


def rule_matches_nothing(fake: Fake) -> Result:
    from tests.unit.addon_flows import status_patch

    live = _live_proxy(fake)
    assert live.handle("POST", "/rules", {"id": "r", "match": {"write": "admission", "name": "job1"}})[0] == 201
    live.request(status_patch()).result(10)  # job-job1-…: the rule named it wrongly
    code, out = _run(fake, "status")
    assert "WARNING: rule r has matched nothing, but admission" in out and "job-job1-*" in out, out
    return [(code, out)]


def pytest_keep_env(fake: Fake) -> Result:
    r = subprocess.run([sys.executable, "-m", "pytest", "cases", "-p", "no:cacheprovider", "--collect-only", "-q",
                        "--keep-env"], capture_output=True, text=True, cwd=ROOT, env=fake.env, timeout=120)
    assert "--keep-env cannot keep a local environment from pytest" in r.stderr, r.stderr
    return [(r.returncode, r.stdout + r.stderr)]


def no_case_matched(fake: Fake) -> Result:
    """Resolved before any build (issue 24): an empty cache, no binaries given and no Go on PATH, yet the
    answer is about -k, within seconds (the Bar's < 5 s is timed in bench/, not here), and no evidence folder."""
    for var in [v for v in fake.env if v.startswith("KUEUE_HARNESS_") and v != "KUEUE_HARNESS_CACHE"]:
        del fake.env[var]
    code, out = _run(fake, "run", "-k", "nomatch", "--artifacts-dir", str(fake.tmp / "art"), timeout=120)
    assert "no case matched -k nomatch" in out and "Go is not on PATH" not in out, out
    assert not (fake.tmp / "art").exists(), "a refused run must leave no evidence folder"
    assert not (fake.cache / "bin").exists() and not (fake.cache / "kueue").exists(), "nothing may be built"
    return [(code, out)]


def no_space(fake: Fake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> Result:
    import shutil

    for k, v in fake.env.items():
        monkeypatch.setenv(k, v)
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1024 * 1024))
    code = cli.main(["run", "--artifacts-dir", str(fake.tmp / "art" / "run")])
    captured = capsys.readouterr()
    assert not (fake.tmp / "art").exists(), "a refused run must leave no empty evidence folder"
    return [(code, captured.out + captured.err)]


def folder_not_writable(fake: Fake) -> Result:
    (fake.tmp / "a-file").write_text("")
    code, out = _run(fake, "run", "--artifacts-dir", str(fake.tmp / "a-file" / "art"))
    assert "It is on the path --artifacts-dir names" in out, out
    return [(code, out)]


def plan_line_error(fake: Fake) -> Result:
    plan = fake.tmp / "bad.yaml"
    plan.write_text("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: bad\nrules:\n  - id: r1\n    action: explode\n")
    code, out = _run(fake, "up", "--plan", str(plan))
    assert re.search(r"bad\.yaml:\d+:", out), out
    return [(code, out)]


def plan_refused(fake: Fake) -> Result:
    plan = fake.tmp / "alias.yaml"
    plan.write_text("apiVersion: kueue-harness/v1\nkind: FaultPlan\nname: a\ndescription: &d x\nother: *d\nrules: []\n")
    code, out = _run(fake, "up", "--plan", str(plan))
    assert "anchors and aliases are not allowed" in out, out
    return [(code, out)]


def session_already_running(fake: Fake) -> Result:
    _live_session(fake, 1)
    code, out = _run(fake, "up")
    assert "already running" in out, out
    return [(code, out)]


def session_died(fake: Fake) -> Result:
    left, _ = _dead_session(fake)
    fake.cleanup.append(left.kill)
    status = _run(fake, "status")
    holds = _run(fake, "holds")
    assert "the session's supervisor pid" in status[1] and "died" in holds[1], (status, holds)
    return [status, holds]


def session_failed_to_start(fake: Fake) -> Result:
    _etcd_exits(fake)
    component = _run(fake, "up", "--name", "a")
    # A build that fails in the supervisor: kubectl, with a Go that cannot download anything.
    _script(Path(fake.env["KUEUE_HARNESS_ETCD"]), f"echo $$ > {fake.etcd_pid}\nexec sleep 300")
    _fake_go(fake)
    del fake.env["KUEUE_HARNESS_KUBECTL"]
    build = _run(fake, "up", "--name", "b")
    # Killed while starting.
    fake.env["KUEUE_HARNESS_KUBECTL"] = str(_script(fake.tmp / "bin" / "kubectl", "exit 0"))
    up = fake.up("--name", "c")
    rec, _ = fake.wait_starting(up, "c")
    import os

    os.kill(rec["supervisor"]["pid"], signal.SIGKILL)
    out, err = up.communicate(timeout=60)
    killed = (up.returncode, out + err)
    for code, text in (component, build, killed):
        assert "the session failed to start" in text, text
    return [component, build, killed]


def interrupted(fake: Fake) -> Result:
    results = []
    for i, sig in enumerate((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
        fake.etcd_pid.unlink(missing_ok=True)
        up = fake.up("--name", f"s{i}")
        fake.wait_starting(up, f"s{i}")
        up.send_signal(sig)
        out, err = up.communicate(timeout=60)
        assert f"interrupted by {sig.name} while session s{i} was starting" in err, err
        results.append((up.returncode, out + err))
    return results


def run_interrupted(fake: Fake) -> Result:
    """`run` stopped by a signal while a case runs (synthetic cases, the real CLI and plugin:
    tests/unit/test_run_interrupted.py checks what is kept)."""
    from tests.unit.test_run_interrupted import run_fake

    results = []
    for sig in ("SIGINT", "SIGTERM", "SIGHUP"):
        r, _, _ = run_fake(fake.tmp / sig, sig)
        out = r.stdout + r.stderr
        assert f"interrupted by {sig}: 1 verdict(s) decided before it are kept in" in out, out
        results.append((r.returncode, out))
    return results


def run_no_space(fake: Fake) -> Result:
    from tests.unit.test_run_interrupted import run_fake

    r, _, _ = run_fake(fake.tmp, "enospc")
    out = r.stdout + r.stderr
    assert "no space left on the device writing" in out and "the run stopped after this case" in out, out
    return [(r.returncode, out)]


def bundle_unreadable(fake: Fake) -> Result:
    """`kueue-harness report` on a truncated bundle archive (tests/unit/test_report_robustness.py has more)."""
    good = Path(__file__).parent / "data" / "bundles" / "test-quota-oversubscription.tar.gz"
    bad = fake.tmp / "truncated.tar.gz"
    bad.write_bytes(good.read_bytes()[:2000])
    code, out = _run(fake, "report", str(bad), "--out", str(fake.tmp / "recheck"))
    assert "not a readable bundle archive" in out and "Traceback" not in out, out
    # Issue 24: a refused archive leaves no empty (or half-unpacked) folder, given or the default `.recheck/`.
    again, _ = _run(fake, "report", str(bad))
    assert again == code and not (fake.tmp / "recheck").exists() and not (fake.tmp / "truncated.recheck").exists()
    return [(code, out)]


def bad_log_level(fake: Fake) -> Result:
    code, out = _run(fake, "logs", "--level", "bogus")
    assert "'bogus' is not a level Kueue logs" in out, out
    return [(code, out)]


def explore_no_case(fake: Fake) -> Result:
    """`kueue-harness explore` with a case name that is not there (checked before anything is built)."""
    code, out = _run(fake, "explore", "test_nope_control", "--out", str(fake.tmp / "explore"))
    assert "control cases: " in out and "test_stuck_preemption_control" in out, out
    return [(code, out)]


def retired_variable(fake: Fake) -> Result:
    fake.env["KUEUE_HARNESS_SESSION"] = "/tmp/session.json"
    return [_run(fake, "status")]


PROVOKE: dict[str, Callable[..., Result]] = {
    "is not a Kueue release tag": bad_version,
    "Go is not on PATH": no_go,
    "name two builds: give one of them": two_selectors,
    "`--good and --bad are both X`": bisect_same_ref,
    "could not download": build_failed,
    "exited during start-up": component_exited,
    "the proxy refused": proxy_refused,
    "hold hN expired at": hold_expired,
    "timed out after Ns waiting for rule": wait_timed_out,
    "but it FAILED": wait_step_failed,
    "WARNING: rule X has matched nothing": rule_matches_nothing,
    "--keep-env cannot keep a local environment": pytest_keep_env,
    "no case matched": no_case_matched,
    "has N KiB free": no_space,
    "It is on the path --artifacts-dir names": folder_not_writable,
    "<file>:<line>:": plan_line_error,
    "is already running": session_already_running,
    "supervisor pid N died": session_died,
    "the session failed to start": session_failed_to_start,
    "interrupted by SIGTERM while session": interrupted,
    "verdict(s) decided before it are kept": run_interrupted,
    "no space left on the device writing": run_no_space,
    "KUEUE_HARNESS_SESSION is no longer read": retired_variable,
    "cannot talk to the proxy's control channel": control_channel_gone,
    "anchors and aliases are not allowed": plan_refused,
    "not a readable bundle archive": bundle_unreadable,
    "is not a level Kueue logs": bad_log_level,
    "explore`: `no case named": explore_no_case,
}


def _key(cell: str, keys) -> str | None:
    found = [k for k in keys if k in cell]
    assert len(found) <= 1, f"row {cell!r} matches {found}"
    return found[0] if found else None


def test_every_row_is_provoked_or_says_why_not() -> None:
    rows = table()
    assert len(rows) >= 15
    for cell, codes in rows:
        assert codes, f"row {cell!r} has no exit code"
        assert _key(cell, PROVOKE) or _key(cell, NOT_PROVOKED), \
            f"docs/troubleshooting.md row {cell!r}: add a provocation or a reason"
    used = [_key(c, PROVOKE) for c, _ in rows] + [_key(c, NOT_PROVOKED) for c, _ in rows]
    assert set(PROVOKE) | set(NOT_PROVOKED) <= set(used), \
        "a provocation names a row docs/troubleshooting.md no longer has"


@pytest.mark.parametrize("row", [c for c, _ in table() if _key(c, PROVOKE)], ids=lambda c: _key(c, PROVOKE))
def test_the_exit_code_is_the_tables(row: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    codes = dict(table())[row]
    fake = Fake(tmp_path)
    fake.cleanup = []
    provoke = PROVOKE[_key(row, PROVOKE)]
    try:
        if provoke is no_space:
            results = provoke(fake, monkeypatch, capsys)
        else:
            results = provoke(fake)
    finally:
        for undo in fake.cleanup:
            undo()
    assert [code for code, _ in results] == codes, [(code, out[-600:]) for code, out in results]
