"""Where sessions are kept and how they are found and ended: one folder per session name under the harness cache
(`sessions/<name>/`: the session file with paths, never secrets; its start lock), reading and listing them (a
dead supervisor is told apart), and `down`: stopping a supervisor and reaping what it left.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
from pathlib import Path
from typing import Any, Iterator

from harness.build import binaries
from harness.common.errors import HarnessError
from harness.common.procs import is_alive
from harness.common.waiting import WaitTimeout, wait_for

DEFAULT_NAME = "default"


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def sessions_root() -> Path:
    """<cache>/sessions. Raises HarnessError when the retired KUEUE_HARNESS_SESSION is set (it named one
    session file; sessions have names now), so a stale setting cannot silently point elsewhere."""
    if os.environ.get("KUEUE_HARNESS_SESSION"):
        raise HarnessError("KUEUE_HARNESS_SESSION is no longer read: sessions have names now. Unset it and use "
                           "`kueue-harness up --name NAME` (and `--name NAME` on the other session commands)")
    return binaries.cache_root() / "sessions"


def check_name(name: str | None) -> str:
    """`name` (None: "default") if it is a usable session name, else HarnessError saying what is. An empty name
    (`--name ''`) is refused, not taken as the default session: a user who typed it meant some name."""
    name = DEFAULT_NAME if name is None else name
    if not _NAME.fullmatch(name):
        raise HarnessError(f"session name {name!r} is not usable: use 1-63 letters, digits, '.', '_' or '-', "
                           "starting with a letter or digit (e.g. `--name old`)")
    return name


def session_dir(name: str | None) -> Path:
    """<cache>/sessions/<name> (not created). Raises HarnessError for an unusable name."""
    return sessions_root() / check_name(name)


def session_file(name: str | None = None) -> Path:
    """<cache>/sessions/<name>/session.json."""
    return session_dir(name) / "session.json"


def name_option(name: str | None) -> str:
    """" --name NAME" for a non-default session, "" for the default one (to quote commands)."""
    name = name or DEFAULT_NAME
    return "" if name == DEFAULT_NAME else f" --name {name}"


def _lock_held(name: str) -> bool:
    """True while some `up` holds the session's start lock (it is starting the session)."""
    path = session_dir(name) / "up.lock"
    if not path.exists():
        return False
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False


@contextlib.contextmanager
def _start_lock(name: str, busy: str) -> Iterator[None]:
    """Hold the session's start lock, or raise HarnessError(`busy`) when another process holds it."""
    d = session_dir(name)
    for _ in range(3):  # a `down` of the same name may remove the folder between mkdir and open
        d.mkdir(parents=True, exist_ok=True)
        try:
            fh = open(d / "up.lock", "a")
            break
        except FileNotFoundError:
            continue
    else:
        raise HarnessError(f"cannot create {d / 'up.lock'}: something keeps removing {d}; try again")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HarnessError(busy) from None
        yield
    finally:
        fh.close()


def _write(name: str, data: dict[str, Any]) -> None:
    f = session_file(name)
    tmp = f.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(f)


def describe(name: str | None = None, holding_lock: bool = False) -> dict[str, Any] | None:
    """The session's record with "phase": "starting", "running" or "died" (its supervisor is gone and
    no `up` is handling that), or None when there is no record. `holding_lock`: the caller holds the
    session's start lock (so no `up` is starting it). Raises HarnessError for a bad name."""
    name = check_name(name)
    try:
        data = json.loads(session_file(name).read_text())
    except (OSError, ValueError):
        return None
    sup = data.get("supervisor") or {}
    alive = bool(sup.get("pid")) and is_alive(sup["pid"], sup.get("start"))
    data["name"] = name
    if not alive:
        data["phase"] = "starting" if not holding_lock and _lock_held(name) else "died"
    else:
        data["phase"] = data.get("phase") or "running"
    return data


def list_sessions() -> list[dict[str, Any]]:
    """describe() of every session that has a record, by name."""
    root = sessions_root()
    out = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        if _NAME.fullmatch(d.name) and (d / "session.json").is_file():
            rec = describe(d.name)
            if rec is not None:
                out.append(rec)
    return out


def died_message(rec: dict[str, Any]) -> str:
    """What to say about a session whose supervisor died, with the remedy."""
    return (f"the session's supervisor pid {rec['supervisor']['pid']} died; logs in {rec.get('artifacts', '?')}; "
            f"`kueue-harness down{name_option(rec['name'])}` cleans up")


def _others(name: str) -> str:
    live = [r["name"] for r in list_sessions() if r["name"] != name]
    if not live:
        return ""
    return f" Sessions with other names: {', '.join(live)} (`kueue-harness status --name NAME`)."


def read_session(name: str | None = None) -> dict[str, Any] | None:
    """The session's record if it is up and ready, else None (no session, starting, or died)."""
    rec = describe(name)
    return rec if rec is not None and rec["phase"] == "running" else None


def require_session(name: str | None = None) -> dict[str, Any]:
    """The running session `name`, or HarnessError saying why there is none and what to do."""
    name = check_name(name)
    rec = describe(name)
    if rec is None:
        raise HarnessError(f"no kueue-harness session named {name} is running: start one with "
                           f"`kueue-harness up{name_option(name)}` (see docs/manual-session.md).{_others(name)}")
    if rec["phase"] == "died":
        raise HarnessError(f"session {name}: {died_message(rec)}")
    if rec["phase"] == "starting":
        raise HarnessError(f"session {name} is still starting (log: {rec.get('log')}): wait for its "
                           "`kueue-harness up` to finish, then try again")
    return rec


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap_owned(owner: dict[str, Any], state: str | None = None, timeout: float = 5) -> tuple[list[str], list[str]]:
    """Kill what a dead owner (a session supervisor, {"pid", "start"}) recorded and remove its state folders.

    Looks at <cache>/runs/*/processes.json whose "owner" is `owner` (pid and start time), plus `state`
    (the folder the session record names). Each recorded process still running with its recorded start
    time gets SIGTERM, SIGKILL after `timeout` seconds. Returns (["name pid", ...] killed, [folders removed]).
    Never touches a folder whose owner is alive.
    """
    from harness.env.runs import runs_root

    folders = {Path(state)} if state else set()
    for f in runs_root().glob("*/processes.json"):
        try:
            o = json.loads(f.read_text()).get("owner") or {}
        except (OSError, ValueError):
            continue
        if o.get("pid") == owner.get("pid") and o.get("start") == owner.get("start"):
            folders.add(f.parent)
    killed: list[str] = []
    removed: list[str] = []
    for folder in sorted(folders):
        try:
            data = json.loads((folder / "processes.json").read_text())
        except (OSError, ValueError):
            data = {}
        o = data.get("owner") or owner
        if o.get("pid") and is_alive(o["pid"], o.get("start")):
            continue  # not dead after all: never pull a live run's files away
        for r in data.get("procs", []):
            if r.get("start") is not None and is_alive(r["pid"], r["start"]):
                _kill_group(r["pgid"], signal.SIGTERM)
                try:
                    wait_for(lambda r=r: not is_alive(r["pid"], r["start"]), timeout=timeout,
                             what=f"{r['name']} (pid {r['pid']}) to exit on SIGTERM")
                except WaitTimeout:
                    _kill_group(r["pgid"], signal.SIGKILL)
                killed.append(f"{r['name']} {r['pid']}")
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return killed, removed


def _stop_supervisor(pid: int, start: int | None, timeout: float) -> bool:
    """SIGTERM the supervisor and wait up to `timeout` seconds; SIGKILL if it does not exit.
    Returns False only when it had to be killed (it did not stop its environment itself)."""
    if not is_alive(pid, start):
        return True
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    try:
        wait_for(lambda: not is_alive(pid, start), timeout=timeout, interval=0.2,
                 what=f"the session supervisor (pid {pid}) to stop its environment")
        return True
    except WaitTimeout:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_for(lambda: not is_alive(pid, start), timeout=10, what=f"the session supervisor (pid {pid}) to die")
        return False


def _forget(name: str, keep_lock: bool = False) -> None:
    """Remove the session's folder (record and lock file) once nothing runs under that name. Called with
    the start lock held; an `up` that comes after makes the folder again. `keep_lock`: only the record goes
    (an `up` that cleans up a dead session and then starts it in the same folder, under the same lock)."""
    d = session_dir(name)
    session_file(name).unlink(missing_ok=True)
    if keep_lock:
        return
    (d / "up.lock").unlink(missing_ok=True)
    try:
        d.rmdir()
    except OSError:
        pass  # something else is in it: leave it


def _cleanup(rec: dict[str, Any], keep_lock: bool = False) -> str:
    """Reap what a dead supervisor left and remove the session's record and folder (with `keep_lock`, the
    folder and its start lock stay: the caller starts the session again). Returns what was done."""
    killed, removed = reap_owned(rec["supervisor"], rec.get("state"))
    _forget(rec["name"], keep_lock)
    parts = [f"reaped {', '.join(killed)}" if killed else "none of its processes was left running",
             f"removed its state folder (keys, tokens) {', '.join(removed)}" if removed else "no state folder was left"]
    return "; ".join(parts)


def stop(name: str | None = None, timeout: float = 60) -> str:
    """Stop session `name` (SIGTERM to its supervisor, which stops every process; SIGKILL after `timeout`
    seconds, then its processes are reaped). A session whose supervisor died is cleaned up: its recorded
    processes are killed and its state folder removed. Idempotent. Returns one line saying what happened.
    Raises HarnessError while an `up` is still starting the session.
    """
    name = check_name(name)
    busy = (f"session {name} is starting right now (another `kueue-harness up{name_option(name)}`): stop that "
            f"`up` (Ctrl-C or kill; it stops the session), or run `kueue-harness down{name_option(name)}` again "
            "once it is up")
    if not session_dir(name).is_dir():
        return f"no session named {name} was running.{_others(name)}"
    with _start_lock(name, busy):
        rec = describe(name, holding_lock=True)
        if rec is None:
            _forget(name)
            return f"no session named {name} was running.{_others(name)}"
        sup = rec["supervisor"]
        if rec["phase"] == "died":
            return f"session {name}: its supervisor pid {sup['pid']} had died; {_cleanup(rec)}"
        clean = _stop_supervisor(sup["pid"], sup.get("start"), timeout)
        done = _cleanup(rec)
        if clean:
            return f"session {name} stopped"
        return f"session {name}: its supervisor did not stop within {timeout:g}s and was killed; {done}"
