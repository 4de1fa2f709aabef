"""Kueue builds other than the session's: a fixed release from the git repository (the seed cases must
*pass* where #11480 scenario 1 is fixed, and scenario 2 still reproduce), and a local source tree with an
uncommitted one-line change that must show up in Kueue's own log.

Both need a Kueue repository for tags the Go module proxy does not serve: KUEUE_HARNESS_KUEUE_REPO (a path,
URL or .tar of a bare repository), else upstream. With none configured, an upstream that cannot be reached
skips with the reason (tests/integration/builds.py); a configured repository that fails is a failure.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


from harness import report
from harness.build import binaries
from harness.build import kueue as kueue_build
from harness.cli.matrix import CASES_DIR, aggregate, run_cases
from harness.kueue import log as kueue_log
from tests.integration.builds import build_or_skip

#: A release with the scenario-1 fix (the cherry-pick 2f5004ff of kubernetes-sigs/kueue#11502).
FIXED_RELEASE = "v0.17.4"
MARKER = "kueue-harness source-tree marker: this line is not in any Kueue release"


def _build_or_skip(spec: kueue_build.KueueSpec) -> binaries.Binaries:
    return build_or_skip(spec)


def test_seed_cases_on_a_fixed_release(tmp_path: Path, artifacts_dir: Path) -> None:
    """On v0.17.4 the stuck-preemption case passes (fixed), its control passes, and the oversubscription
    case still reproduces (no fix known): the cases tell fixed from affected Kueue, on what actually ran."""
    spec = kueue_build.KueueSpec(version=FIXED_RELEASE)
    bins = _build_or_skip(spec)
    summary = run_cases(spec, [str(CASES_DIR / "kueue_11480")], artifacts_dir / "fixed-release")
    rows = aggregate(summary)
    got = {c: sorted(r["verdicts"]) for c, r in rows.items()}
    assert got == {
        "test_stuck_preemption": ["passed"],
        "test_stuck_preemption_control": ["passed"],
        "test_quota_oversubscription": ["reproduced"],
        "test_quota_oversubscription_control": ["passed"],
    }, f"{got}; pytest output: {summary.get('output_tail', '')}"
    assert rows["test_stuck_preemption"]["expected"] == "passed"
    assert "outside the affected range" in rows["test_stuck_preemption"]["expected_reason"]
    assert rows["test_quota_oversubscription"]["expected"] == "reproduced"
    # What ran, as the binary reported it, not the flag.
    assert summary["kueue_version"] == FIXED_RELEASE
    assert summary["kueue"]["reported"]["gitVersion"] == FIXED_RELEASE
    assert summary["kueue"]["commit"] == bins.kueue_build.commit
    assert summary["exit"] == 0, summary.get("output_tail")
    # The offline re-check of every bundle gives the verdict the run recorded (one composition of checkers).
    for case in summary["cases"]:
        r = report.report_bundle(Path(case["bundle"]), out=tmp_path / Path(case["bundle"]).name)
        assert r.verdict == r.recorded == case["verdict"], (case["case"], r.verdict, r.recorded, r.notes)


def test_source_tree_with_a_local_change(tmp_path: Path) -> None:
    """--kueue-source builds a working tree with an uncommitted change; the change runs (its log line is in
    Kueue's log) and the recorded version is `git describe --dirty` plus a content hash."""
    tag_build = _build_or_skip(kueue_build.KueueSpec(version=FIXED_RELEASE)).kueue_build
    repo = tag_build.repo or kueue_build.repo_dir(None)
    tree = tmp_path / "kueue"
    subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", "--detach", FIXED_RELEASE], check=True)
    main_go = tree / "cmd" / "kueue" / "main.go"
    src = main_go.read_text()
    anchor = 'setupLog.Info("Initializing"'
    assert anchor in src, "Kueue's main.go no longer logs Initializing: update this test"
    main_go.write_text(src.replace(anchor, f'setupLog.Info("{MARKER}")\n\t{anchor}', 1))

    from harness.env.local import LocalEnvironment

    env = LocalEnvironment.start(kueue_build.KueueSpec(source=str(tree)), artifacts=tmp_path / "env", with_proxy=False)
    try:
        assert kueue_log.count(env.kueue_log, MARKER) >= 1, "the local change did not run"
        built = env.bins.kueue_build
        assert built.version.startswith(f"{FIXED_RELEASE}-dirty+") and len(built.version.split("+")[1]) == 8
        assert env.kueue_version == built.version, "the binary reported another version than it was built with"
        assert env.kueue_reported["gitCommit"] == tag_build.commit
    finally:
        env.stop()
