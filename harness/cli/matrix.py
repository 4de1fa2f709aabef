"""`kueue-harness matrix`: the seed cases (or any cases) on several Kueue builds, one pytest run per build in
its own process and evidence folder, summarised as matrix.json and matrix.md (verdicts per build and case,
with the version and commit each binary reported).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.build.kueue import KueueSpec
from harness.common.errors import HarnessError
from harness.common.paths import CASES_DIR


def parse_build(text: str, repo: str | None = None, race: bool = False) -> KueueSpec:
    """"v0.17.4" (a tag), "ref:REF" or "source:DIR" as a KueueSpec (`race`: built with Go's race detector).
    Raises HarnessError on a bad tag."""
    if text.startswith("ref:"):
        return KueueSpec(ref=text[4:], repo=repo, race=race)
    if text.startswith("source:"):
        return KueueSpec(source=str(Path(text[7:]).resolve()), repo=repo, race=race)
    return KueueSpec.from_options(version=text, repo=repo, race=race)


def case_name(nodeid: str) -> str:
    """"cases/x.py::test_a[r1]" -> "test_a" (repetitions of one case share a row)."""
    return re.sub(r"\[r\d+\]$", "", nodeid.split("::")[-1])


def run_cases(spec: KueueSpec, targets: list[str], art: Path, runs: int = 1, k: str | None = None,
              quiet: bool = True) -> dict[str, Any]:
    """Run pytest on `targets` against the Kueue `spec` in a child process, evidence in `art`; return its
    summary.json (empty "cases" when the run made none, with "exit" and "output_tail" to say why).

    The child builds nothing new when the caller built `spec` first (the cache has it). An `art` that holds
    an earlier run is not written over (nor is its summary.json read as this run's): the run goes to
    `art`/<run-id> (harness/env/runs.py run_folder), which summary["artifacts"] names.
    """
    from harness.env.runs import run_folder

    art, note = run_folder(art, time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}")
    if note and not quiet:
        print(f"[kueue-harness] {note}", file=sys.stderr)
    art.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-q", "-rN", "--no-verdict-table",
           *spec.cli_args(), f"--artifacts-dir={art}", f"--junitxml={art / 'junit.xml'}", f"--repeat={runs}"]
    if k:
        cmd += ["-k", k]
    with open(art / "pytest.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=CASES_DIR.parent, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
    summary_file = art / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {"cases": []}
    summary["exit"] = rc
    summary["artifacts"] = str(art)
    if not summary["cases"]:
        summary["output_tail"] = (art / "pytest.log").read_text(errors="replace")[-1500:]
    return summary


def aggregate(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per case: {"verdicts": {verdict: count}, "expected": ..., "seconds": [..]} from a summary.json."""
    rows: dict[str, dict[str, Any]] = {}
    for c in summary.get("cases", []):
        r = rows.setdefault(case_name(c["case"]), {"verdicts": {}, "expected": c.get("expected", ""),
                                                   "expected_reason": c.get("expected_reason", ""), "seconds": []})
        r["verdicts"][c["verdict"]] = r["verdicts"].get(c["verdict"], 0) + 1
        r["seconds"].append(c.get("seconds", 0.0))
    return rows


def cell(row: dict[str, Any] | None) -> str:
    """"reproduced 3/3" (or "reproduced 2/3, error 1/3"), with a mark when it differs from the expected."""
    if not row:
        return "-"
    n = sum(row["verdicts"].values())
    text = ", ".join(f"{v} {c}/{n}" for v, c in sorted(row["verdicts"].items(), key=lambda x: -x[1]))
    exp = row.get("expected")
    if exp in ("reproduced", "passed") and set(row["verdicts"]) != {exp}:
        text += f" (expected {exp})"
    return text


def render_md(result: dict[str, Any]) -> str:
    cases = result["cases"]
    head = ["build asked for", "Kueue (reported)", "commit", *cases]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in result["builds"]:
        if b.get("error"):
            lines.append(f"| {b['asked']} | error: {b['error'][:120]} |" + " |" * (len(head) - 2))
            continue
        lines.append("| " + " | ".join([b["asked"], f"`{b.get('kueue_version') or '?'}`", f"`{(b.get('commit') or '?')[:10]}`",
                                         *[cell(b["rows"].get(c)) for c in cases]]) + " |")
    return "\n".join(lines) + "\n"


def run_matrix(builds: list[str], out: Path, repo: str | None = None, runs: int = 1, k: str | None = None,
               targets: list[str] | None = None, say=print, race: bool = False) -> dict[str, Any]:
    """Build and run each of `builds` in turn (build errors become a row, not an abort); write
    out/matrix.json and out/matrix.md after every build, so an interrupted matrix keeps what it had."""
    from harness.build import binaries

    targets = targets or [str(CASES_DIR)]
    result: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "runs": runs, "builds": [], "cases": []}
    out.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(builds, 1):
        entry: dict[str, Any] = {"asked": text}
        result["builds"].append(entry)
        t0 = time.monotonic()
        try:
            spec = parse_build(text, repo, race)
            say(f"[{i}/{len(builds)}] {text}: building (or finding) Kueue")
            bins = binaries.ensure_all(spec, lambda line: say(f"    {line}"))
            entry["build_seconds"] = round(time.monotonic() - t0, 1)
            say(f"[{i}/{len(builds)}] {text}: running the cases ({runs} run(s) each)")
            t1 = time.monotonic()
            summary = run_cases(spec, targets, out / re.sub(r"[^A-Za-z0-9._-]+", "_", text), runs, k)
            entry["run_seconds"] = round(time.monotonic() - t1, 1)
            entry.update(kueue_version=summary.get("kueue_version"), commit=(summary.get("kueue") or {}).get("commit")
                         or bins.kueue_build.commit, source=bins.kueue_build.source, rows=aggregate(summary),
                         exit=summary["exit"], evidence=summary["artifacts"])
            if not entry["rows"]:
                entry["error"] = "no case ran: " + summary.get("output_tail", "")[-300:].replace("\n", " ")
            for c in entry["rows"]:
                if c not in result["cases"]:
                    result["cases"].append(c)
            say(f"[{i}/{len(builds)}] {text} = Kueue {entry['kueue_version']}: " +
                "; ".join(f"{c} {cell(r)}" for c, r in entry["rows"].items()))
        except HarnessError as e:
            entry["error"] = str(e).splitlines()[0]
            say(f"[{i}/{len(builds)}] {text}: {entry['error']}")
        (out / "matrix.json").write_text(json.dumps(result, indent=1))
        (out / "matrix.md").write_text(render_md(result))
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    (out / "matrix.json").write_text(json.dumps(result, indent=1))
    return result


def run_folder(args, kind: str) -> Path:
    """The evidence folder of a `matrix`/`bisect` command (`--out`, else artifacts/<kind>-<time>), after
    checking `--runs`. Raises HarnessError for --runs below 1."""
    if args.runs < 1:
        raise HarnessError(f"--runs must be 1 or more, got {args.runs}")
    out = Path(args.out or Path("artifacts") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if out.exists() and not out.is_dir():
        raise HarnessError(f"--out {out} is a file, not a folder: give a new folder")
    if out.is_dir() and any(out.iterdir()):
        raise HarnessError(f"--out {out} already holds files (an earlier {kind}?): evidence is never overwritten; "
                           "give a new folder")
    return out


def cli(args) -> int:
    out = run_folder(args, "matrix")
    for b in args.builds:
        parse_build(b, args.kueue_repo, args.kueue_race)  # every bad tag before the first long build
    if args.k:
        from harness.cli.selection import _no_case_message, select_cases

        if not select_cases([str(CASES_DIR)], ["-k", args.k]):  # a -k typo in seconds, before any build
            raise HarnessError(_no_case_message(args.k))
    result = run_matrix(args.builds, out, args.kueue_repo, args.runs, args.k, race=args.kueue_race)
    print()
    print(render_md(result), end="")
    print(f"\nmatrix: {out / 'matrix.md'} and matrix.json; each build's evidence under {out}/")
    ok = all(not b.get("error") and all(set(r["verdicts"]) <= {"reproduced", "passed"} for r in b["rows"].values())
             for b in result["builds"])
    return 0 if ok else 1
