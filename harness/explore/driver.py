"""`kueue-harness explore`: the search loop around real runs, its summary table, and `explore merge`.

1. **Reference**: each control case runs once under the observe-only plan; its trace (trace.py) is the generator's
   input (reference/<case>.json; `--reference DIR` reuses one, so shards on several machines start alike).
2. **Search**: candidates (generate.py) wait in one priority queue; batches of `--batch` runs go to one
   pytest process each (one environment per batch; `--explore-runs`, harness/explore/plugin.py). After
   each batch a run is *discarded* (the forced ordering did not happen: an assumption failed), *passed*,
   or a *violation* (an invariant failed; a known bug's when its signature explains it: known.py). A passed
   run that reached a state no earlier run reached is extended (generate.py). A no-op run (the observe-only
   plan) goes into every `--noop-every` runs: any violation it shows is a false positive of the oracles.
3. **Confirm, strengthen, minimise** each distinct violation (checker + subject, e.g.
   `liveness:job2:stuck`) when first found (minimize.py, `--min-runs` runs per plan): a plan that
   reproduced only sometimes is tried with one more move (the violating run's extensions) until one reproduces
   every time; then moves are dropped one at a time while it reproduces as often. Saved as findings/<key>.yaml
   with the replay commands and an evidence bundle of a reproducing run.
4. **Output**: explore.json (everything), summary.md (the table), a progress line per run.

Budget: `--minutes` of wall time and `--max-runs` perturbations; the search stops at either, or when the queue is
empty. `--shard I/N` keeps every N-th root (generate.shard); extensions stay in their shard.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checkers import REGISTRY
from harness.common import paths
from harness.common.errors import HarnessError
from harness.explore import PROGRESS_FILE, RESULT_FILE, generate, oracles, salvage
from harness.explore.cases import case_slug, resolve_case  # noqa: F401 - resolve_case: re-exported
from harness.explore.findings import (
    cluster_key,
    clusters,
    finding_header,
    key_matches,
    outcome,
    summary_of,
    trace_of,
    violation_keys,
    write_lead,
)
from harness.explore.known import KnownBugs
from harness.explore.minimize import minimize, strengthen
from harness.explore.model import Candidate, Plan, move_to_dict, plan_document, plan_key, plan_words
from harness.explore.plugin import same_case
from harness.explore.stream import Stream
from harness.explore.tables import progress_kind, progress_line, render_summary
from harness.explore.trace import Trace

ROOT = paths.ROOT
CASES_DIR = paths.CASES_DIR
#: Seconds a batch may take per run before its pytest process is stopped (a run takes 3-20 s).
BATCH_SECONDS_PER_RUN = 90.0
#: Every OTHERS_EVERY-th perturbation comes from the later stages (Explorer.pop).
OTHERS_EVERY = 4
#: Plans with one more move tried for a violation that reproduced only sometimes (minimize.strengthen).
STRENGTHEN = 6
#: Share of the budget that confirming and minimising findings may take in all (issue 25: <= 15 %).
MINIMIZE_SHARE = 0.15


@dataclass
class RunRecord:
    id: str
    case: str
    words: str
    moves: list[dict[str, Any]]
    family: str
    depth: int
    parent: str | None
    outcome: str = ""
    reason: str = ""
    keys: list[str] = field(default_factory=list)
    novelty: int = 0
    seconds: float = 0.0
    at_minutes: float = 0.0
    index: int = 0
    #: "reference" | "noop" | "perturbation" | "minimize"
    role: str = "perturbation"
    plan: str = ""
    evidence: str = ""
    bundle: str = ""
    #: A discarded run's violated invariants (salvage.violated_keys): counted and listed, and replayed as
    #: the plan that happened (salvage.as_happened) when only the plan's own assumption failed.
    violated: list[str] = field(default_factory=list)
    #: What became of such a run: "kept as <key>", "replay did not reproduce", "not replayable".
    salvage: str = ""


class Explorer:
    """One exploration (module docstring). `cases`: node ids; `spec`: the Kueue build (KueueSpec); `out`:
    its folder; `say`: where progress lines go."""

    def __init__(self, cases: list[str], spec: Any, out: Path, *, minutes: float = 30.0, max_runs: int = 400,
                 batch: int = 10, shard: tuple[int, int] = (1, 1), max_depth: int = 3, min_runs: int = 5,
                 noop_every: int = 20, reference: Path | None = None, minimize_minutes: float = 6.0,
                 stop_after: int | None = None, stop_on: tuple[str, ...] = (), reference_only: bool = False, stream: bool = True,
                 oracles: tuple[str, ...] = (), workers: int = 1, known: dict[str, Any] | None = None,
                 say: Callable[[str], None] = print) -> None:
        self.cases, self.spec, self.out, self.say = cases, spec, out, say
        #: `--oracle NAME[=JSON]` values passed on to every batch (harness/explore/plugin.py parse_oracles).
        self.user_oracles = tuple(oracles)
        self.budget, self.max_runs, self.batch = minutes * 60.0, max_runs, max(1, batch)
        self.shard, self.max_depth, self.min_runs, self.noop_every = shard, max_depth, max(1, min_runs), max(1, noop_every)
        self.reference_dir, self.minimize_budget, self.stop_after = reference, minimize_minutes * 60.0, stop_after
        self.reference_only = reference_only
        #: `--stop-on KEY` values: the search ends once a finding's key is named by one (findings.key_matches).
        self.stop_on = tuple(stop_on)
        #: One environment for the whole search (harness/explore/stream.py), else one per batch.
        self.streaming = stream
        #: pytest processes (environments) on the stream at once (stream.Stream `workers`).
        self.workers = max(1, int(workers))
        self.stream: Stream | None = None
        self.t0 = time.monotonic()
        self.queue: list[tuple[int, int, int, int, Candidate]] = []
        self.seq = 0
        self.seen_plans: set = set()
        self.coverage: set = set()
        self.runs: list[RunRecord] = []
        self.cands: dict[str, Candidate] = {}
        self.findings: dict[str, dict[str, Any]] = {}
        #: Violations whose confirming runs never reproduced them (or found no time to run): not findings.
        self.leads: list[dict[str, Any]] = []
        self.known = KnownBugs(known)  # muted bugs: a violation they explain is never a finding (known.py)
        self.batches = 0
        self.tried = 0
        #: Perturbation ids handed out (next_items): a refill takes the next ones before the batch is recorded.
        self.issued = 0
        self.since_noop = 0
        self.noops = 0
        #: generate.blocked_key -> the reference time of the earliest trigger a hold of that kind never
        #: reached; `pruned` counts the candidates not run because of it.
        self.blocked: dict[tuple[str, str, str], float] = {}
        self.pruned = 0
        self.pops = 0
        self.kueue_version = ""
        #: case -> the oracles its reference run makes meaningful (oracles.choose).
        self.oracles: dict[str, dict[str, dict[str, Any]]] = {}
        #: case -> the steps of its own plan as its reference run loaded them (CaseContext.loaded_steps): what
        #: the "moved" family and `unblock` move.
        self.steps: dict[str, dict[str, Any]] = {}
        #: Seconds spent confirming and minimising findings so far (MINIMIZE_SHARE of the budget at most).
        self.minimize_spent = 0.0
        #: Runs of this batch finished so far, by outcome word (the progress lines' counters).
        self.batch_tally: dict[str, int] = {}
        #: Runs the batch under way was given (its progress lines say how many a refill added).
        self.batch_size = 0

    # ---- helpers ----------------------------------------------------------------------------
    def minutes(self) -> float:
        return (time.monotonic() - self.t0) / 60.0

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def push(self, c: Candidate, place: str = "root", novelty: int = 0) -> None:
        """Queue `c`: a "root" at its stage; a "front" extension before the remaining roots of its stage; a
        "rest" extension after them (before the next stage's roots). Extensions of a run that reached more
        new states first (`novelty`), then first in, first out."""
        self.seq += 1
        c.seq = self.seq
        key = {"root": (c.stage, 1), "front": (c.stage, 0), "rest": (c.stage + 1, 0)}[place]
        heapq.heappush(self.queue, (*key, -novelty, self.seq, c))

    def pop(self) -> Candidate:
        """The next candidate: the queue's first, except that every OTHERS_EVERY-th pop takes the first of
        stage 2 or later when there is one (the other families: failed writes, unobserved states,
        restarts, holds of strict and Job writes), so every family is tried from the start."""
        self.pops += 1
        if self.pops % OTHERS_EVERY == 0:
            later = [e for e in self.queue if e[0] >= 2]
            if later:
                best = min(later)
                self.queue.remove(best)
                heapq.heapify(self.queue)
                return best[-1]
        return heapq.heappop(self.queue)[-1]

    def counts(self) -> dict[str, int]:
        real = [r for r in self.runs if r.role == "perturbation"]
        noop = [r for r in self.runs if r.role == "noop"]
        return {"tried": len(real), "discarded": sum(r.outcome == "discarded" for r in real),
                "discarded_violating": sum(bool(r.violated) for r in real),
                "salvaged": sum(r.salvage.startswith("kept") for r in real),
                "errors": sum(r.outcome == "error" for r in real), "passed": sum(r.outcome == "passed" for r in real),
                "violations": sum(r.outcome == "violation" for r in real),
                "distinct": len({f["key"] for f in self.findings.values()}),
                "variants": sum(1 for f in self.findings.values() if f.get("variant_of")),
                "leads": len(self.leads), "known": len(self.known.runs),
                "pruned_blocked": self.pruned,
                "noop_runs": len(noop), "false_positives": sum(r.outcome == "violation" for r in noop),
                "noop_discarded": sum(r.outcome in ("discarded", "error") for r in noop)}

    # ---- running a batch ------------------------------------------------------------------------
    def run_batch(self, items: list[tuple[str, Candidate | None, str]],
                  refill: Callable[[int], list[tuple[str, Candidate | None, str]]] | None = None,
                  ) -> dict[str, dict[str, Any] | None]:
        """Run `items` ((run id, candidate or None for the observe-only plan, case)) in one pytest process;
        returns {run id: explore.json or None}. Prints a progress line per finished run. `refill()`: items
        for a worker idle at the batch's tail (stream.Stream.run), their results returned too."""
        self.batches += 1
        self.batch_size = len(items)
        runs = self._runs_of(items)
        if self.streaming:
            if self.stream is None:
                self.stream = Stream(self._stream_cmd, self.out / "stream", ROOT, self.cases,
                                     per_run=BATCH_SECONDS_PER_RUN, workers=self.workers, say=self.say)
            self.batch_tally = {}
            got = self.stream.run(runs, same_case, self._progress,
                                  refill=(lambda n: self._runs_of(refill(n))) if refill is not None else None)
            for res in got.values():
                if res is not None:
                    self.kueue_version = res.get("kueue_version") or self.kueue_version
            return got
        bdir = self.out / "batches" / f"b{self.batches:04d}"
        bdir.mkdir(parents=True, exist_ok=True)
        (bdir / "runs.json").write_text(json.dumps({"runs": runs}, indent=1))
        targets = sorted({r["case"] for r in runs})
        cmd = [sys.executable, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-q", "-rN", "--no-verdict-table",
               *self.spec.cli_args(), f"--artifacts-dir={bdir}", f"--explore-runs={bdir / 'runs.json'}",
               "--explore-bundles=violations", *(f"--oracle={o}" for o in self.user_oracles)]
        progress = bdir / PROGRESS_FILE
        seen = 0
        self.batch_tally = {}
        with open(bdir / "pytest.log", "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
            deadline = time.monotonic() + 60.0 + BATCH_SECONDS_PER_RUN * len(items)
            try:
                while True:
                    try:
                        proc.wait(timeout=1.0)
                        done = True
                    except subprocess.TimeoutExpired:
                        done = False
                    if progress.is_file():
                        lines = progress.read_text().splitlines()
                        for line in lines[seen:]:
                            seen += 1
                            self._progress(json.loads(line), seen, len(items))
                    if done:
                        break
                    if time.monotonic() > deadline:
                        self.say(f"[explore] batch {self.batches} took too long: stopping its pytest process")
                        os.killpg(proc.pid, signal.SIGTERM)
                        try:
                            proc.wait(timeout=30)
                        except subprocess.TimeoutExpired:
                            os.killpg(proc.pid, signal.SIGKILL)
                            proc.wait()
                        break
            except KeyboardInterrupt:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
                raise
        summary_file = bdir / "summary.json"
        summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {"cases": []}
        self.kueue_version = summary.get("kueue_version") or self.kueue_version
        out: dict[str, dict[str, Any] | None] = {rid: None for rid, _, _ in items}
        for entry in summary.get("cases", []):
            m = re.search(r"\[([^\]]+)\]$", entry.get("case", ""))
            if not m or m.group(1) not in out:
                continue
            res_file = Path(entry.get("evidence", "")) / RESULT_FILE
            if res_file.is_file():
                res = json.loads(res_file.read_text())
                res["bundle"] = entry.get("bundle", "")
                res["summary_verdict"] = entry.get("verdict")
                out[m.group(1)] = res
        if not summary.get("cases"):
            tail = (bdir / "pytest.log").read_text(errors="replace")[-1200:]
            self.say(f"[explore] batch {self.batches} ran no case; the end of its pytest.log:\n{tail}")
        return out

    def _runs_of(self, items: list[tuple[str, Candidate | None, str]]) -> list[dict[str, Any]]:
        """The runs-file entries of `items`, their plans written under plans/."""
        runs = []
        for rid, cand, case in items:
            moves = cand.moves if cand is not None else ()
            pfile = self.out / "plans" / f"{rid}.yaml"
            pfile.parent.mkdir(parents=True, exist_ok=True)
            pfile.write_text(plan_document(moves, f"explore-{rid}", header=f"kueue-harness explore run {rid} on {case}"))
            runs.append({"id": rid, "case": case, "plan": str(pfile),
                         "words": cand.words() if cand is not None else "no fault (observe only)",
                         "oracles": self.oracles.get(case, {}), "not_judged": oracles.not_judged(moves)})
        return runs

    def _stream_cmd(self, art: Path) -> list[str]:
        return [sys.executable, "-m", "pytest", *self.cases, "-p", "no:cacheprovider", "-q", "-rN",
                "--no-verdict-table", *self.spec.cli_args(), f"--artifacts-dir={art}",
                f"--explore-stream={self.out / 'stream'}", "--explore-bundles=violations",
                *(f"--oracle={o}" for o in self.user_oracles)]

    def _progress(self, line: dict[str, Any], k: int, n: int) -> None:
        """A progress line; its counters are the table's (counts()) plus this batch's runs so far."""
        what = progress_kind(line)
        if not str(line.get("run", "")).split("-")[-1].startswith(("n", "m", "ref", "r", "h")):  # a perturbation
            self.batch_tally[what] = self.batch_tally.get(what, 0) + 1
        self.say(progress_line(self.minutes(), self.batches, k, n, n - self.batch_size, line, what, self.counts(),
                               self.batch_tally, len(self.queue)))

    def record(self, rid: str, cand: Candidate | None, case: str, res: dict[str, Any] | None,
               role: str = "perturbation") -> RunRecord:
        kind, reason = outcome(res)
        rec = RunRecord(rid, case, cand.words() if cand else "no fault (observe only)",
                        [move_to_dict(m) for m in (cand.moves if cand else ())], cand.family if cand else "noop",
                        cand.depth if cand else 0, cand.parent if cand else None, kind, reason,
                        violation_keys((res or {}).get("findings") or []) if kind == "violation" else [],
                        seconds=float((res or {}).get("seconds") or 0.0), at_minutes=round(self.minutes(), 2),
                        role=role, plan=str(self.out / "plans" / f"{rid}.yaml"),
                        evidence=str((res or {}).get("evidence", "")), bundle=str((res or {}).get("bundle", "")))
        if kind != "violation" and rec.bundle and not Path(rec.bundle).is_file():
            rec.bundle = ""  # bundles are written for violating runs only (--explore-bundles=violations)
        if kind == "discarded" and res is not None:
            rec.violated = salvage.violated_keys(res.get("findings") or [])
        if role == "perturbation":
            self.tried += 1
            rec.index = self.tried
        self.runs.append(rec)
        return rec

    # ---- phases -----------------------------------------------------------------------------
    def reference(self) -> dict[str, Trace]:
        """Each case's reference trace: from --reference DIR, else a run under the observe-only plan (which
        must pass: a control case that fails without faults cannot tell a perturbation's effect)."""
        traces: dict[str, Trace] = {}
        refdir = self.out / "reference"
        refdir.mkdir(parents=True, exist_ok=True)
        todo = []
        for i, case in enumerate(self.cases):
            src = (self.reference_dir / "reference" / f"{case_slug(case)}.json") if self.reference_dir else None
            if src is not None:
                if not src.is_file():
                    raise HarnessError(f"--reference {self.reference_dir}: no {src.name} there (a folder of an earlier "
                                       "`kueue-harness explore` of this case)")
                res = json.loads(src.read_text())
                (refdir / src.name).write_text(json.dumps(res, indent=1))
                traces[case] = Trace.from_events(res["events"], res["namespace"], res["jobs"])
                self.oracles[case] = oracles.choose(traces[case], res, REGISTRY)
                self.steps[case] = res.get("steps") or {}
            else:
                todo.append((f"ref{i}", None, case))
        if todo:
            self.say(f"[explore] reference run of {', '.join(c.split('::')[-1] for _, _, c in todo)} (observe only)")
            got = self.run_batch(todo)
            for rid, _, case in todo:
                res = got.get(rid)
                rec = self.record(rid, None, case, res, role="reference")
                if rec.outcome != "passed" or res is None:
                    raise HarnessError(f"the reference run of {case} did not pass ({rec.outcome}: {rec.reason or '-'}); "
                                       f"explore needs a control case that passes with no fault. Evidence: "
                                       f"{self.out / 'batches'}")
                (refdir / f"{case_slug(case)}.json").write_text(json.dumps(res, indent=1))
                traces[case] = Trace.from_events(res["events"], res["namespace"], res["jobs"])
                self.oracles[case] = oracles.choose(traces[case], res, REGISTRY)
                self.steps[case] = res.get("steps") or {}
        for t in traces.values():
            self.coverage |= t.facts()
        return traces

    def seed(self, traces: dict[str, Trace]) -> int:
        per_case = [generate.roots(traces[c], c, self.seen_plans, self.steps.get(c)) for c in self.cases]
        roots = generate.shard(generate.interleave(per_case), *self.shard)
        for c in roots:
            self.push(c, "root")
        return len(roots)

    def next_items(self, limit: int | None = None) -> list[tuple[str, Candidate | None, str]]:
        items: list[tuple[str, Candidate | None, str]] = []
        prefix = f"s{self.shard[0]}-" if self.shard[1] > 1 else ""
        while len(items) < (limit or self.batch) and self.queue and self.issued < self.max_runs:
            if self.since_noop >= self.noop_every or self.noops == 0:
                # The observe-only plan, on each case in turn: its violations are the oracles' false positives.
                self.noops += 1
                items.append((f"{prefix}n{self.noops:03d}", None, self.cases[(self.noops - 1) % len(self.cases)]))
                self.since_noop = 0
                continue
            c = self.pop()
            bk = generate.blocked_key(c)
            if bk is not None and bk in self.blocked and c.meta["until"] >= self.blocked[bk]:
                self.pruned += 1
                continue
            self.issued += 1  # ahead of `tried` while a batch and its refills run
            c.id = f"{prefix}p{self.issued:04d}"
            self.cands[c.id] = c
            items.append((c.id, c, c.case))
            self.since_noop += 1
        return items

    def search(self, traces: dict[str, Trace]) -> None:
        while self.queue and self.tried < self.max_runs and self.left() > 0:
            distinct = {f["key"] for f in self.findings.values()}
            if self.stop_after is not None and len(distinct) >= self.stop_after:
                self.say(f"[explore] {len(distinct)} distinct violation(s) found: stopping (--stop-after)")
                break
            named = sorted({k for k in distinct if key_matches(k, self.stop_on)}) if self.stop_on else []
            if named:
                self.say(f"[explore] {', '.join(named)} found: stopping (--stop-on {' '.join(self.stop_on)})")
                break
            items = self.next_items()
            extra: list[tuple[str, Candidate | None, str]] = []

            def refill(n: int) -> list[tuple[str, Candidate | None, str]]:
                # The next batch's first runs, for workers idle at this one's tail (judged with this batch).
                more = self.next_items(limit=min(n, self.workers)) if self.left() > 0 and n > 0 else []
                extra.extend(more)
                return more

            got = self.run_batch(items, refill=refill)
            for rid, cand, case in items + extra:
                res = got.get(rid)
                rec = self.record(rid, cand, case, res, role="noop" if cand is None else "perturbation")
                if cand is None:
                    if rec.outcome == "violation":
                        self.say(f"[explore] FALSE POSITIVE: the no-op run {rid} violated {', '.join(rec.keys)}")
                    continue
                trace = Trace.from_events(res["events"], res["namespace"], res["jobs"]) if res else None
                if rec.outcome in ("passed", "violation") and trace is not None:
                    new = trace.facts() - self.coverage
                    rec.novelty = len(new)
                    self.coverage |= new
                bk = generate.blocked_key(cand)
                if rec.outcome == "discarded" and bk is not None and f"{bk[2]} ended by hold_timeout" in rec.reason:
                    self.blocked[bk] = min(self.blocked.get(bk, float("inf")), cand.meta["until"])
                if rec.violated and res is not None and self.left() > 0:
                    salvage.replay(self, rec, cand, res)
                if rec.outcome != "violation" and res is not None and res.get("unrun_steps"):
                    self.unblock(cand, res["unrun_steps"])
                if rec.outcome == "violation":
                    for key in rec.keys:
                        if not self.known.record(key, rec, res, self.say):
                            self.on_violation(key, rec, cand)
                elif rec.outcome == "passed" and rec.novelty and trace is not None:
                    ext = generate.extensions(cand, trace, self.seen_plans, self.max_depth)
                    for i, e in enumerate(ext):
                        e.stage = cand.stage
                        self.push(e, "front" if i < generate.FRONT else "rest", rec.novelty)

    def unblock(self, cand: Candidate, unrun: list[str]) -> None:
        """A run of `cand` kept a step of the case's own plan from running: try `cand` again with that step run
        earlier (generate.unblocked_candidates), next in line (its perturbation is known to act)."""
        for c in generate.unblocked_candidates(cand, self.steps.get(cand.case), unrun, self.seen_plans, self.max_depth):
            self.push(c, "front", 1)

    def on_violation(self, key: str, rec: RunRecord, cand: Candidate, note: str = "") -> None:
        """Record violation `key` of run `rec`: a run of a known finding's root cause (findings.cluster_key of
        its plan equal to that of the finding's first or minimal plan) is added to its runs; a new key, or a
        known key broken by a plan of another shape — a *variant*, kept with its own plan, confirmed and
        minimised like a finding (kueue#14863: its preemptor stuck once by #11480's late admission, once by
        an eviction that keeps failing: two root causes, one key) — becomes a finding, id `key` or
        `key~N`."""
        cause = cluster_key(key, rec.moves)
        same = [f for f in self.findings.values() if f["key"] == key]
        for f in same:
            if cause in f["causes"]:
                f["runs"].append(rec.id)
                return
        fid = f"{key}~{len(same) + 1}" if same else key
        self.findings[fid] = f = {"key": key, "id": fid, "causes": [cause], "first_run": rec.id,
                                  "first_index": rec.index, "first_minutes": rec.at_minutes, "case": rec.case,
                                  "plan": rec.words, "moves": rec.moves, "runs": [rec.id], "bundle": rec.bundle,
                                  "evidence": rec.evidence, "summary": summary_of(rec.evidence, key)}
        if same:
            f["variant_of"] = same[0]["id"]
        if note:
            f["note"] = note
        self.say(f"[explore] VIOLATION {key} in run {rec.id} after {rec.index} perturbations, "
                 f"{rec.at_minutes:.1f} min: {rec.words}" + (f" (a variant of {same[0]['id']}: {cause})" if same else ""))
        self.minimize_finding(f, cand)
        if f.get("minimal"):
            f["causes"] = list(dict.fromkeys([*f["causes"], cluster_key(key, f["minimal"])]))

    def minimize_finding(self, f: dict[str, Any], cand: Candidate) -> None:
        """Minimise the plan of finding `f` (minimize.py) and save it under findings/ (module docstring)."""
        key, case = f["key"], cand.case
        started = time.monotonic()
        budget = min(self.minimize_budget, MINIMIZE_SHARE * self.budget - self.minimize_spent)
        n = self.min_runs
        counter = [0]
        hit_bundle: dict[Plan, str] = {}

        def evaluate(plans: list[Plan]) -> list[int] | None:
            if time.monotonic() - started > budget:
                return None
            items = []
            for p in plans:
                counter[0] += 1
                for r in range(n):
                    items.append((f"m{len(self.findings):02d}-{counter[0]:02d}-r{r}",
                                  Candidate(p, case, "minimize", depth=len(p)), case))
            got = self.run_batch(items)
            hits = []
            for k, p in enumerate(plans):
                h = 0
                for rid, c, _ in items[k * n:(k + 1) * n]:
                    rec = self.record(rid, c, case, got.get(rid), role="minimize")
                    if rec.outcome == "violation" and key in rec.keys:
                        h += 1
                        hit_bundle.setdefault(p, rec.bundle or rec.evidence)
                hits.append(h)
            return hits

        self.say(f"[explore] confirming {key}: {n} run(s) of {cand.words()}")
        got = evaluate([cand.moves])
        moves, hits = cand.moves, (got or [0])[0]
        f["confirmed"] = f"{hits}/{n}" if got is not None else "not re-run (no time left)"
        if got is None or hits == 0:
            self._to_lead(f, cand, "no time left to re-run it" if got is None else f"0 of {n} confirming runs reproduced it")
            self.minimize_spent += time.monotonic() - started
            return
        known = {plan_key(cand.moves): (hits, n)} if got is not None else {}
        if got is not None and 0 < hits < n and len(cand.moves) < self.max_depth:
            # Reproduced only sometimes: one more move, on the writes of the violating run's race first.
            trace = trace_of(f["evidence"])
            ext = generate.extensions(cand, trace, set(), self.max_depth)[:STRENGTHEN] if trace else []
            self.say(f"[explore] {key} reproduced {hits}/{n}: trying {len(ext)} plan(s) with one more move")
            moves, hits, steps = strengthen(cand.moves, hits, [e.moves for e in ext], evaluate, n)
            f["strengthened"] = [{"plan": plan_words(p), "hits": h} for p, h in steps]
            for p, h in steps:
                known[plan_key(p)] = (h, n)
        self.say(f"[explore] minimising {key}: {len(moves)} move(s), reproduced {hits}/{n}; {n} run(s) per plan")
        m = minimize(moves, evaluate, n, hits=hits if got is not None else None, known=known)
        f["minimal"] = [move_to_dict(x) for x in m.moves]
        f["minimal_words"] = plan_words(m.moves)
        f["reproduced"] = f"{m.hits}/{m.runs}" if m.runs else "not re-run (no time left)"
        f["minimize_complete"] = m.complete
        f["minimize_minutes"] = round((time.monotonic() - started) / 60.0, 2)
        self.minimize_spent += time.monotonic() - started
        f["minimize_steps"] = [{"plan": plan_words(p), "hits": h} for p, h in m.steps]
        f["bundle"] = hit_bundle.get(m.moves) or f["bundle"]
        path = self.out / "findings" / f"{re.sub(r'[^a-z0-9]+', '-', str(f.get('id') or key).lower()).strip('-')}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        header = finding_header(f, self.kueue_version or self.spec.wanted, case, path, self.spec.cli_args(), hits, n)
        path.write_text(plan_document(m.moves, f"explore-{path.stem}", f["minimal_words"], header=header))
        f["file"] = str(path)
        self.say(f"[explore] {key}: minimal plan ({len(m.moves)} move(s), reproduced {f['reproduced']}) -> {path}")

    def _to_lead(self, f: dict[str, Any], cand: Candidate, why: str) -> None:
        """A violation not confirmed is a lead, never a finding: out of `findings`, into `leads` and
        leads/<id>.yaml (findings.write_lead)."""
        self.findings.pop(f["id"], None)
        f["lead"] = why
        f["file"] = str(write_lead(self.out, f, cand.case, cand.moves, why))
        self.leads.append(f)
        self.say(f"[explore] {f['key']} is a lead, not a finding: {why} -> {f['file']}")

    # ---- the whole thing --------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            traces = self.reference()
        except BaseException:
            self.close()
            raise
        if self.reference_only:
            self.close()
            self.say(f"[explore] reference runs saved in {self.out / 'reference'} (for --reference)")
            return self.write()
        roots = self.seed(traces)
        self.say(f"[explore] {roots} root perturbation(s) in shard {self.shard[0]}/{self.shard[1]}; budget "
                 f"{self.budget / 60:.0f} min, at most {self.max_runs} runs")
        try:
            self.search(traces)
        finally:
            self.close()
            result = self.write()
        return result

    def close(self) -> None:
        """Stop the stream's pytest process (its environment) if one runs."""
        if self.stream is not None:
            self.stream.stop()
            self.stream = None

    def write(self) -> dict[str, Any]:
        c = self.counts()
        result = {"cases": self.cases, "kueue": self.kueue_version or self.spec.wanted, "shard": list(self.shard),
                  "minutes": round(self.minutes(), 2), "counts": c, "queue_left": len(self.queue),
                  "batches": self.batches, "findings": list(self.findings.values()), "leads": list(self.leads),
                  "known": self.known.counts(), "known_runs": list(self.known.runs),
                  "clusters": clusters(self.findings.values()),
                  "minimize_minutes": round(self.minimize_spent / 60.0, 2),
                  "runs": [r.__dict__ for r in self.runs],
                  "settings": {"max_runs": self.max_runs, "budget_minutes": self.budget / 60, "batch": self.batch,
                               "max_depth": self.max_depth, "min_runs": self.min_runs, "noop_every": self.noop_every,
                               "workers": self.workers}}
        (self.out / "explore.json").write_text(json.dumps(result, indent=1, default=str))
        (self.out / "summary.md").write_text(render_summary(result))
        return result
