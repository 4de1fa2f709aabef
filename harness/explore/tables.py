"""What an exploration tells people: summary.md (the table of runs, violations, findings and false positives)
rendered from explore.json, and `kueue-harness explore merge DIR...`, which joins the tables of shards that
share a reference.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.common.errors import HarnessError


def render_summary(result: dict[str, Any]) -> str:
    """The summary table (markdown) of one exploration or of a merge."""
    c = {k: 0 for k in ("tried", "discarded", "errors", "violations", "distinct", "noop_runs", "false_positives")}
    c.update(result["counts"])  # an explore.json of an older harness may lack a count: 0, never a KeyError
    cases = ", ".join(x.split("::")[-1] for x in result["cases"])
    shard = result.get("shard") or [1, 1]
    dv = int(c.get("discarded_violating", 0))
    discarded = f"{c['discarded']} ({dv} of them violated an invariant)" if dv else f"{c['discarded']}"
    lines = [f"# kueue-harness explore: {cases} on Kueue {result['kueue']}"
             + (f" (shard {shard[0]}/{shard[1]})" if shard[1] > 1 else ""), "",
             ("| perturbations tried | discarded | errors | not run (blocked) | violations | distinct violations | no-op runs "
             "| false positives | minutes |"),
             "|---|---|---|---|---|---|---|---|---|",
             (f"| {c['tried']} | {discarded} | {c['errors']} | {c.get('pruned_blocked', 0)} | {c['violations']} "
             f"| {c['distinct']} | {c['noop_runs']} | {c['false_positives']} | {result['minutes']:.1f} |"), ""]
    if result["findings"]:
        lines += ["| violation | first found (run, perturbations, minutes) | minimal plan | reproduced | plan file | evidence bundle |",
                  "|---|---|---|---|---|---|"]
        for f in result["findings"]:
            lines.append(f"| `{f.get('id') or f['key']}`" + (f" (variant of `{f['variant_of']}`)" if f.get("variant_of") else "")
                         + f" | {f['first_run']}, {f['first_index']}, {f['first_minutes']:.1f} | "
                         f"{f.get('minimal_words', f['plan'])} | {f.get('reproduced', '-')} | {f.get('file', '-')} | "
                         f"{f.get('bundle') or '-'} |")
    else:
        lines.append("No violation found.")
    known = result.get("known") or {}
    if known:
        lines += ["", "Known bugs muted (a violation their signature explains is recorded as the bug, not a finding; "
                  "harness/kueue/signatures.py): " + ", ".join(f"`{k}` {n}×" for k, n in known.items()) + "."]
    leads = result.get("leads") or []
    if leads:
        lines += ["", f"Leads: {len(leads)} violation(s) seen once and not confirmed (not findings; each plan kept to "
                  "try again by hand).", "", "| violation | seen in run | plan | why not a finding | plan file |",
                  "|---|---|---|---|---|"]
        for f in leads:
            lines.append(f"| `{f.get('id') or f.get('key')}` | {f.get('first_run', '-')} | {f.get('plan', '-')} | "
                         f"{f.get('lead', '-')} | {f.get('file', '-')} |")
    gone = [r for r in result.get("runs") or [] if r.get("violated")]
    if gone:
        lines += ["", (f"Discarded runs (the plan did not happen as written) that violated an invariant: {len(gone)}, "
                  f"{int(c.get('salvaged', 0))} kept as findings after a replay of the plan that happened "
                  "(a hold that ended by its timeout held for as long as it did)."), "",
                  "| run | plan | violated | what became of it |", "|---|---|---|---|"]
        for r in gone:
            lines.append(f"| {r['id']} | {r['words']} | {', '.join(r['violated'])} | {r.get('salvage') or '-'} |")
    groups = result.get("clusters") or []
    if len(groups) < len(result["findings"]):
        lines += ["", f"Root causes: {len(groups)} (findings grouped by invariant and the shape of the minimal plan)", "",
                  "| cause | findings |", "|---|---|"]
        for g in groups:
            lines.append(f"| {g['cause']} | {', '.join(g['keys'])} |")
    if c["tried"] and c["errors"] >= c["tried"]:
        lines.append(f"WARNING: all {c['tried']} perturbations ended in error, so nothing was judged: read "
                     "batches/*/pytest.log (e.g. the Kueue build or a case that fails on its own).")
    return "\n".join(lines) + "\n"


def merge(dirs: list[Path], out: Path | None = None) -> dict[str, Any]:
    """One table from several explorations (the shards of one search): counts summed, minutes the longest
    shard's (machine minutes summed apart), distinct violations joined by finding id (the key, or key~N for a variant; the earliest kept).
    Raises HarnessError for a folder without explore.json."""
    parts = []
    seen: set[Path] = set()
    for d in dirs:
        real = Path(d).resolve()
        if real in seen:
            raise HarnessError(f"explore merge: {d} is given twice (its runs would count twice)")
        seen.add(real)
        if out is not None and out.resolve() == real:
            raise HarnessError(f"explore merge: --out {out} is one of the explorations merged: give a new folder "
                               "(merging never overwrites an exploration)")
        f = Path(d) / "explore.json"
        if not f.is_file():
            raise HarnessError(f"{d}: no explore.json (a folder written by `kueue-harness explore --out`)")
        try:
            p = json.loads(f.read_text())
            if not (isinstance(p, dict) and isinstance(p.get("counts"), dict) and isinstance(p.get("findings"), list)
                    and isinstance(p.get("cases"), list) and "kueue" in p and "minutes" in p):
                raise ValueError("not the shape explore writes (counts, findings, cases, kueue, minutes)")
        except (ValueError, UnicodeDecodeError) as e:
            raise HarnessError(f"{f}: not an explore.json kueue-harness wrote ({str(e)[:200]}); copy it again from "
                               "the shard's run") from None
        parts.append(p)
    if not parts:
        raise HarnessError("explore merge: give the folders of the explorations to merge")
    builds = sorted({str(p["kueue"]) for p in parts})
    if len(builds) > 1:
        raise HarnessError(f"explore merge: these explorations ran different Kueue builds ({', '.join(builds)}); "
                           "merge the shards of one build at a time")
    counts: dict[str, int] = {}
    for p in parts:
        for k, v in p["counts"].items():
            counts[k] = counts.get(k, 0) + int(v)
    findings: dict[str, dict[str, Any]] = {}
    for p in parts:
        for f in p["findings"]:
            fid = f.get("id") or f["key"]
            old = findings.get(fid)
            if old is None or f["first_minutes"] < old["first_minutes"]:
                findings[fid] = {**f, "shard": p.get("shard")}
    counts["distinct"] = len({f["key"] for f in findings.values()})
    leads = [{**f, "shard": p.get("shard")} for p in parts for f in (p.get("leads") or []) if isinstance(f, dict)]
    result = {"cases": sorted({c for p in parts for c in p["cases"]}), "kueue": parts[0]["kueue"],
              "shard": [1, 1], "minutes": max(p["minutes"] for p in parts),
              "machine_minutes": round(sum(p["minutes"] for p in parts), 2), "counts": counts,
              "findings": sorted(findings.values(), key=lambda f: f["key"]), "leads": leads,
              "known": _sum_known(parts),
              "known_runs": [{**r, "shard": p.get("shard")} for p in parts for r in (p.get("known_runs") or [])],
              "merged": [str(d) for d in dirs],
              "shards": [p.get("shard") for p in parts]}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "explore.json").write_text(json.dumps(result, indent=1, default=str))
        (out / "summary.md").write_text(render_summary(result))
    return result


def _sum_known(parts: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in parts:
        for k, n in (p.get("known") or {}).items():
            out[k] = out.get(k, 0) + int(n)
    return out


def progress_kind(line: dict[str, Any]) -> str:
    """What a finished run was, for a progress line: VIOLATION, passed, discarded or error."""
    return {"reproduced": "VIOLATION", "passed": "passed"}.get(
        str(line.get("verdict")), "discarded" if line.get("assumption_failed") else "error")


def progress_line(minutes: float, batch: int, k: int, n: int, refilled: int, line: dict[str, Any], what: str,
                  c: dict[str, int], t: dict[str, int], queue: int) -> str:
    """explore's progress line for run `k` of `n` of a batch (`refilled` of them added at its tail): `c` the
    table's counts so far, `t` this batch's perturbations by kind (not no-op, minimising, reference, confirming
    runs or salvage replays)."""
    return (f"[explore {minutes:5.1f} min] batch {batch} run {k}/{n}"
            f"{f' ({refilled} refilled)' if refilled > 0 else ''} {line.get('run')}: "
            f"{what} ({line.get('seconds', 0):.1f}s) | tried {c['tried'] + sum(t.values())}, "
            f"discarded {c['discarded'] + t.get('discarded', 0)}, "
            f"violations {c['violations'] + t.get('VIOLATION', 0)} ({c['distinct']} distinct so far), queue {queue}")
