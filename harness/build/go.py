"""How a component is built with the machine's Go: one small module of ours per binary (go.mod + tools.go or
a wrapper main) that requires the upstream module, `go mod tidy` and `go build` run in their own process
group with a progress line every 20 s, under a lock between harness processes, into the cache.

Cache layout (root: $KUEUE_HARNESS_CACHE or ~/.cache/kueue-harness):
  build/<name>-<version>/   our own small Go module (go.mod + tools.go) that requires the upstream module
  bin/<name>-<version>      the built binary, renamed into place only after a successful build
  logs/<name>-<version>.log Go's full output of the last build
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from harness.build import integrity
from harness.common.errors import BuildError, HarnessError
from harness.common.paths import cache_root
from harness.common.procs import _die_with_parent
from harness.kueue import versions

Progress = Callable[[str], None]


def _default_progress(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


def go_binary() -> str:
    """Path of a Go toolchain >= versions.MIN_GO.

    Raises HarnessError when Go is missing or too old, saying how to fix it.
    """
    go = shutil.which("go")
    need = ".".join(map(str, versions.MIN_GO))
    if go is None:
        raise HarnessError(
            f"Go is not on PATH: install Go >= {need} (the real components are built from their Go "
            "modules), or point KUEUE_HARNESS_KUEUE_BINARY, KUEUE_HARNESS_KUBE_APISERVER, "
            "KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER and KUEUE_HARNESS_ETCD at binaries you have (for Pods that run "
            "also KUEUE_HARNESS_KUBE_SCHEDULER and KUEUE_HARNESS_KWOK)."
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    if not m or (int(m.group(1)), int(m.group(2))) < versions.MIN_GO:
        raise HarnessError(
            f"{go} reports {out or 'no version'}; the builds need Go >= {need} "
            "(Kueue 0.17's go.mod says go 1.25.0). Install a newer Go or put it first on PATH."
        )
    return go


@dataclass(frozen=True)
class GoTarget:
    """One binary built from a Go module.

    `name`: cache name ("kueue"); `version`: pinned version; `go_mod`: our module's go.mod text;
    `main_pkg`: package path to build, or None when `main_go` (a wrapper main package) is given;
    `ldflags`: -X flags; `override_env`: variable that names a prebuilt binary instead.
    """

    name: str
    version: str
    go_mod: str
    imports: tuple[str, ...]
    main_pkg: str | None
    main_go: str | None
    ldflags: str
    override_env: str
    #: Built with Go's race detector (`go build -race`, cgo: needs a C compiler); cached apart ("-race").
    race: bool = False

    @property
    def key(self) -> str:
        """Its name in the cache: bin/<key>, build/<key>, logs/<key>.log."""
        return f"{self.name}-{self.version}" + ("-race" if self.race else "")


def _tools_go(imports: tuple[str, ...]) -> str:
    lines = "\n".join(f'\t_ "{i}"' for i in imports)
    return f"//go:build tools\n\npackage tools\n\nimport (\n{lines}\n)\n"


def _module_dir(go: str, module: str, version: str) -> Path:
    """Download `module@version` through the module proxy and return its folder in GOMODCACHE."""
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True
    )
    info = json.loads(proc.stdout or "{}") if proc.stdout.strip().startswith("{") else {}
    if proc.returncode != 0 or "Dir" not in info:
        raise BuildError(
            f"could not download {module}@{version} from the Go module proxy: "
            f"{info.get('Error') or proc.stderr.strip()[-600:]}. Check GOPROXY "
            f"(`go env GOPROXY`) and that {version} is served (`go list -m {module}@{version}`)."
        )
    return Path(info["Dir"])


#: Seconds between the lines said while waiting for another process's build lock.
LOCK_WAIT_INTERVAL = 20.0


def lock_holder(path: Path) -> str:
    """Who holds the lock file `path`, in words, from what its holder wrote there when it took it: "pid N
    (`kueue-harness run …`), since 02:41:07 (3 min 10 s ago)"; "another process" when that is not known
    (the holder has not written yet, or wrote nothing: an older harness)."""
    from harness.common.procs import is_alive

    try:
        info = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    pid = info.get("pid")
    if not isinstance(pid, int) or not is_alive(pid, info.get("start")):
        return "another process"
    since = info.get("since")
    when = (f", since {time.strftime('%H:%M:%S', time.localtime(since))} ({_duration(time.time() - since)} ago)"
            if isinstance(since, (int, float)) else "")
    return f"pid {pid} (`{info.get('command', '?')}`){when}"


def _command_line() -> str:
    """This process's command line as a person would type it ("kueue-harness run -k x", "pytest cases")."""
    first = sys.argv[0] if sys.argv else "?"
    name = ("kueue-harness" if first.endswith(("harness/cli/__main__.py", "kueue-harness")) else
            "pytest" if first.endswith(("pytest/__main__.py", "pytest")) else os.path.basename(first))
    return " ".join([name, *sys.argv[1:]])


@contextmanager
def build_lock(name: str, progress: Progress = _default_progress,
               interval: float = LOCK_WAIT_INTERVAL) -> Iterator[None]:
    """An exclusive lock between harness processes, so two of them never build the same binary into the
    same temp file or check out the same worktree at once (the second waits, then finds the cache).

    The holder writes into the lock file who it is (pid, start time, command line) and since when; a
    process that has to wait says so at once and then every `interval` seconds through `progress`: whose
    lock, which build (`name`, e.g. "kube-apiserver-v1.35.4"), since when (issue 24: minutes of silence)."""
    from harness.common.procs import proc_start_time

    d = cache_root() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{name}.lock"
    with open(path, "a+") as fh:  # never truncated before the lock is ours: the holder's note stays readable
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            t0 = time.monotonic()
            done = threading.Event()

            def say() -> None:
                first = True
                while True:
                    waited = "" if first else f", waited {_duration(time.monotonic() - t0)} so far"
                    first = False
                    progress(f"waiting for the build lock of {name} held by {lock_holder(path)}{waited} "
                             f"(it is building or checking out the same thing; this one then uses its result; "
                             f"lock file {path})")
                    if done.wait(interval):
                        return

            ticker = threading.Thread(target=say, name=f"lock-wait-{name}", daemon=True)
            ticker.start()
            try:
                fcntl.flock(fh, fcntl.LOCK_EX)
            finally:
                done.set()
                ticker.join()
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"pid": os.getpid(), "start": proc_start_time(os.getpid()), "what": name,
                                 "command": _command_line()[:200],
                                 "since": time.time()}))
            fh.flush()
        except OSError:
            pass  # the note is a courtesy to waiters; the lock itself holds
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _packages(lines: list[str]) -> int:
    """How many of `go build -v`'s output lines name a package it compiled (not "go: downloading …",
    "# pkg" headers or compiler messages)."""
    return sum(1 for line in lines if line.strip() and not line.startswith(("go: ", "#")) and " " not in line.strip())


def _stale_packages(cmd: list[str], cwd: Path, timeout: float = 120) -> int | None:
    """For a `go build [flags] PKG` command: how many packages it will compile, i.e. the dependencies of
    PKG that `go list -deps` with the same flags reports as stale (not in Go's build cache). That is
    what `go build -v` prints, one line each. None when it cannot be told (not a build, go list failed
    or took longer than `timeout` seconds)."""
    if len(cmd) < 3 or cmd[1] != "build":
        return None
    flags: list[str] = []
    rest = cmd[2:-1]
    i = 0
    while i < len(rest):
        if rest[i] == "-o":
            i += 2
            continue
        if rest[i] != "-v":
            flags.append(rest[i])
        i += 1
    try:
        out = subprocess.run([cmd[0], "list", "-deps", "-f", "{{if .Stale}}{{.ImportPath}}{{end}}", *flags, cmd[-1]],
                             cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return sum(1 for line in out.stdout.splitlines() if line.strip())


def _duration(seconds: float) -> str:
    """"45s", "3 min 20 s"."""
    s = int(round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


#: Seconds of recent progress a build's time left is estimated from (the rate of a whole build is not one rate:
#: module downloads, then many small packages, then a few big ones; the average since the start said "about 33 min
#: left" 12 s before a loaded build ended).
RATE_WINDOW = 120.0


def recent_rate(samples: list[tuple[float, int]], window: float = RATE_WINDOW) -> float | None:
    """Packages a second over the last `window` seconds of `samples` ((elapsed s, packages done), oldest first),
    or None while that stretch compiled fewer than 5 packages or is shorter than 20 s: no estimate then."""
    if len(samples) < 2:
        return None
    t1, d1 = samples[-1]
    t0, d0 = next(((t, d) for t, d in samples if t >= t1 - window), samples[0])
    if t1 - t0 < 20 or d1 - d0 < 5:
        return None
    return (d1 - d0) / (t1 - t0)


def progress_line(what: str, done: int, total: int | None, elapsed: float, rate: float | None = -1.0) -> str:
    """One build progress line: packages compiled so far, of `total` when known (with the share done and, when
    `rate` (packages a second, recent_rate) is known, the time left at it, linking not included), and the elapsed
    time. `elapsed` in seconds; `rate` -1: the average since the start (callers with no samples)."""
    if not total or done > total:
        return f"{what}: {done} packages compiled, {_duration(elapsed)} elapsed"
    line = f"{what}: {done}/{total} packages ({100 * done // total}%), {_duration(elapsed)} elapsed"
    if rate == -1.0:
        rate = done / elapsed if done >= 10 and elapsed > 0 else None
    if rate:
        line += f", about {_duration((total - done) / rate)} left at the last minutes' rate (then linking)"
    return line


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _run_go(cmd: list[str], cwd: Path, log, what: str, progress: Progress, interval: float = 20.0) -> None:
    """Run a Go command in its own process group, teeing its output to `log`.

    Every `interval` seconds a progress line (progress_line): for `go build`, packages compiled of how
    many need compiling (_stale_packages) with an estimate of the time left; for `go mod`, the modules
    downloaded so far. Go and its compilers are killed when this is interrupted (Ctrl-C, a signal
    handler's exception) or when the calling process dies (PR_SET_PDEATHSIG), so a stopped `up` or
    `build` leaves no compiler running. Raises BuildError with the tail of Go's output when it fails.
    """
    start = time.monotonic()
    lines: list[str] = []
    total = _stale_packages(cmd, cwd)
    if total is not None:
        progress(f"{what}: {total} packages to compile")
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    done = threading.Event()
    modules = len(cmd) > 1 and cmd[1] == "mod"

    def ticker() -> None:
        samples: list[tuple[float, int]] = []
        while not done.wait(interval):
            elapsed = time.monotonic() - start
            if modules:
                got = sum(1 for line in lines if line.startswith("go: downloading"))
                progress(f"{what}: {got} modules downloaded, {_duration(elapsed)} elapsed")
            else:
                samples.append((elapsed, _packages(lines)))
                progress(progress_line(what, samples[-1][1], total, elapsed, recent_rate(samples)))

    t = threading.Thread(target=ticker, daemon=True)
    t.start()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            log.write(line)
        rc = proc.wait()
    except BaseException:
        _kill_group(proc.pid)
        proc.wait()
        raise
    finally:
        done.set()
    if rc != 0:
        tail = "".join(l for l in lines if not l.startswith("go: downloading"))[-1500:]
        raise BuildError(
            f"{what} failed (exit {rc}) after {time.monotonic() - start:.0f}s. Read the full log, {log.name}; "
            "a module that cannot be downloaded points at the Go module proxy (`go env GOPROXY`). Last output:\n"
            f"{tail}"
        )


def build(target: GoTarget, progress: Progress = _default_progress) -> Path:
    """Return the path of `target`'s binary, building it if the cache lacks it.

    Honours `target.override_env` (a path to an existing binary). Raises BuildError with Go's output
    when a step fails, HarnessError when Go is missing.
    """
    override = os.environ.get(target.override_env)
    if override:
        p = Path(override)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise HarnessError(f"{target.override_env}={override} is not an executable file: point it at the "
                               f"{target.name} binary (`chmod +x` it), or unset it to have it built")
        return p
    root = cache_root()
    out = root / "bin" / target.key
    if out.is_file() and _intact(out, progress):
        return out
    with build_lock(target.key, progress):
        if out.is_file() and _intact(out, progress):  # another process built it while this one waited
            return out
        built = _build_locked(target, root, out, progress)
        integrity.write_record(built)
        return built


def _intact(binary: Path, progress: Progress) -> bool:
    """False (and the damaged binary removed, said through `progress`) when `binary` is not what was
    built (harness/build/integrity.py); True otherwise."""
    why = integrity.check_cached(binary)
    if why is None:
        return True
    progress(f"the cached {binary} is damaged ({why}); removing it and building it again")
    binary.unlink(missing_ok=True)
    integrity.record_path(binary).unlink(missing_ok=True)
    return False


def _build_locked(target: GoTarget, root: Path, out: Path, progress: Progress) -> Path:
    go = go_binary()
    bdir = root / "build" / target.key
    bdir.mkdir(parents=True, exist_ok=True)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "logs").mkdir(parents=True, exist_ok=True)
    (bdir / "go.mod").write_text(target.go_mod)
    if target.main_go:
        (bdir / "main.go").write_text(target.main_go)
    else:
        (bdir / "tools.go").write_text(_tools_go(target.imports))
    what = f"building {target.name} {target.version}"
    progress(f"{what} with {go} (cold builds take minutes; log: {root / 'logs'})")
    start = time.monotonic()
    with open(root / "logs" / f"{target.key}.log", "w") as log:
        _run_go([go, "mod", "tidy"], bdir, log, f"{what}: resolving modules", progress)
        # Not out.with_suffix(): "kueue-v0.16.6" and "kueue-v0.16.9" would share "kueue-v0.16.tmp".
        tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
        pkg = target.main_pkg or "."
        _run_go(
            [go, "build", "-v", "-trimpath", *(["-race"] if target.race else []), "-ldflags", target.ldflags,
             "-o", str(tmp), pkg],
            bdir, log, what, progress,
        )
    tmp.rename(out)
    progress(f"built {out} in {time.monotonic() - start:.0f}s")
    return out
