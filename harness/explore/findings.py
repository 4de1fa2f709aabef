"""What a violation is called: its key (one per invariant and subject) and its root-cause cluster.

`violation_keys` names each violated invariant of a run "checker:subject[:how]" ("liveness:job2:stuck",
"quota:cq"): explore's distinct violations. `cluster_key` groups findings by root cause — the invariant
and how it broke, and the shape of the minimal plan (each move's kind and write kind, with roles replaced
by their relation to the finding's subject) — so that one race found on job1 and on a1, or once with a
held request and once with a stale write of the same kind, is reported as one cause with its variants.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from harness.explore.model import how_of, plan_document

#: How a liveness violation went (harness/checkers/liveness.py summaries): part of its key, so a Workload
#: stuck for ever and one admitted late are two findings.
LIVENESS_HOW = (("is stuck", "stuck"), ("got quota only after", "late"), ("got no quota", "never"))


def violation_keys(findings: Iterable[Mapping[str, Any]]) -> list[str]:
    """"checker:subject[:how]" for each violated invariant finding: "liveness:job2:stuck", "quota:cq" (the
    subject is the first name of the finding's summary, after "transient:" and "ClusterQueue")."""
    out = []
    for f in findings:
        if f.get("result") != "violated" or f.get("assumption"):
            continue
        summary = str(f.get("summary", ""))
        words = re.sub(r"^(transient:\s*)?((ClusterQueue|cohort|Cohort|Workload)\s+)?", "", summary).split()
        key = f"{f.get('check')}:{words[0].rstrip(':,') if words else '?'}"
        how = next((h for text, h in LIVENESS_HOW if text in summary), None) if f.get("check") == "liveness" else None
        out.append(f"{key}:{how}" if how else key)
    return sorted(set(out))


def key_matches(key: str, prefixes: Iterable[str]) -> bool:
    """Whether finding `key` ("checker:subject[:how]") is named by one of `prefixes`: equal to one, or
    starting with it and ":" ("liveness:s" names "liveness:s:never"; "quota" names "quota:cq", not
    "quotas:x"). Used by `explore --stop-on` and bench/rediscover.py."""
    return any(key == p or key.startswith(p + ":") for p in prefixes)


def cluster_key(key: str, moves: Iterable[Mapping[str, Any]]) -> str:
    """The root-cause cluster of a finding `key` with minimal plan `moves` (model.move_to_dict shapes):
    "liveness:stuck | hold_response admission (subject), hold eviction (other)". The subject's role is the
    key's second part; every other role is "other"."""
    parts = key.split(":")
    check, subject = parts[0], parts[1] if len(parts) > 1 else ""
    how = parts[2] if len(parts) > 2 else ""
    shape = []
    for m in moves:
        t = m.get("target") or {}
        rel = "subject" if t.get("role") == subject else "other"
        kind = str(m.get("kind"))
        if kind == "delete_as":  # how it deletes is the cause: an Orphan deletion and a slow finalizer differ
            ways = how_of(str(m.get("how") or "{}")) or {}
            kind += "".join(f" {ways[k] if k == 'propagation' else k}" for k in sorted(map(str, ways)))
        shape.append(f"{kind} {t.get('cls')} ({rel})")
    return f"{check}{':' + how if how else ''} | {', '.join(sorted(shape)) or 'no fault'}"


def clusters(findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Findings grouped by `cluster_key` of their minimal plan (else the first plan): [{"cause", "keys" (finding
    ids: a variant's is "key~N"), "first"}], in order of first discovery."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(findings, key=lambda x: float(x.get("first_minutes") or 0.0)):
        cause = cluster_key(str(f["key"]), f.get("minimal") or f.get("moves") or [])
        c = out.setdefault(cause, {"cause": cause, "keys": [], "first": f.get("id") or f["key"]})
        c["keys"].append(f.get("id") or f["key"])
    return list(out.values())


def outcome(result: dict[str, Any] | None) -> tuple[str, str]:
    """("violation" | "discarded" | "passed" | "error", reason) of a run's explore.json (None: no result)."""
    if result is None:
        return "error", "no result (the run did not reach its end: see the batch's pytest.log)"
    if result.get("verdict") == "reproduced":
        return "violation", ", ".join(violation_keys(result.get("findings") or []))
    if result.get("verdict") == "passed":
        return "passed", ""
    failed = [f for f in result.get("findings") or [] if f.get("assumption") and f.get("result") in ("violated", "inconclusive")]
    if failed:
        return "discarded", "; ".join(f"{f['check']}: {f.get('evidence') or f.get('summary')}" for f in failed)[:300]
    return "error", str(result.get("reason") or "")[:300]


def finding_header(f: Mapping[str, Any], kueue: str, case: str, path: Any, cli_args: list[str], hits: int,
                   n: int) -> str:
    """The comment block of a finding's plan file (findings/<id>.yaml): what was found, on which Kueue and
    case, how often each plan reproduced it, the evidence bundle, and the commands that replay it. `f`: the
    finding (driver.Explorer.on_violation, minimize_finding); `hits`/`n`: the strengthened plan's record.
    A plan that moves or changes the case's own steps (steps_after, deletes_as) is replayed on its case
    only (`up --plan` refuses it: harness/plan/moved.py)."""
    own_steps = any(str(m.get("kind")) in ("step", "delete_as") for m in f.get("minimal") or f.get("moves") or [])
    return "\n".join([
        f"Found by `kueue-harness explore` on Kueue {kueue}: {f['key']}"
        + (f" (a variant of {f['variant_of']}: another root cause)" if f.get("variant_of") else ""),
        f"{f['summary']}" if f.get("summary") else "",
        f"Case: {case}",
        *([str(f["note"])] if f.get("note") else []),
        f"First seen in run {f['first_run']} (perturbation {f['first_index']}, {f['first_minutes']:.1f} min): {f['plan']}",
        f"That plan reproduced it {f['confirmed']} times"
        + (f"; with one more move (the first that reproduced every time, else the most reliable of "
           f"{len(f['strengthened'])} tried) {hits}/{n}" if f.get("strengthened") else "") + ".",
        f"This plan (moves dropped one at a time while it reproduced as often) reproduced it {f['reproduced']} times.",
        f"Evidence bundle: {f['bundle']}",
        "Replay:",
        f"  .venv/bin/python -m pytest '{case}' --plan {path} {' '.join(cli_args)}",
        *([] if own_steps else [f"  .venv/bin/kueue-harness up --plan {path}   # then create the case's objects by hand"]),
    ])


def write_lead(out: Any, f: Mapping[str, Any], case: str, moves: Any, why: str) -> Any:
    """Write leads/<id>.yaml under folder `out` (a Path): the plan `moves` that violated `f["key"]` once in case
    `case` and was not confirmed (`why`), headed as a lead, with the command to try it again by hand; returns its
    path. A key that violated again later and again was not confirmed keeps every plan (<id>~N.yaml). Issue
    "Judge progress, not the clock": a finding was saved with 0 of 5 confirmations."""
    path = out / "leads" / f"{re.sub(r'[^a-z0-9]+', '-', str(f.get('id') or f['key']).lower()).strip('-')}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(f"{path.stem.rsplit('~', 1)[0]}~{n}.yaml")
    header = "\n".join([f"A LEAD, NOT A FINDING: {f['key']} violated once, in run {f['first_run']}, and was not "
                        f"confirmed ({why}).", f"Case: {case}", f"Try it again: pytest {case} --plan {path} --repeat=5"])
    path.write_text(plan_document(moves, f"explore-lead-{path.stem}", f["plan"], header=header))
    return path


def _result(evidence: str) -> dict[str, Any] | None:
    """A run's explore.json (harness/explore/plugin.py writes it into the run's evidence folder), or None."""
    import json
    from pathlib import Path

    from harness.explore import RESULT_FILE

    try:
        return json.loads((Path(evidence) / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None


def summary_of(evidence: str, key: str) -> str:
    """The summary line of the violated invariant finding of `key` in the run whose evidence folder is `evidence`
    ("" when there is none)."""
    res = _result(evidence) or {}
    return next((x["summary"] for x in res.get("findings") or []
                 if x.get("result") == "violated" and not x.get("assumption")
                 and key.startswith(f"{x.get('check')}:")), "")


def trace_of(evidence: str) -> Any:
    """The abstract history (trace.Trace) of the run whose evidence folder is `evidence`, or None."""
    from harness.explore.trace import Trace

    res = _result(evidence)
    return Trace.from_events(res["events"], res["namespace"], res["jobs"]) if res else None
