"""A long-running environment for manual sessions (`kueue-harness up` / `down`): a small supervisor
process owns the LocalEnvironment and keeps it up until `down` (SIGTERM), and a session file tells the
other CLI commands where everything is.

Session file: <cache>/session.json = {"supervisor": {"pid", "start"}, "kueue_version", "api_url",
"admin_kubeconfig", "proxy_url", "control_port", "control_token_file", "web_url", "artifacts", "state",
"kueue_log", "started"}. It holds paths, never secrets (the token stays in the 0600 file it names).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.env import binaries
from harness.errors import HarnessError
from harness.procs import is_alive, proc_start_time
from harness.waiting import WaitTimeout, wait_for


def session_file() -> Path:
    """$KUEUE_HARNESS_SESSION, else <cache>/session.json (one session per cache by default)."""
    env = os.environ.get("KUEUE_HARNESS_SESSION")
    return Path(env) if env else binaries.cache_root() / "session.json"


def read_session() -> dict[str, Any] | None:
    """The running session's description, or None (no session, or its supervisor is gone)."""
    f = session_file()
    try:
        data = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    sup = data.get("supervisor") or {}
    if not sup.get("pid") or not is_alive(sup["pid"], sup.get("start")):
        return None
    return data


def require_session() -> dict[str, Any]:
    """The running session, or HarnessError telling the user to start one."""
    s = read_session()
    if s is None:
        raise HarnessError("no kueue-harness session is running: start one with `kueue-harness up` "
                           "(see docs/manual-session.md)")
    return s


def start(kueue_version: Any, plan: str | None, ui: bool, artifacts: str | None, intercept: str | None = None,
          timeout: float = 900) -> dict[str, Any]:
    """Start the supervisor in the background and wait until the environment is ready.

    `kueue_version`: a tag, or a harness.env.kueue_build.KueueSpec (any tag, ref or source tree).
    Build progress and start-up lines go to <artifacts>/session.log and are echoed here. Raises
    HarnessError if a session already runs, or with the supervisor's last lines if it fails.
    """
    # One `up` at a time: two racing `up`s would each start an environment and orphan one of them.
    lock = open(session_file().with_suffix(".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise HarnessError("another `kueue-harness up` is starting a session right now; wait for it, then use "
                           "`kueue-harness status`") from None
    try:
        return _start_locked(kueue_version, plan, ui, artifacts, intercept, timeout)
    finally:
        lock.close()


def _start_locked(kueue_version: Any, plan: str | None, ui: bool, artifacts: str | None, intercept: str | None,
                  timeout: float) -> dict[str, Any]:
    running = read_session()
    if running is not None:
        raise HarnessError(
            f"a session is already running (supervisor pid {running['supervisor']['pid']}, Kueue "
            f"{running['kueue_version']}, started {running['started']}): use it, or stop it with "
            "`kueue-harness down` before starting another"
        )
    session_file().unlink(missing_ok=True)
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-session-{os.getpid()}"
    art = Path(artifacts or Path("artifacts") / run_id).resolve()
    art.mkdir(parents=True, exist_ok=True)
    log = art / "session.log"
    spec_args = kueue_version.cli_args() if hasattr(kueue_version, "cli_args") else ["--kueue-version", kueue_version]
    cmd = [sys.executable, "-m", "harness.session", *spec_args, "--artifacts", str(art)]
    if plan:
        cmd += ["--plan", plan]
    if ui:
        cmd += ["--ui"]
    if intercept:
        cmd += ["--intercept", intercept]
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=os.getcwd())
    shown = 0

    def ready() -> dict[str, Any] | None:
        nonlocal shown
        lines = log.read_text(errors="replace").splitlines()
        for line in lines[shown:]:
            print(line, file=sys.stderr, flush=True)
        shown = len(lines)
        if proc.poll() is not None:
            raise HarnessError(f"the session failed to start (exit {proc.returncode}); see {log}")
        return read_session()

    try:
        return wait_for(ready, timeout=timeout, interval=0.5, what="the session's environment to be ready",
                        fatal=(HarnessError,))
    except HarnessError:
        raise
    except WaitTimeout as e:
        proc.terminate()
        raise HarnessError(f"{e}; see {log}") from None
    except KeyboardInterrupt:
        # Ctrl-C on `up`: the half-started session must not come up behind the user's back.
        proc.terminate()
        proc.wait(60)
        raise


def stop(timeout: float = 60) -> bool:
    """Stop the running session (SIGTERM to its supervisor, which stops every process). Idempotent:
    returns False when nothing was running."""
    s = read_session()
    if s is None:
        with open(session_file().with_suffix(".lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise HarnessError("a session is starting right now (another `kueue-harness up`); run "
                                   "`kueue-harness down` again once it is up") from None
        session_file().unlink(missing_ok=True)
        return False
    pid = s["supervisor"]["pid"]
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not is_alive(pid, s["supervisor"].get("start")), timeout=timeout,
             what=f"the session supervisor (pid {pid}) to stop the environment")
    session_file().unlink(missing_ok=True)
    return True


def _serve(args: argparse.Namespace) -> int:
    """Supervisor main: start the environment, write the session file, wait for SIGTERM/SIGINT."""
    from harness.env.local import LocalEnvironment
    from harness.plans import load_plan

    stop_event = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
    signal.signal(signal.SIGINT, lambda *_: stop_event.set())
    art = Path(args.artifacts)
    plan = load_plan(args.plan) if args.plan else None  # validate before anything starts
    kubectl = binaries.kubectl()
    from harness.env.kueue_build import KueueSpec

    spec = KueueSpec.from_options(args.kueue_version, args.kueue_ref, args.kueue_source, args.kueue_repo)
    env = LocalEnvironment.start(spec, artifacts=art / "env", ui=args.ui, intercept=args.intercept)
    nemesis = None
    try:
        # Process faults (restart_kueue) and delayed watch events of the session's plans, loaded now or
        # later with `plan load`, need the harness side too (harness/nemesis.py); before any plan loads.
        from harness.nemesis import Nemesis

        nemesis = Nemesis.for_session(env, say=lambda line: print(line, flush=True)).start()
        if plan is not None:
            env.proxy.load_plan(plan)
            print(f"[kueue-harness] plan {plan.name} loaded: {', '.join(r.id for r in plan.rules)}", flush=True)
        me = os.getpid()
        data = {
            "supervisor": {"pid": me, "start": proc_start_time(me)},
            "kueue_version": env.kueue_version,
            "kueue": env.kueue_build_info(),
            "api_url": env.api_url,
            "admin_kubeconfig": str(env.admin_kubeconfig),
            "kubectl": str(kubectl),
            "proxy_url": env.proxy.url,
            "control_port": env.proxy.control_port,
            "control_token_file": str(env.state / "control.token"),
            "web_url": env.proxy.web_url,
            "artifacts": str(art),
            "state": str(env.state),
            "kueue_log": str(env.kueue_log),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        tmp = session_file().with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(session_file())
        reported: set[str] = set()
        while not stop_event.wait(1):
            for name in list(env.procs.procs):
                if nemesis.busy():
                    break  # a plan's process fault is restarting Kueue: not an exit
                if name not in reported and not env.procs.alive(name):
                    reported.add(name)
                    print(f"[kueue-harness] {name} exited (see {env.artifacts}); the session keeps running for "
                          "inspection: `kueue-harness status`, then `kueue-harness down`", flush=True)
        stop_event.wait()
    finally:
        if nemesis is not None:
            nemesis.stop(timeout=60)
        env.stop()
        try:
            if json.loads(session_file().read_text()).get("supervisor", {}).get("pid") == os.getpid():
                session_file().unlink()
        except (OSError, ValueError):
            pass
        print("[kueue-harness] session stopped", flush=True)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="kueue-harness session supervisor (started by `kueue-harness up`)")
    ap.add_argument("--kueue-version")
    ap.add_argument("--kueue-ref")
    ap.add_argument("--kueue-source")
    ap.add_argument("--kueue-repo")
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--plan")
    ap.add_argument("--ui", action="store_true")
    ap.add_argument("--intercept")
    try:
        sys.exit(_serve(ap.parse_args()))
    except HarnessError as e:
        print(f"kueue-harness: {e}", flush=True)
        sys.exit(e.exit_code)
