"""Saved bundles of the four seed cases (Kueue v0.17.0, 2026-11-30), re-checked with no cluster: the
offline checkers reproduce each recorded verdict, each history keeps to docs/history.md, and each
diagram parses (the structural validator always; the Mermaid CLI too when it is installed).

tests/unit/data/bundles/<case>.tar.gz hold the files `kueue-harness report` reads (bundle.json,
history.jsonl, objects.yaml) of real bundles; logs and flows are left out to keep the repository small.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from harness import report
from harness.cli import commands as cli

DATA = Path(__file__).parent / "data" / "bundles"
SEEDS = {
    "test-stuck-preemption": ("reproduced", "liveness"),
    "test-stuck-preemption-control": ("passed", None),
    "test-quota-oversubscription": ("reproduced", "quota"),
    "test-quota-oversubscription-control": ("passed", None),
}


@pytest.mark.parametrize("slug", sorted(SEEDS))
def test_offline_recheck_reproduces_the_recorded_verdict(slug, tmp_path):
    verdict, violated = SEEDS[slug]
    r = report.report_bundle(DATA / f"{slug}.tar.gz", out=tmp_path / "out")
    assert r.recorded == verdict
    assert r.verdict == verdict, [f"{f.check}: {f.result}: {f.evidence}" for f in r.findings]
    broken = [f.check for f in r.findings if f.result == "violated"]
    assert broken == ([violated] if violated else [])
    md = (tmp_path / "out" / "report.recheck.md").read_text()
    assert md.startswith(f"# {json.loads((r.folder / 'bundle.json').read_text())['case'].split('::')[-1]}: {verdict}")
    assert f"offline re-check from history.jsonl: {verdict} (agrees)" in md


def test_the_stuck_case_tells_the_race_in_order(tmp_path):
    r = report.report_bundle(DATA / "test-stuck-preemption.tar.gz", out=tmp_path)
    md = r.report.read_text()
    diagram = md.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert report.validate_sequence_diagram(diagram) == []
    lines = diagram.splitlines()
    story = ["create Job job1", "admission job1 (loose)", "HOLD", "create Job job2", "eviction job1 (loose)",
             "HOLD h3: the answer", "release h2", "Proxy->>API", "(Evicted, Preempted gone)",
             "Preemption already issued", "verdict: reproduced"]
    pos = [next((i for i, ln in enumerate(lines) if s in ln), None) for s in story]
    assert None not in pos and pos == sorted(pos), list(zip(story, pos))
    # Kueue logs "Preempted" once the eviction's answer reaches it (released after the admission went on).
    preempted = next(i for i, ln in enumerate(lines) if "Preempted job1 (for job2)" in ln)
    assert pos[story.index("Proxy->>API")] < preempted < pos[story.index("Preemption already issued")]
    flood = next(ln for ln in lines if "Preemption already issued" in ln)
    assert "×" in flood and int(flood.split("×")[1].split(":")[0]) > 1000
    assert len(lines) < report.MAX_DIAGRAM_LINES
    liveness = next(f for f in r.findings if f.check == "liveness")
    assert liveness.result == "violated" and "no quota" in liveness.evidence


@pytest.mark.parametrize("slug", sorted(SEEDS))
def test_saved_histories_keep_to_the_documented_schema(slug, tmp_path):
    with tarfile.open(DATA / f"{slug}.tar.gz") as tf:
        tf.extractall(tmp_path, filter="data")
    assert report.history_problems(report.load_history(tmp_path / slug / "history.jsonl")) == []


def test_cli_on_an_archive_exits_0_when_the_verdict_agrees(tmp_path, capsys):
    assert cli.main(["report", str(DATA / "test-quota-oversubscription.tar.gz"), "--out", str(tmp_path)]) == 0
    assert "verdict: reproduced (recorded at run time: reproduced) — agrees" in capsys.readouterr().out


def _mmdc() -> str | None:
    return os.environ.get("KUEUE_HARNESS_MMDC") or shutil.which("mmdc")


@pytest.mark.skipif(not _mmdc(), reason="Mermaid CLI not installed (npm @mermaid-js/mermaid-cli; set "
                                        "KUEUE_HARNESS_MMDC or put mmdc on PATH): docs/evidence.md")
@pytest.mark.parametrize("slug", sorted(SEEDS))
def test_mermaid_cli_parses_the_diagram(slug, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("the Mermaid CLI needs a Chromium (apt-get install chromium)")
    r = report.report_bundle(DATA / f"{slug}.tar.gz", out=tmp_path)
    src = tmp_path / "timeline.mmd"
    src.write_text(r.report.read_text().split("```mermaid\n", 1)[1].split("```", 1)[0])
    conf = tmp_path / "puppeteer.json"
    conf.write_text(json.dumps({"executablePath": browser, "args": ["--no-sandbox"]}))
    out = tmp_path / "timeline.svg"
    p = subprocess.run([_mmdc(), "-p", str(conf), "-i", str(src), "-o", str(out)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PUPPETEER_SKIP_DOWNLOAD": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    svg = out.read_text()
    assert "Syntax error" not in svg and "kube-apiserver" in svg and "verdict" in svg
