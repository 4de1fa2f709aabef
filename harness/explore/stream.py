"""One environment for a whole exploration (issue 25): the driver feeds runs to one long-lived pytest process.

Starting an environment (etcd, kube-apiserver, kube-controller-manager, the proxy, Kueue) costs 10-40 s; a
search of hundreds of runs in batches of 10 spent about half its time on it. With `--explore-stream DIR`
(written by the driver, `Stream`), the pytest process collects `SLOTS` *slots* per control case
(`test_x_control[slot00001]`, interleaved across cases) instead of fixed runs; before each slot's set-up
(so before its case folder exists) the plugin asks the driver for a run and waits for the answer:

- `DIR/want/<worker>-<slot>.json` (plugin): `{"case": node id, "slot": key, "worker": its artifacts folder name}`;
- `DIR/assign/<worker>-<slot>.json` (driver, written whole by rename): `{"run": {id, case, plan, words, oracles,
  not_judged}}` — the slot runs it as `--explore-runs` would; `{"skip": why}` — no run for this case now
  (the slot is skipped at once, nothing is created); `{"stop": why}` — the search is over (the session
  stops after this slot).

Results travel as before: explore.json in the run's evidence folder and a line of
`<artifacts>/explore-progress.jsonl` (now with `evidence`). The plugin gives up waiting when the driver's
process is gone (`stream.json`'s `driver_pid`) or after WANT_TIMEOUT, so a dead driver never leaves an
environment running. The driver restarts the process (a new environment) when it exits early, or when a
run takes longer than its bound (the run then has no result: outcome `error`).

**Workers** (`explore --workers N`): N such processes at once, each with its own environment (etcd,
kube-apiserver, kube-controller-manager, proxy, Kueue: nothing shared but the binaries), each with its own
artifacts folder (`p01`, `p02`, ...) whose name prefixes its slot keys (`p02-slot00007-<hash>`). A run of the
batch goes to the first worker that asks for a slot of its case; a worker that ends is replaced by a new one.
A run is judged in the environment it ran in alone, so workers never see each other's objects or faults.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.common.errors import HarnessError

#: Slots collected per case; a process that used them all ends, and the driver starts another.
SLOTS = 3000
#: Seconds a slot waits for the driver's answer before it gives up (the driver answers within a second,
#: except while it judges a batch: then at most one batch's bookkeeping).
WANT_TIMEOUT = 900.0
#: Seconds between two looks at the stream folder (plugin and driver): a slot skipped waits for one answer,
#: and a run's case may come after several skipped slots.
POLL = 0.02
#: Processes in a row that may end before finishing a run before the search gives up (a case that cannot
#: start, a broken build): then the end of the last one's log is the error.
MAX_FRUITLESS = 3
#: Seconds more the first run of a process may take: it starts the environment (10-40 s, more under load).
START_GRACE = 180.0


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as JSON to `path` whole (rename), so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---- the pytest side -----------------------------------------------------------------------------

def slot_ids() -> list[str]:
    return [f"slot{k:05d}" for k in range(1, SLOTS + 1)]


def slot_key(nodeid: str, slot: str) -> str:
    """The file name of a slot's question and answer: the slot of *this case* (every case has a slot00001)."""
    case = nodeid.split("[")[0]
    return f"{slot}-{hashlib.sha1(case.encode()).hexdigest()[:10]}"


def interleave(items: list[Any]) -> list[Any]:
    """Slot items of several cases in the order slot 1 of each case, slot 2 of each case, ...; other items
    keep their place before them."""
    def slot(item: Any) -> int | None:
        name = getattr(item, "name", "")
        if name.endswith("]") and "[slot" in name:
            return int(name.rsplit("[slot", 1)[1][:-1])
        return None

    plain = [i for i in items if slot(i) is None]
    slots = sorted((i for i in items if slot(i) is not None), key=lambda i: (slot(i), items.index(i)))
    return plain + slots


def ask(folder: Path, nodeid: str, slot: str, timeout: float = WANT_TIMEOUT, worker: str = "") -> dict[str, Any]:
    """Ask the driver (stream folder `folder`) for the run of `slot` of case `nodeid`; returns the answer
    (`run`, `skip` or `stop`; `stop` also when the driver is gone or did not answer within `timeout`).
    `worker`: the asking process's name (its artifacts folder, `p01`): with several processes on one stream
    (`explore --workers N`) it keeps their slots apart and tells the driver whose run it is."""
    info = json.loads((folder / "stream.json").read_text())
    key = f"{worker}-{slot_key(nodeid, slot)}" if worker else slot_key(nodeid, slot)
    want, answer = folder / "want" / f"{key}.json", folder / "assign" / f"{key}.json"
    _write(want, {"case": nodeid, "slot": key, "worker": worker})
    t0 = time.monotonic()
    while True:
        if answer.is_file():
            got = json.loads(answer.read_text())
            for f in (want, answer):  # answered: the driver looks at the questions still open only
                f.unlink(missing_ok=True)
            return got
        if not _alive(int(info["driver_pid"])):
            return {"stop": "the explore driver is gone"}
        if time.monotonic() - t0 > timeout:
            return {"stop": f"the explore driver did not answer within {timeout:g}s"}
        time.sleep(POLL)


# ---- the driver side -----------------------------------------------------------------------------

class _Worker:
    """One pytest process of the stream, with its own environment: its artifacts folder (`p01`, `p02`, ...;
    also its name in the slot keys) and how far the driver has read its progress lines."""

    def __init__(self, art: Path, proc: subprocess.Popen) -> None:
        self.art, self.proc = art, proc
        self.progress, self.seen, self.done = art / "explore-progress.jsonl", 0, 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def lines(self) -> list[dict[str, Any]]:
        if not self.progress.is_file():
            return []
        lines = self.progress.read_text().splitlines()
        new = [json.loads(x) for x in lines[self.seen:] if x.strip()]
        self.seen = len(lines)
        return new


class Stream:
    """The driver's end (module docstring). `cmd(artifacts)`: the pytest command line for one process with
    its artifacts folder; `folder`: the stream folder; `say`: progress lines; `per_run`: seconds a run may
    take before its process is restarted; `workers`: pytest processes (each its own environment) taking runs
    side by side: the runs of a batch go to whichever asks first for their case (`explore --workers`)."""

    def __init__(self, cmd: Callable[[Path], list[str]], folder: Path, cwd: Path, cases: list[str], *,
                 per_run: float = 90.0, workers: int = 1, say: Callable[[str], None] = print) -> None:
        self.cmd, self.folder, self.cwd, self.cases, self.per_run, self.say = cmd, folder, cwd, cases, per_run, say
        self.n_workers = max(1, workers)
        self.workers: list[_Worker] = []
        self.fruitless = 0
        self.starts = 0
        self.answered: set[str] = set()
        #: Answers given, by kind ("run", "skip", "stop").
        self.answers: dict[str, int] = {}

    @property
    def proc(self) -> subprocess.Popen | None:
        """The first live worker's process (None when none runs)."""
        return next((w.proc for w in self.workers if w.alive()), None)

    def _start_one(self) -> _Worker:
        self.starts += 1
        for sub in ("want", "assign"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        _write(self.folder / "stream.json", {"driver_pid": os.getpid(), "slots": SLOTS, "cases": self.cases,
                                             "workers": self.n_workers})
        art = self.folder / f"p{self.starts:02d}"
        art.mkdir(parents=True, exist_ok=True)
        with open(art / "pytest.log", "w") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(self.cmd(art), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.cwd, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        w = _Worker(art, proc)
        self.workers.append(w)
        self.say(f"[explore] one environment for the search: pytest process {self.starts} started "
                 f"(log: {art / 'pytest.log'})" if self.n_workers == 1 else
                 f"[explore] worker {len(self.workers)} of {self.n_workers}: pytest process {self.starts} started "
                 f"(its own environment; log: {art / 'pytest.log'})")
        return w

    def start(self) -> None:
        """Start workers until `workers` run."""
        while len(self.workers) < self.n_workers:
            self._start_one()

    def alive(self) -> bool:
        return any(w.alive() for w in self.workers)

    def _wants(self) -> list[dict[str, Any]]:
        out = []
        for f in sorted((self.folder / "want").glob("*.json"), key=lambda f: f.stat().st_mtime):
            if f.stem in self.answered:
                continue
            try:
                out.append(json.loads(f.read_text()))
            except ValueError:
                continue  # being written (it is renamed into place: a torn read is impossible, but be safe)
        return out

    def _answer(self, slot: str, data: dict[str, Any]) -> None:
        self.answered.add(slot)
        kind = next(iter(data), "")
        self.answers[kind] = self.answers.get(kind, 0) + 1
        _write(self.folder / "assign" / f"{slot}.json", data)

    def _forget(self, w: _Worker) -> None:
        """Drop an ended worker: its questions and answers (a new worker has other slot keys)."""
        self.workers.remove(w)
        for sub in ("want", "assign"):
            for f in (self.folder / sub).glob(f"{w.art.name}-*"):
                f.unlink()

    def _owner(self, want: dict[str, Any]) -> _Worker | None:
        name = want.get("worker") or ""
        if not name:
            return self.workers[0] if len(self.workers) == 1 else None
        return next((w for w in self.workers if w.art.name == name), None)

    def run(self, runs: list[dict[str, Any]], same_case: Callable[[str, str], bool],
            on_line: Callable[[dict[str, Any], int, int], None],
            refill: Callable[[int], list[dict[str, Any]]] | None = None) -> dict[str, dict[str, Any] | None]:
        """Run `runs` (the runs-file entries: id, case, plan, ...) on the stream; returns {run id: the run's
        explore.json (with `bundle`) or None}. `on_line(line, k, n)` is called for each finished run.
        `refill(n)`: at most n more runs for a worker that asks once every run was handed out while a run of `runs`
        itself is still under way (the batch's tail would leave it idle), at most len(runs) in all; their
        results are returned too. (Refilling while only refilled runs are under way would never end the
        batch: its results would never be judged.)"""
        own = {r["id"] for r in runs}  # the batch's own runs; runs[len(own):] are refilled ones
        runs = list(runs)
        pending = list(runs)
        #: run id -> (when it was handed out, the worker running it)
        waiting: dict[str, tuple[float, _Worker]] = {}
        results: dict[str, dict[str, Any] | None] = {}
        k = 0

        def take_lines(w: _Worker) -> None:
            nonlocal k
            for line in w.lines():
                rid = str(line.get("run"))
                if rid not in waiting:
                    continue
                waiting.pop(rid)
                k += 1
                w.done += 1
                res = None
                ev = line.get("evidence")
                try:
                    res = json.loads((Path(ev) / "explore.json").read_text()) if ev else None
                except (OSError, ValueError):
                    res = None
                if res is not None:
                    res["bundle"] = str(Path(ev).with_name(Path(ev).name + ".tar.gz"))
                results[rid] = res
                on_line(line, k, len(runs))

        self.start()
        while pending or waiting:
            for w in list(self.workers):
                take_lines(w)  # before looking at the process: a run's line may be its last act
            if not (pending or waiting):
                break
            for w in [w for w in self.workers if not w.alive()]:
                take_lines(w)  # what it wrote before it ended (nothing more can come)
                if w.done == 0:
                    self.fruitless += 1
                    if self.fruitless >= MAX_FRUITLESS:
                        tail = (w.art / "pytest.log").read_text(errors="replace")[-1500:]
                        self._forget(w)
                        raise HarnessError(f"explore: {self.fruitless} pytest processes in a row ended before "
                                           f"finishing a run; the end of the last one's log ({w.art}/pytest.log):"
                                           f"\n{tail}")
                else:
                    self.fruitless = 0
                self.say(f"[explore] the pytest process {w.art.name} ended (exit {w.proc.returncode}); its runs "
                         f"under way have no result; starting another")
                for rid in [rid for rid, (_, o) in waiting.items() if o is w]:
                    results[rid] = None
                    waiting.pop(rid)
                self._forget(w)
            self.start()
            for want in self._wants():
                owner = self._owner(want)
                if owner is None:
                    self.answered.add(want["slot"])  # a question of a worker that ended: nobody waits for it
                    continue
                i = next((j for j, r in enumerate(pending) if same_case(r["case"], want["case"])), None)
                room = 2 * len(own) - len(runs)  # refills left: at most as many as the batch's own runs
                if i is None and not pending and refill is not None and room > 0 and any(rid in own for rid in waiting):
                    more = refill(room)
                    runs.extend(more)
                    pending.extend(more)
                    i = next((j for j, r in enumerate(pending) if same_case(r["case"], want["case"])), None)
                if i is not None:
                    r = pending.pop(i)
                    self._answer(want["slot"], {"run": r})
                    waiting[r["id"]] = (time.monotonic(), owner)
                elif pending:
                    self._answer(want["slot"], {"skip": "no run for this case in the batch"})
            for w in list(self.workers):
                take_lines(w)
            late = [(rid, o) for rid, (t, o) in waiting.items()
                    if time.monotonic() - t > self.per_run + (START_GRACE if o.done == 0 else 0.0)]
            if late:
                self.say(f"[explore] run(s) {', '.join(r for r, _ in late)} took more than {self.per_run:g}s: stopping "
                         "its pytest process (a new environment for the next runs)")
                for rid, o in late:
                    results[rid] = None
                    waiting.pop(rid)
                    if o in self.workers:
                        self._stop_worker(o, "a run took too long")
                        self._forget(o)
                continue
            time.sleep(POLL)
        return results

    def _stop_worker(self, w: _Worker, why: str) -> None:
        """Tell the worker's waiting slots to stop, let it end (its teardown stops the environment), and kill
        its process group if it does not within 120 s."""
        deadline = time.monotonic() + 120.0
        while w.alive() and time.monotonic() < deadline:
            for want in self._wants():
                if self._owner(want) is w:
                    self._answer(want["slot"], {"stop": why})
            try:
                w.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        if w.alive():
            os.killpg(w.proc.pid, signal.SIGTERM)
            try:
                w.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait()

    def stop(self, why: str = "the search is over") -> None:
        """Stop every worker: all are told at once and waited for together; one still running after 120 s is
        killed (`_stop_worker`)."""
        deadline = time.monotonic() + 120.0
        while any(w.alive() for w in self.workers) and time.monotonic() < deadline:
            for want in self._wants():
                if self._owner(want) is not None:
                    self._answer(want["slot"], {"stop": why})
            time.sleep(0.25)
        for w in list(self.workers):
            self._stop_worker(w, why)  # only those still running after 120 s: killed
        self.workers.clear()
