"""harness/report.py on synthetic histories: the checkers (liveness, quota, log flood), the diagram
(what is drawn, collapsing, merging), the structural Mermaid validator, Kueue log cutting, and the CLI's
exit codes. Real saved bundles: test_report_bundles.py."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness import report
from harness.checkers.liveness import Liveness
from harness.checkers.log_flood import LogFlood
from harness.checkers.quota import QuotaSafety
from harness.cli import commands as cli
from harness.common.redact import Redactor
from harness.history.names import Names


def check_liveness(h, objs, bound=15.0):
    return Liveness(bound).check(h, objs, Names(h))


def check_quota_history(h, objs):
    return QuotaSafety().check(h, objs, Names(h))


def check_log_flood(h):
    return LogFlood().check(h, {}, Names(h))

NS = "case-1"
WL1, WL2 = "job-job1-aaaaa", "job-job2-bbbbb"
T0 = 1_000_000.0


def ev(dt: float, source: str, event: str, **f):
    return {"ts": T0 + dt, "source": source, "event": event, **f}


def kobj(name: str) -> dict:
    return {"name": name, "namespace": NS}


def log(dt: float, msg: str, **f):
    return ev(dt, "kueue", "log", msg=msg, fields=f)


def write(cls: str, name: str, strict: bool = False) -> dict:
    return {"kind": "Workload", "namespace": NS, "name": name, "write": cls, "method": "PATCH",
            "subresource": "status", "field_manager": "kueue-admission", "patch_type": "apply", "strict": strict,
            "resource_version": None, "conditions": {}, "admission_cluster_queue": None}


def base(dt_end: float = 20.0) -> list[dict]:
    """job1 admitted, job2 created and preempting job1: the start every scenario below shares."""
    return [
        ev(0, "harness", "case_started", case="cases/t.py::t", namespace=NS),
        ev(0.1, "harness", "queues_created", cluster_queue=f"{NS}-cq", local_queue=f"{NS}/lq", nominal_cpu="1"),
        ev(0.2, "harness", "job_created", job=f"{NS}/job1", priority=f"{NS}-low", cpu="1"),
        ev(0.3, "harness", "job_created", job=f"{NS}/job2", priority=f"{NS}-high", cpu="1"),
        log(0.4, "Preempted", targetWorkload=kobj(WL1), preemptingWorkload=kobj(WL2), workload=kobj(WL2)),
        ev(dt_end, "harness", "case_finished"),
    ]


def workload(name: str, quota: bool, cpu: str = "1") -> dict:
    conds = [{"type": "QuotaReserved", "status": "True" if quota else "False"}]
    st: dict = {"conditions": conds}
    if quota:
        st["admission"] = {"clusterQueue": f"{NS}-cq", "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": cpu}}]}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {}, "status": st}


CQ = {"metadata": {"name": f"{NS}-cq"}, "spec": {"resourceGroups": [
    {"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}}


# ---- liveness ---------------------------------------------------------------------------------------

def test_liveness_violated_when_the_preemptor_never_gets_quota_within_the_bound():
    h = base(20.0)
    objs = {"workloads": [workload(WL1, True), workload(WL2, False)], "clusterqueues": [CQ]}
    [f] = check_liveness(h, objs, bound=15)
    assert f.result == "violated" and "job2" in f.evidence and "job1" in f.evidence
    assert "QuotaReserved=False" in f.evidence


def test_liveness_inconclusive_when_the_history_is_shorter_than_the_bound():
    [f] = check_liveness(base(5.0), {}, bound=15)
    assert f.result == "inconclusive"


def test_liveness_held_when_quota_arrives_on_the_watch():
    h = base(20.0) + [ev(1.0, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=WL2,
                         resource_version="12", conditions={"QuotaReserved": "True"}, admission=True)]
    h.sort(key=lambda e: e["ts"])
    [f] = check_liveness(h, {}, bound=15)
    assert f.result == "held" and "0.60s after its first preemption" in f.evidence


def test_liveness_bound_runs_from_the_last_fault_lifted():
    h = base(30.0) + [ev(10.0, "proxy", "released", flow=3, hold="h1", rule="r", stage="request", label="x", why="t"),
                      ev(24.0, "proxy", "response", flow=7, status=200, resource_version="20", label="a",
                         write="admission", namespace=NS, name=WL2)]
    h.sort(key=lambda e: e["ts"])
    [f] = check_liveness(h, {}, bound=15)
    assert f.result == "held", f.evidence  # 14 s after the release at t=10, though 23.6 s after the preemption
    [f] = check_liveness(h, {}, bound=10)
    assert f.result == "violated" and "nothing moved for 14.00s" in f.evidence


def test_liveness_ignores_releases_at_the_end_of_the_case():
    h = base(20.0) + [ev(19.9, "proxy", "released", flow=3, hold="h1", rule="r", stage="request", label="x",
                         why="end of case")]
    h.sort(key=lambda e: e["ts"])
    [f] = check_liveness(h, {}, bound=15)
    assert f.result == "violated"


def test_liveness_not_applicable_without_preemption():
    h = [e for e in base() if e["source"] != "kueue"]
    [f] = check_liveness(h, {})
    assert f.result == "not applicable"


# ---- quota, flood, verdict -----------------------------------------------------------------------------

def test_quota_violation_in_the_final_objects():
    objs = {"workloads": [workload(WL1, True), workload(WL2, True)], "clusterqueues": [CQ]}
    [f] = check_quota_history(base(), objs)
    assert f.result == "violated" and "2 used of 1" in f.evidence and "job1, job2" in f.evidence


def test_transient_quota_violation_from_the_monitor():
    h = base() + [ev(1.0, "monitor", "quota_violation_started", finding=f"ClusterQueue {NS}-cq flavor rf cpu: 2 used "
                     f"of 1 allowed by nominal quota, held by {NS}/{WL1}, {NS}/{WL2}", used_milli=2000,
                     allowed_milli=1000, workloads=[])]
    objs = {"workloads": [workload(WL1, False), workload(WL2, True)], "clusterqueues": [CQ]}
    [f] = check_quota_history(sorted(h, key=lambda e: e["ts"]), objs)
    assert f.result == "violated" and f.summary.startswith("transient") and "cleared before the end" in f.evidence


def test_verdict_from_all_checks():
    h = base(20.0)
    objs = {"workloads": [workload(WL1, True), workload(WL2, False)], "clusterqueues": [CQ]}
    verdict, findings = report.recheck(h, objs)
    assert verdict == "reproduced"
    assert [f.check for f in findings][:2] == ["liveness", "quota"]
    ok = h + [ev(1.0, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=WL2, resource_version="9",
                 conditions={"QuotaReserved": "True"}, admission=True)]
    assert report.recheck(sorted(ok, key=lambda e: e["ts"]), {"workloads": [workload(WL2, True)], "clusterqueues": [CQ]})[0] == "passed"
    assert report.recheck(base(5.0), {})[0] == "error"  # no ClusterQueue: quota cannot judge


def test_log_flood_is_counted_but_does_not_decide():
    h = base() + [log(1 + i / 100, "Preemption already issued, waiting for observation",
                      targetWorkload=kobj(WL1), preemptingWorkload=kobj(WL2)) for i in range(150)]
    [f] = check_log_flood(sorted(h, key=lambda e: e["ts"]))
    assert f.result == "info" and not f.bearing and "150 times" in f.evidence and "flood" in f.evidence


# ---- diagram -------------------------------------------------------------------------------------------

def stuck_history() -> list[dict]:
    """The stuck-preemption story in miniature: hold job1's admission, hold the eviction's answer,
    release both, then a flood of 'Preemption already issued' interleaved with a write."""
    h = base(16.0)[:-2] + [
        ev(0.05, "proxy", "rule_added", rule={"id": "admission-job1", "match": {"write": "admission", "name": "job-job1-*", "namespace": NS},
                                              "action": "hold", "stage": "request", "times": 1,
                                              "release": {"after": [{"rule": "eviction-job1", "state": "held", "status": 200}], "timeout": 120}},
           plan="stuck-preemption"),
        ev(0.06, "proxy", "rule_added", rule={"id": "eviction-job1", "match": {"write": "eviction", "name": "job-job1-*"},
                                              "action": "hold", "stage": "response", "times": 1}, plan="stuck-preemption"),
        ev(0.25, "proxy", "request", flow=5, method="PATCH", path="/x", user_agent="kueue", write=write("admission", WL1)),
        ev(0.26, "proxy", "held", flow=5, hold="h1", rule="admission-job1", stage="request", label="admission"),
        ev(0.35, "proxy", "request", flow=6, method="PATCH", path="/x", user_agent="kueue", write=write("eviction", WL1)),
        ev(0.36, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=WL1, resource_version="263",
           conditions={"QuotaReserved": "True", "Admitted": "True", "Evicted": "True", "Preempted": "True"}, admission=True),
        ev(0.37, "proxy", "held", flow=6, hold="h2", rule="eviction-job1", stage="response", label="eviction", status=200,
           resource_version="263"),
        ev(0.38, "proxy", "released", flow=5, hold="h1", rule="admission-job1", stage="request", label="admission",
           why="triggers: eviction-job1 held"),
        ev(0.39, "proxy", "watch_event", flow=9, type="MODIFIED", namespace=NS, name=WL1, resource_version="264",
           conditions={"QuotaReserved": "True", "Admitted": "True"}, admission=True),
        ev(0.40, "proxy", "response", flow=5, status=200, resource_version="264", label="a", write="admission",
           namespace=NS, name=WL1),
        ev(0.41, "proxy", "released", flow=6, hold="h2", rule="eviction-job1", stage="response", label="eviction",
           why="bundle test"),
        ev(0.42, "proxy", "response", flow=6, status=200, resource_version="263", label="e", write="eviction",
           namespace=NS, name=WL1),
        log(0.43, "Preempted", targetWorkload=kobj(WL1), preemptingWorkload=kobj(WL2), workload=kobj(WL2)),
        ev(0.60, "proxy", "request", flow=8, method="PATCH", path="/x", user_agent="kueue", write=write("pending", WL2)),
        ev(0.61, "proxy", "response", flow=8, status=200, resource_version="268", label="p", write="pending",
           namespace=NS, name=WL2),
    ]
    h += [log(0.5 + i * 0.01, "Preemption already issued, waiting for observation", targetWorkload=kobj(WL1),
              preemptingWorkload=kobj(WL2), workload=kobj(WL2)) for i in range(1500)]
    h += [ev(15.6, "harness", "verdict", invariant="liveness", held=False), ev(15.7, "harness", "case_finished")]
    return sorted(h, key=lambda e: e["ts"])


def test_diagram_tells_the_story_in_order():
    h = stuck_history()
    verdict, findings = report.recheck(h, {})
    lines = report.diagram_lines(h, verdict="reproduced", findings=findings)
    text = "\n".join(lines)
    assert report.validate_sequence_diagram(text) == []
    order = ["load fault plan stuck-preemption", "create Job job1", "Kueue->>Proxy: 0.250s admission job1 (loose)",
             "HOLD h1", "Kueue->>API: 0.350s eviction job1", "HOLD h2: the answer", "release h1",
             "Proxy->>API: 0.380s admission job1", "watch job1 rv 264: QuotaReserved, Admitted (Evicted, Preempted gone)",
             "Test->>Proxy: 0.410s release h2 (bundle test)", "Proxy-->>Kueue: 0.420s 200 rv 263 for eviction job1",
             "Preempted job1 (for job2)", "log ×1500", "pending job2 (loose) → 200 rv 268", "verdict: reproduced"]
    pos = [next((i for i, ln in enumerate(lines) if s in ln), None) for s in order]
    assert None not in pos, [s for s, p in zip(order, pos) if p is None]
    assert pos == sorted(pos), list(zip(order, pos))
    assert len(lines) < 40, "the flood must collapse to one note"
    assert sum("Preemption already issued" in ln for ln in lines) == 1


def test_duplicate_workload_create_answered_409_is_not_drawn():
    h = base() + [ev(0.21, "proxy", "request", flow=2, method="POST", path="/x", user_agent="kueue",
                     write={**write("post", WL1), "method": "POST", "subresource": None}),
                  ev(0.22, "proxy", "response", flow=2, status=409, resource_version=None, label="p", write="post",
                     namespace=NS, name=WL1)]
    lines = report.diagram_lines(sorted(h, key=lambda e: e["ts"]))
    assert not any("create Workload" in ln or "409" in ln for ln in lines)


def test_names_shorten_workloads_and_the_case_prefix():
    n = report.Names(base())
    assert n.wl(WL1) == "job1" and n.kobj(kobj(WL2)) == "job2" and n.priority("job2") == "high"
    assert n.text(f"ClusterQueue {NS}-cq held by {NS}/{WL1}") == "ClusterQueue cq held by job1"


@pytest.mark.parametrize("bad, why", [
    ("graph TD\n A-->B", "first line"),
    ("sequenceDiagram\n participant A\n A->>B: hi", "not declared"),
    ("sequenceDiagram\n participant A\n participant B\n A->>B: one; two", "`;`"),
    ("sequenceDiagram\n participant A\n loop x\n Note over A: hi", "not closed"),
    ("sequenceDiagram\n participant A\n participant B\n A->>B:  ", "empty text"),
    ("sequenceDiagram\n participant A\n Note over A: <b>x</b>", "markup"),
    ("sequenceDiagram\n participant A\n A gives B", "not a participant"),
])
def test_validator_rejects_broken_diagrams(bad, why):
    problems = report.validate_sequence_diagram(bad)
    assert problems and any(why in p for p in problems), problems


def test_clean_keeps_mermaid_syntax_out_of_texts():
    s = report._clean("a; b #3 <x> %% c")
    assert ";" not in s and "#" not in s and "<" not in s and "%%" not in s


# ---- Kueue's log ----------------------------------------------------------------------------------------

def _zap(ts: float, msg: str, **kv) -> str:
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(ts, timezone.utc).isoformat().replace("+00:00", "Z")
    return json.dumps({"level": "info", "ts": stamp, "msg": msg, **kv}) + "\n"


def test_cut_kueue_log_keeps_the_window_and_cuts_repeats_in_the_excerpt(tmp_path, monkeypatch):
    src = tmp_path / "kueue.log"
    lines = [_zap(T0 - 10 + i * 0.001, "before") for i in range(5000)]
    lines += ["plain start-up text\n"]
    lines += [_zap(T0 + i * 0.01, "Preemption already issued, waiting for observation",
                   workload=kobj(WL2), targetWorkload=kobj(WL1), token="abcdefgh12345678") for i in range(100)]
    lines += [_zap(T0 + 2, "other", workload={"name": "x", "namespace": "elsewhere"})]
    lines += [_zap(T0 + 50, "after")]
    src.write_text("".join(lines))
    out = tmp_path / "b"
    out.mkdir()
    name, n, kept = report.cut_kueue_log(src, T0, T0 + 10, out, [NS], Redactor(["s3cret-token-value"]))
    assert name == "kueue.log" and n == 101  # the plain line takes the time before it: outside
    text = (out / "kueue.log").read_text()
    assert "before" not in text and "after" not in text and "elsewhere" in text
    assert "abcdefgh12345678" not in text  # a `token` field is redacted
    ex = (out / "kueue-excerpt.log").read_text().splitlines()
    assert kept == report.EXCERPT_REPEATS + 1 and len(ex) == kept + 1
    assert "89 more lines 'Preemption already issued" in ex[report.EXCERPT_REPEATS]
    monkeypatch.setattr("harness.report.write.LOG_PLAIN_MAX", 1000)
    name, _, _ = report.cut_kueue_log(src, T0, T0 + 10, out, [NS], Redactor())
    assert name == "kueue.log.gz" and not (out / "kueue.log").exists()
    assert "elsewhere" in gzip.decompress((out / "kueue.log.gz").read_bytes()).decode()


# ---- the CLI --------------------------------------------------------------------------------------------

def _bundle(tmp_path: Path, verdict: str) -> Path:
    d = tmp_path / "case-x"
    d.mkdir()
    (d / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in stuck_history()))
    (d / "objects.yaml").write_text("workloads: []\nclusterqueues: []\n")
    (d / "bundle.json").write_text(json.dumps({"case": "cases/t.py::t", "slug": "case-x", "verdict": verdict,
                                               "namespace": NS, "prefix": NS}))
    return d


def test_cli_report_exit_codes(tmp_path, capsys):
    d = _bundle(tmp_path, "reproduced")
    assert cli.main(["report", str(d)]) == 0
    out = capsys.readouterr().out
    assert "verdict: reproduced (recorded at run time: reproduced) — agrees" in out
    assert (d / "report.recheck.md").read_text().startswith("# t: reproduced")
    (d / "bundle.json").write_text(json.dumps({"case": "t", "verdict": "passed", "namespace": NS}))
    assert cli.main(["report", str(d)]) == 1
    assert "DIFFERS" in capsys.readouterr().out
    assert cli.main(["report", str(tmp_path / "nope")]) == 8  # a bundle that cannot be read
    (d / "bundle.json").unlink()
    assert cli.main(["report", str(d)]) == 8
    assert "bundle.json" in capsys.readouterr().err


def test_report_is_deterministic(tmp_path):
    d = _bundle(tmp_path, "reproduced")
    report.report_bundle(d)
    first = (d / "report.recheck.md").read_bytes()
    report.report_bundle(d)
    assert (d / "report.recheck.md").read_bytes() == first


def test_a_job_is_drawn_before_kueue_reacts_to_it():
    """The harness records job_created when its call returns; Kueue may have written the Workload already."""
    h = base()
    h.append(ev(0.15, "proxy", "request", flow=2, method="POST", path="/x", user_agent="kueue",
                write={**write("post", WL1), "method": "POST", "subresource": None}))
    lines = report.diagram_lines(sorted(h, key=lambda e: e["ts"]))
    job = next(i for i, ln in enumerate(lines) if "create Job job1" in ln)
    wl = next(i for i, ln in enumerate(lines) if "create Workload job1" in ln)
    assert job < wl and "create Job job1 (priority low, cpu 1), call returned 0.200s" in lines[job]


def test_names_shorten_workloads_of_jobs_the_history_did_not_create():
    """A manual session's Jobs are created by hand: job-<name>-<hash> still reads as <name>."""
    n = report.Names([{"ts": 1.0, "source": "proxy", "event": "watch_event", "namespace": "demo",
                       "name": "job-job1-6e59a", "type": "ADDED"}], "demo")
    assert n.wl("job-job1-6e59a") == "job1" and n.legend() == ["job1 = demo/job-job1-6e59a"]
    assert n.wl("other-name") == "other-name"


def test_fault_table_says_step_log_and_object_triggers_in_their_own_words():
    """A hold released by plan steps and facts (cases/kueue_10901's evict-v) is not shown as "None answered"."""
    from harness.report.markdown import _fault_rules

    after = [{"step": "b-dequeued"}, {"delivered": "deactivated-b"}, {"log": "not active .*job-b-"},
             {"object": "Job/v", "field": "$.spec.suspend", "equals": True}, {"rule": "r", "state": "answered", "status": 200}]
    h = [{"ts": T0, "source": "proxy", "event": "rule_added", "plan": "p",
          "rule": {"id": "evict-v", "action": "hold", "times": 1, "match": {"write": "eviction"},
                   "release": {"after": after, "timeout": 30}}}]
    ((_, _, _, released, _),) = _fault_rules(h, Names(h))
    assert released == ("step b-dequeued done and Kueue's watch delivered deactivated-b's object and Kueue logged "
                        "/not active .*job-b-/ and Job/v $.spec.suspend = true and r answered 200 (else release after 30s)")
