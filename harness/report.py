"""The evidence bundle of one case run, and its offline re-check: `report.md` (verdict, versions, fault
plan, a Mermaid sequence diagram of the race, checker findings), logs, flows and final objects, redacted.

Writing (`write_case_bundle`) needs the live environment; everything else here is pure over a bundle's
files (history.jsonl + objects.yaml + bundle.json), so `kueue-harness report BUNDLE` re-runs the
checkers and re-renders report.md on a machine with no cluster. Layout of a bundle: docs/evidence.md;
history.jsonl's events: docs/history.md.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import tarfile
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import actions, kueue_log, versions
from harness.checkers import Finding, Selection, compose
from harness.checkers.bounds import LIVENESS_BOUND
from harness.names import Names, _workload_names, case_t0, kobj_key as _kobj_key
from harness.errors import HarnessError
from harness.redact import Redactor, find_secrets, run_secrets

BUNDLE_SCHEMA = 1
#: Diagram lines beyond which uneventful watch deliveries and pass-through writes are dropped.
MAX_DIAGRAM_LINES = 90

INVARIANTS = {
    "liveness": "a Workload that preempts another gets quota within {bound:g} s once every fault is lifted",
    "quota": "no ClusterQueue holds more than its quota (a watch during the run, and the final state)",
}


class BundleError(HarnessError):
    """A bundle folder or archive cannot be read; the message names the missing or broken file."""


# =====================================================================================================
# Reading a bundle


def load_history(path: Path) -> list[dict[str, Any]]:
    """history.jsonl as a list of events in file order. Raises BundleError on a malformed line."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise BundleError(f"cannot read {path}: {e}. A bundle needs history.jsonl (docs/evidence.md).") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise BundleError(f"{path}:{i}: not JSON ({e})") from None
        if not isinstance(ev, dict) or "ts" not in ev or "event" not in ev:
            raise BundleError(f"{path}:{i}: an event needs `ts` and `event` (docs/history.md)")
        out.append(ev)
    return out


def load_objects(path: Path) -> dict[str, list[dict[str, Any]]]:
    """objects.yaml ({"workloads": [...], "jobs": [...], "clusterqueues": [...]}); {} if absent or a
    comment only (the harness could not read the final state)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError:
        return {}
    except yaml.YAMLError as e:
        raise BundleError(f"{path}: not YAML ({e})") from None
    return data if isinstance(data, dict) else {}


#: The fields each (source, event) of history.jsonl carries besides ts/source/event (docs/history.md is
#: the prose of this table; `history_problems` holds a history to it). Optional fields are not listed.
HISTORY_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("harness", "case_started"): ("case", "namespace"),
    ("harness", "queues_created"): ("cluster_queue", "local_queue", "nominal_cpu"),
    ("harness", "job_created"): ("job", "priority", "cpu"),
    ("harness", "plan_loaded"): ("plan", "rules"),
    ("harness", "plan_step"): ("rule", "why"),
    ("harness", "held"): ("hold", "label"),
    ("harness", "released"): ("hold", "label"),
    ("harness", "admission_answered"): ("status", "resource_version"),
    ("harness", "watch_delivered"): ("resource_version",),
    ("harness", "observed"): ("what",),
    ("harness", "verdict"): ("invariant", "held"),
    ("harness", "holds_released_at_end"): ("holds",),
    ("harness", "case_finished"): (),
    ("monitor", "quota_violation_started"): ("finding", "used_milli", "allowed_milli", "workloads"),
    ("monitor", "quota_violation_cleared"): ("finding",),
    ("monitor", "reservation_mismatch_started"): ("mismatch",),
    ("monitor", "reservation_mismatch_cleared"): ("mismatch",),
    ("monitor", "watch_error"): ("error",),
    ("harness", "teardown_problem"): ("problem",),
    ("harness", "case_objects_deleted"): ("namespace",),
    ("harness", "case_objects_not_deleted"): ("error",),
    ("harness", "kueue_restart"): ("kill",),  # optional: rule (a plan's process fault)
    ("harness", "oversubscription_lasted"): ("persisted",),
    ("proxy", "flow_error"): ("flow", "error"),
    ("proxy", "rule_added"): ("rule",),
    ("proxy", "request"): ("flow", "method", "path", "write"),
    ("proxy", "held"): ("flow", "hold", "rule", "stage", "label"),
    ("proxy", "released"): ("flow", "hold", "rule", "stage", "label", "why"),
    ("proxy", "failed"): ("flow", "rule", "stage", "status", "label"),
    ("proxy", "hold_expired"): ("flow", "hold", "rule", "label"),
    ("proxy", "hold_timeout"): ("flow", "hold", "rule", "label", "then"),
    ("proxy", "delayed"): ("flow", "rule", "stage", "seconds", "label"),
    ("proxy", "reset"): ("flow", "rule", "stage", "label"),
    ("proxy", "response"): ("flow", "status", "resource_version", "label", "write", "namespace", "name"),
    ("proxy", "watch_event"): ("flow", "type", "namespace", "name", "resource_version", "conditions", "admission"),
    ("proxy", "watch_event_dropped"): ("flow", "rule", "type", "namespace", "name", "resource_version"),
    ("proxy", "watch_event_delayed"): ("flow", "rule", "seconds", "due", "type", "namespace", "name",
                                       "resource_version"),
    ("proxy", "watch_events_undelivered"): ("flow", "lines"),
    ("proxy", "signalled"): ("rule", "action", "why"),
    ("proxy", "signal_done"): ("rule", "action", "ok", "since_signalled"),
    ("kueue", "log"): ("msg", "fields"),
}
WRITE_FIELDS = ("kind", "namespace", "name", "write", "method", "subresource", "field_manager", "patch_type",
                "strict", "resource_version", "conditions", "admission_cluster_queue")


def history_problems(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where a history departs from docs/history.md: events out of time order, unknown (source, event)
    pairs, missing fields. Returns one line per problem (at most one per kind of event), [] if none."""
    problems: dict[str, str] = {}
    last = float("-inf")
    for i, e in enumerate(history, 1):
        if not isinstance(e.get("ts"), (int, float)):
            problems.setdefault("ts", f"event {i}: `ts` is not a number")
            continue
        if e["ts"] < last:
            problems.setdefault("order", f"event {i} ({e.get('event')}): earlier than the event before it")
        last = max(last, e["ts"])
        key = (str(e.get("source")), str(e.get("event")))
        if key not in HISTORY_FIELDS:
            problems.setdefault(repr(key), f"event {i}: unknown source/event {key[0]}/{key[1]}")
            continue
        missing = [f for f in HISTORY_FIELDS[key] if f not in e]
        if key == ("proxy", "request") and isinstance(e.get("write"), Mapping):
            missing += [f"write.{f}" for f in WRITE_FIELDS if f not in e["write"]]
        if missing:
            problems.setdefault(repr(key), f"event {i} ({key[0]}/{key[1]}): missing {', '.join(missing)}")
    return list(problems.values())


# =====================================================================================================
# Checkers live in harness/checkers/; the report runs the same composition the case's verdict came from.


#: What ran before bundles recorded their checkers (bundle schema 1 without "checkers").
LEGACY_SELECTION = {"liveness": {}, "quota": {}, "log_flood": {}, "reservation": {}}


def selection_of(meta: Mapping[str, Any], bound: float | None = None) -> Selection:
    """The checkers (and parameters) the run used, from bundle.json; `bound` (seconds) overrides the
    liveness bound when given."""
    declared = meta.get("checkers") or LEGACY_SELECTION
    chosen = {k: dict(v or {}) for k, v in declared.items()}
    if bound is not None and "liveness" in chosen:
        chosen["liveness"]["bound"] = bound
    return Selection(chosen)


def recheck(history: Sequence[Mapping[str, Any]], objects: Mapping[str, Any],
            bound: float | None = None, names: Names | None = None,
            selection: Selection | None = None) -> tuple[str, list[Finding]]:
    """Run the checkers over a history. Returns (verdict, findings): "error" when an assumption failed,
    "reproduced" if a bearing check was violated, "inconclusive" if one was undecided, else "passed".
    `selection` defaults to the liveness, quota, log-flood and reservation checkers."""
    v = compose(selection or selection_of({}, bound), history, objects, names)
    return v.verdict, v.findings

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
    names = names or Names(history)
    t0 = _t0(history)

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
    lines: list[_Line] = []
    plans_shown: set[str] = set()
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
                    if plan in plans_shown:
                        continue
                    plans_shown.add(plan)
                    ids = [r.get("rule", {}).get("id") for r in history
                           if r.get("event") == "rule_added" and r.get("plan") == plan]
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
                else:
                    held = fate is not None and ("held_response" in fate or "failed_request" in fate or "reset_request" in fate)
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
                lines.append(_Line(ts, f"Proxy--xKueue: {t(e)} {e.get('status')} injected (rule {_clean(str(e.get('rule')))})", "msg", flow=flow))
            elif ev in ("hold_expired", "hold_timeout"):
                lines.append(_Line(ts, f"Note over Proxy: {t(e)} {e.get('hold')} {'hold expired' if ev == 'hold_expired' else 'plan timeout'}", flow=flow))
            elif ev == "reset":
                lines.append(_Line(ts, f"Proxy--xKueue: {t(e)} stream reset (rule {_clean(str(e.get('rule')))})", "msg", flow=flow))
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
            elif ev == "flow_error":
                lines.append(_Line(ts, f"Note over Proxy: {t(e)} flow {flow} error: {_wrap(str(e.get('error', '')), 40)}", breaks=False))
        elif src == "harness":
            if ev == "queues_created":
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
            lines.append(_Line(ts, "", "log", breaks=False, extra={"e": e}))

    if not verdict_done and verdict:
        end = max((e["ts"] for e in history), default=t0)
        lines.append(_Line(end, _verdict_note("", {}, verdict, findings), breaks=False))
    lines = _collapse_logs(lines, names, t0)
    lines = _merge_pairs(lines)
    if len(lines) > MAX_DIAGRAM_LINES:
        lines = [ln for ln in lines if ln.keep]
    body = ["sequenceDiagram"] + [f"    participant {pid}" + (f" as {alias}" if alias != pid else "") for pid, alias in _PARTICIPANTS]
    body += ["    " + ln.text for ln in lines]
    return body


def _rule_text(rule: Mapping[str, Any], names: Names) -> str:
    m = rule.get("match") or {}
    what = " ".join(str(m[k]) for k in ("write", "kind", "name") if m.get(k)) or "any request"
    act = actions.describe(rule)  # the fault kind's own words (harness/actions.py)
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
    FLOOD_GROUP or more, keeps counting past them)."""
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
        g = open_groups.get(label)
        if g is not None:
            g.extra["n"] += 1
            g.extra["last"] = e["ts"]
            continue
        g = _Line(ln.ts, "", "log", breaks=False, extra={"label": label, "n": 1, "first": e["ts"], "last": e["ts"]})
        open_groups[label] = g
        out.append(g)
    for ln in out:
        if ln.kind == "log":
            x = ln.extra
            when = f"{x['first'] - t0:.3f}s" if x["n"] == 1 else f"{x['first'] - t0:.3f}s to {x['last'] - t0:.3f}s"
            count = "" if x["n"] == 1 else f" ×{x['n']}"
            ln.text = f"Note over Kueue: {when} log{count}:<br/>{_wrap(x['label'], 44)}"
            ln.kind = "note"
    return out


def _merge_pairs(lines: list[_Line]) -> list[_Line]:
    """A pass-through write whose answer comes next becomes one arrow: "create Workload job1 → 201"."""
    out: list[_Line] = []
    for ln in lines:
        prev = out[-1] if out else None
        if ln.pair == "resp" and prev is not None and prev.pair == "req" and prev.flow == ln.flow:
            prev.text += f" → {ln.extra.get('status')}{ln.extra.get('rv', '')}"  # the answer, on the same arrow
            prev.pair = ""
            prev.keep = prev.keep or ln.keep
            continue
        out.append(ln)
    return out


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


# =====================================================================================================
# report.md


def _table(rows: Iterable[Sequence[str]], head: Sequence[str]) -> list[str]:
    def cell(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", "<br>")

    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _fault_rules(history: Sequence[Mapping[str, Any]], names: Names) -> list[list[str]]:
    rows = []
    for e in history:
        if e.get("event") != "rule_added" or e.get("source") != "proxy":
            continue
        r = e.get("rule") or {}
        m = r.get("match") or {}
        match = ", ".join(f"{k}={names.text(str(v)) if k != 'namespace' else '(case)'}" for k, v in m.items())
        act = actions.describe(r)  # the fault kind's own words (harness/actions.py)
        rel = r.get("release") or {}
        when = []
        for tr in rel.get("after") or []:
            if tr.get("delivered"):
                when.append(f"Kueue's watch delivered {tr['delivered']}'s object")
            else:
                when.append(f"{tr.get('rule')} {tr.get('state', 'answered')}" + (f" {tr['status']}" if tr.get("status") else ""))
        release = " and ".join(when) if when else ("by the test" if r.get("action", "hold") == "hold" else "-")
        if rel.get("timeout"):
            release += f" (else {rel.get('on_timeout', 'release')} after {rel['timeout']:g}s)"
        times = "every" if r.get("times") is None else str(r.get("times"))
        rows.append([f"`{r.get('id')}`" + (f" (plan {e['plan']})" if e.get("plan") else ""), act, match, release, times])
    return rows


def render_report(meta: Mapping[str, Any], history: Sequence[Mapping[str, Any]], objects: Mapping[str, Any],
                  bound: float | None = None) -> tuple[str, str, list[Finding]]:
    """report.md for a bundle. `meta` is bundle.json. Returns (markdown, re-checked verdict, findings).
    The checkers are the ones the run declared (bundle.json "checkers"); `bound` (seconds) overrides the
    liveness bound. Deterministic: the same bundle renders the same bytes (no clock, no host names)."""
    names = Names(history, meta.get("namespace", ""), meta.get("prefix", ""))
    selection = selection_of(meta, bound)
    verdict, findings = recheck(history, objects, names=names, selection=selection)
    bound = float((selection.checkers.get("liveness") or {}).get("bound", LIVENESS_BOUND))
    recorded = meta.get("verdict", "?")
    t0 = _t0(history)
    case_short = str(meta.get("case", "?")).split("::")[-1]
    inv = next((e.get("invariant") for e in history if e.get("event") == "verdict" and e.get("invariant")), None)
    invariants = [inv] if inv in INVARIANTS else [f.check for f in findings if f.bearing and f.result != "not applicable"]
    inv_text = "; ".join(f"**{i}**: {INVARIANTS[i].format(bound=bound)}" for i in dict.fromkeys(invariants) if i in INVARIANTS)
    bug = meta.get("bug") or {}
    gates = meta.get("feature_gates")
    gates_text = ", ".join(f"{k}={str(v).lower()}" for k, v in gates.items()) if isinstance(gates, Mapping) and gates else "Kueue's defaults"
    if isinstance(gates, Mapping):
        gates_text += " (all others: Kueue's defaults)"
    agree = "agrees" if verdict == recorded else "**differs** from the run's verdict"
    out = [f"# {case_short}: {recorded}", ""]
    rows = [
        ["verdict", f"**{recorded}** (expected: {meta.get('expected', '?')}); offline re-check from history.jsonl: "
                    f"{verdict} ({agree})"],
        ["invariant", inv_text or "-"],
        ["case", f"`{meta.get('case', '?')}`"],
    ]
    if bug:
        fixed = f"; fixed in {', '.join(bug['fixed_in'])}" if bug.get("fixed_in") else ""
        on = bug.get("on_this_build") or {}
        here = f"<br>on this build: **{on.get('status')}**: {on.get('reason')}" if on else ""
        rows.append(["known bug", f"{bug.get('issue')}: {bug.get('summary')} (affected: "
                                  f"{', '.join(bug.get('affected', []))}{fixed}){here}"])
    kb = meta.get("kueue") or {}
    built = kb.get("build") or {}
    kueue_cell = str(meta.get("kueue_version", "?"))
    if kb.get("commit"):
        kueue_cell += f" (commit `{str(kb['commit'])[:12]}`)"
    if built.get("source"):
        kueue_cell += f"; built from {built['source']}"
    rows += [
        ["Kueue (as the binary reported)", kueue_cell],
        ["kube-apiserver", str(meta.get("kubernetes_version", "?"))],
        ["feature gates", gates_text],
        ["target", str(meta.get("target", "?"))],
        ["namespace", f"`{meta.get('namespace', names.ns)}`"],
        ["Workloads", "<br>".join(names.legend()) or "-"],
        ["started", f"{_utc(t0)}; the case ran {meta.get('seconds', 0):.1f}s" if meta.get("seconds") else _utc(t0)],
    ]
    out += _table(rows, ["", ""]) + [""]
    if meta.get("detail") or meta.get("message"):
        out += ["## What the case reported", "", "```", str(meta.get("message") or meta.get("detail")).strip(), "```", ""]
    out += ["## Fault plan", ""]
    rules = _fault_rules(history, names)
    out += (_table(rules, ["rule", "action", "match", "released when", "times"]) if rules
            else ["No fault rule: this run is a control (the same objects and order, nothing held)."]) + [""]
    out += ["## Timeline", "",
            f"Seconds since the case started ({_utc(t0)}). `Kueue->>kube-apiserver` arrows pass through the Proxy "
            "unchanged; a write the Proxy parks is drawn to the Proxy, with its HOLD and its release. Dotted "
            "arrows are what Kueue's Workload watch delivered (only deliveries that changed a Workload's "
            "conditions). Notes over Kueue are its log lines about the case's Workloads; a line repeated "
            "before anything else happened is one note with its count (×N).", "",
            "```mermaid"] + diagram_lines(history, names, recorded, findings) + ["```", ""]
    out += ["## Checker findings", "",
            f"Re-run offline from history.jsonl and objects.yaml (`kueue-harness report`); liveness bound {bound:g}s.", ""]
    out += _table([[f.check, f.result if f.bearing else f"{f.result} (does not decide the verdict)", f.evidence]
                   for f in findings], ["check", "result", "evidence"]) + [""]
    files = meta.get("files") or {}
    if files:
        out += ["## Files", ""]
        out += _table([[f"[`{n}`]({n})", f"{s:,}", _FILE_NOTES.get(n, "")] for n, s in files.items()],
                      ["file", "bytes", "what"]) + [""]
    red = meta.get("redaction") or {}
    if red:
        out += [f"Redaction: Authorization headers, bearer tokens, private keys and this run's "
                f"{red.get('secrets', 0)} secret values were removed before writing; a scan of every file for "
                f"them found {len(red.get('found', []))} {'leak' if len(red.get('found', [])) == 1 else 'leaks'}.", ""]
    out += ["## Re-check offline", "", "```sh",
            f"kueue-harness report {meta.get('slug', 'BUNDLE')}.tar.gz   # or the bundle's folder", "```",
            "prints the re-checked verdict and rewrites report.md from history.jsonl + objects.yaml; "
            "`mitmweb -r flows.mitm` shows the flows.", ""]
    return "\n".join(out), verdict, findings


_FILE_NOTES = {
    "report.md": "this page",
    "history.jsonl": "the case's ordered events (docs/history.md)",
    "harness-events.jsonl": "the harness's own steps, flushed as they happened",
    "objects.yaml": "final Workloads, Jobs, ClusterQueues",
    "kueue.log": "Kueue's log during the case (every line of that time window)",
    "kueue.log.gz": "Kueue's log during the case, every line of that window (gzip: it is long)",
    "kueue-excerpt.log": "Kueue's log lines about the case's objects",
    "flows.mitm": "Kueue's requests for the case's objects (`mitmweb -r flows.mitm`)",
    "flows.har": "the same flows as HAR",
    "timeline.mmd": "the diagram alone (`mmdc -i timeline.mmd -o timeline.png`)",
    "bundle.json": "verdict, versions, window, files (read by `kueue-harness report`)",
}


# =====================================================================================================
# Writing a bundle (live environment)


def _seek_time(fh, since: float) -> None:
    """Position a binary file of time-ordered JSON log lines near the first line at or after `since`
    (binary search on byte offsets), so a long session log is not read from the start."""
    fh.seek(0, 2)
    lo, hi = 0, fh.tell()
    while hi - lo > 65536:
        mid = (lo + hi) // 2
        fh.seek(mid)
        fh.readline()
        ts = None
        for _ in range(50):
            raw = fh.readline()
            if not raw:
                break
            if raw.startswith(b"{"):
                try:
                    ts = kueue_log.parse_ts(json.loads(raw).get("ts"))
                except ValueError:
                    ts = None
                if ts is not None:
                    break
        if ts is None or ts >= since:
            hi = mid
        else:
            lo = mid
    fh.seek(lo)
    if lo:
        fh.readline()


#: Kueue's log of a case's window is written plainly up to this size, gzip-compressed above it (the stuck
#: preemption case: ~12 lines per 10 ms scheduling cycle at --zap-log-level=3, ~5.5 MB in 16 s).
LOG_PLAIN_MAX = 1 << 20
#: In kueue-excerpt.log, lines with the same message about the same Workloads after this many are left
#: out (one marker line says how many, and the last one is kept).
EXCERPT_REPEATS = 10


def _repeat_key(line: str) -> tuple[str, ...] | None:
    try:
        d = json.loads(line)
    except ValueError:
        return None
    objs = tuple(sorted(f"{k}={_kobj_key(v)}" for k, v in d.items()
                        if k in ("workload", "targetWorkload", "preemptingWorkload", "job", "clusterQueue")))
    return (str(d.get("msg")),) + objs


def cut_kueue_log(src: Path, start: float, end: float, dst_dir: Path, mentions: Sequence[str],
                  redactor: Redactor) -> tuple[str, int, int]:
    """Write the lines of Kueue's log `src` from `start` to `end` (epoch s) to `dst_dir`/kueue.log (or
    kueue.log.gz above LOG_PLAIN_MAX bytes), and those that mention any of `mentions` (namespace, Workload
    names) to kueue-excerpt.log, where a message repeated for the same Workloads is cut after
    EXCERPT_REPEATS lines (a marker line says how many were left out, from when to when). Redacted.
    Non-JSON lines take the time of the last JSON line. Returns (log file name, lines, excerpt lines)."""
    window: list[str] = []
    with open(src, "rb") as fh:
        _seek_time(fh, start)
        last = start
        for raw in fh:
            line = raw.decode("utf-8", errors="replace")
            if line.startswith("{"):
                try:
                    last = kueue_log.parse_ts(json.loads(line).get("ts")) or last
                except ValueError:
                    pass
            if last < start:
                continue
            if last > end:
                break
            window.append(redactor.text(line))
    text = "".join(window)
    for old in ("kueue.log", "kueue.log.gz"):
        (dst_dir / old).unlink(missing_ok=True)
    if len(text.encode()) > LOG_PLAIN_MAX:
        name = "kueue.log.gz"
        with gzip.open(dst_dir / name, "wt") as out:
            out.write(text)
    else:
        name = "kueue.log"
        (dst_dir / name).write_text(text)
    about = [(ln, _repeat_key(ln)) for ln in window if any(x and x in ln for x in mentions)]
    totals = Counter(k for _, k in about)
    count: dict[Any, int] = {}
    kept = 0
    with open(dst_dir / "kueue-excerpt.log", "w") as ex:
        for ln, k in about:
            count[k] = count.get(k, 0) + 1
            i, total = count[k], totals[k]
            if k is None or total <= EXCERPT_REPEATS + 1 or i <= EXCERPT_REPEATS or i == total:
                ex.write(ln)
                kept += 1
            elif i == EXCERPT_REPEATS + 1:
                ex.write(f"# kueue-harness: {total - EXCERPT_REPEATS - 1} more lines {k[0]!r} about "
                         f"{', '.join(k[1:]) or '-'} are left out here ({name} has every line; the last one "
                         "is kept below at its time)\n")
    return name, len(window), kept


def cut_flows(src: Path, start: float, end: float, flow_numbers: set[int], mentions: Sequence[str],
              redactor: Redactor, dst_mitm: Path, dst_har: Path) -> int:
    """Copy the flows of the session's .mitm `src` that belong to the case (addon flow number in
    `flow_numbers`, or a path naming one of `mentions`, started between `start` and `end`) to `dst_mitm`,
    redacted, and the same as HAR (mitmproxy's own HAR export) to `dst_har`. Returns how many."""
    from mitmproxy import io as mio
    from mitmproxy.addons.savehar import SaveHar
    from mitmproxy.exceptions import FlowReadException

    picked = []
    with open(src, "rb") as fh:
        try:
            for f in mio.FlowReader(fh).stream():
                req = getattr(f, "request", None)
                if req is None or not (start <= (req.timestamp_start or 0) <= end):
                    continue
                if f.metadata.get("kh_flow") in flow_numbers or any(x and x in req.path for x in mentions):
                    picked.append(redactor.flow(f))
        except FlowReadException:
            pass  # the session file's last flow may be half written while the proxy runs
    with open(dst_mitm, "wb") as out:
        w = mio.FlowWriter(out)
        for f in picked:
            w.add(f)
    dst_har.write_text(json.dumps(SaveHar().make_har(picked), indent=1))
    return len(picked)


def _feature_gates(env: Any) -> dict[str, Any] | None:
    try:
        cfg = env._kueue_config()  # noqa: SLF001 - the local target's generated Configuration
        return dict(cfg.get("featureGates") or {})
    except Exception:  # noqa: BLE001 - other targets: read the config file if there is one
        try:
            cfg = yaml.safe_load((Path(env.state) / "kueue-config.yaml").read_text())
            return dict((cfg or {}).get("featureGates") or {})
        except Exception:  # noqa: BLE001
            return None


def write_case_bundle(ctx: Any, env: Any, outcome: Mapping[str, Any]) -> Path:
    """Complete a case's folder (`ctx.dir`, which already holds history.jsonl and objects.yaml) into its
    evidence bundle and pack it as `<folder>.tar.gz` beside it; returns the archive's path.

    `ctx`: the pytest plugin's CaseContext; `env`: the running environment (its tokens and keys are what
    redaction removes); `outcome`: the case's verdict entry ("case", "verdict", "expected", "detail",
    "seconds", optional "message", "bug"). Every file written is redacted; afterwards every file (the
    archive and .mitm included) is scanned for the run's secrets and any file that holds one is removed
    and named in bundle.json. Raises OSError when the folder cannot be written."""
    d: Path = ctx.dir
    end = time.time()
    start = ctx.history.started
    secrets = run_secrets(env)
    redactor = Redactor(secrets)
    for name in ("history.jsonl", "harness-events.jsonl", "objects.yaml"):
        p = d / name
        if p.exists():
            text = p.read_text(errors="replace")
            red = redactor.text(text)
            if red != text:
                p.write_text(red)
    history = load_history(d / "history.jsonl") if (d / "history.jsonl").exists() else []
    names = Names(history, ctx.ns, ctx.prefix)
    mentions = [ctx.ns] + sorted(names.workloads)
    notes: list[str] = []
    log = getattr(env, "kueue_log", None)
    if log is not None and Path(log).exists():
        cut_kueue_log(Path(log), start, end, d, mentions, redactor)
    else:
        notes.append("Kueue's log was not available")
    proxy = getattr(env, "proxy", None)
    session_flows = Path(proxy.events_file).with_name("flows.mitm") if proxy is not None else None
    if session_flows is not None and session_flows.exists():
        numbers = {int(e["flow"]) for e in history if e.get("source") == "proxy" and e.get("event") == "request"
                   and e.get("flow") is not None}
        cut_flows(session_flows, start, end, numbers, mentions, redactor, d / "flows.mitm", d / "flows.har")
    else:
        notes.append("no proxy flows were recorded")
    meta: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA,
        "case": outcome.get("case"),
        "slug": d.name,
        "verdict": outcome.get("verdict", "error"),
        "expected": outcome.get("expected"),
        "detail": outcome.get("detail", ""),
        "message": redactor.text(str(outcome.get("message") or "")),
        "seconds": outcome.get("seconds"),
        "bug": outcome.get("bug"),
        "kueue_version": getattr(env, "kueue_version", None),
        "kueue": env.kueue_build_info() if hasattr(env, "kueue_build_info") else None,
        "kubernetes_version": getattr(env, "kubernetes_version", None) or versions.KUBERNETES_VERSION,
        "target": outcome.get("target") or getattr(env, "target", None) or "local",
        "feature_gates": _feature_gates(env),
        "namespace": ctx.ns,
        "prefix": ctx.prefix,
        "workloads": sorted(getattr(ctx, "workload_keys", ()) or ()),
        "window": [start, end],
        "notes": notes,
        "checkers": outcome.get("checkers"),
    }
    objects = load_objects(d / "objects.yaml")
    _, findings = recheck(history, objects, names=names, selection=selection_of(meta))
    (d / "timeline.mmd").write_text("\n".join(diagram_lines(history, names, meta["verdict"], findings)) + "\n")
    _finish(d, meta, history, objects, secrets)
    tar = d.with_name(d.name + ".tar.gz")
    with tarfile.open(tar, "w:gz") as tf:
        tf.add(d, arcname=d.name)
    leaks = find_secrets([tar], secrets)
    if leaks:  # cannot happen unless redaction missed a form: never leave such an archive behind
        tar.unlink()
        raise HarnessError(f"the bundle archive of {d.name} would hold a secret ({leaks[0]}); not written")
    return tar


def _finish(d: Path, meta: dict[str, Any], history: list[dict[str, Any]], objects: Mapping[str, Any],
            secrets: Sequence[str]) -> None:
    """Scan, record file sizes, write bundle.json and report.md (twice: the report lists its neighbours)."""
    found = find_secrets([p for p in sorted(d.iterdir()) if p.is_file()], secrets)
    for leak in found:
        bad = d / leak.split(":", 1)[0].split("!", 1)[0]
        bad.unlink(missing_ok=True)
    meta["redaction"] = {"secrets": len(secrets), "found": found}
    order = list(_FILE_NOTES)
    files = sorted((p for p in d.iterdir() if p.is_file() and p.name not in ("report.md",)),
                   key=lambda p: (order.index(p.name) if p.name in order else len(order), p.name))
    meta["files"] = {p.name: p.stat().st_size for p in files if p.name != "bundle.json"}
    size = 0
    for _ in range(4):  # bundle.json lists its own size: render until that number is right
        meta["files"]["bundle.json"] = size
        text = json.dumps(meta, indent=1, sort_keys=True)
        if len(text.encode()) == size:
            break
        size = len(text.encode())
    (d / "bundle.json").write_text(text)
    md, verdict, _ = render_report(meta, history, objects)
    (d / "report.md").write_text(md)


# =====================================================================================================
# Offline: `kueue-harness report BUNDLE`


@dataclass
class Recheck:
    """What `report_bundle` found: the bundle folder it read, the run's recorded verdict, the re-checked
    one, the findings and the report.md it wrote."""

    folder: Path
    recorded: str
    verdict: str
    findings: list[Finding]
    report: Path


def _extract(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tf:
        tops = {m.name.split("/")[0] for m in tf.getmembers()}
        if len(tops) != 1:
            raise BundleError(f"{archive}: expected one bundle folder inside, found {sorted(tops)}")
        tf.extractall(into, filter="data")
    return into / tops.pop()


def report_bundle(bundle: Path, out: Path | None = None, bound: float | None = None) -> Recheck:
    """Re-run the checkers on a bundle (folder or .tar.gz) and write report.md: into the folder itself,
    or for an archive into `out` (default: `<archive>.recheck/` beside it). No cluster is needed.
    Raises BundleError if history.jsonl or bundle.json is missing or malformed."""
    bundle = Path(bundle)
    if not bundle.exists():
        raise BundleError(f"{bundle} does not exist: give a bundle folder (artifacts/<run>/cases/<case>) or its .tar.gz")
    if bundle.is_dir():
        folder = bundle
        dest = Path(out) if out else folder
    else:
        dest = Path(out) if out else bundle.with_name(bundle.name.removesuffix(".gz").removesuffix(".tar") + ".recheck")
        with tempfile.TemporaryDirectory() as tmp:
            src = _extract(bundle, Path(tmp))
            dest.mkdir(parents=True, exist_ok=True)
            for p in src.iterdir():
                if p.is_file():
                    shutil.copy2(p, dest / p.name)
        folder = dest
    try:
        meta = json.loads((folder / "bundle.json").read_text())
    except (OSError, ValueError) as e:
        raise BundleError(f"{folder}/bundle.json: {e}. Is this a kueue-harness bundle (docs/evidence.md)?") from None
    history = load_history(folder / "history.jsonl")
    objects = load_objects(folder / "objects.yaml")
    md, verdict, findings = render_report(meta, history, objects, bound)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "report.md").write_text(md)
    return Recheck(folder, str(meta.get("verdict", "?")), verdict, findings, dest / "report.md")


def cli(bundle: str, out: str | None = None, bound: float | None = None) -> int:
    """`kueue-harness report`: print the findings and the verdict; exit 0 when the re-checked verdict is
    the run's recorded one, 1 when it differs."""
    r = report_bundle(Path(bundle), Path(out) if out else None, bound)
    print(f"{r.folder.name}: re-checked offline from history.jsonl + objects.yaml with the run's checkers"
          + (f" (liveness bound {bound:g}s)" if bound is not None else ""))
    for p in history_problems(load_history(r.folder / "history.jsonl")):
        print(f"  note: history.jsonl departs from docs/history.md: {p}")
    for f in r.findings:
        print(f"  {f.check:<20} {f.result:<15} {f.evidence}")
    same = r.verdict == r.recorded
    print(f"verdict: {r.verdict} (recorded at run time: {r.recorded}) — {'agrees' if same else 'DIFFERS'}")
    print(f"report: {r.report}")
    return 0 if same else 1
