"""harness/kueue/dump.py on Kueue's own dump lines (pkg/debugger/debugger.go, snapshot.go Log, queue dumper.go),
as v0.17.0 logs them on SIGUSR2."""

from __future__ import annotations

from harness.kueue import dump

T = "2026-12-07T10:00:01.5Z"


def line(msg, **f):
    return {"ts": T, "level": "info", "logger": "dumper", "msg": msg, **f}


LINES = [
    line("Started dump"),
    line("Found ClusterQueue", clusterQueue={"name": "p-cq"}, cohort="<none>", usage={"rf": {"cpu": 1000}},
         workloads=["ns/job-job1-aaaaa"]),
    line("Found cohort", cohort="root", resources={"rf": {"cpu": 2000}}, usage={"rf": {"cpu": 1000}}),
    line("Found pending and inadmissible workloads in ClusterQueue", clusterQueue={"name": "p-cq"},
         pending=[], inadmissible=["ns/job-job2-bbbbb"]),
    line("Ended dump"),
]


def test_the_last_complete_dump_after_the_signal() -> None:
    d = dump.last_dump(LINES, since=0)
    assert d["cluster_queues"]["p-cq"] == {"cohort": "<none>", "usage": {"rf": {"cpu": 1000}},
                                           "workloads": ["ns/job-job1-aaaaa"], "pending": [],
                                           "inadmissible": ["ns/job-job2-bbbbb"]}
    assert d["cohorts"]["root"]["usage"] == {"rf": {"cpu": 1000}}
    assert dump.where(d, "ns/job-job1-aaaaa") == ["counted in p-cq's usage (admitted or assumed in the scheduler cache)"]
    assert dump.where(d, "ns/job-job2-bbbbb") == ["inadmissible in p-cq (parked until something changes)"]
    assert dump.where(d, "ns/other") == []
    assert dump.last_dump(LINES[:-1], since=0) is None  # not ended yet: no dump
    assert dump.last_dump(LINES, since=2e9) is None  # before the signal: not this dump
