"""`kueue-harness report` on damaged bundles and bad options: a clear message and its own exit code
(docs/troubleshooting.md: 8 for a bundle that cannot be read, 2 for a bad option; 1 only ever means
"the re-checked verdict differs"), never a traceback; an emptied history is inconclusive, never passed;
a missing objects.yaml is named; the recorded report.md is never rewritten; archive members are capped.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from harness.cli import commands as cli
from harness.report import bundle as bundle_mod

DATA = Path(__file__).parent / "data" / "bundles"
QUOTA = DATA / "test-quota-oversubscription.tar.gz"
BUNDLE_UNREADABLE = 8


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["report", *args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _folder(tmp_path: Path, src: Path = QUOTA) -> Path:
    with tarfile.open(src) as tf:
        tf.extractall(tmp_path / "x", filter="data")
    return next((tmp_path / "x").iterdir())


# ---- archives -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "not-gzip-tar"])
def test_a_damaged_archive_is_a_clear_error_with_its_own_exit_code(damage, tmp_path, capsys):
    data = QUOTA.read_bytes()
    bad = tmp_path / "b.tar.gz"
    bad.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"garbage\n" * 10, "empty": b"",
                     "not-gzip-tar": b"\x1f\x8b" + data[2:60]}[damage])
    code, out, err = _run(capsys, str(bad), "--out", str(tmp_path / "o"))
    assert code == BUNDLE_UNREADABLE, (code, out, err)
    assert "Traceback" not in err and str(bad) in err and "archive" in err, err


def test_an_archive_with_two_folders_is_refused(tmp_path, capsys):
    bad = tmp_path / "two.tar.gz"
    with tarfile.open(bad, "w:gz") as tf:
        for name in ("a/bundle.json", "b/bundle.json"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tf.addfile(info, io.BytesIO(b"{}"))
    code, _, err = _run(capsys, str(bad), "--out", str(tmp_path / "o"))
    assert code == BUNDLE_UNREADABLE and "one bundle folder" in err, err


def test_a_huge_member_is_not_extracted(tmp_path, capsys, monkeypatch):
    """A small archive whose member unpacks to more than the cap: refused before anything of it is written."""
    monkeypatch.setattr(bundle_mod, "MAX_MEMBER_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz") as tf:
        for name, size in (("case/bundle.json", 2), ("case/history.jsonl", 3 << 20)):
            info = tarfile.TarInfo(name)
            info.size = size
            tf.addfile(info, io.BytesIO(b"{}" if size == 2 else b"\0" * size))
    assert bomb.stat().st_size < 20_000
    out = tmp_path / "o"
    code, _, err = _run(capsys, str(bomb), "--out", str(out))
    assert code == BUNDLE_UNREADABLE and "history.jsonl" in err and "MiB" in err, err
    written = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file()) - bomb.stat().st_size
    assert written < 1 << 20


def test_the_whole_archive_is_capped_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bundle_mod, "MAX_MEMBER_BYTES", 1 << 20)
    monkeypatch.setattr(bundle_mod, "MAX_ARCHIVE_BYTES", 2 << 20)
    bomb = tmp_path / "many.tar.gz"
    with tarfile.open(bomb, "w:gz") as tf:
        for i in range(5):
            info = tarfile.TarInfo(f"case/f{i}.log")
            info.size = 900_000
            tf.addfile(info, io.BytesIO(b"\0" * info.size))
    code, _, err = _run(capsys, str(bomb), "--out", str(tmp_path / "o"))
    assert code == BUNDLE_UNREADABLE and "MiB" in err, err


def test_links_and_devices_in_an_archive_are_refused(tmp_path, capsys):
    bad = tmp_path / "link.tar.gz"
    with tarfile.open(bad, "w:gz") as tf:
        info = tarfile.TarInfo("case/history.jsonl")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    code, _, err = _run(capsys, str(bad), "--out", str(tmp_path / "o"))
    assert code == BUNDLE_UNREADABLE and "history.jsonl" in err, err


# ---- damaged files in a folder ------------------------------------------------------------------------

def test_an_emptied_history_is_inconclusive_not_passed(tmp_path, capsys):
    d = _folder(tmp_path, DATA / "test-quota-oversubscription-control.tar.gz")
    (d / "history.jsonl").write_text("")
    code, out, _ = _run(capsys, str(d))
    assert "verdict: inconclusive (recorded at run time: passed) — DIFFERS" in out, out
    assert "history.jsonl holds no event" in out and code == 1


@pytest.mark.parametrize("content, what", [
    (b"\xff\xfe not utf-8\n", "UTF-8"),
    (b'{"ts": "yesterday", "event": "x", "source": "harness"}\n', "ts"),
    (b'[1, 2]\n', "ts"),
    (b'{"ts": 1, "event": "x"\n', "not JSON"),
])
def test_a_broken_history_is_named(content, what, tmp_path, capsys):
    d = _folder(tmp_path)
    (d / "history.jsonl").write_bytes(content)
    code, out, err = _run(capsys, str(d))
    assert code == BUNDLE_UNREADABLE and "history.jsonl:1" in err and what in err and "Traceback" not in err, err


@pytest.mark.parametrize("meta", ["[]", '"x"', '{"checkers": {"no_such_checker": {}}}',
                                  '{"checkers": {"liveness": {"bound": "soon"}}}', '{"seconds": "long"}'])
def test_a_broken_bundle_json_is_named(meta, tmp_path, capsys):
    d = _folder(tmp_path)
    (d / "bundle.json").write_text(meta)
    code, out, err = _run(capsys, str(d))
    assert "Traceback" not in err
    if meta == '{"seconds": "long"}':  # a field the report only prints: shown as it is, nothing breaks
        assert code in (0, 1), err
    else:
        assert code == BUNDLE_UNREADABLE and "bundle.json" in err, err


def test_a_missing_objects_yaml_is_named(tmp_path, capsys):
    d = _folder(tmp_path)
    (d / "objects.yaml").unlink()
    code, out, _ = _run(capsys, str(d))
    assert "objects.yaml is missing" in out, out
    assert "objects.yaml is missing" in (d / "report.recheck.md").read_text()


# ---- the recorded report.md ---------------------------------------------------------------------------

def test_report_of_a_folder_never_rewrites_its_report_md(tmp_path, capsys):
    d = _folder(tmp_path)
    (d / "report.md").write_text("the run's own report\n")
    code, out, _ = _run(capsys, str(d), "--liveness-bound", "1")
    assert code == 0 and (d / "report.md").read_text() == "the run's own report\n"
    assert (d / "report.recheck.md").read_text().startswith("# test_quota_oversubscription: reproduced")
    assert f"report: {d / 'report.recheck.md'}" in out
    # --out naming the folder itself does not overwrite it either.
    _run(capsys, str(d), "--out", str(d))
    assert (d / "report.md").read_text() == "the run's own report\n"


def test_report_of_an_archive_keeps_the_recorded_report_beside_the_recheck(tmp_path, capsys):
    src = _folder(tmp_path)
    (src / "report.md").write_text("recorded\n")
    archive = tmp_path / "case.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname=src.name)
    shutil.rmtree(tmp_path / "x")
    code, out, _ = _run(capsys, str(archive))
    dest = tmp_path / "case.recheck"
    assert code == 0 and (dest / "report.md").read_text() == "recorded\n"
    assert (dest / "report.recheck.md").exists()


# ---- options ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bound", ["-5", "0", "nan", "inf", "-inf"])
def test_a_bound_that_is_not_a_positive_number_of_seconds_is_refused(bound, tmp_path, capsys):
    code, out, err = _run(capsys, str(QUOTA), "--out", str(tmp_path / "o"), f"--liveness-bound={bound}")
    assert code == 2 and "--liveness-bound" in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()
