"""The generator: perturbations of a run's trace, pruned and put in a stated order; extensions of a run
that reached new states; the shard split.

Order (the heuristic; docs/architecture.md "explore"):

- **Stage 0 begins with the control's delete steps deleting otherwise** (`delete_moves`: propagation Orphan
  or Foreground, or the object kept Terminating by a finalizer): at most three moves per delete step.
- **Stage 0, late loose writes first.** Hold the request of a *loose* Workload status write W (no
  resourceVersion: kube-apiserver applies it whatever happened meanwhile, docs/kueue-notes.md §6) until a
  later event E, or hold its answer until E. A late loose write is the one kind of staleness the API
  server cannot refuse (a strict write held late fails with 409, which Kueue handles by re-reading).
  W in request order; for each W, E on the same object first, then E on other objects, each by time;
  for each E, "answered" before "delivered".
  Then the second write of a loose kind the reference made more than once, held (`skip: 1`) until a later
  event, a later write of another kind counted as its nth (`count` trigger: kueue#9591's requeue of b after
  its ClusterQueue's quota grew, held until a was updated).
- **Extensions of a run that reached a new state** (any fact of `Trace.facts` no earlier run had, and the
  forced ordering happened, and no violation): the run's plan plus one more move on a write of *that
  run's* trace. Writes its triggers waited for come first (the first move made them part of the race),
  then writes on the same objects, then the rest; held answers before held requests. The first
  `FRONT` extensions of a run go before every remaining root of its stage (a fuzzer's "new coverage
  first"), the rest after them. Depth is capped (`max_depth`).
- **Stage 2, everything else**, its families taken in turn: holds of strict and Job writes, unobserved
  states (drop/delay the watch events up to W's result), failed writes (409 / 500 once), restarts right
  after W was answered (SIGTERM, SIGKILL), failed writes three times, a write that keeps failing (every
  time: how Kueue retries a write it cannot make, kueue#9428; evictions first, admissions last; and every
  time after the first one or two of a kind the reference made more than once, kueue#9015), and the
  case's own user steps moved earlier (`earlier`: a create, patch or delete of the control's plan run
  without waiting for one of its triggers — a concurrent user). The driver takes every 4th run from this
  stage (driver.OTHERS_EVERY).
- **Unblocked steps**: a run whose perturbation kept a step of the case's own plan from running (its
  trigger never held: the preemptor a failing eviction starves is never admitted) is tried again at
  once with that step run earlier too (`unblocked`), so the scene the control plays still happens.

Pruning: one acting move per write kind and object role; a request is never held until its own
consequence (`is_consequence`: Kueue's watch delivering it, or a write of the same object that Kueue's job
reconciler makes only after seeing it — a held admission never sees its Job unsuspended); E must be a different target whose event came
after W's request in the trace; only the case's namespace; Workload creations are failed, never held (a
case waits for its Workload to exist); a watch event is dropped only when a later event of the same object
exists in the trace (Kueue should still see the object as it is, like after a re-list: the "unobserved
intermediate state" of Sieve, not a lost object; a run where it did not is discarded by the
`watch_caught_up` assumption, since that later event may have been Kueue's reaction to the dropped one); combinations whose triggers can never hold, or which the plan loader refuses
(trigger cycles), are not run; a plan equal to one generated before is not generated again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.explore.model import (
    WATCH_DELAY,
    After,
    Candidate,
    Move,
    Plan,
    Target,
    delete_as_move,
    plan_key,
    step_move,
    validate,
)
from harness.explore.trace import Trace, WriteStep

#: Extensions of one novel run that go before the remaining roots of its stage.
FRONT = 4
#: Extensions of one run generated at most.
MAX_EXTENSIONS = 24

#: Writes Kueue makes only after it has *seen* the result of another write of the same object role, so that
#: holding that write's request until one of them can never end by its trigger (the hold would wait for
#: its own consequence). Source: Kueue's job reconciler (pkg/controller/jobframework/reconciler.go,
#: v0.16-v0.19): it unsuspends a Job once the Workload it reads from its informer is admitted
#: (`admission` -> `job_unsuspend`), suspends it once the Workload is evicted (`eviction` -> `job_suspend`)
#: (and, if it ran, only after its admission: ALSO_AFTER),
#: and clears the quota reservation of an evicted Workload once its Job is suspended and has no active
#: Pods (`job_suspend` -> `quota_release`). Closed transitively by `consequences`.
CAUSES: dict[str, tuple[str, ...]] = {
    "admission": ("job_unsuspend",),
    "eviction": ("job_suspend",),
    "job_suspend": ("quota_release",),
}
#: Write kinds that follow a write only through another one, and not what follows from them: a Job is
#: suspended again only once it ran, so the suspend PATCH of an evicted Workload's Job comes after the Job
#: was unsuspended, hence after Kueue saw the admission (a Job still suspended needs no PATCH). Its quota
#: release does not: an evicted Workload whose Job never ran has its quota released all the same (the late
#: admission of #11480 scenario 2 is held exactly until that). Without it, "hold the admission of v1 until
#: the Job suspend of v1 was answered" was generated and could only time out (kueue_14863's control).
ALSO_AFTER: dict[str, tuple[str, ...]] = {"admission": ("job_suspend",)}


def consequences(cls: str) -> set[str]:
    """Write kinds (of the same object role) that follow from a write of kind `cls` once Kueue saw its
    result: the transitive closure of CAUSES ("eviction" -> {"job_suspend", "quota_release"})."""
    out: set[str] = set()
    todo = list(CAUSES.get(cls, ()))
    while todo:
        c = todo.pop()
        if c not in out:
            out.add(c)
            todo.extend(CAUSES.get(c, ()))
    return out | set(ALSO_AFTER.get(cls, ()))


def is_consequence(held: Target, a: After) -> bool:
    """Whether trigger `a` is a causal consequence of the *request* of `held`: Kueue's watch delivering
    `held`'s own result, or a write of the same role whose kind follows from it (CAUSES). A hold of the
    request until such a trigger can only end by its timeout, so it is never generated. (A held *answer*
    does not block them: kube-apiserver applied the write, and Kueue's controllers see it by watch.)"""
    if a.target.rule_id == held.rule_id:
        return True
    return a.target.role == held.role and a.target.cls in consequences(held.cls)


def later_events(trace: Trace, w: WriteStep, skip: Iterable[str] = ()) -> list[After]:
    """Triggers for "until E" after write `w` in `trace`: every other target's first write answered 2xx
    after `w` was requested ("answered", with that status) and, for Workload writes answered 200, Kueue's
    watch delivering its result after that ("delivered"). Same object first; Workload writes before Job
    writes (Kueue writes a Job in reaction to its Workload: holding the Workload write until then mostly
    waits for its own consequence); then by time. `skip`: rule ids not to use (the plan's own targets)."""
    skip = set(skip) | {w.target.rule_id}
    found: list[tuple[int, float, int, After]] = []
    for e in trace.first_writes():
        if e.target.rule_id in skip or e.status is None or not 200 <= e.status < 300:
            continue
        if e.target.cls == "create" and e.target.role == w.target.role:
            continue  # an object's creation precedes every write to it; only its answer can come late
        same = 0 if e.target.role == w.target.role else 1
        job = 1 if e.target.cls in ("job_suspend", "job_unsuspend") else 0
        if e.answered is not None and e.answered > w.ts:
            found.append((same, job, e.answered, 0, After(e.target, "answered", e.status)))
        at = trace.delivered_at(e)
        if at is not None and at > w.ts:
            found.append((same, job, at, 1, After(e.target, "delivered", None)))
    found.sort(key=lambda x: x[:4])
    return [a for *_, a in found]


def later_writes(trace: Trace, w: WriteStep) -> list[After]:
    """Triggers for "until E" after a *later* write `w` (not its kind's first): `later_events`, then every
    other target's 2nd or later write answered 2xx after `w` was requested, as its nth write answered (a
    `count` trigger): the events after a second write are mostly second writes too."""
    seen: dict[str, int] = {}
    more: list[tuple[int, float, After]] = []
    for x in trace.writes:
        seen[x.target.rule_id] = seen.get(x.target.rule_id, 0) + 1
        n = seen[x.target.rule_id]
        if (n > 1 and x.target.rule_id != w.target.rule_id and x.status is not None and 200 <= x.status < 300
                and x.answered is not None and x.answered > w.ts and x.target.cls not in ("create", "watch")):
            same = 0 if x.target.role == w.target.role else 1
            more.append((same, x.answered, After(x.target, "answered", x.status, n)))
    more.sort(key=lambda t: t[:2])
    return later_events(trace, w) + [a for *_, a in more]


def event_time(trace: Trace, a: After) -> float | None:
    """When trigger `a` held in `trace` (its write answered, or its result delivered), or None."""
    w = next((x for x in trace.first_writes() if x.target.rule_id == a.target.rule_id), None)
    if w is None:
        return None
    return w.answered if a.mode == "answered" else trace.delivered_at(w)


def _holdable(w: WriteStep) -> bool:
    return w.target.cls not in ("create", "watch")


def _loose_workload(w: WriteStep) -> bool:
    return w.loose and w.target.cls not in ("create", "job_suspend", "job_unsuspend", "watch")


def _holds(trace: Trace, writes: list[WriteStep], kinds=("hold", "hold_response"),
           skip: Iterable[str] = ()) -> list[tuple[str, Move]]:
    out: list[tuple[str, Move]] = []
    for w in writes:
        for a in later_events(trace, w, skip):
            for kind in kinds:
                if kind == "hold" and is_consequence(w.target, a):
                    continue
                out.append((f"{'stale' if kind == 'hold' else 'late-answer'}", Move(kind, w.target, (a,))))
    return out


#: Step kinds of a case's own plan that a user does (the rest wait or sleep): the "moved" family moves them.
USER_STEPS = ("create", "patch", "delete")


def earlier(steps: Mapping[str, Mapping[str, Any]], sid: str) -> list[list[dict[str, Any]]]:
    """Trigger lists that run step `sid` of the case's own plan earlier than its own triggers do (`steps`:
    the case's loaded steps, CaseContext.loaded_steps: {id: {"after", "action", "previous"}}), each a plan's
    `steps_after` value: one trigger left out of several (the step no longer waits for it); a step that waits
    for a `wait` step runs when that wait began instead (on its triggers); a step on one other trigger runs
    after the step before it. A concurrent user acting before Kueue finished what the control waits for:
    kubernetes-sigs/kueue#10759 (queues deleted while an admission is in flight), #10901 (a Workload
    deactivated while its preemption is in flight), #14863 (a Workload submitted while a preemption fails)."""
    st = steps.get(sid) or {}
    after = [dict(t) for t in st.get("after") or []]
    alts: list[list[dict[str, Any]]] = []
    if len(after) >= 2:
        alts += [after[:i] + after[i + 1:] for i in range(len(after))]
    elif len(after) == 1:
        t = after[0]
        waited = steps.get(str(t.get("step"))) if "step" in t else None
        if waited is not None and waited.get("action") == "wait":
            alts.append([dict(x) for x in waited.get("after") or []])
        elif "step" not in t:
            prev = st.get("previous")
            alts.append([{"step": prev}] if prev else [])
    out: list[list[dict[str, Any]]] = []
    for a in alts:
        if a != after and a not in out:
            out.append(a)
    return out


def step_moves(steps: Mapping[str, Mapping[str, Any]] | None) -> list[Move]:
    """The "moved" family: every user step (USER_STEPS) of the case's own plan run earlier (`earlier`)."""
    return [step_move(sid, a) for sid, st in (steps or {}).items() if st.get("action") in USER_STEPS
            for a in earlier(steps or {}, sid)]


#: Seconds a "kept Terminating" delete keeps its object Terminating (a finalizer's time): the scene of
#: kubernetes-sigs/kueue#12820, where a Job's own finalizer held it 5 s while its Pod still ran.
KEEP_TERMINATING = 5.0


def delete_moves(steps: Mapping[str, Mapping[str, Any]] | None) -> list[Move]:
    """The "deleted otherwise" family: every delete step of the case's own plan deleting the way a user or a
    controller may delete the same object instead — with propagation Orphan (`kubectl delete
    --cascade=orphan`: its dependents stay, ownerless; kubernetes-sigs/kueue#1789, an orphaned Workload that
    kept its quota for ever), Foreground (the owner stays Terminating until its dependents are gone), and kept
    Terminating KEEP_TERMINATING s by a finalizer (#12820: a Terminating Job's Workload finished while its Pod
    still ran). The ways the step deletes already are left out."""
    out: list[Move] = []
    for sid, st in (steps or {}).items():
        if st.get("action") != "delete":
            continue
        spec = st.get("delete")
        spec = spec if isinstance(spec, Mapping) else {}
        for prop in ("Orphan", "Foreground"):
            if spec.get("propagation") != prop:
                out.append(delete_as_move(sid, propagation=prop))
        if not spec.get("keep_terminating"):
            out.append(delete_as_move(sid, keep_terminating=KEEP_TERMINATING))
    return out


def unblocked(parent: Plan, steps: Mapping[str, Mapping[str, Any]] | None, unrun: list[str]) -> list[Move]:
    """Moves that let the first step of `unrun` (the case's steps a run of `parent` never ran: its
    perturbation blocked their triggers, as a preemption failed every time blocks "the preemptor was
    admitted") run anyway: right after the step before it (none of its triggers: the perturbation may have
    blocked them all), then earlier by one trigger (`earlier`); none when `parent` already moves that step."""
    moved = {m.target.role for m in parent if m.kind == "step"}
    first = next((sid for sid in unrun if sid in (steps or {})), None)
    if first is None or first in moved:
        return []
    prev = (steps or {})[first].get("previous")
    alts = [[{"step": prev}] if prev else []] + earlier(steps or {}, first)
    return [step_move(first, a) for i, a in enumerate(alts) if a not in alts[:i]
            and a != (steps or {})[first].get("after")]


def unblocked_candidates(cand: Candidate, steps: Mapping[str, Mapping[str, Any]] | None, unrun: list[str],
                         seen: set, max_depth: int = 3) -> list[Candidate]:
    """`cand` plus each move of `unblocked` (at most `max_depth` + 1 moves; valid, new: `seen` is updated), as
    stage-0 candidates: a run of `cand` blocked a step of the case's own plan, so these go next."""
    out: list[Candidate] = []
    if len(cand.moves) > max_depth:
        return out
    for m in unblocked(cand.moves, steps, unrun):
        plan = (*cand.moves, m)
        k = (cand.case, plan_key(plan))
        if k in seen or validate(plan):
            continue
        seen.add(k)
        out.append(Candidate(plan, cand.case, "unblocked", depth=len(plan), parent=cand.id or None, stage=0))
    return out


def root_moves(trace: Trace, steps: Mapping[str, Mapping[str, Any]] | None = None) -> list[tuple[int, str, Move]]:
    """Every single-move perturbation of a reference trace, as (stage, family, move), in the order of the
    module docstring (not yet pruned by the plan loader); `steps`: the case's own plan steps as its
    reference run loaded them (the "moved" family)."""
    first = trace.first_writes()
    loose = [w for w in first if _loose_workload(w)]
    other = [w for w in first if _holdable(w) and not _loose_workload(w)]
    out: list[tuple[int, str, Move]] = []
    # Stage 0 begins with the control's delete steps deleting otherwise: a few moves per delete step (three
    # ways), each a scene the control lacks rather than an ordering of it. Behind the late loose writes they
    # waited for every 4th run's turn: kueue#12820's slow finalizer was not reached in 47 perturbations.
    out += [(0, "deleted", m) for m in delete_moves(steps)]
    # Then late loose Workload writes (every E of one W, held request then held answer).
    for w in loose:
        for a in later_events(trace, w):
            if not is_consequence(w.target, a):
                out.append((0, "stale", Move("hold", w.target, (a,))))
            out.append((0, "late-answer", Move("hold_response", w.target, (a,))))
    # Then the 2nd write of a loose kind the reference made more than once (a later write of the same
    # kind and object held late: kueue#9591, b's requeue after its ClusterQueue's quota grew, held until a
    # was updated), until an event after *that* write.
    for w in loose:
        again = [x for x in trace.writes if x.target.rule_id == w.target.rule_id and x.ts > w.ts][:1]
        for w2 in again:
            for a in later_writes(trace, w2):
                if not is_consequence(w2.target, a):
                    out.append((0, "stale", Move("hold", w2.target, (a,), skip=1)))
                out.append((0, "late-answer", Move("hold_response", w2.target, (a,), skip=1)))
    # Stage 2: the rest, one family after the other in turn (each family in its own order), so that
    # however far the budget reaches, every family got its first candidates.
    fams: list[list[tuple[str, Move]]] = [_holds(trace, other), [], [], [], [], [],
                                          [("moved", m) for m in step_moves(steps)], []]
    for role in dict.fromkeys(d.role for d in trace.deliveries):
        mods = trace.modified(role)
        glob = mods[0].glob if mods else ""
        for k in range(1, len(mods)):  # drop the first k only when a later event of the object follows
            fams[1].append(("unobserved", Move("drop_watch", Target("watch", role, glob), times=k)))
        for k in range(1, len(mods) + 1):
            fams[1].append(("unobserved", Move("delay_watch", Target("watch", role, glob), times=k,
                                                delay=WATCH_DELAY)))
    for w in first:
        for status in (409, 500):
            fams[2].append(("failed", Move("fail", w.target, status=status, times=1)))
    for w in first:
        if w.status == 200:
            for kill in (False, True):
                fams[3].append(("restart", Move("restart", w.target, kill=kill)))
    for w in first:
        for status in (409, 500):
            fams[4].append(("failed", Move("fail", w.target, status=status, times=3)))
    # A write that keeps failing (`times: null`): kueue#9428's repeated eviction requests, kueue#14863's
    # preemption that never completes. Evictions first: a victim whose eviction keeps failing holds its quota,
    # and the preemptor waiting behind it is what the progress oracles judge; admissions last: an admission
    # failed every time starves only its own Workload, and under it no progress invariant is judged
    # (oracles.not_judged), so such a run can find a safety violation only.
    keep_failing = sorted((w for w in first if w.target.cls != "create"),
                          key=lambda w: {"eviction": 0, "admission": 2}.get(w.target.cls, 1))
    for w in keep_failing:
        fams[5].append(("failing", Move("fail", w.target, status=500, times=None)))
    # A write that starts failing after the first (or second) of its kind went through, where the reference
    # made it more than once: a later write of the same kind and object that Kueue cannot make, while the
    # first one's effect stands — kueue#9015: an elastic Job's first slice admitted and running, every
    # admission of its scaled-up slice failing.
    made = {}
    for x in trace.writes:
        made[x.target.rule_id] = made.get(x.target.rule_id, 0) + 1
    for w in keep_failing:
        for k in range(1, min(made.get(w.target.rule_id, 0), 3)):
            fams[7].append(("failing", Move("fail", w.target, status=500, times=None, skip=k)))
    for i in range(max(len(f) for f in fams)):
        for f in fams:
            if i < len(f):
                out.append((2, *f[i]))
    return out


def roots(trace: Trace, case: str, seen: set | None = None,
          steps: Mapping[str, Mapping[str, Any]] | None = None) -> list[Candidate]:
    """The root candidates of a case from its reference trace: valid, deduplicated, in order; `seen`
    ((case, plan key) of every candidate generated before: the same plan on another case is another
    experiment) is updated."""
    seen = seen if seen is not None else set()
    out = []
    for stage, fam, m in root_moves(trace, steps):
        plan = (m,)
        k = (case, plan_key(plan))
        if k in seen or validate(plan):
            continue
        seen.add(k)
        c = Candidate(plan, case, fam, depth=1, stage=stage)
        if m.kind in ("hold", "hold_response") and m.after:
            c.meta["until"] = event_time(trace, m.after[0])  # for the driver's "blocked" pruning
        out.append(c)
    return out


def blocked_key(c: Candidate) -> tuple[str, str, str] | None:
    """(case, hold kind, target) of a single-hold root candidate, the key of the driver's blocked pruning:
    when holding W until E timed out (E never came: W's hold blocked it, as a held eviction blocks Kueue's
    scheduling cycle), holding W the same way until an event that came after E in the reference is not
    run either (the trace is in time order; Kueue's controllers act in sequence)."""
    if c.depth != 1 or c.moves[0].kind not in ("hold", "hold_response") or c.meta.get("until") is None \
            or c.moves[0].skip or any(a.nth > 1 for a in c.moves[0].after):
        return None  # a hold of a later write, or until one, is ordered by counts the reference times do not give
    return c.case, c.moves[0].kind, c.moves[0].target.rule_id


def extension_moves(parent: Plan, trace: Trace) -> list[tuple[str, Move]]:
    """One more move for plan `parent`, from the trace of its run: holds (answer first, then request) of
    writes the parent's triggers waited for, then of writes on the parent's objects, then of the rest,
    each until an event after it in that trace (module docstring)."""
    acting = {m.rule_id for m in parent}
    waited = {a.target.rule_id for m in parent for a in m.after} | {m.target.rule_id for m in parent if m.kind == "restart"}
    roles = {m.target.role for m in parent}
    first = [w for w in trace.first_writes() if _holdable(w) and w.target.rule_id not in acting]
    tiers = ([w for w in first if w.target.rule_id in waited],
             [w for w in first if w.target.rule_id not in waited and w.target.role in roles],
             [w for w in first if w.target.rule_id not in waited and w.target.role not in roles])
    out: list[tuple[str, Move]] = []
    for tier in tiers:
        out += _holds(trace, tier, kinds=("hold_response", "hold"))
    return out


def extensions(parent: Candidate, trace: Trace, seen: set, max_depth: int = 3) -> list[Candidate]:
    """Candidates extending `parent` by one move of `extension_moves` (valid, new, at most MAX_EXTENSIONS;
    none beyond `max_depth` moves). `seen` is updated."""
    if len(parent.moves) >= max_depth:
        return []
    out = []
    for fam, m in extension_moves(parent.moves, trace):
        plan = (*parent.moves, m)
        k = (parent.case, plan_key(plan))
        if k in seen or validate(plan):
            continue
        seen.add(k)
        out.append(Candidate(plan, parent.case, fam, depth=len(plan), parent=parent.id))
        if len(out) >= MAX_EXTENSIONS:
            break
    return out


def interleave(per_case: list[list[Candidate]]) -> list[Candidate]:
    """One list from each case's roots: by stage, then position within the case's candidates of that
    stage, then case order (so every case gets its best candidates early)."""
    keyed = []
    for j, cands in enumerate(per_case):
        within: dict[int, int] = {}
        for c in cands:
            within[c.stage] = within.get(c.stage, -1) + 1
            keyed.append((c.stage, within[c.stage], j, c))
    keyed.sort(key=lambda x: (x[0], x[1], x[2]))
    return [c for *_, c in keyed]


def parse_shard(text: str | None) -> tuple[int, int]:
    """"2/4" -> (2, 4) (shards are numbered from 1); None -> (1, 1). Raises ValueError with what to write."""
    if not text:
        return 1, 1
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected I/N, e.g. 1/4") from None
    if n < 1 or not 1 <= i <= n:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N (N >= 1)")
    return i, n


def shard(cands: list[Candidate], i: int, n: int) -> list[Candidate]:
    """Shard `i` of `n` of an ordered root list: every n-th candidate from the (i-1)-th, so every shard
    gets a share of each stage. Disjoint, and together the whole list, when every machine computes the
    same list (the same reference: `explore --reference`)."""
    return [c for k, c in enumerate(cands) if k % n == i - 1]
