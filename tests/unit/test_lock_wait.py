"""Issue 24 item 1: waiting on another process's build lock is never silent: a line at once and then every
`interval` seconds (20 s by default) saying whose lock (pid and command line), which build, since when."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.build import go
from harness.common.waiting import wait_for

HOLDER = """
import sys, time
from pathlib import Path
from harness.build.go import build_lock
with build_lock("kube-apiserver-v1.35.4"):
    Path(sys.argv[1]).write_text("locked")
    # Holds the lock until the test removes the file (bounded: 60 s at most).
    for _ in range(600):
        if not Path(sys.argv[1]).exists():
            break
        time.sleep(0.1)
"""


def test_a_wait_on_a_build_lock_says_whose_which_and_since_when(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    flag = tmp_path / "locked"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(flag)], env={**__import__("os").environ})
    try:
        wait_for(flag.exists, timeout=60, what="the other process to take the lock")
        lines: list[str] = []
        got = threading.Event()

        def waiter() -> None:
            with go.build_lock("kube-apiserver-v1.35.4", lines.append, interval=0.2):
                got.set()

        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        wait_for(lambda: len(lines) >= 3, timeout=30, what="three progress lines while waiting")
        assert not got.is_set(), "the lock is held by the other process"
        first = lines[0]
        assert "waiting for the build lock of kube-apiserver-v1.35.4" in first, first
        assert f"held by pid {holder.pid} (`" in first and ", since " in first and " ago)" in first, first
        assert "waited" in lines[-1], lines
        flag.unlink()  # the holder lets go
        wait_for(got.is_set, timeout=30, what="the lock once the holder let go")
        t.join(10)
        assert not t.is_alive(), "the waiter took the lock and its progress thread ended"
    finally:
        holder.kill()
        holder.wait(10)


def test_an_uncontended_lock_says_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_HARNESS_CACHE", str(tmp_path / "cache"))
    lines: list[str] = []
    with go.build_lock("etcd-v3.6.0", lines.append, interval=0.1):
        note = (tmp_path / "cache" / "locks" / "etcd-v3.6.0.lock").read_text()
    assert lines == [] and '"what": "etcd-v3.6.0"' in note
    assert go.lock_holder(tmp_path / "cache" / "locks" / "etcd-v3.6.0.lock").startswith("pid ")
    assert go.lock_holder(tmp_path / "nowhere.lock") == "another process"
