"""The container engine of the kind target, started by the harness itself where none runs: Docker from
Debian's `docker.io` package (dockerd 20.10, its own containerd 1.6, runc 1.1), its data under the harness
cache, stopped again by its PID when the run ends.

Why: kind needs a container engine; a CI machine or sandbox without systemd has the package but nothing
starts the daemon (Debian's postinst: "invoke-rc.d: policy-rc.d denied execution of start"). `ensure()`:
1. Reuses an engine that answers: $DOCKER_HOST or the default socket (someone else's: never stopped here),
   else the harness's own socket `RUN_DIR/docker.sock` (a daemon an earlier run kept, `--keep-env`).
2. Installs `docker.io iptables` with apt-get when `dockerd` is missing (root only; else says what to do).
3. **A sandbox workaround, only where needed**: when this process's capability bounding set lacks
   CAP_SYS_RESOURCE (`CapBnd` in /proc/self/status: seen in Firecracker sandboxes), a privileged container
   cannot start ("runc create failed: unable to start container process: unable to apply caps: operation
   not permitted"; Docker 20.10 ignores `--cap-drop` for privileged containers). Then dockerd gets a
   default runtime `kueue-harness-runc` (`--add-runtime`, `--default-runtime`): a small Go program built
   here that deletes CAP_SYS_RESOURCE from the OCI spec's capability sets (the bundle's config.json on
   create/run, the --process file on exec) and execs runc. Nothing changes on a normal machine.
4. Starts `dockerd --data-root <cache>/docker/data --exec-root RUN_DIR/exec --pidfile RUN_DIR/dockerd.pid
   -H unix://RUN_DIR/docker.sock`, log `<cache>/logs/dockerd.log`, awaits `docker info`, and sets
   DOCKER_HOST in this process's environment so kind and the docker CLI use it.
`Engine.stop()` stops a daemon this run started (SIGTERM to its PID: dockerd stops its containers and its
containerd; SIGKILL to the process group after 30 s) and nothing else.

CLI: `python -m harness.env.engine up [--keep] | down | status` (ci/ scripts).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.common.errors import EnvironmentNotReady, HarnessError
from harness.common.paths import cache_root
from harness.common.procs import _die_with_parent, is_alive, proc_start_time
from harness.common.waiting import WaitTimeout, wait_for

Say = Callable[[str], None]

#: Capability number of CAP_SYS_RESOURCE (linux/capability.h).
CAP_SYS_RESOURCE = 24
#: Where the harness's own daemon keeps its sockets (short: unix socket paths are limited to 108 bytes).
RUN_DIR = Path(os.environ.get("KUEUE_HARNESS_DOCKER_RUN", "/run/kueue-harness-docker"))
#: In RUN_DIR while the harness's own daemon was started to be kept (`keep`): runs ending leave it running.
KEPT_MARK = "kept"
RUNTIME_NAME = "kueue-harness-runc"
PACKAGES = ("docker.io", "iptables")
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def _say(line: str) -> None:
    print(f"[kueue-harness] {line}", file=sys.stderr, flush=True)


def bounding_set(status_text: str) -> int:
    """The capability bounding set (CapBnd, hexadecimal) from /proc/<pid>/status text. Raises ValueError
    when the line is missing."""
    for line in status_text.splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise ValueError("no CapBnd line in the status text")


def lacks_sys_resource(status_text: str | None = None) -> bool:
    """True when this process (or the given /proc/self/status text) cannot hand CAP_SYS_RESOURCE to a
    container: its bit is clear in the bounding set."""
    text = status_text if status_text is not None else Path("/proc/self/status").read_text()
    return not bounding_set(text) >> CAP_SYS_RESOURCE & 1


def _answers(host: str, timeout: float = 20) -> bool:
    """True when `docker info` works against `host` (a DOCKER_HOST value)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        p = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "DOCKER_HOST": host}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False
    return p.returncode == 0 and bool(p.stdout.strip())


# ---- the runtime shim (sandboxes only) ---------------------------------------------------------------
SHIM_GO = r'''// kueue-harness-runc: dockerd's runtime on machines whose capability bounding set lacks
// CAP_SYS_RESOURCE (harness/env/engine.py). It deletes that capability from the OCI spec runc is about to
// apply (the bundle's config.json for create/run, the --process file for exec) and execs runc.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

var runc = "/usr/sbin/runc" // set with -ldflags -X main.runc=...

func drop(caps map[string]interface{}) {
	for _, set := range []string{"bounding", "effective", "inheritable", "permitted", "ambient"} {
		list, ok := caps[set].([]interface{})
		if !ok {
			continue
		}
		kept := list[:0]
		for _, c := range list {
			if c != "CAP_SYS_RESOURCE" {
				kept = append(kept, c)
			}
		}
		caps[set] = kept
	}
}

func edit(path string, process bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return // runc itself reports a missing spec
	}
	var doc map[string]interface{}
	if json.Unmarshal(data, &doc) != nil {
		return
	}
	proc := doc
	if !process {
		p, ok := doc["process"].(map[string]interface{})
		if !ok {
			return
		}
		proc = p
	}
	caps, ok := proc["capabilities"].(map[string]interface{})
	if !ok {
		return
	}
	drop(caps)
	out, err := json.Marshal(doc)
	if err == nil {
		os.WriteFile(path, out, 0o600)
	}
}

func value(args []string, i int, long, short string) (string, bool) {
	a := args[i]
	if strings.HasPrefix(a, long+"=") {
		return strings.TrimPrefix(a, long+"="), true
	}
	if (a == long || a == short) && i+1 < len(args) {
		return args[i+1], true
	}
	return "", false
}

func main() {
	args := os.Args[1:]
	cmd := ""
	for _, a := range args {
		if a == "create" || a == "run" || a == "exec" {
			cmd = a
			break
		}
	}
	bundle := ""
	for i := range args {
		if v, ok := value(args, i, "--bundle", "-b"); ok && cmd != "exec" {
			bundle = v
		}
		if v, ok := value(args, i, "--process", "-p"); ok && cmd == "exec" {
			edit(v, true)
		}
	}
	if cmd == "create" || cmd == "run" {
		if bundle == "" {
			bundle, _ = os.Getwd()
		}
		edit(filepath.Join(bundle, "config.json"), false)
	}
	err := syscall.Exec(runc, append([]string{"runc"}, args...), os.Environ())
	os.Stderr.WriteString("kueue-harness-runc: exec " + runc + ": " + err.Error() + "\n")
	os.Exit(127)
}
'''


def build_shim(say: Say = _say) -> Path:
    """The runtime shim's binary (SHIM_GO built with the machine's Go against this machine's runc), cached
    by the hash of its source and runc's path. Raises HarnessError without Go or runc, BuildError."""
    from harness.build.go import _run_go, build_lock, go_binary

    runc = shutil.which("runc") or ("/usr/sbin/runc" if Path("/usr/sbin/runc").is_file() else None)
    if runc is None:
        raise HarnessError("runc is not installed (Debian's docker.io depends on it): `apt-get install runc`")
    digest = hashlib.sha256((SHIM_GO + runc).encode()).hexdigest()[:12]
    out = cache_root() / "bin" / f"{RUNTIME_NAME}-{digest}"
    if out.is_file():
        return out
    with build_lock(f"{RUNTIME_NAME}-{digest}"):
        if out.is_file():
            return out
        d = cache_root() / "build" / f"{RUNTIME_NAME}-{digest}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "go.mod").write_text("module kueueharness.local/build/runcshim\n\ngo 1.22\n")
        (d / "main.go").write_text(SHIM_GO)
        out.parent.mkdir(parents=True, exist_ok=True)
        (cache_root() / "logs").mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
        env_go = go_binary()
        with open(cache_root() / "logs" / f"{RUNTIME_NAME}.log", "w") as log:
            _run_go([env_go, "build", "-trimpath", "-ldflags", f"-s -w -X main.runc={runc}", "-o", str(tmp), "."],
                    d, log, "building the runtime shim", say)
        tmp.rename(out)
    return out


# ---- install, start, stop ----------------------------------------------------------------------------
def install_packages(packages: tuple[str, ...], say: Say = _say, what: str = "") -> None:
    """`apt-get install -y --no-install-recommends PACKAGES` (after `apt-get update`). Raises HarnessError
    saying what to install by hand when not root or without apt-get, or when apt fails."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise HarnessError(f"{what or ' '.join(packages)} is missing and cannot be installed here ("
                           f"{'not root' if apt else 'no apt-get'}): install {' '.join(packages)} (Debian/Ubuntu "
                           "package names), or run a container engine yourself and set DOCKER_HOST")
    say(f"installing {' '.join(packages)} from the distribution (apt-get, about 30 s)")
    t = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "--no-install-recommends", *packages]):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"`{' '.join(argv)}` did not finish in 15 min") from None
        if p.returncode != 0:
            tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-10:])
            raise HarnessError(f"`{' '.join(argv)}` exited {p.returncode}:\n{tail}")
    say(f"installed {' '.join(packages)} in {time.monotonic() - t:.0f}s")


@dataclass
class Engine:
    """A container engine that answers at `host` (a DOCKER_HOST value). `pid` is set only when this run
    started the daemon; stop() stops only that one."""

    host: str
    pid: int | None = None
    start_time: int | None = None
    shim: Path | None = None
    seconds: float = 0.0
    #: The default bridge (docker0) was made by the daemon started here: deleted again on stop().
    made_bridge: bool = False
    #: iptables' FORWARD policy before dockerd started (dockerd sets DROP); restored with made_bridge.
    forward_policy: str | None = "ACCEPT"
    say: Say = field(default=_say, repr=False)

    @property
    def started_here(self) -> bool:
        return self.pid is not None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the daemon this run started (SIGTERM; the process group SIGKILLed after `timeout` s) and
        remove its socket and pid file. A daemon found running is left alone."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        if not is_alive(pid, self.start_time):
            return
        os.kill(pid, signal.SIGTERM)
        try:
            wait_for(lambda: not is_alive(pid, self.start_time), timeout=timeout, interval=0.5,
                     what=f"dockerd (pid {pid}) to stop")
        except WaitTimeout:
            self.say(f"dockerd (pid {pid}) did not stop in {timeout:g}s: killing its process group")
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for f in ("docker.sock", "dockerd.pid", KEPT_MARK):
            (RUN_DIR / f).unlink(missing_ok=True)
        if self.made_bridge and Path("/sys/class/net/docker0").exists():
            # dockerd leaves its default bridge behind; this run made it, so it goes too.
            p = subprocess.run(["ip", "link", "delete", "docker0"], capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                self.say(f"could not delete the docker0 bridge dockerd made: {p.stderr.strip()}")
        if self.made_bridge:
            remove_docker_iptables(self.forward_policy, self.say)
        if os.environ.get("DOCKER_HOST") == self.host:
            del os.environ["DOCKER_HOST"]
        self.say(f"stopped dockerd (pid {pid})")


def users(host: str) -> list[str]:
    """What still runs on the engine at `host`: its running containers, "NAME (kind cluster C)" for a kind node.
    [] when none (or the engine does not answer)."""
    try:
        p = subprocess.run(["docker", "ps", "--format", '{{.Names}} {{.Label "io.x-k8s.kind.cluster"}}'],
                           capture_output=True, text=True, env={**os.environ, "DOCKER_HOST": host}, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0:
        return []
    out = []
    for line in p.stdout.splitlines():
        name, _, cluster = line.strip().partition(" ")
        if name:
            out.append(f"{name} (kind cluster {cluster})" if cluster.strip() else name)
    return out


def kept() -> bool:
    """Whether the harness's own daemon was started to outlive its run (`--keep-env`, `engine up`)."""
    return (RUN_DIR / KEPT_MARK).exists()


def release(say: Say = _say) -> None:
    """At the end of a run that used the harness's own daemon: stop it when it is not kept and nothing runs on it
    any more (another run's kind cluster, a kept cluster); otherwise leave it running and say who uses it. So the
    last run out stops it, whichever run started it (a run that stopped it under another run's cluster failed
    that run)."""
    own = find_own()
    if own is None:
        return
    own.say = say
    if kept():
        say(f"dockerd (pid {own.pid}) stays: it was started to be kept (`python -m harness.env.engine down` stops it)")
        return
    still = users(own.host)
    if still:
        say(f"dockerd (pid {own.pid}) stays: still used by {', '.join(still)}")
        return
    own.stop()


def iptables_policy(chain: str = "FORWARD") -> str | None:
    """The filter table's policy of `chain` ("ACCEPT", "DROP"), None without iptables."""
    try:
        p = subprocess.run(["iptables", "-S", chain], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = p.stdout.splitlines()[0].split() if p.returncode == 0 and p.stdout else []
    return first[2] if len(first) == 3 and first[0] == "-P" else None


def remove_docker_iptables(forward_policy: str | None, say: Say = _say) -> int:
    """Undo what dockerd wrote into iptables (its DOCKER* chains and the rules that jump to them or name
    docker0, in the nat and filter tables) and put the FORWARD policy back to `forward_policy` (dockerd
    sets DROP). Only for a daemon this run started on a host that had none (Engine.made_bridge). Returns
    how many rules and chains were removed."""
    removed = 0
    for table in ("nat", "filter"):
        try:
            rules = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return removed
        chains = [line.split()[1] for line in rules.splitlines() if line.startswith("-N DOCKER")]
        for line in rules.splitlines():
            words = line.split()
            if words[:1] == ["-A"] and not words[1].startswith("DOCKER") and ("docker0" in words or any(
                    w.startswith("DOCKER") for w in words[2:])):
                subprocess.run(["iptables", "-t", table, "-D", *words[1:]], capture_output=True, timeout=30)
                removed += 1
        for c in chains:
            subprocess.run(["iptables", "-t", table, "-F", c], capture_output=True, timeout=30)
        for c in chains:
            subprocess.run(["iptables", "-t", table, "-X", c], capture_output=True, timeout=30)
            removed += 1
    if forward_policy and iptables_policy() != forward_policy:
        subprocess.run(["iptables", "-P", "FORWARD", forward_policy], capture_output=True, timeout=30)
    if removed:
        say(f"removed dockerd's {removed} iptables rules and chains (FORWARD policy back to {forward_policy})")
    return removed


def own_host() -> str:
    return f"unix://{RUN_DIR / 'docker.sock'}"


def ensure(say: Say = _say, keep: bool = False) -> Engine:
    """An engine that answers: found (DOCKER_HOST, the default socket, the harness's own socket) or
    started here (module docstring). With `keep` a daemon started here is not tied to this process (it
    outlives it, for a kept cluster; `python -m harness.env.engine down` stops it). Sets DOCKER_HOST.
    Raises HarnessError (cannot install or start), EnvironmentNotReady (started but never answered)."""
    for host in filter(None, (os.environ.get("DOCKER_HOST"), DEFAULT_SOCKET, own_host())):
        if _answers(host):
            os.environ["DOCKER_HOST"] = host
            say(f"using the container engine at {host}")
            return Engine(host, say=say)
    if os.environ.get("KIND_EXPERIMENTAL_PROVIDER", "docker") != "docker":
        raise HarnessError(f"KIND_EXPERIMENTAL_PROVIDER={os.environ['KIND_EXPERIMENTAL_PROVIDER']}: start that "
                           "engine yourself (the harness starts only Docker)")
    if shutil.which("dockerd") is None:
        install_packages(PACKAGES, say, "Docker (dockerd)")
    return start_daemon(say, keep)


def start_daemon(say: Say = _say, keep: bool = False) -> Engine:
    """Start dockerd with the harness's paths (module docstring) and wait until it answers."""
    if os.geteuid() != 0:
        raise HarnessError("starting dockerd needs root: run as root, or start a container engine yourself "
                           "(rootless Docker, Podman) and set DOCKER_HOST")
    t0 = time.monotonic()
    data = cache_root() / "docker" / "data"
    data.mkdir(parents=True, exist_ok=True)
    RUN_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    (cache_root() / "logs").mkdir(parents=True, exist_ok=True)
    host = own_host()
    argv = [shutil.which("dockerd") or "dockerd", "--data-root", str(data), "--exec-root", str(RUN_DIR / "exec"),
            "--pidfile", str(RUN_DIR / "dockerd.pid"), "-H", host, "--log-level", "warn"]
    shim = None
    if lacks_sys_resource():
        shim = build_shim(say)
        argv += ["--add-runtime", f"{RUNTIME_NAME}={shim}", "--default-runtime", RUNTIME_NAME]
        say("this machine's capability bounding set lacks CAP_SYS_RESOURCE (a sandbox): privileged containers "
            f"run through {shim.name}, which drops that capability from their spec (harness/env/engine.py)")
    had_bridge = Path("/sys/class/net/docker0").exists()
    forward_policy = iptables_policy()
    log_path = cache_root() / "logs" / "dockerd.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=None if keep else _die_with_parent)
    eng = Engine(host, pid=proc.pid, start_time=proc_start_time(proc.pid), shim=shim, say=say,
                 made_bridge=not had_bridge, forward_policy=forward_policy)
    try:
        wait_for(lambda: proc.poll() is not None or _answers(host, 5), timeout=60, interval=0.5,
                 what="dockerd to answer `docker info`")
    except WaitTimeout:
        eng.stop()
        raise EnvironmentNotReady(f"dockerd did not answer in 60 s; its log: {log_path}") from None
    if proc.poll() is not None:
        eng.pid = None
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-10:])
        raise EnvironmentNotReady(f"dockerd exited {proc.returncode} at start; last lines of {log_path}:\n{tail}")
    eng.seconds = time.monotonic() - t0
    if keep:
        (RUN_DIR / KEPT_MARK).write_text(f"{os.getpid()}\n")
    else:
        (RUN_DIR / KEPT_MARK).unlink(missing_ok=True)
    os.environ["DOCKER_HOST"] = host
    say(f"started dockerd (pid {proc.pid}, data {data}) in {eng.seconds:.1f}s; it stops with this run"
        + (" unless kept" if keep else ""))
    return eng


def find_own() -> Engine | None:
    """The harness's own daemon when one runs (pid file + answering socket): for `down`."""
    pidfile = RUN_DIR / "dockerd.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    if not is_alive(pid, None):
        return None
    return Engine(own_host(), pid=pid, start_time=proc_start_time(pid), made_bridge=True)


def leftovers(cluster: str, since: float | None = None) -> list[str]:
    """What a kind run may have left: the harness's own dockerd (when it started after `since`, epoch
    seconds), and, on any engine that answers, containers of kind cluster `cluster` and the `kind` network."""
    out = []
    own = find_own()
    if own is not None and own.pid is not None:
        started = os.stat(f"/proc/{own.pid}").st_ctime
        if since is None or started >= since:
            out.append(f"the harness's dockerd (pid {own.pid}) still runs")
    for host in filter(None, (os.environ.get("DOCKER_HOST"), DEFAULT_SOCKET, own_host())):
        if not _answers(host):
            continue
        env = {**os.environ, "DOCKER_HOST": host}
        ps = subprocess.run(["docker", "ps", "-a", "--filter", f"label=io.x-k8s.kind.cluster={cluster}",
                             "--format", "{{.Names}}"], capture_output=True, text=True, env=env, timeout=60)
        out += [f"container {n} ({host})" for n in ps.stdout.split()]
        net = subprocess.run(["docker", "network", "ls", "--filter", "name=^kind$", "--format", "{{.Name}}"],
                             capture_output=True, text=True, env=env, timeout=60)
        out += [f"network {n} ({host})" for n in net.stdout.split()]
        break
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.env.engine up [--keep] | down | status | leftovers [--cluster N] [--since T]`."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m harness.env.engine",
                                description="The container engine the kind target uses (harness/env/engine.py).")
    p.add_argument("cmd", choices=["up", "down", "status", "leftovers"],
                   help="up: find or start one (prints its DOCKER_HOST; it keeps running); down: stop the harness's "
                        "own daemon (refused while containers run on it: it says which); status: say which answers; leftovers: list what a kind run left (exit 1 if any)")
    p.add_argument("--cluster", default="kueue-harness", help="leftovers: the kind cluster's name")
    p.add_argument("--force", action="store_true", help="down: stop it even while containers still run on it")
    p.add_argument("--since", type=float, help="leftovers: a harness dockerd started before this epoch time is "
                                               "not this run's")
    a = p.parse_args(argv)
    if a.cmd == "leftovers":
        left = leftovers(a.cluster, a.since)
        for line in left:
            print(f"left behind: {line}")
        return 1 if left else 0
    if a.cmd == "up":
        print(ensure(keep=True).host)
        return 0
    if a.cmd == "down":
        eng = find_own()
        if eng is None:
            print("the harness's own dockerd is not running")
            return 0
        still = users(eng.host)
        if still and not a.force:
            print(f"the harness's dockerd (pid {eng.pid}) is still used by: {', '.join(still)}; stop those first "
                  "(`kind delete cluster --name NAME` for a kept cluster), or give --force")
            return 1
        eng.stop()
        return 0
    for host in filter(None, (os.environ.get("DOCKER_HOST"), DEFAULT_SOCKET, own_host())):
        print(f"{host}: {'answers' if _answers(host) else 'no answer'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
