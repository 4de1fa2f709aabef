"""report.md: the verdict, versions, fault plan, the sequence diagram and the checker findings of a
bundle (`render_report`). Deterministic: the same bundle renders the same bytes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.checkers import Finding, progress
from harness.checkers.base import within_case
from harness.checkers.bounds import LIVENESS_BOUND
from harness.history.names import Names
from harness.history.names import case_t0 as _t0
from harness.plan import actions
from harness.report import race
from harness.report.bundle import recheck as run_checkers
from harness.report.bundle import selection_of
from harness.report.diagram import diagram_lines

INVARIANTS = {
    "liveness": "a Workload that preempts another, or one the case names, gets quota within {bound:g} s of waiting "
                "(counted from the last fault lifted, if later)",
    "quota": "no ClusterQueue holds more than its quota (a watch during the run, and the final state)",
}

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


#: How report.md's fault table says who let a hold go, by the `why` the control channel recorded with the
#: proxy's `released` / `failed` event (prefix → words): the CLI (harness/cli/commands.py) sends its own command,
#: the plugin "end of case" (pytest_plugin.py), a case's `proxy.release(h)` "test" or its own words.
_ENDED_BY = (
    ("kueue-harness release --all", "by hand (`kueue-harness release --all`)"),
    ("kueue-harness release", "by hand (`kueue-harness release`)"),
    ("kueue-harness fail", "by hand (`kueue-harness fail`)"),
    ("end of case", "at the end of the case (every hold still held is released)"),
    ("max_hold", "when its max_hold expired"),
    ("control", "through the control channel"),
)


def _ended_words(why: str, who: str) -> str | None:
    """The words for one hold's end (`why` of its released/failed event); None for ends the rule's own
    release says (its triggers, its release.timeout)."""
    if why.startswith(("triggers:", "release.timeout")):
        return None
    return next((words for prefix, words in _ENDED_BY if why.startswith(prefix)), who)


def _hold_ends(history: Sequence[Mapping[str, Any]], rule_id: str, who: str) -> tuple[list[str], bool]:
    """(how the holds of rule `rule_id` ended other than by its own release, in order of first use;
    whether it held anything)."""
    held, words = False, []
    for e in history:
        if e.get("source") != "proxy" or str(e.get("rule")) != rule_id:
            continue
        if e.get("event") == "held":
            held = True
        elif e.get("event") in ("released", "failed") and e.get("hold") is not None:
            w = _ended_words(str(e.get("why") or ""), who)
            if w is not None and w not in words:
                words.append(w)
        elif e.get("event") == "hold_expired" and "when its max_hold expired" not in words:
            words.append("when its max_hold expired")
    return words, held


def _fault_rules(history: Sequence[Mapping[str, Any]], names: Names, session: bool = False) -> list[list[str]]:
    """The fault table's rows: rule (and plan), action, match, released when, times. "released when" is
    the rule's own release (its triggers' words), else how its holds did end (by hand with the CLI, by
    the test, at the end of the case, on expiry; in a `session`'s bundle, which has no test, "by hand" or
    "not yet"); a hold that ended otherwise than by its triggers is said as well."""
    who = "by hand" if session else "by the test"
    rows = []
    for e in history:
        if e.get("event") != "rule_added" or e.get("source") != "proxy":
            continue
        r = e.get("rule") or {}
        m = r.get("match") or {}
        match = ", ".join(f"{k}={names.text(str(v)) if k != 'namespace' else '(case)'}" for k, v in m.items())
        act = actions.describe(r)  # the fault kind's own words (harness/plan/actions.py)
        rel = r.get("release") or {}
        when = []
        for tr in rel.get("after") or []:
            if tr.get("rule"):
                when.append(f"{tr.get('rule')} {tr.get('state', 'answered')}" + (f" {tr['status']}" if tr.get("status") else ""))
            else:  # delivered, step, log, object: the trigger's own words ("step b-dequeued done")
                when.append(_trigger_words(tr))
        ended, held = _hold_ends(history, str(r.get("id")), who)
        if when:
            release = " and ".join(when) + (f"; a hold of it ended otherwise: {' / '.join(ended)}" if ended else "")
        elif r.get("action", "hold") != "hold":
            release = "-"
        else:
            release = " / ".join(ended) or ("not yet (still held when the bundle was made)" if held and session
                                            else who)
        if rel.get("timeout"):
            release += f" (else {rel.get('on_timeout', 'release')} after {rel['timeout']:g}s)"
        times = "every" if r.get("times") is None else str(r.get("times"))
        rows.append([f"`{r.get('id')}`" + (f" (plan {e['plan']})" if e.get("plan") else ""), act, match, release, times])
    return rows


def _trigger_words(tr: Mapping[str, Any]) -> str:
    """How report.md says a non-rule trigger (harness.plan.rules.Trigger.describe), or the mapping itself."""
    from harness.plan.rules import Trigger

    try:
        return Trigger(**{k: v for k, v in tr.items() if k in Trigger.__dataclass_fields__}).describe()
    except TypeError:
        return str(dict(tr))


def _map(v: Any) -> Mapping[str, Any]:
    """`v` if it is a mapping, else {} (a bundle.json field of the wrong type is shown as absent)."""
    return v if isinstance(v, Mapping) else {}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _kueue_config_rows(kc: Mapping[str, Any]) -> list[list[str]]:
    """The "Kueue configuration" row: what the case declared (harness/kueue/config.py) and the feature gates
    Kueue reported in its "Loaded feature gates" line; the whole Configuration file is in bundle.json."""
    if not kc:
        return []
    cell = str(kc.get("summary") or "the harness's default")
    reported = _map(kc.get("feature_gates_reported"))
    if reported:
        on = sorted(k for k, v in reported.items() if v is True)
        cell += f"<br>Kueue reported {len(reported)} gates, on: {', '.join(on) or 'none'}"
    cell += "<br>(the Configuration file Kueue was given: bundle.json `kueue_config.configuration`)"
    return [["Kueue configuration", cell]]


def _kueue_view_section(view: Mapping[str, Any], names: Names) -> list[str]:
    """"Kueue's own view": what Kueue's SIGUSR2 dump said of each Workload of the case at the verdict (bundle.json
    `kueue_view`, harness/scenarios/verdicts.py _kueue_view), its ClusterQueues' usage and queues; [] without one."""
    if not view:
        return []
    out = ["## Kueue's own view at the verdict", "",
           "Kueue dumped its scheduler cache and queues on SIGUSR2 (pkg/debugger) when the case was judged; the whole "
           "dump is kueue-dump.json, its goroutine stacks goroutines.txt.", ""]
    if view.get("problem"):
        out += [f"Not all of it: {view['problem']}.", ""]
    wls = _map(view.get("workloads"))
    if wls:
        out += _table([[names.text(k), "; ".join(v) if isinstance(v, list) and v else
                        "nowhere: neither counted, pending nor inadmissible"] for k, v in wls.items()],
                      ["Workload", "where Kueue has it"]) + [""]
    cqs = _map(view.get("cluster_queues"))
    if cqs:
        out += _table([[names.text(cq), json.dumps(_map(d).get("usage"), sort_keys=True),
                        ", ".join(names.text(w) for w in _map(d).get("workloads") or []) or "-",
                        ", ".join(names.text(w) for w in _map(d).get("pending") or []) or "-",
                        ", ".join(names.text(w) for w in _map(d).get("inadmissible") or []) or "-"]
                       for cq, d in cqs.items()], ["ClusterQueue", "usage", "counted", "pending", "inadmissible"]) + [""]
    if view.get("goroutines"):
        out += [f"Goroutines at that moment: {view['goroutines']} (goroutines.txt).", ""]
    return out


def _pace_cell(history: Sequence[Mapping[str, Any]]) -> str:
    """How fast the run's control plane moved (harness/checkers/progress.py pace), as the checkers judged it."""
    p = progress.pace(within_case(history))
    if not p.figures:
        return "nothing to time"
    slow = " — **far slower than idle**: a verdict resting on time alone is `error`" if p.slow else ""
    return (", ".join(f"{k} {v:.3f}s (median of {p.samples[k]})" for k, v in p.figures.items())
            + f"; {p.factor:.1f}× an idle run's{slow}")


def render_report(meta: Mapping[str, Any], history: Sequence[Mapping[str, Any]], objects: Mapping[str, Any],
                  bound: float | None = None, notes: Sequence[str] = (),
                  recheck: bool = False, writes: Mapping[str, Mapping[str, Any]] | None = None,
                  managed: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> tuple[str, str, list[Finding]]:
    """report.md for a bundle. `meta` is bundle.json. Returns (markdown, re-checked verdict, findings).
    The checkers are the ones the run declared (bundle.json "checkers"); `bound` (seconds) overrides the
    liveness bound; `notes`: what is wrong with the bundle (a section of their own); `recheck`: this is
    `kueue-harness report`'s report.recheck.md, not the run's report.md; `writes` (writes.json) and
    `managed` (managed-fields.yaml) feed "The writes that decided the verdict" (harness/report/race.py).
    Fields of bundle.json that are
    only shown and have the wrong type are shown as absent. Deterministic: the same bundle renders the
    same bytes (no clock, no host names)."""
    names = Names(history, meta.get("namespace", ""), meta.get("prefix", ""))
    bound_given = bound is not None
    selection = selection_of(meta, bound)
    verdict, findings = run_checkers(history, objects, names=names, selection=selection)
    bound = float((selection.checkers.get("liveness") or {}).get("bound", LIVENESS_BOUND))
    recorded = meta.get("verdict", "?")
    t0 = _t0(history)
    case_short = str(meta.get("case", "?")).split("::")[-1]
    inv = next((e.get("invariant") for e in history if e.get("event") == "verdict" and e.get("invariant")), None)
    invariants = [inv] if inv in INVARIANTS else [f.check for f in findings if f.bearing and f.result != "not applicable"]
    inv_text = "; ".join(f"**{i}**: {INVARIANTS[i].format(bound=bound)}" for i in dict.fromkeys(invariants) if i in INVARIANTS)
    bug = _map(meta.get("bug"))
    gates = meta.get("feature_gates")
    gates_text = ", ".join(f"{k}={str(v).lower()}" for k, v in gates.items()) if isinstance(gates, Mapping) and gates else "Kueue's defaults"
    if isinstance(gates, Mapping):
        gates_text += " (all others: Kueue's defaults)"
    agree = "agrees" if verdict == recorded else "**differs** from the run's verdict"
    out = [f"# {case_short}: {recorded}", ""]
    if recheck:
        out += [f"Re-checked offline by `kueue-harness report`{f' with liveness bound {bound:g}s' if bound_given else ''}; "
                "the run's own report is report.md beside this file.", ""]
    rows = [
        ["verdict", f"**{recorded}** (expected: {meta.get('expected') or '-'}); offline re-check from history.jsonl: "
                    f"{verdict} ({agree})"],
        ["invariant", inv_text or "-"],
        ["case", f"`{meta.get('case', '?')}`"],
    ]
    if bug:
        fixed = f"; fixed in {', '.join(bug['fixed_in'])}" if bug.get("fixed_in") else ""
        on = _map(bug.get("on_this_build"))
        here = f"<br>on this build: **{on.get('status')}**: {on.get('reason')}" if on else ""
        rows.append(["known bug", f"{bug.get('issue')}: {bug.get('summary')} (affected: "
                                  f"{', '.join(bug.get('affected', []))}{fixed}){here}"])
    kb = _map(meta.get("kueue"))
    built = _map(kb.get("build"))
    kueue_cell = str(meta.get("kueue_version", "?"))
    if kb.get("commit"):
        kueue_cell += f" (commit `{str(kb['commit'])[:12]}`)"
    if built.get("source"):
        kueue_cell += f"; built from {built['source']}"
    if built.get("race"):
        kueue_cell += "; with Go's race detector (-race, from the binary's build information)"
    rows += [
        ["Kueue (as the binary reported)", kueue_cell],
        ["kube-apiserver", str(meta.get("kubernetes_version", "?"))],
        *([["Pods that run", f"kube-scheduler {_map(meta.get('pods')).get('kube_scheduler', '?')}, "
                             f"kwok {_map(meta.get('pods')).get('kwok', '?')}"]] if meta.get("pods") else []),
        ["feature gates", gates_text],
        *_kueue_config_rows(_map(meta.get("kueue_config"))),
        ["target", str(meta.get("target", "?"))],
        ["namespace", f"`{meta.get('namespace', names.ns)}`"],
        ["Workloads", "<br>".join(names.legend()) or "-"],
        ["started", f"{_utc(t0)}; the case ran {_num(meta.get('seconds')):.1f}s" if _num(meta.get("seconds")) else _utc(t0)],
        ["pace of this run", _pace_cell(history)],
    ]
    hv = _map(meta.get("harness"))
    if hv:
        commit = f", commit `{str(hv['commit'])[:12]}`" if hv.get("commit") else ""
        dirty = " with uncommitted changes" if hv.get("dirty") else ""
        rows.append(["kueue-harness", f"{hv.get('version') or '?'}{commit}{dirty}"])
    if isinstance(meta.get("rerun"), str) and meta["rerun"]:
        rows.append(["run it again", f"`{meta['rerun']}` (from the kueue-harness checkout)"])
    out += _table(rows, ["", ""]) + [""]
    if notes:
        out += ["## Problems with this bundle", ""] + [f"- {n}" for n in notes] + [""]
    if meta.get("detail") or meta.get("message"):
        out += ["## What the case reported", "", "```", str(meta.get("message") or meta.get("detail")).strip(), "```", ""]
    out += ["## Fault plan", ""]
    rules = _fault_rules(history, names, session=bool(meta.get("session")))
    out += (_table(rules, ["rule", "action", "match", "released when", "times"]) if rules
            else ["No fault rule: this run is a control (the same objects and order, nothing held)."]) + [""]
    out += ["## Timeline", "",
            f"Seconds since the case started ({_utc(t0)}). `Kueue->>kube-apiserver` arrows pass through the Proxy "
            "unchanged; a write the Proxy parks is drawn to the Proxy, with its HOLD and its release; a write the "
            "Proxy answers itself (a `fail` or `reset` rule at the request stage) ends at the Proxy with a cross "
            "(`Kueue-xProxy: … → 500 injected`), as kube-apiserver never saw it. Dotted arrows with an open head "
            "are what Kueue's Workload watch delivered (only deliveries that changed a Workload's conditions); "
            "other dotted arrows are answers. Notes over Kueue are its log lines about the case's Workloads; a "
            "line repeated before anything else happened is one note with its count (×N). Up to 4 lines that "
            "repeat as a cycle (the same but for times, flow numbers, resourceVersions and hold ids) are drawn "
            "once, followed by a note saying how often and until when they repeated. Errors of connections that "
            "were not the case's (the previous Kueue process's, cut when a configuration change restarted it) "
            "are one note.", "",
            "```mermaid"] + diagram_lines(history, names, recorded, findings) + ["```", ""]
    out += race.race_section(history, names, writes or {}, managed or {})
    out += ["## Checker findings", "",
            f"Re-run offline from history.jsonl and objects.yaml (`kueue-harness report`); liveness bound {bound:g}s.", ""]
    out += _table([[f.check, f.result if f.bearing else f"{f.result} (does not decide the verdict)", f.evidence]
                   for f in findings], ["check", "result", "evidence"]) + [""]
    out += _kueue_view_section(_map(meta.get("kueue_view")), names)
    files = _map(meta.get("files"))
    if files:
        out += ["## Files", ""]
        out += _table([[f"[`{n}`]({n})", f"{s:,}" if _num(s) is not None else str(s), _FILE_NOTES.get(n, "")]
                       for n, s in files.items()],
                      ["file", "bytes", "what"]) + [""]
    red = _map(meta.get("redaction"))
    if red:
        out += [f"Redaction: Authorization headers, bearer tokens, private keys and this run's "
                f"{red.get('secrets', 0)} secret values were removed before writing; a scan of every file for "
                f"them found {len(red.get('found', []))} {'leak' if len(red.get('found', [])) == 1 else 'leaks'}.", ""]
    out += ["## Re-check offline", "", "```sh",
            f"kueue-harness report {meta.get('slug', 'BUNDLE')}.tar.gz   # or the bundle's folder", "```",
            "prints the re-checked verdict and writes report.recheck.md from history.jsonl + objects.yaml "
            "(report.md stays as the run wrote it). The flows: "
            "`mitmweb -r flows.mitm --set web_columns=tls,icon,path,comment,method,status,size,time` shows each "
            "flow's label and fate in the comment column; the writes a fault rule touched are marked "
            "(filter `~marked`).", ""]
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
    "writes.json": "Kueue's Workload writes of the case: request bodies, answers, managedFields",
    "managed-fields.yaml": "managedFields of the final objects (who owns which field)",
    "timeline.mmd": "the diagram alone (`mmdc -i timeline.mmd -o timeline.png`)",
    "kueue-dump.json": "Kueue's own view at the verdict: its scheduler cache and queues (SIGUSR2 dump, pkg/debugger)",
    "goroutines.txt": "Kueue's goroutine stacks at the verdict (pprof)",
    "bundle.json": "verdict, versions, window, files (read by `kueue-harness report`)",
}

