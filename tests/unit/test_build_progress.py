"""Build progress lines (a total and an estimate of the time left), Go killed when a build is interrupted,
per-target temp files, kubectl built by `run`/`build`, and no Go needed when every binary is given.

Go itself never runs here: a fake `go` script stands in where a command must run.
"""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import pytest

from harness.build import binaries
from harness.build import go as go_build
from harness.build import kueue as kueue_build
from harness.cli import commands as cli
from harness.common.procs import is_alive
from harness.common.waiting import wait_for
from harness.kueue import versions


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


# ---- progress lines ----------------------------------------------------------------------------------

def test_progress_line_with_a_total_gives_the_share_and_the_time_left() -> None:
    line = go_build.progress_line("building kube-apiserver v1.35.4", 500, 2000, 100.0)
    assert line == ("building kube-apiserver v1.35.4: 500/2000 packages (25%), 1 min 40 s elapsed, "
                    "about 5 min 00 s left at the last minutes' rate (then linking)")


def test_time_left_comes_from_the_recent_rate_or_is_not_said() -> None:
    """A loaded build said "about 33 min left" 12 s before it ended: the average since the start is not the rate
    of the last packages. The estimate uses the last RATE_WINDOW seconds, and none while they show little."""
    samples = [(20.0 * i, 10 * i) for i in range(1, 10)] + [(200.0, 400), (220.0, 700)]  # fast at the end
    rate = go_build.recent_rate(samples)
    assert rate is not None and rate > 5  # the recent stretch, not 700/220 ≈ 3.2 a second
    assert "left" not in go_build.progress_line("b", 700, 800, 220.0, go_build.recent_rate([(0.0, 0), (10.0, 3)]))


def test_progress_line_without_a_usable_total() -> None:
    assert go_build.progress_line("b", 7, None, 20.0) == "b: 7 packages compiled, 20s elapsed"
    # More compiled than estimated (the estimate missed some): no share, no time left.
    assert go_build.progress_line("b", 30, 20, 20.0) == "b: 30 packages compiled, 20s elapsed"
    # Too few packages in to extrapolate from.
    assert go_build.progress_line("b", 3, 100, 20.0) == "b: 3/100 packages (3%), 20s elapsed"


def test_package_lines_are_counted_not_downloads_or_compiler_messages() -> None:
    lines = ["go: downloading k8s.io/api v0.35.4\n", "k8s.io/api/core/v1\n", "# k8s.io/x\n",
             "./x.go:1:2: something failed here\n", "sigs.k8s.io/kueue/cmd/kueue\n", "\n"]
    assert go_build._packages(lines) == 2


def test_stale_packages_asks_go_list_with_the_build_flags(tmp_path: Path) -> None:
    args = tmp_path / "args"
    go = _script(tmp_path / "go", f'echo "$@" > {args}\nprintf "a\\nb\\n\\nc\\n"')
    n = go_build._stale_packages([str(go), "build", "-v", "-trimpath", "-mod=mod", "-ldflags", "-X a=b", "-o",
                                  str(tmp_path / "out"), "./cmd/kueue"], tmp_path)
    assert n == 3
    assert args.read_text().split() == ["list", "-deps", "-f", "{{if", ".Stale}}{{.ImportPath}}{{end}}", "-trimpath",
                                        "-mod=mod", "-ldflags", "-X", "a=b", "./cmd/kueue"]


def test_stale_packages_is_none_when_it_cannot_be_told(tmp_path: Path) -> None:
    assert go_build._stale_packages([str(_script(tmp_path / "go", "exit 1")), "build", "x"], tmp_path) is None
    assert go_build._stale_packages(["go", "mod", "tidy"], tmp_path) is None


def test_run_go_reports_progress_against_the_total(tmp_path: Path) -> None:
    # `go list` says 4 packages need compiling; the "build" prints them, then waits for the test's signal.
    gate = tmp_path / "gate"
    go = _script(tmp_path / "go", f"""case "$1" in
list) printf "p1\\np2\\np3\\np4\\n" ;;
build) printf "p1\\np2\\n"; while [ ! -e {gate} ]; do sleep 0.05; done; printf "p3\\np4\\n" ;;
esac""")
    lines: list[str] = []

    def progress(line: str) -> None:
        lines.append(line)
        if "2/4 packages (50%)" in line:
            gate.touch()

    go_build._run_go([str(go), "build", "-v", "-o", str(tmp_path / "out"), "."], tmp_path, io.StringIO(), "building x",
                     progress, interval=0.05)
    assert lines[0] == "building x: 4 packages to compile"
    assert any(line.startswith("building x: 2/4 packages (50%), ") for line in lines), lines


def test_an_interrupted_build_kills_go(tmp_path: Path) -> None:
    """Ctrl-C (or a stop signal's exception in a session supervisor) while Go builds: Go must not go on."""
    pidfile = tmp_path / "go.pid"
    go = _script(tmp_path / "go", f'[ "$1" = list ] && exit 1\necho $$ > {pidfile}\necho p1\nexec sleep 300')

    class Log(io.StringIO):
        def write(self, s: str) -> int:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        go_build._run_go([str(go), "build", "-v", "."], tmp_path, Log(), "building x", lambda s: None, interval=60)
    pid = int(pidfile.read_text())
    try:
        wait_for(lambda: not is_alive(pid, None), timeout=5, what="the interrupted go to be killed")
    finally:
        if is_alive(pid, None):
            os.kill(pid, signal.SIGKILL)


def test_patch_versions_of_one_target_build_into_different_temp_files(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """kueue-v0.16.6 and kueue-v0.16.9 used to share kueue-v0.16.tmp (Path.with_suffix), and their builds
    hold different locks, so two at once could write one file."""
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path))
    monkeypatch.setattr(go_build, "go_binary", lambda: "go")
    outs: list[str] = []

    def fake_run_go(cmd, cwd, log, what, progress, interval=20.0):
        if cmd[1] == "build":
            out = cmd[cmd.index("-o") + 1]
            outs.append(out)
            Path(out).write_text("binary")

    monkeypatch.setattr(go_build, "_run_go", fake_run_go)
    for v in ("v0.16.6", "v0.16.9"):
        binaries.build(binaries._kueue_target(v), progress=lambda s: None)
    assert len(set(outs)) == 2, outs
    assert (tmp_path / "bin" / "kueue-v0.16.6").is_file() and (tmp_path / "bin" / "kueue-v0.16.9").is_file()


# ---- kubectl and Go --------------------------------------------------------------------------------

@pytest.fixture
def given_binaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every component through KUEUE_HARNESS_* variables, an empty cache, no Go on PATH, and go_binary()
    failing the test if anything calls it."""
    for var, name in (("KUEUE_HARNESS_KUEUE_BINARY", "kueue"), ("KUEUE_HARNESS_KUBE_APISERVER", "kube-apiserver"),
                      ("KUEUE_HARNESS_KUBE_CONTROLLER_MANAGER", "kcm"), ("KUEUE_HARNESS_ETCD", "etcd")):
        monkeypatch.setenv(var, str(_script(tmp_path / "bin" / name, "exit 0")))
    src = tmp_path / "kueue-src"
    (src / "config" / "components" / "crd" / "bases").mkdir(parents=True)
    monkeypatch.setenv("KUEUE_HARNESS_KUEUE_SOURCE", str(src))
    crd = tmp_path / "provisioningrequests.yaml"  # the ProvisioningRequest CRD, given like the binaries
    crd.write_text("kind: CustomResourceDefinition\n")
    monkeypatch.setenv("KUEUE_HARNESS_PROVISIONING_REQUEST_CRD", str(crd))
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    for var in ("KUEUE_HARNESS_KUBECTL", "KUBEBUILDER_ASSETS", "KUEUE_HARNESS_KUEUE_REF", "KUEUE_HARNESS_KUEUE_SOURCE_DIR"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    def no_go() -> str:
        raise AssertionError("go_binary() was called although every binary is given")

    for mod in (go_build, binaries, kueue_build):
        monkeypatch.setattr(mod, "go_binary", no_go)
    return tmp_path


def test_kubectl_if_buildable_is_none_without_go(given_binaries: Path) -> None:
    assert binaries.kubectl_if_buildable(lambda s: None) is None


def test_kubectl_if_buildable_uses_the_override_or_the_cache(given_binaries: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cached = given_binaries / "cache" / "bin" / f"kubectl-{versions.KUBERNETES_VERSION}"
    _script(cached, "exit 0")
    assert binaries.kubectl_if_buildable(lambda s: None) == cached
    mine = _script(given_binaries / "mine" / "kubectl", "exit 0")
    monkeypatch.setenv("KUEUE_HARNESS_KUBECTL", str(mine))
    assert binaries.kubectl_if_buildable(lambda s: None) == mine


def test_build_needs_no_go_when_every_binary_is_given(given_binaries: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["build"]) == 0
    out = capsys.readouterr().out
    assert "kube_apiserver" in out and "kubectl" in out and "not built" in out, out


def test_run_needs_no_go_when_every_binary_is_given(given_binaries: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    import pytest as pytest_module

    ran: list[list[str]] = []
    monkeypatch.setattr(pytest_module, "main", lambda argv, plugins=None: ran.append(argv) or 0)
    monkeypatch.setattr(cli, "select_cases", lambda targets, options: ["cases/x.py::test_x"])
    assert cli.main(["run", "--artifacts-dir", str(given_binaries / "art")]) == 0
    assert ran, "the cases should have been run"


@pytest.mark.parametrize(("command", "builds_kubectl"), [(["build"], True), (["run"], False)])
def test_build_builds_kubectl_and_run_does_not(given_binaries: Path, monkeypatch: pytest.MonkeyPatch,
                                               command: list[str], builds_kubectl: bool) -> None:
    """`build` builds kubectl too, so the first `up` afterwards does not wait for it; `run` does not wait for
    it (issue 24: its cases never use kubectl; `up` builds it when a manual session first needs it)."""
    import pytest as pytest_module

    asked: list[bool] = []
    kubectl = _script(given_binaries / "built" / "kubectl", "exit 0")
    monkeypatch.setattr(binaries, "kubectl_if_buildable", lambda progress=None: asked.append(True) or kubectl)
    monkeypatch.setattr(pytest_module, "main", lambda argv, plugins=None: 0)
    monkeypatch.setattr(cli, "select_cases", lambda targets, options: ["cases/x.py::test_x"])
    args = command + (["--artifacts-dir", str(given_binaries / "art")] if command == ["run"] else [])
    assert cli.main(args) == 0
    assert asked == ([True] if builds_kubectl else [])
