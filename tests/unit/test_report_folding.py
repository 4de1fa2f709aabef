"""report.md stays short and true when a fault repeats: decisive writes alike (same rules, kind of write,
object, outcome) are shown once with "…and N more like it"; a cycle of diagram lines (a `fail` rule with
`times: null` failing the same eviction, Kueue logging and retrying, kubernetes-sigs/kueue#14863) is drawn
once with a note saying how often it repeated; a write the Proxy answers itself is drawn to the Proxy;
flow errors of the Kueue process a configuration restart stopped are one note, and the proxy-failure
assumption does not count them. Synthetic histories, no cluster."""

from __future__ import annotations

import json

from harness import report
from harness.checkers.assumptions import NoUnexplainedProxyFailure
from harness.history.names import Names
from harness.report import race
from tests.unit.test_report import NS, WL1, WL2, base, ev, kobj, log, write

PATH = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{WL1}/status?fieldManager=kueue-admission&force=true"


def _sticky(cycles: int = 40) -> list[dict]:
    """job2 preempts job1; rule evict-once holds job1's eviction and fails it, then rule evict-again
    (a `fail` with times: null) fails every later eviction at the request stage; Kueue logs and retries."""
    h = base(20.0)[:-1] + [
        ev(0.05, "proxy", "rule_added", plan="sticky", rule={
            "id": "evict-once", "match": {"write": "eviction", "name": WL1}, "action": "hold", "stage": "request",
            "times": 1, "release": {"after": [{"rule": "x", "state": "answered"}], "then": "fail"}}),
        ev(0.06, "proxy", "rule_added", plan="sticky", rule={
            "id": "evict-again", "match": {"write": "eviction", "name": WL1}, "action": "fail", "stage": "request",
            "times": None, "status": 500}),
        ev(0.50, "proxy", "request", flow=10, method="PATCH", path=PATH, user_agent="kueue",
           write=write("eviction", WL1)),
        ev(0.51, "proxy", "held", flow=10, hold="h1", rule="evict-once", stage="request", label="eviction"),
        ev(0.60, "proxy", "failed", flow=10, hold="h1", rule="evict-once", stage="request", status=500,
           label="eviction", why="triggers: x answered"),
        ev(0.61, "proxy", "response", flow=10, status=500, resource_version=None, label="eviction", write="eviction",
           namespace=NS, name=WL1),
    ]
    for i in range(cycles):
        t, f = 1.0 + i * 0.1, 11 + 2 * i  # flow numbers with gaps, as Kueue's other requests take some
        h += [
            ev(t, "proxy", "request", flow=f, method="PATCH", path=PATH, user_agent="kueue",
               write=write("eviction", WL1)),
            ev(t + 0.001, "proxy", "failed", flow=f, rule="evict-again", stage="request", status=500,
               label="eviction"),
            ev(t + 0.002, "proxy", "response", flow=f, status=500, resource_version=None, label="eviction",
               write="eviction", namespace=NS, name=WL1),
            log(t + 0.003, "Failed to preempt workloads", workload=kobj(WL2)),
            log(t + 0.004, "Workload re-queued", workload=kobj(WL2), requeueReason="PreemptionFailed"),
        ]
    h += [ev(15.0, "harness", "verdict", invariant="liveness", held=False), ev(15.1, "harness", "case_finished")]
    return sorted(h, key=lambda e: e["ts"])


def _writes(flows, body_time: str = "2026-11-30T14:56:01Z") -> dict:
    return {str(f): {"label": f"eviction {NS}/{WL1} (kueue-admission, loose)", "method": "PATCH", "path": PATH,
                     "content_type": "application/apply-patch+yaml", "status": 500,
                     "body": {"kind": "Workload", "metadata": {"name": WL1, "namespace": NS}, "status": {
                         "conditions": [{"type": "Evicted", "status": "True", "lastTransitionTime": body_time}]}},
                     "answer": {"reason": "InternalError", "message": "injected by kueue-harness"}} for f in flows}


# ---- decisive writes alike ---------------------------------------------------------------------------

def test_alike_decisive_writes_are_shown_once_with_how_many_more():
    h = _sticky(40)
    flows = [10] + [11 + 2 * i for i in range(40)]
    # The bodies of the repeats differ in lastTransitionTime only: still alike.
    writes = {**_writes(flows[:2]), **_writes(flows[2:], "2026-11-30T14:56:05Z")}
    md = "\n".join(race.race_section(h, Names(h, NS), writes, {}))
    sections = [ln for ln in md.splitlines() if ln.startswith("### flow")]
    # flow 10 (held, then failed: another rule and outcome) and flow 11, the first of the 40 alike.
    assert [s.split(":")[0] for s in sections] == ["### flow 10", "### flow 11"]
    assert "…and 39 more like it (flows 13–89, sent from 1.100s to 4.900s)" in md
    assert "differing only in times" in md
    assert md.count("request body (redacted)") == 2
    # Answered by the proxy: the table says so, not "kube-apiserver answered".
    assert "| the proxy answered (kube-apiserver never saw the request) | 500 InternalError" in md
    assert "kube-apiserver answered" not in md
    assert "answered 500 by the proxy, rule `evict-again`" in md


def test_the_last_alike_write_is_shown_when_it_differs_in_more_than_times():
    h = _sticky(5)
    flows = [10] + [11 + 2 * i for i in range(5)]
    writes = _writes(flows)
    writes["19"]["body"]["status"]["conditions"][0]["status"] = "False"  # the last one's body says otherwise
    md = "\n".join(race.race_section(h, Names(h, NS), writes, {}))
    sections = [ln.split(":")[0] for ln in md.splitlines() if ln.startswith("### flow")]
    assert sections == ["### flow 10", "### flow 11", "### flow 19"]
    assert "…and 3 more like it (flows 13–17," in md
    assert md.index("…and 3 more") < md.index("### flow 19")


def test_writes_to_another_object_or_with_another_outcome_are_not_alike():
    h = _sticky(3)
    h += [ev(5.0, "proxy", "request", flow=99, method="PATCH", path="/x", user_agent="kueue",
             write=write("eviction", WL2)),
          ev(5.001, "proxy", "failed", flow=99, rule="evict-again", stage="request", status=500, label="eviction"),
          ev(5.002, "proxy", "response", flow=99, status=500, resource_version=None, label="e", write="eviction",
             namespace=NS, name=WL2)]
    h = sorted(h, key=lambda e: e["ts"])
    md = "\n".join(race.race_section(h, Names(h, NS), {}, {}))
    sections = [ln.split(":")[0] for ln in md.splitlines() if ln.startswith("### flow")]
    assert sections == ["### flow 10", "### flow 11", "### flow 99"]
    assert "…and 2 more like it (flows 13–15" in md


# ---- the diagram -------------------------------------------------------------------------------------

def test_a_repeating_cycle_of_lines_is_drawn_once_with_its_count():
    h = _sticky(40)
    verdict, findings = report.recheck(h, {})
    lines = report.diagram_lines(h, Names(h, NS), "reproduced", findings)
    text = "\n".join(lines)
    assert report.validate_sequence_diagram(text) == []
    fails = [ln for ln in lines if "500 injected (rule evict-again)" in ln]
    assert len(fails) == 1, fails
    note = next(ln for ln in lines if "repeated" in ln)
    assert "the 3 lines above repeated 39 more times (×40 in all) until 4.904s" in note.replace("<br/>", " ")
    assert "flows 13–89" in note.replace("<br/>", " ")
    assert note.strip().startswith("Note over Kueue,Proxy:")
    # The story stays in order: the fold, then the verdict.
    assert lines.index(note) < next(i for i, ln in enumerate(lines) if "verdict: reproduced" in ln)
    assert len(lines) < 30


def test_lines_repeated_twice_are_not_folded():
    h = _sticky(2)
    lines = report.diagram_lines(h, Names(h, NS), "reproduced")
    assert not any("repeated" in ln for ln in lines)
    assert sum("500 injected (rule evict-again)" in ln for ln in lines) == 2


def test_a_cycle_with_an_interruption_folds_on_each_side():
    h = _sticky(12)
    h.append(ev(1.55, "proxy", "watch_event", flow=3, type="MODIFIED", namespace=NS, name=WL1,
                resource_version="300", conditions={"Evicted": "True"}, admission=True))
    h = sorted(h, key=lambda e: e["ts"])
    lines = report.diagram_lines(h, Names(h, NS), "reproduced")
    notes = [ln.replace("<br/>", " ") for ln in lines if "repeated" in ln]
    assert [n.split("repeated ")[1].split(" more")[0] for n in notes] == ["5", "5"], notes
    assert report.validate_sequence_diagram("\n".join(lines)) == []


def test_a_write_the_proxy_answers_itself_is_drawn_to_the_proxy():
    h = _sticky(1)
    lines = report.diagram_lines(h, Names(h, NS), "reproduced")
    arrow = next(ln for ln in lines if "1.000s eviction job1" in ln)
    assert arrow.strip() == "Kueue-xProxy: 1.000s eviction job1 (loose) → 500 injected (rule evict-again)"
    assert not any("Kueue->>API" in ln and "eviction job1" in ln for ln in lines)
    # The held one (flow 10): to the Proxy, held, then failed by the Proxy.
    assert any(ln.strip() == "Kueue->>Proxy: 0.500s eviction job1 (loose)" for ln in lines)


def test_a_write_failed_at_the_response_stage_reached_kube_apiserver():
    h = base() + [
        ev(0.5, "proxy", "request", flow=7, method="PATCH", path="/x", user_agent="kueue", write=write("admission", WL1)),
        ev(0.6, "proxy", "failed", flow=7, rule="r", stage="response", status=409, label="admission"),
        ev(0.61, "proxy", "response", flow=7, status=409, resource_version=None, label="a", write="admission",
           namespace=NS, name=WL1),
    ]
    lines = report.diagram_lines(sorted(h, key=lambda e: e["ts"]), Names(h, NS))
    assert any(ln.strip() == "Kueue->>API: 0.500s admission job1 (loose)" for ln in lines)
    assert any(ln.strip().startswith("Proxy--xKueue: 0.600s 409 injected") for ln in lines)


# ---- flow errors of the Kueue process a configuration restart stopped --------------------------------

def _restarted(errors_during: tuple[str, ...] = ()) -> list[dict]:
    h = base(10.0)
    t_cfg = -0.006
    h += [ev(-1.367 + i * 0.0005, "proxy", "flow_error", flow=7 + i, error="stream reset by client (CANCEL)")
          for i in range(16)]
    h.append(ev(-1.359, "proxy", "flow_error", flow=40, error="Connection reset by peer"))  # not client-side
    h.append(ev(t_cfg, "harness", "kueue_configured", why="case", declared={}, summary="gates", restarted=True,
                seconds=1.365, feature_gates={}, if_known={}))
    h += [ev(2.0 + i, "proxy", "flow_error", flow=500 + i, error=err) for i, err in enumerate(errors_during)]
    h.append(ev(9.0, "harness", "verdict", invariant="liveness", held=True))
    return sorted(h, key=lambda e: e["ts"])


def test_flow_errors_of_the_restarted_kueue_are_one_note():
    h = _restarted()
    lines = report.diagram_lines(h, Names(h, NS), "passed")
    errs = [ln for ln in lines if "Note over Proxy" in ln and ("error" in ln or "cut" in ln)]
    assert len(errs) == 1, errs
    text = errs[0].replace("<br/>", " ")
    assert "17 requests of the previous Kueue process were cut by its restart (configuration change)" in text
    assert "-1.367s to -1.359s" in text
    assert report.validate_sequence_diagram("\n".join(lines)) == []


def test_flow_errors_before_the_case_without_a_restart_are_one_note_too():
    h = [e for e in _restarted() if e["event"] != "kueue_configured"]
    lines = report.diagram_lines(h, Names(h, NS), "passed")
    errs = [ln.replace("<br/>", " ") for ln in lines if "Note over Proxy" in ln]
    assert len(errs) == 1 and "17 requests from before the case started ended with an error" in errs[0], errs


def test_the_proxy_failure_assumption_leaves_out_the_restart_and_counts_the_case():
    check = NoUnexplainedProxyFailure()
    quiet = _restarted()
    assert check.check(quiet, {}, Names(quiet, NS))[0].result == "held"
    # A real failure during the case is still counted (and only it).
    loud = _restarted(("Connection reset by peer",))
    f = check.check(loud, {}, Names(loud, NS))[0]
    assert f.result != "held" and "1 request(s)" in f.summary and "flow 500" in f.evidence
    # ...and drawn on its own.
    lines = report.diagram_lines(loud, Names(loud, NS), "error")
    assert any("flow 500 error: Connection reset by peer" in ln for ln in lines)


def test_report_md_legend_says_what_the_proxy_answers():
    h = _sticky(5)
    meta = {"case": "cases/t.py::t", "verdict": "reproduced", "namespace": NS}
    md, _, _ = report.render_report(meta, h, {})
    assert "ends at the Proxy with a cross" in md and "kube-apiserver never saw it" in md
    assert "Kueue-xProxy:" in md
    json.dumps(md)  # plain text
