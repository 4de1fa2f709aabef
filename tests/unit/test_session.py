"""Session lifecycle through the real CLI, on fake components (no Go, no real binaries, seconds each):
stop signals to a starting `up`, a supervisor that dies, `status`/`down` afterwards, named sessions.

Each test has its own cache (KUEUE_HARNESS_CACHE), so the sessions, runs and locks it makes are its own.
The fake etcd never answers its health check, which keeps the supervisor starting until it is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.common.procs import is_alive, proc_start_time
from harness.common.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "harness.cli"]


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


class Fake:
    """A cache, fake components and the environment variables that point the harness at them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cache = tmp / "cache"
        self.cache.mkdir()
        bins = tmp / "bin"
        self.etcd_pid = tmp / "etcd.pid"
        src = tmp / "kueue-src"
        (src / "config" / "components" / "crd" / "bases").mkdir(parents=True)
        crd = src / "provisioningrequests.yaml"
        crd.write_text("kind: CustomResourceDefinition\n")
        self.env = {
            **os.environ,
            "KUEUE_HARNESS_CACHE": str(self.cache),
            # The one component that starts: it records its pid and waits, never healthy.
            "KUEUE_HARNESS_ETCD": str(_script(bins / "etcd", f'echo $$ > {self.etcd_pid}\nexec sleep 300')),
            "KUEUE_HARNESS_KUEUE_BINARY": str(_script(bins / "kueue", "exit 1")),
            "KUEUE_HARNESS_KUBE_APISERVER": str(_script(bins / "kube-apiserver", "exit 1")),
            "KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER": str(_script(bins / "kcm", "exit 1")),
            "KUEUE_HARNESS_KUEUE_SOURCE": str(src),
            "KUEUE_HARNESS_PROVISIONING_REQUEST_CRD": str(crd),  # the ProvisioningRequest CRD, given like the binaries
            "KUEUE_HARNESS_KUBECTL": str(_script(bins / "kubectl", "exit 0")),
            "PATH": "/usr/bin:/bin",  # no Go: nothing here may need it
        }
        for var in ("KUEUE_HARNESS_SESSION", "KUBEBUILDER_ASSETS"):
            self.env.pop(var, None)

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, env=self.env, timeout=timeout)

    def up(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([*CLI, "up", "--artifacts-dir", str(self.tmp / "art"), *args], cwd=ROOT, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def record(self, name: str = "default") -> dict:
        return json.loads((self.cache / "sessions" / name / "session.json").read_text())

    def wait_starting(self, up: subprocess.Popen[str], name: str = "default") -> tuple[dict, int]:
        """Wait until the fake etcd runs under the starting session; (session record, etcd pid)."""
        def started() -> bool:
            if up.poll() is not None:
                raise AssertionError(f"up exited early ({up.returncode}): {up.communicate()}")
            return self.etcd_pid.is_file() and bool(self.etcd_pid.read_text().strip())

        wait_for(started, timeout=60, what="the fake etcd to start", fatal=(AssertionError,))
        return self.record(name), int(self.etcd_pid.read_text())

    def runs(self) -> list[Path]:
        root = self.cache / "runs"
        return sorted(root.iterdir()) if root.is_dir() else []


@pytest.fixture
def fake(tmp_path: Path):
    f = Fake(tmp_path)
    yield f
    # Whatever a failed test left: stop it by recorded pid, never by name.
    for p in (tmp_path / "cache" / "sessions").glob("*/session.json"):
        sup = json.loads(p.read_text()).get("supervisor") or {}
        if sup.get("pid") and is_alive(sup["pid"], sup.get("start")):
            os.kill(sup["pid"], signal.SIGKILL)
    if f.etcd_pid.is_file() and f.etcd_pid.read_text().strip():
        try:
            os.kill(int(f.etcd_pid.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _gone(pid: int, start: int | None, what: str, timeout: float = 20) -> None:
    wait_for(lambda: not is_alive(pid, start), timeout=timeout, what=f"{what} (pid {pid}) to exit")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_to_a_starting_up_stops_the_session(fake: Fake, sig: signal.Signals) -> None:
    up = fake.up()
    rec, etcd = fake.wait_starting(up)
    assert rec["phase"] == "starting"
    sup = rec["supervisor"]
    t0 = time.monotonic()
    up.send_signal(sig)
    out, err = up.communicate(timeout=60)
    assert time.monotonic() - t0 < 30, "up should stop the starting session promptly"
    assert up.returncode == 128 + sig, (up.returncode, err)
    assert f"interrupted by {sig.name} while session default was starting" in err, err
    assert not is_alive(sup["pid"], sup["start"]), "the supervisor must not keep starting the environment"
    _gone(etcd, None, "the half-started environment's etcd", timeout=5)
    assert not (fake.cache / "sessions" / "default" / "session.json").exists()
    assert fake.runs() == [], "the state folder (keys, tokens) must go"
    assert fake.cli("status").returncode == 1


def test_a_killed_up_takes_its_starting_supervisor_with_it(fake: Fake) -> None:
    """SIGKILL cannot be handled by `up`: the supervisor gets SIGTERM from the kernel (PR_SET_PDEATHSIG)."""
    up = fake.up()
    rec, etcd = fake.wait_starting(up)
    up.kill()
    up.communicate(timeout=30)
    _gone(rec["supervisor"]["pid"], rec["supervisor"]["start"], "the supervisor")
    _gone(etcd, None, "the fake etcd", timeout=5)
    st = fake.cli("status")
    assert st.returncode == 1 and "no session named default" in st.stdout, st.stdout


def test_a_supervisor_killed_while_starting_is_reported_by_up(fake: Fake) -> None:
    up = fake.up()
    rec, etcd = fake.wait_starting(up)
    os.kill(rec["supervisor"]["pid"], signal.SIGKILL)
    out, err = up.communicate(timeout=60)
    assert up.returncode == 2, err
    assert "the session failed to start" in err and "was killed by SIGKILL" in err, err
    _gone(etcd, None, "the fake etcd", timeout=5)
    assert fake.runs() == [], "its state folder (keys, tokens) must be removed"
    assert not (fake.cache / "sessions" / "default" / "session.json").exists()


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _dead_session(fake: Fake, name: str = "default") -> tuple[subprocess.Popen, Path]:
    """A running-session record whose supervisor is dead, with one recorded process still running
    (as after `kill -9` of a supervisor whose children outlived it) and a secret in its state folder."""
    owner = {"pid": _dead_pid(), "start": 1}
    left = subprocess.Popen(["sleep", "300"], start_new_session=True)
    state = fake.cache / "runs" / f"20260101-000000-{owner['pid']}-abcd"
    state.mkdir(parents=True)
    (state / "tokens.csv").write_text("secret,admin,1\n")
    (state / "processes.json").write_text(json.dumps({"owner": owner, "procs": [
        {"name": "kueue", "pid": left.pid, "pgid": left.pid, "start": proc_start_time(left.pid), "argv0": "sleep",
         "log": "x"}]}))
    d = fake.cache / "sessions" / name
    d.mkdir(parents=True)
    (d / "session.json").write_text(json.dumps({
        "name": name, "phase": "running", "supervisor": owner, "kueue_version": "v0.17.0",
        "artifacts": str(fake.tmp / "art"), "state": str(state), "kueue_log": str(fake.tmp / "art" / "env" / "kueue.log"),
        "admin_kubeconfig": str(state / "admin.kubeconfig"), "started": "2026-01-01T00:00:00"}))
    return left, state


def test_status_reports_a_dead_supervisor_and_down_cleans_up(fake: Fake) -> None:
    left, state = _dead_session(fake)
    try:
        st = fake.cli("status")
        assert st.returncode == 1
        sup = fake.record()["supervisor"]["pid"]
        assert (f"the session's supervisor pid {sup} died; logs in {fake.tmp / 'art'}; `kueue-harness down` cleans up"
                in st.stdout), st.stdout
        assert "still running" in st.stdout
        h = fake.cli("holds")
        assert h.returncode == 2 and "died" in h.stderr and "kueue-harness down" in h.stderr, h.stderr
        assert "died" in fake.cli("sessions").stdout
        d = fake.cli("down")
        assert d.returncode == 0, d.stderr
        assert "had died" in d.stdout and f"reaped kueue {left.pid}" in d.stdout and str(state) in d.stdout, d.stdout
        assert left.wait(10) is not None
        assert not state.exists(), "the state folder holds keys and tokens: down must remove it"
        assert not (fake.cache / "sessions" / "default" / "session.json").exists()
        assert "no session named default was running" in fake.cli("down").stdout
    finally:
        if left.poll() is None:
            left.kill()


def test_up_after_a_killed_supervisor_cleans_up_and_starts_in_one_go(fake: Fake) -> None:
    """Issue 24 item 3: `up --name NAME` over a dead supervisor's record used to remove the session's folder
    while it held the start lock and then fail writing the new record there (session.tmp-N: no such file)."""
    left, state = _dead_session(fake, "again")
    up = fake.up("--name", "again")
    try:
        rec, etcd = fake.wait_starting(up, "again")
        assert rec["phase"] == "starting" and is_alive(rec["supervisor"]["pid"], rec["supervisor"]["start"])
        assert left.wait(10) is not None, "the dead session's leftover must be reaped"
        assert not state.exists()
        assert (fake.cache / "sessions" / "again" / "up.lock").exists(), "the start lock stays while up starts it"
    finally:
        up.send_signal(signal.SIGINT)
        out, err = up.communicate(timeout=60)
        if left.poll() is None:
            left.kill()
    assert "its supervisor pid" in err and "had died; reaped kueue" in err and "starting it again" in err, err
    assert "No such file or directory" not in err and "session.tmp-" not in err, err
    assert up.returncode == 130, err


def test_sessions_says_degraded_when_kueue_has_exited(fake: Fake) -> None:
    """Issue 24 item 8: a live supervisor whose Kueue exited is listed as `degraded`, not `running`."""
    sup = subprocess.Popen(["sleep", "300"])
    kueue = subprocess.Popen(["sleep", "300"])
    proxy = subprocess.Popen(["sleep", "300"])
    try:
        state = fake.tmp / "state"
        state.mkdir()
        (state / "processes.json").write_text(json.dumps({"owner": {}, "procs": [
            {"name": n, "pid": p.pid, "pgid": p.pid, "start": proc_start_time(p.pid), "argv0": "sleep", "log": "x"}
            for n, p in (("kueue", kueue), ("proxy", proxy))]}))
        d = fake.cache / "sessions" / "deg"
        d.mkdir(parents=True)
        (d / "session.json").write_text(json.dumps({
            "name": "deg", "phase": "running", "supervisor": {"pid": sup.pid, "start": proc_start_time(sup.pid)},
            "kueue_version": "v0.17.0", "artifacts": str(fake.tmp / "art"), "state": str(state),
            "started": "2026-01-01T00:00:00"}))
        assert fake.cli("sessions").stdout.splitlines()[1].split()[1] == "running"
        kueue.kill()
        kueue.wait(10)
        out = fake.cli("sessions").stdout
        assert out.splitlines()[1].split()[1] == "degraded", out
        assert "deg: kueue exited; see" in out and "kueue-harness down --name deg" in out, out
    finally:
        for p in (sup, kueue, proxy):
            p.kill()
            p.wait(10)


def test_named_sessions_are_listed_and_stopped_one_at_a_time(fake: Fake) -> None:
    """Two running records (their "supervisors" are stand-ins that exit on SIGTERM) and a dead one."""
    sups = {}
    for name in ("old", "new"):
        p = subprocess.Popen(["sleep", "300"])
        sups[name] = p
        d = fake.cache / "sessions" / name
        d.mkdir(parents=True)
        (d / "session.json").write_text(json.dumps({
            "name": name, "phase": "running", "supervisor": {"pid": p.pid, "start": proc_start_time(p.pid)},
            "kueue_version": {"old": "v0.17.0", "new": "v0.17.4"}[name], "artifacts": str(fake.tmp / name),
            "started": "2026-01-01T00:00:00"}))
    left, _ = _dead_session(fake, "gone")
    try:
        listing = fake.cli("sessions").stdout
        rows = {line.split()[0]: line.split()[1:3] for line in listing.splitlines()[1:4]}
        assert rows == {"gone": ["died", "v0.17.0"], "new": ["running", "v0.17.4"], "old": ["running", "v0.17.0"]}, listing
        assert fake.cli("status", "--all").stdout == listing
        assert "Sessions with other names: gone, new, old" in fake.cli("status").stdout
        d = fake.cli("down", "old")
        assert d.returncode == 0 and "session old stopped" in d.stdout, (d.stdout, d.stderr)
        assert sups["old"].wait(10) is not None and sups["new"].poll() is None
        assert not (fake.cache / "sessions" / "old").exists(), "a stopped session leaves no folder behind"
        d = fake.cli("down", "--name", "new")
        assert "session new stopped" in d.stdout and sups["new"].wait(10) is not None
        assert "had died" in fake.cli("down", "gone").stdout
        assert "no sessions" in fake.cli("sessions").stdout
        bad = fake.cli("down", "a", "--name", "b")
        assert bad.returncode == 2 and "names two sessions" in bad.stderr
    finally:
        for p in [*sups.values(), left]:
            if p.poll() is None:
                p.kill()


def test_a_running_session_of_the_same_name_is_refused_another_name_is_not(fake: Fake) -> None:
    p = subprocess.Popen(["sleep", "300"])
    try:
        d = fake.cache / "sessions" / "default"
        d.mkdir(parents=True)
        (d / "session.json").write_text(json.dumps({
            "name": "default", "phase": "running", "supervisor": {"pid": p.pid, "start": proc_start_time(p.pid)},
            "kueue_version": "v0.17.0", "started": "2026-01-01T00:00:00"}))
        r = fake.cli("up")
        assert r.returncode == 2 and "already running" in r.stderr and "--name OTHER" in r.stderr, r.stderr
        up = fake.up("--name", "second")
        rec, _ = fake.wait_starting(up, "second")
        assert rec["name"] == "second" and rec["phase"] == "starting"
        up.send_signal(signal.SIGTERM)
        up.communicate(timeout=60)
        assert up.returncode == 143
    finally:
        p.kill()


def test_the_retired_session_variable_is_refused(fake: Fake) -> None:
    fake.env["KUEUE_HARNESS_SESSION"] = str(fake.tmp / "session.json")
    r = fake.cli("status")
    assert r.returncode == 2 and "KUEUE_HARNESS_SESSION is no longer read" in r.stderr and "--name" in r.stderr


def test_up_without_go_needs_no_go_when_every_binary_is_given(fake: Fake) -> None:
    """No KUEUE_HARNESS_KUBECTL and no Go on PATH: the session starts without a kubectl of its own."""
    del fake.env["KUEUE_HARNESS_KUBECTL"]
    up = fake.up()
    fake.wait_starting(up)  # got past kubectl to etcd
    up.send_signal(signal.SIGTERM)
    out, err = up.communicate(timeout=60)
    assert "use your own kubectl" in err and "Go is not on PATH" in err, err
    assert "install Go" not in err


def test_a_stop_signal_while_the_supervisor_builds_kills_the_build(fake: Fake) -> None:
    """`up` on an empty cache builds kubectl first; SIGTERM then must not leave `go build` running."""
    gopid = fake.tmp / "go.pid"
    go = _script(fake.tmp / "go" / "go", f"""case "$1" in
env) echo go1.26.0 ;;
build) echo $$ > {gopid}; exec sleep 300 ;;
list) exit 1 ;;
*) exit 0 ;;
esac""")
    fake.env["PATH"] = f"{go.parent}:/usr/bin:/bin"
    del fake.env["KUEUE_HARNESS_KUBECTL"]
    up = fake.up()
    wait_for(lambda: gopid.is_file() and gopid.read_text().strip(), timeout=60, what="the fake go build to start")
    pid = int(gopid.read_text())
    rec = fake.record()
    up.send_signal(signal.SIGTERM)
    out, err = up.communicate(timeout=60)
    try:
        assert up.returncode == 143, err
        assert "building kubectl" in err, err
        _gone(pid, None, "the interrupted go build", timeout=5)
        _gone(rec["supervisor"]["pid"], rec["supervisor"]["start"], "the supervisor", timeout=5)
    finally:
        if is_alive(pid, None):
            os.kill(pid, signal.SIGKILL)
