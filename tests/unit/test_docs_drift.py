"""Issue 24 item 9: what the docs show the CLI print, it prints; the manual session of docs/by-hand.md names
the kubectl the harness built (a system kubectl first on PATH may be another version, e.g. v1.32)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.kueue import versions

ROOT = Path(__file__).resolve().parents[2]
BY_HAND = (ROOT / "docs" / "by-hand.md").read_text()


def _manual_block() -> str:
    section = BY_HAND[BY_HAND.index("# Reproducing by hand"):]
    return section[section.index("```sh"):section.index("```", section.index("```sh") + 5)]


def test_the_by_hand_session_uses_the_harness_built_kubectl() -> None:
    block = _manual_block()
    assert f"kubectl-{versions.KUBERNETES_VERSION}" in block, block
    bare = [line for line in block.splitlines() if re.match(r"\s*kubectl\s", line)]
    assert not bare, f"a bare kubectl may be another version than kube-apiserver {versions.KUBERNETES_VERSION}: {bare}"


def test_the_ready_line_the_walkthrough_shows_is_printed_by_the_session() -> None:
    """docs/manual-session.md shows `[kueue-harness] environment ready in N s (Kueue …, kube-apiserver …);
    artifacts: …`; the session supervisor prints it (harness/cli/session.py; tests/integration/test_cli_session.py
    checks it on a real `up`)."""
    doc = (ROOT / "docs" / "manual-session.md").read_text()
    shown = re.search(r"\[kueue-harness\] environment ready in [\d.]+s \(Kueue \S+, kube-apiserver v[\d.]+\); "
                      r"artifacts: \S+", doc)
    assert shown, "docs/manual-session.md no longer shows the ready line"
    src = (ROOT / "harness" / "cli" / "session.py").read_text()
    assert 'print(f"[kueue-harness] environment ready in {' in src and "artifacts: " in src
