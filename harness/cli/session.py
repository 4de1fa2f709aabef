"""Long-running environments for manual sessions (`kueue-harness up` / `down`), by name: a small
supervisor process owns one LocalEnvironment and keeps it up until `down` (SIGTERM), and a session file
tells the other CLI commands where everything is. Several named sessions can run side by side (e.g. two
Kueue versions); the name defaults to "default".

Layout (root: <cache>/sessions, <cache> as in harness/env/binaries.cache_root):
  <name>/session.json   {"name", "phase", "supervisor": {"pid", "start"}, "up": {"pid", "start"},
                         "artifacts", "log", "started"} while starting; once ready also "kueue_version",
                         "kueue", "api_url", "admin_kubeconfig", "kubectl", "proxy_url", "control_port",
                         "control_token_file", "web_url", "state", "kueue_log", "kueue_baseline" (Kueue's
                         start count and the epoch seconds when the session's Nemesis took over) (and
                         "cases" after `run --keep-env`). Paths only, never secrets (the control token stays in the 0600
                         file it names).
  <name>/up.lock        flock held by the `up` that starts the session, until the session is ready.
  `down` (and a failed `up`) removes the folder.

`kueue-harness run --keep-env` starts a session whose supervisor first runs the cases on its environment
(pytest in the supervisor's process, harness.scenarios.plugin.PROVIDED_ENV): the environment's processes die
with the process that started them (PR_SET_PDEATHSIG), so only a process that stays can keep them. The
session is ready once the cases are done; its record's "cases" holds pytest's exit code.

Ownership: `up` owns its supervisor until the environment is ready. The supervisor gets SIGTERM when
`up` dies (PR_SET_PDEATHSIG, cleared once ready), and SIGTERM/SIGHUP/SIGINT to `up` stop the supervisor
and everything it started. A supervisor that died (SIGKILL, OOM) is reported by `status` and cleaned up
by `down`: the processes it recorded (<cache>/runs/*/processes.json naming it as owner, matched by pid
and start time) are killed and its state folder (keys, tokens, etcd data) is removed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.build import binaries
from harness.cli.records import (  # noqa: F401 - the session records, used through this module too
    DEFAULT_NAME,
    _cleanup,
    _others,
    _start_lock,
    _stop_supervisor,
    _write,
    check_name,
    describe,
    died_message,
    list_sessions,
    name_option,
    read_session,
    reap_owned,
    require_session,
    session_dir,
    session_file,
    sessions_root,
    stop,
)
from harness.common.errors import HarnessError
from harness.common.procs import proc_start_time
from harness.common.waiting import WaitTimeout, wait_for
from harness.kueue import versions

#: Signals that stop a starting session (and `up`): terminal hang-up, `kill`, Ctrl-C.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
_PR_SET_PDEATHSIG = 1

Say = Callable[[str], None]


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Stopped(BaseException):
    """A stop signal arrived while starting (BaseException: probes and `except Exception` let it through)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals(handler: Any) -> Iterator[None]:
    """Install `handler` for STOP_SIGNALS (main thread only), restoring the previous ones afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _raise_stopped(signum: int, _frame: Any) -> None:
    raise _Stopped(signum)


def _prctl_pdeathsig(sig: int) -> None:
    """Linux prctl(PR_SET_PDEATHSIG, sig) for the calling thread's process; 0 clears it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except Exception:  # noqa: BLE001 - not Linux: `up`'s own signal handlers still stop the supervisor
        pass


def _supervisor_preexec() -> None:
    # The stop signals stay blocked (the mask survives exec) until _serve has its handlers: one that came
    # earlier — `up` killed while the new Python process still imports — would end it without removing the
    # starting record `up` wrote (seen at load ~12: "the session's supervisor pid … died").
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    _prctl_pdeathsig(signal.SIGTERM)


def start(name: str | None, kueue_version: Any, plan: str | None, ui: bool, artifacts: str | None,
          intercept: str | None = None, timeout: float = 1800, say: Say = _say,
          cases: list[str] | None = None, again: str | None = None, pods: bool = False,
          kueue_config: str | None = None) -> dict[str, Any]:
    """Start session `name`'s supervisor in the background and wait until its environment is ready.
    With `pods`, kube-scheduler and kwok start with it (harness/env/pods.py; the record's "pods" names them).
    `kueue_config`: a Kueue configuration file (harness/kueue/config.py load_file) Kueue starts with.

    `cases`: pytest arguments (`kueue-harness run --keep-env`): the supervisor runs those cases on its
    environment first (in its own process, so the environment outlives them) and the session is ready once
    they are done; the record's "cases" then holds {"exit": pytest's exit code}. `up` (and so `run`) owns
    the supervisor until then. `again`: the command a stopped start names to start over (default `up`).

    `kueue_version`: a tag, or a harness.build.kueue.KueueSpec (any tag, ref or source tree);
    `timeout`: seconds for builds and start-up together. Build progress and start-up lines go to
    <artifacts>/session.log and are echoed through `say`. A record of a session of that name whose
    supervisor died is cleaned up first. SIGTERM, SIGHUP or SIGINT while waiting stop the supervisor and
    what it started. Returns the session record. Raises HarnessError when the session already runs or is
    being started (exit code 2), when it fails to start (the supervisor's exit code: 5 a component did not
    start, 4 a build failed, ...; 2 when it was killed), when `timeout` passes, and when a signal stopped
    it (exit code 128 + the signal's number).
    """
    name = check_name(name)
    with _start_lock(name, f"another `kueue-harness up{name_option(name)}` is starting session {name} right "
                           f"now; wait for it, then use `kueue-harness status{name_option(name)}`"):
        rec = describe(name, holding_lock=True)
        if rec is not None and rec["phase"] != "died":
            raise HarnessError(
                f"session {name} is already running (supervisor pid {rec['supervisor']['pid']}, Kueue "
                f"{rec.get('kueue_version', '?')}, started {rec.get('started')}): use it, stop it with "
                f"`kueue-harness down{name_option(name)}`, or start another beside it with `--name OTHER`")
        if rec is not None:
            # The folder and its start lock stay (this `up` holds the lock): it starts the session in one go.
            say(f"[kueue-harness] session {name}: its supervisor pid {rec['supervisor']['pid']} had died; "
                f"{_cleanup(rec, keep_lock=True)}; starting it again")
        return _start_locked(name, kueue_version, plan, ui, artifacts, intercept, timeout, say, cases,
                             again or f"kueue-harness up{name_option(name)}", pods, kueue_config)


def _start_locked(name: str, kueue_version: Any, plan: str | None, ui: bool, artifacts: str | None,
                  intercept: str | None, timeout: float, say: Say, cases: list[str] | None = None,
                  again: str = "kueue-harness up", pods: bool = False,
                  kueue_config: str | None = None) -> dict[str, Any]:
    from harness.env.runs import run_folder

    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-session-{name}-{os.getpid()}"
    art, note = run_folder(artifacts, run_id)  # never over an earlier run's evidence: beside it, inside
    art = art.resolve()
    if note:
        say(f"[kueue-harness] {note}")
    art.mkdir(parents=True, exist_ok=True)
    log = art / "session.log"
    spec_args = kueue_version.cli_args() if hasattr(kueue_version, "cli_args") else ["--kueue-version", kueue_version]
    cmd = [sys.executable, "-m", "harness.cli.session", "--name", name, "--owner", str(os.getpid()), *spec_args,
           "--artifacts", str(art)]
    if plan:
        cmd += ["--plan", plan]
    if ui:
        cmd += ["--ui"]
    if intercept:
        cmd += ["--intercept", intercept]
    if pods:
        cmd += ["--pods"]
    if kueue_config:
        cmd += ["--kueue-config", str(Path(kueue_config).resolve())]
    if cases is not None:
        cmd += ["--cases", json.dumps(cases)]
    me = os.getpid()
    shown = 0

    def echo() -> None:
        nonlocal shown
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            return
        for line in lines[shown:]:
            say(line)
        shown = len(lines)

    # Stop signals raise from here on, so none can land between the Popen and the handler below.
    proc: subprocess.Popen | None = None
    sup: dict[str, Any] = {}
    with _signals(_raise_stopped):
        try:
            with open(log, "ab") as fh:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                        start_new_session=True, cwd=os.getcwd(), preexec_fn=_supervisor_preexec)
            sup = {"pid": proc.pid, "start": proc_start_time(proc.pid)}
            _write(name, {"name": name, "phase": "starting", "supervisor": sup,
                          "up": {"pid": me, "start": proc_start_time(me)}, "artifacts": str(art), "log": str(log),
                          "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
            return _wait_ready(name, proc, sup, log, echo, timeout)
        except (_Stopped, KeyboardInterrupt) as e:
            signum = e.signum if isinstance(e, _Stopped) else signal.SIGINT
            signal_name = signal.Signals(signum).name
            with _signals(signal.SIG_IGN):  # a second Ctrl-C must not leave the clean-up half done
                say(f"[kueue-harness] {signal_name}: stopping session {name}, which was still starting")
                if proc is not None:
                    _abandon(name, proc, sup)
                    echo()
            err = HarnessError(f"interrupted by {signal_name} while session {name} was starting: stopped its "
                               f"supervisor and everything it had started (log: {log}). Start it again with "
                               f"`{again}`")
            err.exit_code = 128 + signum
            raise err from None


def _wait_ready(name: str, proc: subprocess.Popen, sup: dict[str, Any], log: Path, echo: Callable[[], None],
                timeout: float) -> dict[str, Any]:
    """Echo the supervisor's log until it records the session as running (returns the record). Raises
    HarnessError when it exits first or `timeout` seconds pass (after stopping it and reaping leftovers)."""

    def ready() -> dict[str, Any] | None:
        echo()
        if proc.poll() is not None:
            raise HarnessError("exited")
        rec = describe(name)
        return rec if rec and rec["phase"] == "running" and rec["supervisor"]["pid"] == proc.pid else None

    try:
        return wait_for(ready, timeout=timeout, interval=0.5, what=f"session {name}'s environment to be ready",
                        fatal=(HarnessError,))
    except HarnessError:
        echo()
        code = proc.returncode
        how = f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited {code}"
        done = _cleanup({"name": name, "supervisor": sup})
        err = HarnessError(f"the session failed to start: its supervisor (pid {proc.pid}) {how} ({done}); "
                           f"see the lines above and {log}")
        # The supervisor's own exit code says what failed (5 a component, 4 a build, 3 a version ...).
        err.exit_code = code if code is not None and 2 <= code <= 7 else 2
        raise err from None
    except WaitTimeout as e:
        _abandon(name, proc, sup)
        raise HarnessError(f"{e}; stopped the session's supervisor and what it had started. See {log}; cold "
                           "builds take about 15 minutes on 2 cores: run `kueue-harness build` first") from None


def _abandon(name: str, proc: subprocess.Popen, sup: dict[str, Any]) -> None:
    """Stop a supervisor that is still starting (it stops what it started), reap leftovers, drop the record."""
    if proc.poll() is None:
        _stop_supervisor(proc.pid, sup.get("start"), timeout=60)
    proc.wait(10)
    _cleanup({"name": name, "supervisor": sup})


def _serve(args: argparse.Namespace) -> int:
    """Supervisor main: start the environment, record it, keep it up until SIGTERM/SIGHUP/SIGINT.

    While starting, a stop signal (or `up` dying: PR_SET_PDEATHSIG) interrupts the start at once and
    stops what was started (raises _Stopped); once ready, it ends the wait below.
    """
    from harness.env.local import LocalEnvironment
    from harness.plan.load import load_plan

    stop_event = threading.Event()
    starting = [True]
    in_cases: list[int | None] = [None]  # while cases run: 0, or the stop signal that came

    def on_signal(signum: int, _frame: Any) -> None:
        stop_event.set()
        if starting[0]:
            starting[0] = False  # raise once: the clean-up that follows must not be interrupted
            if in_cases[0] is not None:
                # pytest ends a run cleanly on KeyboardInterrupt (teardown, summary); other exceptions it
                # would record as a failed case and go on with the next.
                in_cases[0] = signum
                raise KeyboardInterrupt
            raise _Stopped(signum)

    for s in STOP_SIGNALS:
        signal.signal(s, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked by _supervisor_preexec: one pending raises here
    if args.owner and os.getppid() != args.owner:
        print("[kueue-harness] `kueue-harness up` exited before the session started; not starting it", flush=True)
        return 1
    name = check_name(args.name)
    art = Path(args.artifacts)
    plan = load_plan(args.plan) if args.plan else None  # validate before anything starts
    if plan is not None:
        from harness.plan.moved import refuse_outside_a_case

        refuse_outside_a_case(plan, "up --plan")
    # The Kueue configuration: --kueue-config FILE over the plan's `kueue:` section (docs/kueue-config.md).
    from harness.kueue import config as kconfig

    kcfg = kconfig.load_file(args.kueue_config) if args.kueue_config else kconfig.DEFAULT
    if plan is not None and plan.kueue is not None:
        kcfg = kcfg.over(plan.kueue)
    if not kcfg.is_default:
        print(f"[kueue-harness] Kueue configuration: {kcfg.summary()}", flush=True)
    kubectl = _kubectl_or_none()
    from harness.build.kueue import KueueSpec

    spec = KueueSpec.from_options(args.kueue_version, args.kueue_ref, args.kueue_source, args.kueue_repo,
                                  args.kueue_patch, args.kueue_race)
    env = LocalEnvironment.start(spec, artifacts=art / "env", ui=args.ui, intercept=args.intercept, pods=args.pods,
                                 kueue_config=kcfg)
    print(f"[kueue-harness] environment ready in {env.started.get('ready_seconds', 0.0):.1f}s (Kueue {env.kueue_version}, "
          f"kube-apiserver {getattr(env, 'kubernetes_version', '') or versions.KUBERNETES_VERSION}); artifacts: "
          f"{art / 'env'}", flush=True)
    nemesis = None
    cases = None
    try:
        if args.cases is not None:
            # `kueue-harness run --keep-env`: the cases run here, on this environment, which stays up after.
            in_cases[0] = 0
            cases = {"exit": _run_cases(env, json.loads(args.cases))}
            if in_cases[0]:
                raise _Stopped(in_cases[0])
            in_cases[0] = None
            print(f"[kueue-harness] the cases are done (pytest exit code {cases['exit']}); keeping the environment "
                  f"as session {name}", flush=True)
        # Process faults (restart_kueue) and delayed watch events of the session's plans, loaded now or
        # later with `plan load`, need the harness side too (harness/nemesis/runner.py); before any plan loads.
        from harness.nemesis.runner import Nemesis

        # Kueue's start count when the session's own Nemesis takes over: restarts after it are the session's
        # process faults (a session bundle's kueue_not_restarted_unasked: harness/cli/bundle.py).
        kueue_baseline = {"starts": env.kueue_starts(), "since": time.time()}
        nemesis = Nemesis.for_session(env, say=lambda line: print(line, flush=True)).start()
        # Expired holds and rules that match nothing go to the session log as they happen (harness/proxy/notices.py).
        from harness.proxy.notices import EventFollower, notice

        follower = EventFollower(env.proxy.events_file)
        if plan is not None:
            env.proxy.load_plan(plan, by="up --plan")
            print(f"[kueue-harness] plan {plan.name} loaded: {', '.join(r.id for r in plan.rules)}", flush=True)
        me = os.getpid()
        previous = json.loads(session_file(name).read_text()) if session_file(name).is_file() else {}
        data = {
            "name": name,
            "phase": "running",
            "supervisor": {"pid": me, "start": proc_start_time(me)},
            "up": previous.get("up"),
            "log": str(art / "session.log"),
            "kueue_version": env.kueue_version,
            "kueue": env.kueue_build_info(),
            "api_url": env.api_url,
            "admin_kubeconfig": str(env.admin_kubeconfig),
            "kubectl": str(kubectl) if kubectl else None,
            "proxy_url": env.proxy.url,
            "control_port": env.proxy.control_port,
            "control_token_file": str(env.state / "control.token"),
            "web_url": env.proxy.web_url,
            "artifacts": str(art),
            "state": str(env.state),
            "kueue_log": str(env.kueue_log),
            "kueue_baseline": kueue_baseline,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            # kube-scheduler's and kwok's versions when Pods run (up --pods, or a case of run --keep-env asked).
            "pods": env.pods_info(),
        }
        if cases is not None:
            data["cases"] = cases
        # Ready: from now on the session outlives `up`, so `up` exiting must no longer stop it.
        _prctl_pdeathsig(0)
        starting[0] = False
        _write(name, data)
        reported: set[str] = set()
        while not stop_event.wait(1):
            for ev in follower.read():
                line = notice(ev)
                if line:
                    print(line, flush=True)
            for proc_name in list(env.procs.procs):
                if nemesis.busy():
                    break  # a plan's process fault is restarting Kueue: not an exit
                if proc_name not in reported and not env.procs.alive(proc_name):
                    reported.add(proc_name)
                    print(f"[kueue-harness] {proc_name} exited (see {env.artifacts}); the session keeps running for "
                          f"inspection: `kueue-harness status{name_option(name)}`, then "
                          f"`kueue-harness down{name_option(name)}`", flush=True)
    finally:
        starting[0] = False
        if nemesis is not None:
            nemesis.stop(timeout=60)
        env.stop()
        try:
            if json.loads(session_file(name).read_text()).get("supervisor", {}).get("pid") == os.getpid():
                session_file(name).unlink()
        except (OSError, ValueError):
            pass
        print(f"[kueue-harness] session {name} stopped", flush=True)
    return 0


def _run_cases(env: Any, pytest_args: list[str]) -> int:
    """Run pytest with `pytest_args` in this process on `env` (the session's environment, which the cases
    then use instead of starting their own and leave running). Returns pytest's exit code."""
    import pytest

    from harness.scenarios import plugin as pytest_plugin

    pytest_plugin.PROVIDED_ENV = env
    try:
        return int(pytest.main(pytest_args))
    finally:
        pytest_plugin.PROVIDED_ENV = None


def _kubectl_or_none() -> Path | None:
    """kubectl for the session's printout, or None when it would need Go and Go is not there (a
    session whose binaries all come from KUEUE_HARNESS_* variables does not need Go)."""
    k = binaries.kubectl_if_buildable()
    if k is None:
        print("[kueue-harness] no kubectl of the pinned version (Go is not on PATH to build it; "
              "KUEUE_HARNESS_KUBECTL names one): use your own kubectl", flush=True)
    return k


def main(argv: list[str] | None = None) -> int:
    """The supervisor process (`python -m harness.cli.session`, started by `kueue-harness up`)."""
    ap = argparse.ArgumentParser(description="kueue-harness session supervisor (started by `kueue-harness up`)")
    ap.add_argument("--name", default=DEFAULT_NAME)
    ap.add_argument("--owner", type=int, help="pid of the `kueue-harness up` that owns this supervisor until ready")
    ap.add_argument("--kueue-version")
    ap.add_argument("--kueue-ref")
    ap.add_argument("--kueue-source")
    ap.add_argument("--kueue-repo")
    ap.add_argument("--kueue-patch", action="append")
    ap.add_argument("--kueue-race", action="store_true")
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--plan")
    ap.add_argument("--ui", action="store_true")
    ap.add_argument("--pods", action="store_true", help="start kube-scheduler and kwok too (Pods that run)")
    ap.add_argument("--kueue-config", help="a Kueue configuration file (docs/kueue-config.md)")
    ap.add_argument("--intercept")
    ap.add_argument("--cases", help="JSON list of pytest arguments: run those cases on the environment first")
    args = ap.parse_args(argv)
    try:
        return _serve(args)
    except _Stopped as e:
        # The starting record `up` wrote names this process; nobody is left to remove it when `up` died.
        try:
            f = session_file(args.name)
            if json.loads(f.read_text()).get("supervisor", {}).get("pid") == os.getpid():
                f.unlink()
        except (OSError, ValueError, HarnessError):
            pass
        print(f"[kueue-harness] {signal.Signals(e.signum).name} while starting: stopped everything the session "
              "had started", flush=True)
        return 128 + e.signum
    except HarnessError as e:
        print(f"kueue-harness: {e}", flush=True)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
