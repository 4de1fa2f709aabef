"""The Mermaid sequence diagram of a case's history (`diagram_lines`) and a structural validator of
Mermaid `sequenceDiagram` text (`validate_sequence_diagram`). Pure over the history.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.checkers import Finding
from harness.checkers.base import restart_cut_flow_errors, rule_loads, verdict_event, within_case
from harness.history import repeats
from harness.history.names import Names, _workload_names, case_t0
from harness.kueue import log as kueue_log
from harness.plan import actions

#: Diagram lines beyond which uneventful watch deliveries and pass-through writes are dropped.
MAX_DIAGRAM_LINES = 90

# =====================================================================================================
# The sequence diagram


_t0 = case_t0


_PARTICIPANTS = (("Test", "Test"), ("Kueue", "Kueue"), ("Proxy", "Proxy"), ("API", "kube-apiserver"))
_KEY_CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Finished")


def _clean(s: str) -> str:
    """Text safe inside a Mermaid sequenceDiagram message or note: `;` ends a statement and `#` starts an
    entity code there, `%%` a comment, and angle brackets are taken as HTML."""
    s = s.replace(";", ",").replace("#", "no. ").replace("%%", "%").replace("<", "‹").replace(">", "›")
    return re.sub(r"\s+", " ", s).strip()


def _wrap(s: str, width: int = 46) -> str:
    return "<br/>".join(textwrap.wrap(_clean(s), width)) or "-"


@dataclass
class _Line:
    ts: float
    text: str
    kind: str = "note"  # "msg" | "note" | "log"
    breaks: bool = True  # whether a Kueue log run stops here
    flow: int | None = None
    pair: str = ""  # "req" | "resp" for pass-through writes that may be merged
    keep: bool = True  # False: may be dropped when the diagram is too long
    extra: dict[str, Any] = field(default_factory=dict)


def _write_label(w: Mapping[str, Any], names: Names) -> str:
    cls = str(w.get("write", "?"))
    name = names.wl(w.get("name"))
    if cls in ("admission", "eviction", "quota_release", "pending", "finish", "other"):
        return f"{cls.replace('_', ' ')} {name} ({'strict' if w.get('strict') else 'loose'})"
    verb = {"post": "create", "put": "update", "patch": "patch", "delete": "delete"}.get(cls, cls)
    return f"{verb} {w.get('kind') or ''} {name}".replace("  ", " ")


def _why(why: str) -> str:
    if why.startswith("triggers:"):
        return "plan: after " + why.split(":", 1)[1].strip()
    return why


def diagram_lines(history: Sequence[Mapping[str, Any]], names: Names | None = None,
                  verdict: str | None = None, findings: Sequence[Finding] = ()) -> list[str]:
    """The body of a Mermaid `sequenceDiagram` (without the ``` fence) telling the case's story: the
    harness's actions (Test), Kueue's classified writes and the answers (through the Proxy, or parked in
    it: holds and releases with their times), watch deliveries that changed a Workload's conditions, and
    Kueue's log milestones, repeated lines collapsed to one note ("×N"). Times are seconds since the case
    started."""
    history = repeats.expand(history)  # summarised floods are drawn (and counted) line by line
    names = names or Names(history)
    t0 = _t0(history)
    # Log lines the verdict did not judge (logged after what it saw) are counted in notes of their own,
    # so a flood note's count is the log-flood checker's.
    judged = {id(e) for e in within_case(history)} if verdict_event(history) is not None else None

    def t(e: Mapping[str, Any]) -> str:
        return f"{e['ts'] - t0:.3f}s"

    # The harness records a step when its API call returns, after Kueue may have reacted to it: draw a
    # Job's creation before the first write about its Workload (its time label stays the recorded one).
    first_seen: dict[str, float] = {}
    for e in history:
        for name in _workload_names(e):
            first_seen.setdefault(names.wl(name), e["ts"])

    def order(e: Mapping[str, Any]) -> float:
        if e.get("source") == "harness" and e.get("event") == "job_created":
            job = str(e.get("job", "")).split("/")[-1]
            return min(e["ts"], first_seen.get(job, e["ts"]) - 1e-6)
        return e["ts"]

    history = sorted(history, key=order)

    flows: dict[int, dict[str, Any]] = {}
    for e in history:
        if e.get("source") == "proxy" and e.get("flow") is not None and e.get("event") not in ("watch_event", "watch_event_dropped", "watch_open", "watch_closed", "observed"):
            d = flows.setdefault(int(e["flow"]), {})
            d.setdefault(e["event"] + ("_" + e["stage"] if e.get("stage") else ""), e)
            if e.get("event") == "response":
                d["response"] = e
    waited_rv = {str(e.get("resource_version")) for e in history if e.get("event") == "watch_delivered"}
    # Plan steps (harness/plan/actions.py step kinds) by load (an id loaded again after `plan clear` is another
    # step): each one's signalled and signal_done events, for their lines; each load's rule ids.
    step_kinds = set(actions.step_names())
    loads = rule_loads(history)
    load_of = {id(lr.added): lr for lr in loads}
    step_of = {id(x): lr for lr in loads if lr.rule.get("action") in step_kinds for x in (lr.fired, lr.done) if x}
    # A fact only wait steps wait for is said by the wait's own line.
    wait_ids = {lr.id for lr in loads if lr.rule.get("action") == "wait"}
    # Errors of connections that were not the case's (Kueue's old process, cut by a configuration restart,
    # or anything before the case started): one note, as the proxy-failure assumption leaves them out.
    cut = restart_cut_flow_errors(history)
    cut_shown: set[str] = set()
    lines: list[_Line] = []
    plans_shown: set[Any] = set()  # the loads whose "load fault plan" line is drawn
    last_seen: dict[str, tuple] = {}
    verdict_done = False

    for e in history:
        src, ev = e.get("source"), e.get("event")
        ts = e["ts"]
        if src == "proxy":
            flow = e.get("flow")
            fate = flows.get(int(flow)) if flow is not None else None
            if ev == "rule_added":
                rule = e.get("rule") or {}
                plan = e.get("plan")
                if plan:
                    load = load_of[id(e)].load if id(e) in load_of else plan
                    if load in plans_shown:
                        continue
                    plans_shown.add(load)
                    ids = [lr.id for lr in loads if lr.load == load]
                    lines.append(_Line(ts, f"Test->>Proxy: {t(e)} load fault plan {_clean(plan)}: {_clean(', '.join(map(str, ids)))}", "msg"))
                else:
                    lines.append(_Line(ts, f"Test->>Proxy: {t(e)} rule {_clean(_rule_text(rule, names))}", "msg"))
            elif ev == "request":
                w = e.get("write") or {}
                label = _write_label(w, names)
                resp = (fate or {}).get("response") or {}
                if w.get("write") == "post" and resp.get("status") == 409:
                    continue  # Kueue's duplicate create of a Workload that exists: no part of the story
                if fate and "held_request" in fate:
                    lines.append(_Line(ts, f"Kueue->>Proxy: {t(e)} {_clean(label)}", "msg", flow=flow))
                elif fate and ("failed_request" in fate or "reset_request" in fate):
                    # Answered (or cut) by the Proxy itself: kube-apiserver never saw this request.
                    lines.append(_Line(ts, f"Kueue->>Proxy: {t(e)} {_clean(label)}", "msg", flow=flow, pair="ask"))
                else:
                    held = fate is not None and any(k in fate for k in ("held_response", "failed_response", "reset_response"))
                    lines.append(_Line(ts, f"Kueue->>API: {t(e)} {_clean(label)}", "msg", flow=flow,
                                       pair="" if held else "req", keep=held, extra={"label": label}))
            elif ev == "held":
                if e.get("stage") == "response":
                    rv = f" rv {e['resource_version']}" if e.get("resource_version") else ""
                    lines.append(_Line(ts, f"API-->>Proxy: {t(e)} {e.get('status', '')}{rv}", "msg", flow=flow))
                    lines.append(_Line(ts, f"Note over Proxy: {t(e)} HOLD {e.get('hold')}: the answer<br/>(rule {_clean(str(e.get('rule')))})", flow=flow))
                else:
                    lines.append(_Line(ts, f"Note over Proxy: {t(e)} HOLD {e.get('hold')}<br/>(rule {_clean(str(e.get('rule')))})", flow=flow))
            elif ev == "released":
                why = str(e.get("why", ""))
                if why.startswith("triggers:") or why.startswith("max_hold") or why.startswith("release.timeout"):
                    lines.append(_Line(ts, f"Note over Proxy: {t(e)} release {e.get('hold')}<br/>{_wrap(_why(why), 40)}", flow=flow))
                else:
                    lines.append(_Line(ts, f"Test->>Proxy: {t(e)} release {e.get('hold')} ({_clean(why)})", "msg", flow=flow))
                if e.get("stage") == "request":
                    label = _write_label(((fate or {}).get("request") or {}).get("write") or {}, names) if fate else str(e.get("label", ""))
                    lines.append(_Line(ts, f"Proxy->>API: {t(e)} {_clean(label)}", "msg", flow=flow))
            elif ev == "failed":
                lines.append(_Line(ts, f"Proxy--xKueue: {t(e)} {e.get('status')} injected (rule {_clean(str(e.get('rule')))})", "msg", flow=flow,
                                   pair="answer" if e.get("stage") == "request" and e.get("hold") is None else "",
                                   extra={"said": f"{e.get('status')} injected (rule {_clean(str(e.get('rule')))})"}))
            elif ev in ("hold_expired", "hold_timeout"):
                lines.append(_Line(ts, f"Note over Proxy: {t(e)} {e.get('hold')} {'hold expired' if ev == 'hold_expired' else 'plan timeout'}", flow=flow))
            elif ev == "reset":
                lines.append(_Line(ts, f"Proxy--xKueue: {t(e)} stream reset (rule {_clean(str(e.get('rule')))})", "msg", flow=flow,
                                   pair="answer" if e.get("stage") == "request" else "",
                                   extra={"said": f"stream reset (rule {_clean(str(e.get('rule')))})"}))
            elif ev == "delayed":
                lines.append(_Line(ts, f"Note over Proxy: {t(e)} delay {e.get('seconds')}s (rule {_clean(str(e.get('rule')))})", flow=flow))
            elif ev == "response":
                if fate is None or "failed_request" in fate or "failed_response" in fate:
                    continue
                req = fate.get("request") or {}
                if (req.get("write") or {}).get("write") == "post" and e.get("status") == 409:
                    continue
                rv = f" rv {e['resource_version']}" if e.get("resource_version") else ""
                what = _write_label(req.get("write") or {}, names) if req else str(e.get("label", ""))
                if "held_response" in fate:
                    lines.append(_Line(ts, f"Proxy-->>Kueue: {t(e)} {e.get('status')}{rv} for {_clean(what)}", "msg", flow=flow))
                elif "held_request" in fate:
                    lines.append(_Line(ts, f"API-->>Kueue: {t(e)} {e.get('status')}{rv} for {_clean(what)}", "msg", flow=flow))
                else:
                    lines.append(_Line(ts, f"API-->>Kueue: {t(e)} {e.get('status')}{rv} for {_clean(what)}", "msg", flow=flow, pair="resp",
                                       keep=e.get("status", 200) >= 300, extra={"status": e.get("status"), "rv": rv}))
            elif ev == "watch_event":
                key = f"{e.get('namespace')}/{e.get('name')}"
                conds = e.get("conditions") or {}
                state = (e.get("type") == "DELETED", bool(e.get("admission")),
                         tuple(k for k in _KEY_CONDITIONS if conds.get(k) == "True"))
                prev = last_seen.get(key)
                last_seen[key] = state
                if state == prev or (prev is None and not state[1] and not state[2] and not state[0]):
                    continue
                now_true = list(state[2])
                gone = [k for k in (prev[2] if prev else ()) if k not in now_true]
                txt = f"watch {names.wl(e.get('name'))} rv {e.get('resource_version')}: " + (
                    "deleted" if state[0] else (", ".join(now_true) or "no conditions True"))
                if gone:
                    txt += f" ({', '.join(gone)} gone)"
                waited = str(e.get("resource_version")) in waited_rv
                lines.append(_Line(ts, f"API--)Kueue: {t(e)} {_clean(txt)}", "msg", breaks=False,
                                   keep=bool(gone) or waited or "Evicted" in now_true))
            elif ev == "watch_event_dropped":
                lines.append(_Line(ts, f"API--xProxy: {t(e)} watch {names.wl(e.get('name'))} rv {e.get('resource_version')} dropped (rule {_clean(str(e.get('rule')))})", "msg"))
            elif ev == "signalled" and id(e) in step_of and step_of[id(e)].rule.get("action") != "wait":
                # Drawn when it started: its calls follow at once, before what Kueue made of them.
                lines.append(_step_line(step_of[id(e)].done or {}, step_of[id(e)].rule, e, names, t))
            elif ev == "signal_done" and id(e) in step_of and step_of[id(e)].rule.get("action") == "wait":
                lines.append(_step_line(e, step_of[id(e)].rule, step_of[id(e)].fired or {}, names, t))
            elif ev == "fact" and not set(e.get("rules") or ()) <= wait_ids:
                where = "Kueue" if str(e.get("what", "")).startswith("Kueue logged") else "API"
                lines.append(_Line(ts, f"Note over {where}: {t(e)} seen: {_wrap(names.text(str(e.get('what', ''))), 44)}",
                                   breaks=False))
            elif ev == "flow_error" and id(e) in cut:
                why = cut[id(e)]
                if why not in cut_shown:  # one note for them all, at the first
                    cut_shown.add(why)
                    group = [x for x in history if cut.get(id(x)) == why]
                    lines.append(_Line(ts, _cut_note(group, why, t), breaks=False))
            elif ev == "flow_error":
                lines.append(_Line(ts, f"Note over Proxy: {t(e)} flow {flow} error: {_wrap(str(e.get('error', '')), 40)}", breaks=False))
        elif src == "harness":
            if ev == "cohort_queues_created":
                cqs = ", ".join(_clean(names.text(str(c))) for c in e.get("cluster_queues") or [])
                lines.append(_Line(ts, f"Test->>API: {t(e)} create ResourceFlavor, ClusterQueues {cqs} (cohort), "
                                       "a LocalQueue each, priority classes", "msg"))
            elif ev == "queues_created":
                lines.append(_Line(ts, f"Test->>API: {t(e)} create ResourceFlavor, ClusterQueue {_clean(names.text(str(e.get('cluster_queue', ''))))} "
                                       f"(nominal cpu {e.get('nominal_cpu', '?')}), LocalQueue, priority classes", "msg"))
            elif ev == "job_created":
                job = str(e.get("job", "")).split("/")[-1]
                pr = names.priority(job)
                what = f"create Job {_clean(job)}" + (f" (priority {_clean(pr)}, cpu {e.get('cpu', '?')})" if pr else "")
                if order(e) < e["ts"]:  # drawn before Kueue's reaction: say when the call came back
                    lines.append(_Line(order(e), f"Test->>API: {what}, call returned {t(e)}", "msg"))
                else:
                    lines.append(_Line(ts, f"Test->>API: {t(e)} {what}", "msg"))
            elif ev == "verdict" and not verdict_done:
                verdict_done = True
                lines.append(_Line(ts, _verdict_note(f"{t(e)} ", e, verdict, findings), breaks=False))
            elif ev == "kueue_configured":  # one short line; the whole Configuration is in report.md's table
                what = "Kueue restarted with" if e.get("restarted") else "Kueue already ran with"
                lines.append(_Line(ts, f"Note over Test: {t(e)} {what}<br/>{_wrap(_clean(str(e.get('summary') or 'the default configuration')), 40)}",
                                   breaks=False, keep=False))
            elif ev in ("case_started", "case_finished", "held", "released", "admission_answered", "watch_delivered",
                        "observed", "plan_loaded", "plan_step", "holds_released_at_end", "verdict"):
                continue
            else:
                extra = ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("ts", "source", "event"))
                lines.append(_Line(ts, f"Note over Test: {t(e)} {_wrap(names.text(f'{ev} {extra}'), 40)}", breaks=False, keep=False))
        elif src == "monitor":
            if ev in ("quota_violation_started", "quota_violation_cleared"):
                what = names.text(str(e.get("finding", ""))).split(", held by")[0]
                head = "monitor: quota violated" if ev.endswith("started") else "monitor: violation cleared"
                lines.append(_Line(ts, f"Note over Test,API: {t(e)} {head}<br/>{_wrap(what, 60)}", breaks=False))
        elif src == "kueue" and ev == "log":
            lines.append(_Line(ts, "", "log", breaks=False,
                               extra={"e": e, "judged": judged is None or id(e) in judged}))

    if not verdict_done and verdict:
        end = max((e["ts"] for e in history), default=t0)
        lines.append(_Line(end, _verdict_note("", {}, verdict, findings), breaks=False))
    lines = _collapse_logs(lines, names, t0)
    lines = _merge_pairs(lines)
    lines = _fold_cycles(lines, t0)
    if len(lines) > MAX_DIAGRAM_LINES:
        lines = _fold_cycles([ln for ln in lines if ln.keep], t0)
    body = ["sequenceDiagram"] + [f"    participant {pid}" + (f" as {alias}" if alias != pid else "") for pid, alias in _PARTICIPANTS]
    body += ["    " + ln.text for ln in lines]
    return body


def _cut_note(group: Sequence[Mapping[str, Any]], why: str, t: Any) -> str:
    """One note for the flow errors `restart_cut_flow_errors` set apart (`why` "restart" or "before")."""
    n = len(group)
    when = t(group[0]) if n == 1 else f"{t(group[0])} to {t(group[-1])}"
    flows = sorted({int(x["flow"]) for x in group if str(x.get("flow", "")).isdigit()})
    if why == "restart":
        what = (f"{n} request{'s' if n > 1 else ''} of the previous Kueue process {'were' if n > 1 else 'was'} cut "
                "by its restart (configuration change)")
    else:
        what = f"{n} request{'s' if n > 1 else ''} from before the case started ended with an error (not the case's)"
    if flows:
        what += f", flow{'s' if len(flows) > 1 else ''} " + ", ".join(map(str, flows[:6])) + (" …" if len(flows) > 6 else "")
    return f"Note over Proxy: {when}<br/>{_wrap(what, 44)}"


def _step_line(done: Mapping[str, Any], rule: Mapping[str, Any], fired: Mapping[str, Any], names: Names,
               t: Any) -> _Line:
    """A plan step as the Test participant did it: "step w1: create Workload w1 (after barrier held) → done
    in 0.012s", drawn when it was signalled (its calls follow at once, before what Kueue made of them), or
    FAILED with the error; a wait is a note over Test when it ended."""
    what = names.text(actions.describe(rule))
    why = str(fired.get("why", ""))
    after = _why(why).replace("plan: after ", "after ") if why.startswith("triggers:") else ""
    wait = rule.get("action") == "wait"
    at = done if wait or not fired else fired
    head = f"{t(at)} step {_clean(str(rule.get('id')))}: {_clean(what)}" + (
        f" ({_clean(names.text(after))})" if after else "")
    if not done:
        tail = "did not finish before the verdict"
    elif done.get("ok"):
        tail = f"done in {done.get('seconds', '?')}s"
    else:
        tail = "FAILED: " + _clean(names.text(str(done.get("error", "?"))))[:120]
    if wait:
        return _Line(at["ts"], f"Note over Test: {_wrap(head + ': ' + tail, 60)}", breaks=True)
    arrow = "Test->>API" if done.get("ok") else "Test-xAPI"
    if not done:
        arrow = "Test->>API"
    return _Line(at["ts"], f"{arrow}: {head} → {tail}", "msg")


def _rule_text(rule: Mapping[str, Any], names: Names) -> str:
    m = rule.get("match") or {}
    what = " ".join(str(m[k]) for k in ("write", "kind", "name") if m.get(k)) or "any request"
    act = actions.describe(rule)  # the fault kind's own words (harness/plan/actions.py)
    return f"{rule.get('id')}: {act}, {names.text(what)}"


def _verdict_note(prefix: str, rec: Mapping[str, Any], verdict: str | None, findings: Sequence[Finding]) -> str:
    parts = []
    inv = rec.get("invariant")
    if inv:
        parts.append(f"invariant {inv} {'held' if rec.get('held') else 'violated'}")
    bearing = [f for f in findings if f.bearing and f.result in ("violated", "inconclusive")]
    if inv:
        bearing = [f for f in bearing if f.check == inv] or bearing
    parts += [f.summary for f in bearing[:2]]
    head = f"{prefix}verdict: {verdict}" if verdict else f"{prefix}verdict"
    return f"Note over Test,API: {_clean(head)}" + ("<br/>" + "<br/>".join(_wrap(p, 60) for p in parts) if parts else "")


_LOG_LABELS = {
    kueue_log.PREEMPTED: "Preempted {target} (for {preemptor})",
    kueue_log.PREEMPTION_ONGOING: "Preemption ongoing: {preemptor} waits for {target}",
    kueue_log.PREEMPTION_WAITING: "Preemption already issued, waiting for observation: {preemptor} waits for {target}",
    kueue_log.ADMITTED: "Workload successfully admitted: {workload}",
    "Workload re-queued": "Workload re-queued: {workload}{reason}",
    "Could not admit Workload and assign flavors in apiserver": "Could not admit Workload: {workload}",
    "Handling a job with evicted condition": "Handling a job with evicted condition: {workload}",
}


def _log_label(e: Mapping[str, Any], names: Names) -> str:
    f = e.get("fields") or {}
    tmpl = _LOG_LABELS.get(str(e.get("msg")), str(e.get("msg")) + ": {workload}")
    return tmpl.format(target=names.kobj(f.get("targetWorkload")), preemptor=names.kobj(f.get("preemptingWorkload")),
                       workload=names.kobj(f.get("workload") or f.get("targetWorkload")),
                       reason=f" ({f['requeueReason']})" if f.get("requeueReason") else "")


#: A log message repeated this often before something else happened is a flood: its one note keeps
#: counting across the requests and releases that interleave with it.
FLOOD_GROUP = 3


def _collapse_logs(lines: list[_Line], names: Names, t0: float) -> list[_Line]:
    """Kueue log lines become notes over Kueue; a message repeated for the same Workload(s) before the
    next request, response, hold or harness action is one note "×N" at its first occurrence (a flood,
    FLOOD_GROUP or more, keeps counting past them). Lines the verdict did not judge are grouped apart
    ("N more lines after what the verdict saw"), so a "×N" is the count the checkers report."""
    out: list[_Line] = []
    open_groups: dict[str, _Line] = {}
    for ln in lines:
        if ln.kind != "log":
            if ln.breaks:  # a flood in progress goes on in its note; anything else starts afresh
                open_groups = {k: g for k, g in open_groups.items() if g.extra["n"] >= FLOOD_GROUP}
            out.append(ln)
            continue
        e = ln.extra["e"]
        label = _log_label(e, names)
        key = label if ln.extra["judged"] else "\0late " + label
        g = open_groups.get(key)
        if g is not None:
            g.extra["n"] += 1
            g.extra["last"] = e["ts"]
            continue
        g = _Line(ln.ts, "", "log", breaks=False, extra={"label": label, "n": 1, "first": e["ts"], "last": e["ts"],
                                                          "judged": ln.extra["judged"]})
        open_groups[key] = g
        out.append(g)
    for ln in out:
        if ln.kind == "log":
            x = ln.extra
            when = f"{x['first'] - t0:.3f}s" if x["n"] == 1 else f"{x['first'] - t0:.3f}s to {x['last'] - t0:.3f}s"
            if x["judged"]:
                count = "" if x["n"] == 1 else f" ×{x['n']}"
                ln.text = f"Note over Kueue: {when} log{count}:<br/>{_wrap(x['label'], 44)}"
            else:  # not a second count of the flood: what Kueue logged after the verdict's look
                more = f"{x['n']} more line{'s' if x['n'] > 1 else ''}"
                ln.text = (f"Note over Kueue: {when} log, {more} after what the verdict saw (not judged):<br/>"
                           f"{_wrap(x['label'], 44)}")
            ln.kind = "note"
    return out


def _merge_pairs(lines: list[_Line]) -> list[_Line]:
    """A pass-through write whose answer comes next becomes one arrow: "create Workload job1 → 201"; a
    write the Proxy answered itself (a fail or reset rule at the request stage, no hold) whose answer comes
    next becomes one arrow ending at the Proxy: "Kueue-xProxy: eviction v2 → 500 injected (rule r)"."""
    out: list[_Line] = []
    for ln in lines:
        prev = out[-1] if out else None
        if ln.pair == "answer" and prev is not None and prev.pair == "ask" and prev.flow == ln.flow:
            prev.text = prev.text.replace("Kueue->>Proxy:", "Kueue-xProxy:", 1) + f" → {ln.extra['said']}"
            prev.pair = ""
            continue
        if ln.pair == "resp" and prev is not None and prev.pair == "req" and prev.flow == ln.flow:
            prev.text += f" → {ln.extra.get('status')}{ln.extra.get('rv', '')}"  # the answer, on the same arrow
            prev.pair = ""
            prev.keep = prev.keep or ln.keep
            continue
        out.append(ln)
    return out


#: The longest cycle of lines (`_fold_cycles`) folded into one occurrence, and how often it must repeat.
CYCLE_MAX = 4
CYCLE_MIN_REPEATS = 3
# What a repeated line may differ in: times ("1.206s"), flow numbers, resourceVersions, hold ids.
_VARYING = re.compile(r"-?\d+\.\d{3}s|\bflows? \d+(?:[–-]\d+)?|\brv \d+|\bh\d+\b")


def _shape(ln: _Line) -> str | None:
    """A line as it repeats: its text without times, flow numbers, resourceVersions and hold ids. None
    for a line that never counts as a repetition (a fold's own note)."""
    if ln.extra.get("fold"):
        return None
    return _VARYING.sub("·", ln.text)


def _fold_cycles(lines: list[_Line], t0: float) -> list[_Line]:
    """A block of 1 to CYCLE_MAX lines that repeats back to back CYCLE_MIN_REPEATS times or more (the same
    texts but for times, flow numbers, resourceVersions and hold ids; a fault rule with `times: null`
    failing the same write over and over, kubernetes-sigs/kueue#14863) is drawn once, followed by a note
    "the 3 lines above repeated N more times … until t". Folded only when that saves 2 lines or more; the
    block's lines are kept even when the diagram is cut to MAX_DIAGRAM_LINES, so the note stays true."""
    shapes = [_shape(ln) for ln in lines]
    out: list[_Line] = []
    i, n = 0, len(lines)
    while i < n:
        best = None  # (lines covered, period, repeats)
        for k in range(1, CYCLE_MAX + 1):
            block = shapes[i:i + k]
            if len(block) < k or None in block:
                break
            reps = 1
            while shapes[i + reps * k:i + (reps + 1) * k] == block:
                reps += 1
            if reps >= CYCLE_MIN_REPEATS and reps * k - (k + 1) >= 2 and (best is None or reps * k > best[0]):
                best = (reps * k, k, reps)
        if best is None:
            out.append(lines[i])
            i += 1
            continue
        covered, k, reps = best
        first, rest = lines[i:i + k], lines[i + k:i + covered]
        for ln in first:
            ln.keep = True
        end = max(max(ln.ts, ln.extra.get("last", ln.ts)) for ln in rest)
        flows = sorted({int(ln.flow) for ln in rest if ln.flow is not None})
        span = f", flows {flows[0]}–{flows[-1]}" if len(flows) > 1 else (f", flow {flows[0]}" if flows else "")
        what = "line above" if k == 1 else f"{k} lines above"
        note = (f"the {what} repeated {reps - 1} more time{'s' if reps > 2 else ''} (×{reps} in all) until "
                f"{end - t0:.3f}s{span}")
        out += first
        out.append(_Line(end, f"Note over {_span(first)}: {_wrap(note, 50)}", breaks=False, extra={"fold": True}))
        i += covered
    return out


def _span(block: Sequence[_Line]) -> str:
    """The participants a note over `block` spans: "Kueue,API" (first and last in diagram order)."""
    order = [pid for pid, _ in _PARTICIPANTS]
    used = {p for ln in block for m in [_MSG.match(ln.text) or _NOTE.match(ln.text)] if m
            for p in m.groups()[:2] if p in order}
    used = sorted(used or {"Kueue"}, key=order.index)
    return used[0] if len(used) == 1 else f"{used[0]},{used[-1]}"


_NODE = r"[A-Za-z][A-Za-z0-9_]*"
_ARROW = r"(?:-->>|->>|-->|->|--x|-x|--\)|-\))"
_MSG = re.compile(rf"^({_NODE})\s*{_ARROW}\s*[+-]?({_NODE})\s*:(.*)$")
_NOTE = re.compile(rf"^Note\s+(?:left of|right of|over)\s+({_NODE})(?:\s*,\s*({_NODE}))?\s*:(.*)$")
_PARTICIPANT = re.compile(rf"^(?:participant|actor)\s+({_NODE})(?:\s+as\s+(.+))?$")
_BLOCK = re.compile(r"^(loop|alt|opt|par|critical|break|rect)\b")


def validate_sequence_diagram(text: str) -> list[str]:
    """Structural check of Mermaid `sequenceDiagram` syntax as this module writes it (participants,
    messages with the arrows -> ->> --> -->> -x --x -) --), notes, blocks closed by `end`): every
    participant used is declared, messages and notes have text, no `;` or `#` in texts (statement
    separator and entity codes in Mermaid), and only `<br/>` as markup. Returns problems, [] if none.
    The Mermaid CLI (mmdc) is the real parser; tests run it too when it is installed."""
    problems: list[str] = []
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("%%")]
    if not lines or lines[0] != "sequenceDiagram":
        return ["the first line must be `sequenceDiagram`"]
    declared: set[str] = set()
    depth = 0
    for i, ln in enumerate(lines[1:], 2):
        texts: list[str] = []
        m = _PARTICIPANT.match(ln)
        if m:
            if m.group(1) in declared:
                problems.append(f"line {i}: participant {m.group(1)} declared twice")
            declared.add(m.group(1))
            continue
        if ln in ("autonumber", "end"):
            if ln == "end":
                depth -= 1
                if depth < 0:
                    problems.append(f"line {i}: `end` without an open block")
                    depth = 0
            continue
        if _BLOCK.match(ln):
            depth += 1
            continue
        if re.match(r"^(else|and)\b", ln):
            if depth == 0:
                problems.append(f"line {i}: `{ln.split()[0]}` outside a block")
            continue
        m = re.match(rf"^(activate|deactivate)\s+({_NODE})$", ln)
        if m:
            used = [m.group(2)]
        elif (m := _MSG.match(ln)):
            used, texts = [m.group(1), m.group(2)], [m.group(3)]
        elif (m := _NOTE.match(ln)):
            used, texts = [m.group(1)] + ([m.group(2)] if m.group(2) else []), [m.group(3)]
        else:
            problems.append(f"line {i}: not a participant, message, note or block: {ln[:80]!r}")
            continue
        for p in used:
            if p not in declared:
                problems.append(f"line {i}: participant {p} is not declared")
        for tx in texts:
            if not tx.strip():
                problems.append(f"line {i}: empty text")
            if ";" in tx or "#" in tx:
                problems.append(f"line {i}: `;` or `#` in text (Mermaid reads them as syntax)")
            if re.search(r"<(?!br/>)", tx):
                problems.append(f"line {i}: markup other than <br/> in text")
    if depth:
        problems.append(f"{depth} block(s) not closed with `end`")
    if not declared:
        problems.append("no participant declared")
    return problems

