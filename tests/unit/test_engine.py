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
