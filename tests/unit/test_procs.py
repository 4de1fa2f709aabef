"""Unit tests for harness.common.procs with real, short-lived processes (`sleep`, `sh -c`) in a tmp dir.

Every process a test starts is registered with the `tracker` fixture, whose finalizer kills what is still
running — only by the pid/pgid of our own unreaped children, or a pid whose start time still matches.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.common.procs import ProcessGroup, is_alive, proc_start_time, reap_stale
from harness.common.waiting import wait_for


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of `pid` from /proc, None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            s = fh.read()
    except OSError:
        return None
    f = s[s.rindex(")") + 2 :].split()
    return f[0], int(f[1]), int(f[2])


def live_in_group(pgid: int) -> list[int]:
    """Pids of non-zombie processes whose process group is `pgid` (a scan of /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st and st[2] == pgid and st[0] != "Z":
                out.append(int(d))
    return out


def gone(pid: int, start: int | None) -> bool:
    return not is_alive(pid, start)


def wait_gone(pid: int, start: int | None, pgid: int | None = None) -> None:
    """A SIGKILLed process disappears asynchronously: allow it a short, bounded moment."""
    wait_for(lambda: gone(pid, start) and (pgid is None or not live_in_group(pgid)), timeout=2,
             what=f"pid {pid} (group {pgid}) gone", interval=0.01,
             describe=lambda: f"alive in group: {live_in_group(pgid) if pgid else '-'}")


@dataclass
class Tracker:
    groups: list[ProcessGroup] = field(default_factory=list)
    popens: list[subprocess.Popen] = field(default_factory=list)
    pids: list[tuple[int, int | None]] = field(default_factory=list)

    def group(self, state_dir: Path) -> ProcessGroup:
        state_dir.mkdir(parents=True, exist_ok=True)
        pg = ProcessGroup(state_dir)
        self.groups.append(pg)
        return pg

    def popen(self, argv: list[str]) -> subprocess.Popen:
        """A child in its own session (own process group), not through ProcessGroup."""
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.popens.append(p)
        return p

    def pid(self, pid: int) -> int:
        """Remember a grandchild pid (with its current start time) for cleanup."""
        self.pids.append((pid, proc_start_time(pid)))
        return pid

    def cleanup(self) -> None:
        for pg in self.groups:
            pg.stop_all(timeout=1)
        for p in self.popens:
            if p.poll() is None:  # still our unreaped child: its pid (= pgid) cannot have been reused
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for pid, start in self.pids:
            if start is not None and is_alive(pid, start):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def tracker(request: pytest.FixtureRequest) -> Tracker:
    t = Tracker()
    request.addfinalizer(t.cleanup)
    return t


def _record(pg: ProcessGroup) -> dict:
    return json.loads(pg.file.read_text())


def _spawn_with_grandchild(pg: ProcessGroup, tmp_path: Path, name: str, tracker: Tracker,
                           grandchild_ignores_term: bool = False) -> tuple[subprocess.Popen, int]:
    """Start `sh -c` that backgrounds a `sleep 30` child and waits; return (leader, grandchild pid)."""
    pidfile = tmp_path / f"{name}.child"
    child = "(trap '' TERM; exec sleep 30)" if grandchild_ignores_term else "sleep 30"
    p = pg.start(name, ["sh", "-c", f"{child} & echo $! > {pidfile}; wait"], tmp_path / f"{name}.log",
                 cwd=tmp_path)
    gc = wait_for(lambda: int(pidfile.read_text().strip() or 0), timeout=5, what="grandchild pid",
                  interval=0.02)
    tracker.pid(gc)
    # The grandchild is `sleep` itself (exec done, so a TERM trap is already in place).
    wait_for(lambda: Path(f"/proc/{gc}/comm").read_text().strip() == "sleep", timeout=5,
             what="grandchild exec", interval=0.02)
    return p, gc


# --- ProcessGroup -----------------------------------------------------------------------------------------


def test_record_lists_started_processes(tmp_path: Path, tracker: Tracker) -> None:
    pg = tracker.group(tmp_path / "run")
    assert _record(pg) == {"owner": {"pid": os.getpid(), "start": proc_start_time(os.getpid())}, "procs": []}

    a = pg.start("a", ["sleep", "30"], tmp_path / "a.log")
    b, gc = _spawn_with_grandchild(pg, tmp_path, "b", tracker)

    data = _record(pg)
    assert data["owner"] == {"pid": os.getpid(), "start": proc_start_time(os.getpid())}
    assert [r["name"] for r in data["procs"]] == ["a", "b"]
    for r, p in zip(data["procs"], (a, b)):
        assert r["pid"] == p.pid
        assert r["pgid"] == p.pid == os.getpgid(p.pid)  # its own process group...
        assert os.getsid(p.pid) == p.pid  # ...in its own session
        assert r["start"] == proc_start_time(p.pid) and r["start"] is not None
        assert is_alive(r["pid"], r["start"])
    assert data["procs"][0]["argv0"] == "sleep" and data["procs"][1]["argv0"] == "sh"
    assert data["procs"][0]["log"] == str(tmp_path / "a.log")
    assert os.getpgid(gc) == b.pid  # the grandchild shares the leader's group
    assert not (tmp_path / "run" / "processes.tmp").exists()


def test_start_appends_output_to_log_with_env_and_cwd(tmp_path: Path, tracker: Tracker) -> None:
    pg = tracker.group(tmp_path / "run")
    log = tmp_path / "out.log"
    log.write_text("previous run\n")
    wd = tmp_path / "wd"
    wd.mkdir()
    p = pg.start("echo", ["sh", "-c", 'echo "out $FOO"; echo "err $(pwd)" >&2'], log,
                 env={"FOO": "bar", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd=wd)
    assert p.wait(5) == 0
    assert log.read_text() == f"previous run\nout bar\nerr {wd}\n"
    assert not pg.alive("echo")
    assert pg.stop("echo") == 0


def test_stop_kills_leader_and_grandchild(tmp_path: Path, tracker: Tracker) -> None:
    pg = tracker.group(tmp_path / "run")
    a = pg.start("a", ["sleep", "30"], tmp_path / "a.log")
    b, gc = _spawn_with_grandchild(pg, tmp_path, "b", tracker)
    gc_start = proc_start_time(gc)
    assert pg.alive("b")

    t0 = time.monotonic()
    rc = pg.stop("b")
    assert time.monotonic() - t0 < 5
    assert rc == -signal.SIGTERM
    assert gone(b.pid, None)  # the leader was waited for
    wait_gone(gc, gc_start, b.pid)
    # The other process is untouched, and the record no longer lists "b".
    assert pg.alive("a") and is_alive(a.pid, proc_start_time(a.pid))
    assert [r["name"] for r in _record(pg)["procs"]] == ["a"]
    assert pg.stop("b") is None  # unknown / already stopped


def test_stop_kills_grandchild_that_ignores_sigterm(tmp_path: Path, tracker: Tracker) -> None:
    """The leader exits on SIGTERM; a group member that ignores it must still die (final SIGKILL)."""
    pg = tracker.group(tmp_path / "run")
    b, gc = _spawn_with_grandchild(pg, tmp_path, "b", tracker, grandchild_ignores_term=True)
    gc_start = proc_start_time(gc)
    assert pg.stop("b", timeout=5) == -signal.SIGTERM
    wait_gone(gc, gc_start, b.pid)


def test_stop_escalates_to_sigkill(tmp_path: Path, tracker: Tracker) -> None:
    pg = tracker.group(tmp_path / "run")
    p = pg.start("stubborn", ["sh", "-c", "trap '' TERM; exec sleep 30"], tmp_path / "s.log")
    wait_for(lambda: Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep", timeout=5,
             what="exec sleep", interval=0.02)
    t0 = time.monotonic()
    assert pg.stop("stubborn", timeout=0.3) == -signal.SIGKILL
    assert 0.25 <= time.monotonic() - t0 < 5
    assert gone(p.pid, None)
    wait_gone(p.pid, None, p.pid)


def test_stop_all_leaves_nothing_alive(tmp_path: Path, tracker: Tracker) -> None:
    pg = tracker.group(tmp_path / "run")
    started = [pg.start(n, ["sleep", "30"], tmp_path / f"{n}.log") for n in ("etcd", "apiserver")]
    b, gc = _spawn_with_grandchild(pg, tmp_path, "kueue", tracker)
    gc_start = proc_start_time(gc)
    order: list[str] = []
    real_stop = pg.stop
    pg.stop = lambda name, timeout=10.0: (order.append(name), real_stop(name, timeout))[1]  # type: ignore[method-assign]

    pg.stop_all()

    assert order == ["kueue", "apiserver", "etcd"]  # most recently started first
    assert pg.procs == {}
    assert _record(pg)["procs"] == []
    for p in [*started, b]:
        assert p.returncode is not None
        wait_gone(p.pid, None, p.pid)
    wait_gone(gc, gc_start)


def test_stop_of_exited_process_returns_its_code(tmp_path: Path, tracker: Tracker) -> None:
    pg = tracker.group(tmp_path / "run")
    p = pg.start("short", ["sh", "-c", "exit 3"], tmp_path / "x.log")
    p.wait(5)
    assert pg.stop("short") == 3


# --- is_alive / proc_start_time ---------------------------------------------------------------------------


def test_is_alive_and_start_time(tracker: Tracker) -> None:
    p = tracker.popen(["sleep", "30"])
    st = proc_start_time(p.pid)
    assert isinstance(st, int) and st > 0
    assert is_alive(p.pid, st) and is_alive(p.pid, None)
    assert not is_alive(p.pid, st + 1)  # different process under the same pid
    os.kill(p.pid, signal.SIGKILL)
    wait_for(lambda: _stat(p.pid) and _stat(p.pid)[0] == "Z", timeout=5, what="zombie", interval=0.02)
    assert not is_alive(p.pid, st)  # a zombie is not alive
    p.wait(5)
    assert proc_start_time(p.pid) is None and not is_alive(p.pid, None)


def test_proc_start_time_with_odd_command_name(tmp_path: Path, tracker: Tracker) -> None:
    """comm may contain spaces and ')' — fields are read after the last ')'."""
    odd = tmp_path / "a b) c"
    odd.symlink_to("/bin/sleep" if os.path.exists("/bin/sleep") else "/usr/bin/sleep")
    p = tracker.popen([str(odd), "30"])
    wait_for(lambda: ")" in Path(f"/proc/{p.pid}/comm").read_text(), timeout=5, what="exec", interval=0.02)
    st = proc_start_time(p.pid)
    assert st is not None and is_alive(p.pid, st)
    assert _stat(p.pid)[2] == p.pid


# --- reap_stale -------------------------------------------------------------------------------------------


def _dead_owner(tracker: Tracker) -> dict:
    """Owner record of a process that has finished (and been reaped)."""
    p = subprocess.Popen(["sleep", "30"])
    start = proc_start_time(p.pid)
    p.kill()
    p.wait(5)
    assert proc_start_time(p.pid) is None
    return {"pid": p.pid, "start": start}


def _write_record(runs_root: Path, run: str, owner: dict, recs: list[dict]) -> Path:
    d = runs_root / run
    d.mkdir(parents=True)
    f = d / "processes.json"
    f.write_text(json.dumps({"owner": owner, "procs": recs}))
    return f


def _rec(name: str, p: subprocess.Popen, start: int | None = None) -> dict:
    return {"name": name, "pid": p.pid, "pgid": p.pid, "start": start if start is not None else proc_start_time(p.pid),
            "argv0": "sleep", "log": "/dev/null"}


def test_reap_stale_kills_leftovers_of_dead_owner(tmp_path: Path, tracker: Tracker) -> None:
    victim = tracker.popen(["sleep", "30"])
    leader = tracker.popen(["sh", "-c", f"(trap '' TERM; exec sleep 30) & echo $! > {tmp_path}/gc; wait"])
    gc = tracker.pid(wait_for(lambda: int((tmp_path / "gc").read_text().strip() or 0), timeout=5,
                              what="grandchild", interval=0.02))
    wait_for(lambda: Path(f"/proc/{gc}/comm").read_text().strip() == "sleep", timeout=5, what="exec",
             interval=0.02)
    gc_start = proc_start_time(gc)
    runs = tmp_path / "runs"
    f = _write_record(runs, "run-1", _dead_owner(tracker), [_rec("etcd", victim), _rec("kueue", leader)])
    said: list[str] = []

    reaped = reap_stale(runs, said.append)

    assert reaped == [f"etcd {victim.pid}", f"kueue {leader.pid}"]
    assert victim.wait(5) == -signal.SIGTERM
    assert leader.wait(5) == -signal.SIGTERM
    wait_gone(gc, gc_start, leader.pid)
    wait_gone(victim.pid, None, victim.pid)
    assert _record_cleared(f)
    assert len(said) == 1 and "run-1" in said[0] and str(victim.pid) in said[0]


def test_reap_stale_leaves_live_owner_alone(tmp_path: Path, tracker: Tracker) -> None:
    victim = tracker.popen(["sleep", "30"])
    runs = tmp_path / "runs"
    me = {"pid": os.getpid(), "start": proc_start_time(os.getpid())}
    f = _write_record(runs, "live", me, [_rec("etcd", victim)])
    before = f.read_text()

    assert reap_stale(runs) == []
    time.sleep(0.1)
    assert victim.poll() is None and is_alive(victim.pid, proc_start_time(victim.pid))
    assert f.read_text() == before  # record of a live run untouched


def test_reap_stale_owner_pid_reused_counts_as_dead(tmp_path: Path, tracker: Tracker) -> None:
    """An owner pid that now belongs to another process (start time differs) is a dead owner."""
    victim = tracker.popen(["sleep", "30"])
    me = {"pid": os.getpid(), "start": proc_start_time(os.getpid()) - 1}
    _write_record(tmp_path / "runs", "old", me, [_rec("etcd", victim)])
    assert reap_stale(tmp_path / "runs") == [f"etcd {victim.pid}"]
    assert victim.wait(5) == -signal.SIGTERM


def test_reap_stale_spares_reused_pid(tmp_path: Path, tracker: Tracker) -> None:
    """A recorded pid whose start time does not match is someone else's process: it must survive."""
    bystander = tracker.popen(["sleep", "30"])
    real_start = proc_start_time(bystander.pid)
    runs = tmp_path / "runs"
    f = _write_record(runs, "run-1", _dead_owner(tracker), [_rec("kueue", bystander, start=real_start + 7)])

    assert reap_stale(runs) == []
    time.sleep(0.2)
    assert bystander.poll() is None
    assert is_alive(bystander.pid, real_start)
    assert live_in_group(bystander.pid) == [bystander.pid]
    assert _record_cleared(f)  # the stale record is cleared anyway
    # (the tracker finalizer kills the bystander)


def test_reap_stale_spares_record_without_start_time(tmp_path: Path, tracker: Tracker) -> None:
    """No recorded start time means the pid cannot be proven to be ours: never reap by pid alone."""
    bystander = tracker.popen(["sleep", "30"])
    rec = _rec("kueue", bystander)
    rec["start"] = None
    _write_record(tmp_path / "runs", "run-1", _dead_owner(tracker), [rec])
    assert reap_stale(tmp_path / "runs") == []
    time.sleep(0.2)
    assert bystander.poll() is None


def test_reap_stale_skips_gone_and_broken_records(tmp_path: Path, tracker: Tracker) -> None:
    runs = tmp_path / "runs"
    (runs / "broken").mkdir(parents=True)
    (runs / "broken" / "processes.json").write_text("{not json")
    gone_proc = subprocess.Popen(["true"])
    gone_proc.wait(5)
    f = _write_record(runs, "finished", _dead_owner(tracker),
                      [{"name": "x", "pid": gone_proc.pid, "pgid": gone_proc.pid, "start": 1, "argv0": "x",
                        "log": ""}])
    said: list[str] = []
    assert reap_stale(runs, said.append) == []
    assert said == []
    assert _record_cleared(f)
    assert reap_stale(tmp_path / "no-such-dir") == []


def test_reap_stale_reports_per_run_file(tmp_path: Path, tracker: Tracker) -> None:
    """Each run's message names only what was reaped from that run."""
    v1 = tracker.popen(["sleep", "30"])
    v2 = tracker.popen(["sleep", "30"])
    runs = tmp_path / "runs"
    _write_record(runs, "run-a", _dead_owner(tracker), [_rec("one", v1)])
    _write_record(runs, "run-b", _dead_owner(tracker), [_rec("two", v2)])
    _write_record(runs, "run-c", _dead_owner(tracker), [])  # nothing to reap: no message
    said: list[str] = []
    assert reap_stale(runs, said.append) == [f"one {v1.pid}", f"two {v2.pid}"]
    assert len(said) == 2
    assert "run-a" in said[0] and f"one {v1.pid}" in said[0]
    assert "run-b" in said[1] and f"two {v2.pid}" in said[1]
    assert f"one {v1.pid}" not in said[1]
    v1.wait(5)
    v2.wait(5)


def test_children_die_with_killed_owner(tmp_path: Path, tracker: Tracker) -> None:
    """PR_SET_PDEATHSIG: a ProcessGroup child gets SIGTERM when its owner is SIGKILLed (no reap needed)."""
    import sys

    script = (
        "import sys, time; from pathlib import Path; from harness.common.procs import ProcessGroup\n"
        f"pg = ProcessGroup(Path({str(tmp_path)!r}))\n"
        f"p = pg.start('sleeper', ['sleep', '30'], Path({str(tmp_path / 's.log')!r}))\n"
        "print(p.pid, flush=True); time.sleep(30)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             start_new_session=True, cwd=Path(__file__).resolve().parents[2])
    tracker.popens.append(owner)
    assert owner.stdout is not None
    child = int(owner.stdout.readline())
    start = proc_start_time(child)
    tracker.pid(child)
    assert is_alive(child, start)
    rec = json.loads((tmp_path / "processes.json").read_text())
    assert rec["owner"]["pid"] == owner.pid and rec["procs"][0]["pid"] == child

    owner.kill()
    owner.wait(5)
    wait_for(lambda: gone(child, start), timeout=5, what="child of killed owner gone", interval=0.02)


def _record_cleared(f: Path) -> bool:
    """After reap_stale a dead run's record is emptied, and its folder removed when nothing else is left
    in it (stop() already deleted the run's secrets)."""
    if not f.exists():
        return not f.parent.exists() or list(f.parent.iterdir()) != []
    return json.loads(f.read_text())["procs"] == []
