"""Starts the environment's processes in their own process groups, records them in the run's state
folder, stops them, and reaps what a killed earlier run left behind (by recorded pid + start time).

Record: <state>/processes.json = {"owner": {"pid", "start"}, "procs": [{"name","pid","pgid","start",
"argv0","log"}]}. A leftover is reaped only if its pid still has the recorded start time (no pid reuse
accidents) — never by process name.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from harness.common.waiting import WaitTimeout, wait_for

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the harness process dies (even by SIGKILL), so a
    killed test run does not leave etcd or Kueue behind. Linux prctl(PR_SET_PDEATHSIG). SIGKILL, not
    SIGTERM: kube-apiserver's graceful shutdown waits on an etcd that is dying at the same moment."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001 - not Linux: reap_stale() still cleans up on the next start
        pass


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 on), None if gone. The command name may
    contain spaces and parentheses; fields resume after the last ')'."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def proc_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), None if gone."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def cpu_ticks(pid: int) -> int | None:
    """CPU time `pid` used so far, user + system, in clock ticks (/proc/<pid>/stat fields 14-15), None if gone: a
    process starting on a slow machine is progressing while this grows (harness/env/local.py _wait_process)."""
    fields = _stat_fields(pid)
    return int(fields[11]) + int(fields[12]) if fields else None


def is_alive(pid: int, start: int | None) -> bool:
    """True if `pid` runs and (when `start` is given) is the same process that was recorded."""
    st = proc_start_time(pid)
    if st is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return False
    except OSError:
        return False
    return start is None or st == start


@dataclass
class ProcRecord:
    name: str
    pid: int
    pgid: int
    start: int | None
    argv0: str
    log: str


class ProcessGroup:
    """The processes of one run. `start()` launches and records; `stop_all()` terminates in reverse.
    Safe to call from two threads (the local environment starts the proxy in a helper thread)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.file = state_dir / "processes.json"
        self.procs: dict[str, tuple[subprocess.Popen, ProcRecord]] = {}
        self._lock = threading.RLock()
        self._save()

    def _save(self) -> None:
        with self._lock:
            me = os.getpid()
            data = {
                "owner": {"pid": me, "start": proc_start_time(me)},
                "procs": [asdict(r) for _, r in self.procs.values()],
            }
            tmp = self.file.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1))
            tmp.replace(self.file)

    def start(
        self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen:
        """Start `argv` in a new session (own process group), stdout+stderr appended to `log`."""
        fh = open(log, "ab")
        try:
            p = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True, env=env, cwd=cwd, preexec_fn=_die_with_parent,
            )
        finally:
            fh.close()
        rec = ProcRecord(name, p.pid, p.pid, proc_start_time(p.pid), argv[0], str(log))
        with self._lock:
            self.procs[name] = (p, rec)
            self._save()
        return p

    def alive(self, name: str) -> bool:
        p, _ = self.procs[name]
        return p.poll() is None

    def stop(self, name: str, timeout: float = 10.0) -> int | None:
        """SIGTERM the process group of `name`, SIGKILL after `timeout` seconds. Returns exit code."""
        with self._lock:
            entry = self.procs.pop(name, None)
        if entry is None:
            return None
        p, rec = entry
        if p.poll() is None:
            _signal_group(rec.pgid, signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(rec.pgid, signal.SIGKILL)
                p.wait(5)
        # Children that outlived the leader in the same group.
        _signal_group(rec.pgid, signal.SIGKILL)
        self._save()
        return p.returncode

    def stop_all(self, timeout: float = 10.0) -> None:
        """Stop every process, most recently started first (Kueue before the proxy before the apiserver)."""
        for name in reversed(list(self.procs)):
            self.stop(name, timeout)
        self._save()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap_stale(runs_root: Path, say: Callable[[str], None] = lambda s: None) -> list[str]:
    """Kill processes recorded by earlier runs whose owner is gone (killed test run, SIGKILL).

    Looks at every `<runs_root>/*/processes.json`. Returns "name pid" strings of what it reaped.
    """
    reaped: list[str] = []
    if not runs_root.is_dir():
        return reaped
    for f in sorted(runs_root.glob("*/processes.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        owner = data.get("owner") or {}
        if owner.get("pid") and is_alive(owner["pid"], owner.get("start")):
            continue  # a live run (another pytest worker, an `up` session)
        here: list[str] = []
        for r in data.get("procs", []):
            # Without a recorded start time the pid may be anyone's now: never reap by pid alone.
            if r.get("start") is not None and is_alive(r["pid"], r["start"]):
                _signal_group(r["pgid"], signal.SIGTERM)
                try:
                    wait_for(lambda r=r: not is_alive(r["pid"], r["start"]), timeout=5,
                             what=f"leftover {r['name']} to exit on SIGTERM")
                except WaitTimeout:
                    pass  # SIGKILL below
                _signal_group(r["pgid"], signal.SIGKILL)
                here.append(f"{r['name']} {r['pid']}")
        # The owner is gone, so nothing will use this run's state again: its keys, tokens and etcd data go
        # with it (a SIGKILLed run never reached stop(), which removes them otherwise).
        shutil.rmtree(f.parent, ignore_errors=True)
        if here:
            say(f"reaped processes left by an earlier run ({f.parent.name}): {', '.join(here)}")
        reaped += here
    return reaped


def exit_words(returncode: int | None) -> str:
    """A process's end in words: "exit 1"; "killed by SIGSEGV (exit -11)" for a signal (Popen's negative
    returncode); "still running" for None."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name} (exit {returncode})"
        except ValueError:
            return f"killed by signal {-returncode} (exit {returncode})"
    return f"exit {returncode}"

