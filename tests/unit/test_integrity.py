"""Issue 24 item 8: a corrupt cached binary is found by its checksum record and built again; a component
that dies at start-up by a signal says so by name ("killed by SIGSEGV (exit -11)") with its log's path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.build import go, integrity
from harness.build import kueue as kb
from harness.common.procs import exit_words
from tests.unit.test_session import Fake, _script


def _binary(path: Path, body: bytes = b"\x7fELF" + b"\0" * 4096) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    path.chmod(0o755)
    return path


def _damage(path: Path) -> None:
    """Flip one byte in place: same size; mtime moves (as any write does)."""
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_cached_binary_is_told_and_removed(tmp_path: Path) -> None:
    b = _binary(tmp_path / "bin" / "etcd-v3.6.0")
    rec = integrity.write_record(b)
    assert json.loads(integrity.record_path(b).read_text()) == rec and len(rec["sha256"]) == 64
    assert integrity.check_cached(b) is None
    lines: list[str] = []
    assert go._intact(b, lines.append) and lines == []
    _damage(b)
    assert integrity.check_cached(b) == "its sha256 differs from the one recorded when it was built"
    assert not go._intact(b, lines.append)
    assert "is damaged (its sha256 differs" in lines[0] and "building it again" in lines[0]
    assert not b.exists() and not integrity.record_path(b).exists()
    t = _binary(tmp_path / "bin" / "kwok-v0.7.0")
    integrity.write_record(t)
    t.write_bytes(t.read_bytes()[:1000])  # truncated
    assert integrity.check_cached(t) == "it is 1000 bytes, built as 4100"


def test_a_binary_from_before_the_record_gets_one(tmp_path: Path) -> None:
    b = _binary(tmp_path / "bin" / "kubectl-v1.35.4")
    assert integrity.check_cached(b) is None and integrity.read_record(b) is not None


def test_a_damaged_kueue_entry_is_built_again(tmp_path: Path) -> None:
    entry = tmp_path / "kueue" / "v0.17.0"
    k = _binary(entry / "kueue")
    built = kb.KueueBuild(k, entry, "v0.17.0", None, "Go module proxy", "v0.17.0", None, 1.0)
    kb._save_entry(entry, built)
    assert json.loads((entry / "build.json").read_text())["binary"]["size"] == 4100
    assert kb._load_entry(entry, lambda line: None) is not None
    _damage(k)
    lines: list[str] = []
    assert kb._load_entry(entry, lines.append) is None, "a damaged binary must be built again"
    assert "the cached Kueue binary" in lines[0] and "is damaged" in lines[0] and not k.exists()
    # After a crash, the full check finds the damage even when size and mtime agree (build.json's record).
    k2 = _binary(entry / "kueue")
    kb._save_entry(entry, built)
    st = os.stat(k2)
    _damage(k2)
    os.utime(k2, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert integrity.problem(k2, json.loads((entry / "build.json").read_text())["binary"]) is None
    assert integrity.damaged(k2) == "its sha256 differs from the one recorded when it was built"


@pytest.mark.parametrize(("code", "words"), [(-11, "killed by SIGSEGV (exit -11)"), (1, "exit 1"),
                                             (-9, "killed by SIGKILL (exit -9)"), (None, "still running")])
def test_exit_words(code, words) -> None:
    assert exit_words(code) == words


def test_a_component_killed_at_start_up_is_named_by_its_signal(tmp_path: Path) -> None:
    fake = Fake(tmp_path)
    _script(Path(fake.env["KUEUE_HARNESS_ETCD"]), "kill -SEGV $$")
    r = fake.cli("up", "--artifacts-dir", str(tmp_path / "art"), timeout=120)
    out = r.stdout + r.stderr
    assert r.returncode == 5, out
    assert "etcd exited during start-up (killed by SIGSEGV (exit -11))" in out, out
    assert "the log is empty: it died before writing a line" in out and "etcd.log" in out, out


def test_the_damage_note_after_a_crash(tmp_path: Path) -> None:
    from harness.env.local import _damage_note

    b = _binary(tmp_path / "bin" / "kube-apiserver-v1.35.4")
    integrity.write_record(b)
    assert _damage_note(str(b)) == ""
    _damage(b)
    note = _damage_note(str(b))
    assert f"Its binary {b} is damaged" in note and "the next run builds it again" in note and not b.exists()
    assert _damage_note(str(tmp_path / "not-ours")) == ""
