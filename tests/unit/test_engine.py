"""harness/env/engine.py without a daemon: the capability bounding set read from /proc status text, and
the runtime shim (the real Go program, built here) deleting CAP_SYS_RESOURCE from an OCI spec on create
and from a process file on exec, then exec'ing "runc" (a script here that records what it got)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from harness.env import engine

STATUS = "Name:\tpython\nCapInh:\t0000000000000000\nCapBnd:\t{}\nCapAmb:\t0000000000000000\n"


def test_sandbox_bounding_set_lacks_sys_resource():
    assert engine.lacks_sys_resource(STATUS.format("000001fffeffffff"))  # measured in the sandbox
    assert not engine.lacks_sys_resource(STATUS.format("000001ffffffffff"))  # a normal root process


def test_missing_capbnd_is_an_error():
    with pytest.raises(ValueError, match="CapBnd"):
        engine.bounding_set("Name:\tx\n")


CAPS = ["CAP_CHOWN", "CAP_SYS_RESOURCE", "CAP_SYS_ADMIN"]


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain on PATH: the shim is a Go program")
    d = tmp_path_factory.mktemp("shim")
    fake = d / "runc"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {d}/args\n")
    fake.chmod(0o755)
    (d / "go.mod").write_text("module shimtest\n\ngo 1.22\n")
    (d / "main.go").write_text(engine.SHIM_GO)
    subprocess.run([go, "build", "-ldflags", f"-X main.runc={fake}", "-o", str(d / "shim"), "."], cwd=d,
                   check=True, capture_output=True, timeout=300)
    return d


def test_create_drops_sys_resource_from_the_bundle(shim, tmp_path):
    spec = {"ociVersion": "1.0.2", "process": {"args": ["sh"], "capabilities": {
        s: list(CAPS) for s in ("bounding", "effective", "inheritable", "permitted", "ambient")}}}
    (tmp_path / "config.json").write_text(json.dumps(spec))
    subprocess.run([str(shim / "shim"), "--root", "/run/x", "create", "--bundle", str(tmp_path), "--pid-file",
                    "p", "ctr1"], check=True, timeout=30)
    got = json.loads((tmp_path / "config.json").read_text())
    for s, caps in got["process"]["capabilities"].items():
        assert caps == ["CAP_CHOWN", "CAP_SYS_ADMIN"], s
    assert got["process"]["args"] == ["sh"] and got["ociVersion"] == "1.0.2"
    assert (shim / "args").read_text().split() == ["--root", "/run/x", "create", "--bundle", str(tmp_path),
                                                    "--pid-file", "p", "ctr1"]


def test_exec_drops_sys_resource_from_the_process_file(shim, tmp_path):
    proc = tmp_path / "process.json"
    proc.write_text(json.dumps({"args": ["ls"], "capabilities": {"bounding": list(CAPS), "effective": list(CAPS)}}))
    subprocess.run([str(shim / "shim"), "exec", "--process", str(proc), "--detach", "ctr1"], check=True, timeout=30)
    got = json.loads(proc.read_text())
    assert got["capabilities"]["bounding"] == ["CAP_CHOWN", "CAP_SYS_ADMIN"]
    assert got["capabilities"]["effective"] == ["CAP_CHOWN", "CAP_SYS_ADMIN"]


def test_other_commands_pass_through(shim, tmp_path):
    subprocess.run([str(shim / "shim"), "state", "ctr1"], check=True, timeout=30)
    assert (shim / "args").read_text().split() == ["state", "ctr1"]


def test_an_engine_that_answers_is_reused_and_never_stopped(monkeypatch):
    """A second run finds the daemon (its own socket here) and uses it: nothing is installed or started, and
    stop() leaves it alone."""
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    asked: list[str] = []
    monkeypatch.setattr(engine, "_answers", lambda host, timeout=20: asked.append(host) or host == engine.own_host())
    monkeypatch.setattr(engine, "start_daemon", lambda *a, **k: pytest.fail("started a second daemon"))
    monkeypatch.setattr(engine, "install_packages", lambda *a, **k: pytest.fail("installed packages"))
    eng = engine.ensure(say=lambda line: None)
    assert eng.host == engine.own_host() and not eng.started_here
    assert asked == [engine.DEFAULT_SOCKET, engine.own_host()]
    import os

    assert os.environ["DOCKER_HOST"] == engine.own_host()
    eng.stop()  # a no-op: not started here


def test_install_without_root_says_what_to_do(monkeypatch):
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    with pytest.raises(engine.HarnessError, match="not root.*install docker.io iptables"):
        engine.install_packages(engine.PACKAGES, lambda line: None, "Docker (dockerd)")


def test_dockerd_iptables_are_removed_and_others_kept(monkeypatch):
    """What dockerd 20.10 wrote here (iptables -S, measured), beside a rule of someone else's: the DOCKER*
    chains and the rules that jump to them or name docker0 go, the other rule stays, FORWARD back to ACCEPT."""
    from types import SimpleNamespace

    tables = {"nat": "-P PREROUTING ACCEPT\n-N DOCKER\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n"
                     "-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n-A DOCKER -i docker0 -j RETURN\n"
                     "-A POSTROUTING -s 10.9.0.0/16 -j MASQUERADE\n",
              "filter": "-P FORWARD DROP\n-N DOCKER\n-N DOCKER-USER\n-A FORWARD -j DOCKER-USER\n"
                        "-A FORWARD -o docker0 -j DOCKER\n-A DOCKER-USER -j RETURN\n"}
    calls: list[list[str]] = []

    def run(argv, **kw):
        calls.append(argv)
        if argv[1:2] == ["-t"] and argv[3] == "-S":
            return SimpleNamespace(stdout=tables[argv[2]], returncode=0)
        if argv[1:] == ["-S", "FORWARD"]:
            return SimpleNamespace(stdout="-P FORWARD DROP\n", returncode=0)
        return SimpleNamespace(stdout="", returncode=0)

    monkeypatch.setattr(engine.subprocess, "run", run)
    assert engine.remove_docker_iptables("ACCEPT", lambda line: None) == 7  # 4 rules deleted, 3 chains
    deleted = [c[4:] for c in calls if len(c) > 3 and c[3] == "-D"]
    assert ["PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"] in deleted
    assert ["POSTROUTING", "-s", "172.17.0.0/16", "!", "-o", "docker0", "-j", "MASQUERADE"] in deleted
    assert not any("10.9.0.0/16" in c for c in calls)
    assert [c for c in calls if "-X" in c] == [["iptables", "-t", "nat", "-X", "DOCKER"],
                                               ["iptables", "-t", "filter", "-X", "DOCKER"],
                                               ["iptables", "-t", "filter", "-X", "DOCKER-USER"]]
    assert ["iptables", "-P", "FORWARD", "ACCEPT"] in calls


def test_the_last_run_out_stops_the_harness_daemon_never_one_under_another_cluster(monkeypatch, tmp_path):
    """`engine down` after one --keep-env run stopped the engine under another run's kind cluster, which failed.
    Now a run's end (release) and `down` stop it only when nothing runs on it and it is not kept."""
    stopped, said = [], []

    class Own:
        pid, host = 4242, "unix:///x.sock"
        say = None

        def stop(self):
            stopped.append(self.pid)

    monkeypatch.setattr(engine, "RUN_DIR", tmp_path)
    monkeypatch.setattr(engine, "find_own", lambda: Own())
    monkeypatch.setattr(engine, "users", lambda host: ["kind-b-control-plane (kind cluster b)"])
    engine.release(said.append)
    assert stopped == [] and "still used by kind-b-control-plane (kind cluster b)" in said[-1]
    assert engine.main(["down"]) == 1 and stopped == []  # refused, naming the user
    assert engine.main(["down", "--force"]) == 0 and stopped == [4242]
    monkeypatch.setattr(engine, "users", lambda host: [])
    (tmp_path / engine.KEPT_MARK).write_text("1\n")
    engine.release(said.append)
    assert stopped == [4242] and "started to be kept" in said[-1]
    (tmp_path / engine.KEPT_MARK).unlink()
    engine.release(said.append)
    assert stopped == [4242, 4242]  # nothing on it, not kept: the last run out stops it
