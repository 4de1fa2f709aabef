"""One flood count and one clock everywhere in a bundle: history.jsonl summarises Kueue's repeated log lines
(harness/history/repeats.py) and the checkers judge the summary exactly as the full history; the verdict records
what the live checkers saw (`seen`), so the offline re-check, the diagram and the case's own message give
the same numbers; times are written to the millisecond in every section.
"""

from __future__ import annotations

import json
import re

import pytest

from harness import report
from harness.checkers import Selection, compose
from harness.checkers.base import observed_until, within_case
from harness.checkers.liveness import Liveness
from harness.history import repeats
from harness.history.names import Names
from tests.unit.test_report import NS, WL1, WL2, kobj, log, stuck_history

WAITING = "Preemption already issued, waiting for observation"
SEL = Selection({"liveness": {}, "log_flood": {}, "quota": {}})


def _evidence(findings):
    return [(f.check, f.result, f.evidence) for f in findings]


def _flood_count(findings) -> int:
    f = next(f for f in findings if f.check == "log flood")
    return int(re.search(r"observation' (\d+) times", f.evidence).group(1))


# ---- summarised history -----------------------------------------------------------------------------

def test_a_summarised_history_judges_exactly_as_the_full_one():
    full = stuck_history()
    small = repeats.summarize(full)
    assert len(small) < len(full) / 20, (len(small), len(full))
    assert any(e["event"] == "log_repeated" and e["count"] == 1500 - repeats.KEEP for e in small)
    assert report.history_problems(small) == []
    a, b = compose(SEL, full, {}), compose(SEL, small, {})
    assert a.verdict == b.verdict == "reproduced"
    assert _evidence(a.findings) == _evidence(b.findings)


def test_the_conclusive_stuck_rule_works_on_a_summary():
    """liveness counts 'already issued' lines after a time: the summary keeps each line's time."""
    full = [e for e in stuck_history() if e["ts"] - stuck_history()[0]["ts"] <= 1.2]
    small = repeats.summarize(full, keep=3)
    [f] = Liveness(bound=15).check(repeats.expand(small), {}, Names(small))
    assert f.result == "violated" and "Conclusive" in f.evidence
    [g] = Liveness(bound=15).check(full, {}, Names(full))
    assert f.evidence == g.evidence


def test_summaries_keep_times_to_the_microsecond_and_short_runs_whole():
    h = [log(i * 0.0100003, WAITING, preemptingWorkload=kobj(WL2), targetWorkload=kobj(WL1)) for i in range(30)]
    h += [log(0.5, "Preempted", preemptingWorkload=kobj(WL2), targetWorkload=kobj(WL1))]
    small = repeats.summarize(h, keep=5)
    assert [e["event"] for e in small].count("log") == 6 and sum(e["event"] == "log_repeated" for e in small) == 1
    back = repeats.expand(small)
    want = sorted(h, key=lambda e: e["ts"])
    assert len(back) == len(want) and all(abs(a["ts"] - b["ts"]) < 1.5e-6 for a, b in zip(back, want))
    assert repeats.summarize(h[:6], keep=5) == [dict(e) for e in h[:6]]  # keep + 1 lines: nothing to gain
    with pytest.raises(ValueError):
        repeats.summarize(h, keep=0)


def test_write_case_bundle_summarises_the_history_file(tmp_path):
    from harness.report.write import summarize_history_file

    p = tmp_path / "history.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in stuck_history()))
    before = len(p.read_text().splitlines())
    summarize_history_file(p)
    after = report.load_history(p)
    assert before > 1500 and len(after) < 100
    assert compose(SEL, after, {}).verdict == "reproduced"


# ---- what the live verdict saw ------------------------------------------------------------------------

def _live_and_final():
    """The live verdict's snapshot missed the log lines Kueue had not flushed yet; the final history has them
    and the verdict event with what the checkers saw."""
    full = [e for e in stuck_history() if e["event"] not in ("verdict", "case_finished")]
    t_verdict = full[0]["ts"] + 15.6
    snapshot = [e for e in full if e["source"] != "kueue" or e["ts"] <= full[0]["ts"] + 12.0]
    live = compose(SEL, snapshot, {})
    seen = {}
    for e in snapshot:
        seen[e["source"]] = max(seen.get(e["source"], 0.0), e["ts"])
    final = full + [{"ts": t_verdict, "source": "harness", "event": "verdict", "invariant": "liveness",
                     "held": False, "verdict": live.verdict, "seen": seen},
                    {"ts": t_verdict + 0.2, "source": "harness", "event": "case_finished"}]
    final += [log(15.7 + i * 0.01, WAITING, targetWorkload=kobj(WL1), preemptingWorkload=kobj(WL2)) for i in range(20)]
    return live, sorted(final, key=lambda e: e["ts"])


def test_the_offline_recheck_sees_what_the_live_verdict_saw():
    live, final = _live_and_final()
    offline = compose(SEL, final, {})
    assert _evidence(live.findings) == _evidence(offline.findings)
    assert _flood_count(offline.findings) == _flood_count(live.findings) < 1500


def test_within_case_and_observed_until_follow_the_verdicts_seen():
    live, final = _live_and_final()
    judged = within_case(final)
    verdict = next(e for e in final if e["event"] == "verdict")
    assert all(e["ts"] <= verdict["seen"].get(e["source"], verdict["ts"]) + 1e-6 or e is verdict for e in judged)
    assert observed_until(final) == max(verdict["seen"].values())


def test_the_diagram_counts_the_flood_as_the_checker_does():
    live, final = _live_and_final()
    verdict, findings = report.recheck(final, {}, selection=SEL)
    lines = report.diagram_lines(final, verdict=verdict, findings=findings)
    notes = [ln for ln in lines if WAITING in ln.replace("<br/>", " ")]
    judged = int(re.search(r"log ×(\d+)", notes[0]).group(1))
    assert judged == _flood_count(findings)
    assert len(notes) == 2 and "not judged" in notes[1].replace("<br/>", " ") and "×" not in notes[1]
    assert report.validate_sequence_diagram("\n".join(lines)) == []


def test_the_report_says_one_flood_count_everywhere(tmp_path):
    live, final = _live_and_final()
    message = "liveness: violated\n" + "\n".join(f"  {f.check}: {f.result}: {f.evidence}" for f in live.findings)
    meta = {"case": "cases/t.py::t", "verdict": "reproduced", "namespace": NS, "prefix": NS, "message": message,
            "checkers": SEL.checkers}
    md, verdict, findings = report.render_report(meta, final, {})
    counts = {int(n) for n in re.findall(r"observation' (\d+) times", md)}
    counts |= {int(n) for n in re.findall(r"log ×(\d+):<br/>Preemption already issued", md)}
    assert counts == {_flood_count(findings)}, counts


def test_times_are_written_to_the_millisecond_in_every_section():
    h = stuck_history()
    verdict, findings = report.recheck(h, {})
    live = next(f for f in findings if f.check == "liveness")
    lines = report.diagram_lines(h, verdict=verdict, findings=findings)
    t = re.search(r"\(t=(\d+\.\d+)s\)", live.evidence).group(1)
    assert re.fullmatch(r"\d+\.\d{3}", t), t  # to the millisecond, as the diagram
    assert any(f" {t}s " in ln for ln in lines), (t, lines)


def test_the_quota_monitors_time_is_the_diagrams():
    from tests.unit.test_report import base, ev

    h = sorted(base() + [ev(1.2345, "monitor", "quota_violation_started", finding=f"ClusterQueue {NS}-cq over",
                            used_milli=2000, allowed_milli=1000, workloads=[])], key=lambda e: e["ts"])
    verdict, findings = report.recheck(h, {"workloads": [], "clusterqueues": [{"metadata": {"name": "cq"}}]},
                                       selection=Selection({"quota": {}}))
    quota = next(f for f in findings if f.check == "quota")
    t = re.search(r"at t=(\d+\.\d+)s", quota.evidence).group(1)
    lines = report.diagram_lines(h, verdict=verdict, findings=findings)
    assert any(f"{t}s monitor: quota violated" in ln for ln in lines), (t, lines)


def test_a_kueue_configuration_is_one_short_note_in_the_diagram() -> None:
    """kueue_configured carries the whole Configuration file; the diagram shows only its one-line summary."""
    big = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "integrations": {"frameworks": ["batch/job"] * 50}}
    h = [{"ts": 1.0, "source": "harness", "event": "case_started"},
         {"ts": 1.1, "source": "harness", "event": "kueue_configured", "why": "case", "restarted": True,
          "summary": "featureGates PrioritizePreemptorWorkloads=true", "configuration": big, "declared": big}]
    notes = [ln for ln in report.diagram_lines(h) if "Kueue restarted with" in ln]
    assert len(notes) == 1 and "PrioritizePreemptorWorkloads=true" in notes[0]
    assert "frameworks" not in notes[0] and len(notes[0]) < 200
