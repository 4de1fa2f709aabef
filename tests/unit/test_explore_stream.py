"""The stream protocol of `explore` (harness/explore/stream.py): the driver's Stream against a child process
that plays the pytest side with the plugin's own `stream.ask` (slots interleaved across two cases, a skip
when the batch has no run for a slot's case, results read from explore.json, a restart after the child
died, stop at the end). No Kueue here: what is tested is the protocol, with a real second process."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from harness.explore import stream
from harness.explore.plugin import same_case

CHILD = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from harness.explore import stream
    folder, art, cases, die_after = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4])
    done = 0
    for k in range(1, 50):
        for case in cases:  # slot k of each case, as stream.interleave orders pytest's items
            ans = stream.ask(folder, case, f"slot{k:05d}", timeout=30, worker=art.name)
            if "stop" in ans:
                sys.exit(0)
            if "skip" in ans:
                continue
            run = ans["run"]
            ev = art / run["id"]
            ev.mkdir(parents=True)
            (ev / "explore.json").write_text(json.dumps({"run": run["id"], "verdict": "passed", "case": case,
                                                         "oracles": run.get("oracles")}))
            with open(art / "explore-progress.jsonl", "a") as fh:
                fh.write(json.dumps({"run": run["id"], "verdict": "passed", "seconds": 0.1,
                                     "evidence": str(ev)}) + "\\n")
            done += 1
            if done == die_after:
                sys.exit(3)
''')


def test_interleave_puts_slot_k_of_every_case_together() -> None:
    class It:
        def __init__(self, name: str) -> None:
            self.name = name

    items = [It("test_other"), It("test_a[slot00001]"), It("test_a[slot00002]"), It("test_b[slot00001]"),
             It("test_b[slot00002]")]
    assert [i.name for i in stream.interleave(items)] == [
        "test_other", "test_a[slot00001]", "test_b[slot00001]", "test_a[slot00002]", "test_b[slot00002]"]


def _stream(tmp_path: Path, cases: list[str], die_after: int = 0, lines: list | None = None,
            workers: int = 1) -> stream.Stream:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    folder = tmp_path / "stream"

    def cmd(art: Path) -> list[str]:
        return [sys.executable, str(script), str(folder), str(art), ",".join(cases), str(die_after)]

    return stream.Stream(cmd, folder, Path.cwd(), cases, per_run=30.0, workers=workers,
                         say=lambda s: None if lines is None else lines.append(s))


def test_runs_go_to_slots_of_their_case_and_results_come_back(tmp_path: Path) -> None:
    cases = ["cases/x/test_a.py::test_a_control", "cases/x/test_b.py::test_b_control"]
    s = _stream(tmp_path, cases)
    seen: list[tuple[str, int, int]] = []
    try:
        runs = [{"id": "p0001", "case": cases[1], "oracles": {"bounded_evictions": {}}},
                {"id": "p0002", "case": cases[1]}, {"id": "p0003", "case": cases[0]}]
        got = s.run(runs, same_case, lambda line, k, n: seen.append((line["run"], k, n)))
        assert set(got) == {"p0001", "p0002", "p0003"}
        assert got["p0001"]["oracles"] == {"bounded_evictions": {}}
        assert got["p0001"]["bundle"].endswith("p0001.tar.gz")
        assert sorted(k for _, k, _ in seen) == [1, 2, 3] and all(n == 3 for *_, n in seen)
        # Case a's first slot was skipped (the batch's first run was b's); the process stays for the next batch.
        assert s.answers.get("skip", 0) >= 1 and s.answers["run"] == 3
        # A slot removes its question and answer once answered: the driver looks at the open ones only.
        assert not list((tmp_path / "stream" / "assign").glob("*.json"))
        got = s.run([{"id": "p0004", "case": cases[0]}], same_case, lambda *a: None)
        assert got["p0004"]["verdict"] == "passed" and s.starts == 1
    finally:
        s.stop()
    assert s.proc is None


def test_a_process_that_dies_is_started_again(tmp_path: Path) -> None:
    cases = ["cases/x/test_a.py::test_a_control"]
    lines: list[str] = []
    s = _stream(tmp_path, cases, die_after=1, lines=lines)
    try:
        got = s.run([{"id": f"p{i}", "case": cases[0]} for i in range(3)], same_case, lambda *a: None)
        assert all(got[f"p{i}"] is not None for i in range(3))
        assert s.starts == 3 and any("ended (exit 3)" in x for x in lines)
    finally:
        s.stop()


def test_a_process_that_never_finishes_a_run_ends_the_search_with_its_log(tmp_path: Path) -> None:
    import pytest

    from harness.common.errors import HarnessError

    script = tmp_path / "bad.py"
    script.write_text("import sys\nprint('cannot start: no such build')\nsys.exit(4)\n")
    s = stream.Stream(lambda art: [sys.executable, str(script)], tmp_path / "stream", Path.cwd(), ["c"],
                      say=lambda x: None)
    with pytest.raises(HarnessError, match="(?s)3 pytest processes in a row.*cannot start: no such build"):
        s.run([{"id": "p1", "case": "c"}], same_case, lambda *a: None)
    assert s.starts == 3


def test_a_slot_stops_when_the_driver_is_gone(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    (folder / "want").mkdir(parents=True)
    (folder / "assign").mkdir()
    (folder / "stream.json").write_text(json.dumps({"driver_pid": 2**22 + 12345, "cases": []}))
    assert stream.ask(folder, "c", "slot00001", timeout=5) == {"stop": "the explore driver is gone"}


def test_two_workers_take_runs_side_by_side_and_one_that_dies_is_replaced(tmp_path: Path) -> None:
    cases = ["cases/x/test_a.py::test_a_control", "cases/x/test_b.py::test_b_control"]
    lines: list[str] = []
    s = _stream(tmp_path, cases, die_after=3, lines=lines, workers=2)
    try:
        runs = [{"id": f"p{i:04d}", "case": cases[i % 2]} for i in range(8)]
        got = s.run(runs, same_case, lambda *a: None)
        assert all(got[r["id"]] is not None for r in runs)
        # Each run's evidence is in the folder of the worker that ran it: both took some.
        by = {Path(got[r["id"]]["bundle"]).parent.name for r in runs}
        assert len(by) >= 2, by
        # A worker ends after 3 runs (exit 3): another one replaces it, so two run again at the end.
        assert s.starts >= 3 and any("ended (exit 3)" in x for x in lines)
        assert len(s.workers) == 2
        # Slot keys carry the worker's name: two workers never answer each other's slots.
        assert {f.name.split("-")[0] for f in (tmp_path / "stream" / "want").glob("*.json")} <= \
            {w.art.name for w in s.workers}
    finally:
        s.stop()
    assert s.proc is None and not s.workers


def test_a_worker_idle_at_the_batch_tail_gets_refill_runs(tmp_path: Path) -> None:
    """Stream.run `refill`: once every run of the batch was handed out, a worker that asks gets the next runs
    (the driver's next batch's first ones) instead of waiting for the batch's last run; their results come
    back with the batch's."""
    cases = ["cases/x/test_a.py::test_a_control"]
    s = _stream(tmp_path, cases, workers=2)
    asked: list[int] = []

    def refill(n: int) -> list[dict]:  # would give runs for ever: the batch must still end
        assert n >= 1
        asked.append(1)
        return [{"id": f"r{len(asked)}", "case": cases[0]}]

    try:
        got = s.run([{"id": "p1", "case": cases[0]}, {"id": "p2", "case": cases[0]}], same_case, lambda *a: None,
                    refill=refill)
        assert {"p1", "p2"} <= set(got) and all(v is not None for v in got.values())
        # Refilled only while a run of the batch itself was under way, and at most as many as the batch had.
        assert set(got) - {"p1", "p2"} <= {"r1", "r2"}
    finally:
        s.stop()
