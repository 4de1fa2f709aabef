"""The table of every bug of cases/ in docs/bugs.md, generated — never written by hand — from each folder's
bug.yaml (key, summary, affected ranges, fixed tags) and the measurements bench/corpus.py wrote
(bench/results/*-corpus-<folder>-<version>.json): per Kueue build measured, each test's verdicts; and the
longest plan and case file of the folder (both must stay ≤ 30 lines).

    .venv/bin/python bench/corpus_table.py           # print the table
    .venv/bin/python bench/corpus_table.py --write   # put it in docs/bugs.md between the corpus-table markers

tests/unit/test_corpus_table.py fails when docs/bugs.md's table differs from what this prints.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "bugs.md"  # the page that holds the table
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

START, END = "<!-- corpus-table:start -->", "<!-- corpus-table:end -->"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def measurements(folder: str, results: Path) -> dict[str, dict[str, collections.Counter]]:
    """{Kueue version: {test: Counter(verdict)}} over every results file of `folder` (later files of the same
    version add their runs)."""
    out: dict[str, dict[str, collections.Counter]] = {}
    for f in sorted(results.glob(f"*-corpus-{folder}-*.json")):
        data = json.loads(f.read_text())
        if data.get("bug_folder", "").rstrip("/").split("/")[-1] != folder:
            continue  # kueue_94 must not read kueue_9428's files
        version = str(data.get("kueue_requested") or data.get("kueue_version"))
        label = version + "".join(f" + {x}" for x in data.get("patches") or []) + (" -race" if data.get("race") else "")
        per = out.setdefault(label, {})
        for r in data.get("runs", []):
            per.setdefault(r["test"], collections.Counter())[r["verdict"]] += 1
    return out


def _cell(tests: dict[str, collections.Counter]) -> str:
    parts = []
    for test, c in sorted(tests.items(), key=lambda kv: (kv[0].endswith("_control"), kv[0])):
        n = sum(c.values())
        who = "control" if test.endswith("_control") else "case"
        parts.append(f"{who} " + ", ".join(f"{v} {k}/{n}" for v, k in sorted(c.items(), key=lambda kv: -kv[1])))
    return "; ".join(parts)


def _order(p: Path) -> tuple[int, str]:
    m = re.search(r"(\d+)$", p.parent.name)
    return (int(m.group(1)) if m else 0, p.parent.name)


def table(cases: Path = ROOT / "cases", results: Path = ROOT / "bench" / "results") -> str:
    """The markdown table (one row per bug, in folder order)."""
    from harness.kueue import bugs as kbugs

    rows = ["| bug | summary | affected (bug.yaml) | fixed in | measured: affected builds | measured: other builds "
            "| plan / case lines |", "|---|---|---|---|---|---|---|"]
    for by in sorted(cases.glob("*/bug.yaml"), key=_order):
        folder = by.parent
        for key, bug in kbugs.parse(by.read_text(), str(by)).items():
            m = measurements(folder.name, results)
            aff = [f"{v}: {_cell(t)}" for v, t in sorted(m.items()) if bug.affects(v.split()[0])]  # "v0.17.0 -race"
            other = [f"{v}: {_cell(t)}" for v, t in sorted(m.items()) if not bug.affects(v.split()[0])]
            plan = max((_lines(p) for p in (folder / "plans").glob("*.yaml")), default=0)
            case = max((_lines(p) for p in folder.glob("test_*.py")), default=0)
            num = key.rsplit("#", 1)[-1]
            m_ = re.match(r"([\w.-]+/[\w.-]+)#(\d+)", bug.issue)
            link = f"https://github.com/{m_.group(1)}/issues/{m_.group(2)}" if m_ else ""
            rows.append(f"| {f'[#{num}]({link})' if link else key} | {bug.summary} "
                        f"| {', '.join(bug.affected) or '—'} | {', '.join(bug.fixed_in) or 'unfixed'} "
                        f"| {'<br>'.join(aff) or 'no corpus results'} | {'<br>'.join(other) or 'no corpus results'} "
                        f"| {plan or '—'} / {case} |")
    return "\n".join(rows) + "\n"


def page_section(page: str) -> str | None:
    """What docs/bugs.md holds between the markers, or None without them."""
    m = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), page, re.S)
    return m.group(1) if m else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/bugs.md between the markers")
    a = ap.parse_args(argv)
    t = table()
    if not a.write:
        print(t, end="")
        return 0
    text = PAGE.read_text()
    if page_section(text) is None:
        print(f"docs/bugs.md has no {START} … {END} markers: add them where the table goes", file=sys.stderr)
        return 2
    PAGE.write_text(re.sub(re.escape(START) + r"\n.*?" + re.escape(END), lambda _: f"{START}\n{t}{END}", text,
                           flags=re.S))
    print("docs/bugs.md: bug table written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
