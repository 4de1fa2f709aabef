"""One environment for a whole exploration (issue 25): the driver feeds runs to one long-lived pytest process.

Starting an environment (etcd, kube-apiserver, kube-controller-manager, the proxy, Kueue) costs 10-40 s; a
search of hundreds of runs in batches of 10 spent about half its time on it. With `--explore-stream DIR`
(written by the driver, `Stream`), the pytest process collects `SLOTS` *slots* per control case
(`test_x_control[slot00001]`, interleaved across cases) instead of fixed runs; before each slot's set-up
(so before its case folder exists) the plugin asks the driver for a run and waits for the answer:

- `DIR/want/<slot>.json` (plugin): `{"case": node id, "slot": id}`;
- `DIR/assign/<slot>.json` (driver, written whole by rename): `{"run": {id, case, plan, words, oracles,
  not_judged}}` — the slot runs it as `--explore-runs` would; `{"skip": why}` — no run for this case now
  (the slot is skipped at once, nothing is created); `{"stop": why}` — the search is over (the session
  stops after this slot).

Results travel as before: explore.json in the run's evidence folder and a line of
`<artifacts>/explore-progress.jsonl` (now with `evidence`). The plugin gives up waiting when the driver's
process is gone (`stream.json`'s `driver_pid`) or after WANT_TIMEOUT, so a dead driver never leaves an
environment running. The driver restarts the process (a new environment) when it exits early, or when a
run takes longer than its bound (the run then has no result: outcome `error`).
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
#: Seconds between two looks at the stream folder (plugin and driver).
POLL = 0.05
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


def ask(folder: Path, nodeid: str, slot: str, timeout: float = WANT_TIMEOUT) -> dict[str, Any]:
    """Ask the driver (stream folder `folder`) for the run of `slot` of case `nodeid`; returns the answer
    (`run`, `skip` or `stop`; `stop` also when the driver is gone or did not answer within `timeout`)."""
    info = json.loads((folder / "stream.json").read_text())
    key = slot_key(nodeid, slot)
    want, answer = folder / "want" / f"{key}.json", folder / "assign" / f"{key}.json"
    _write(want, {"case": nodeid, "slot": key})
    t0 = time.monotonic()
    while True:
        if answer.is_file():
            return json.loads(answer.read_text())
        if not _alive(int(info["driver_pid"])):
            return {"stop": "the explore driver is gone"}
        if time.monotonic() - t0 > timeout:
            return {"stop": f"the explore driver did not answer within {timeout:g}s"}
        time.sleep(POLL)


# ---- the driver side -----------------------------------------------------------------------------

class Stream:
    """The driver's end (module docstring). `cmd(artifacts)`: the pytest command line for one process with
    its artifacts folder; `folder`: the stream folder; `say`: progress lines; `per_run`: seconds a run may
    take before the process is restarted."""

    def __init__(self, cmd: Callable[[Path], list[str]], folder: Path, cwd: Path, cases: list[str], *,
                 per_run: float = 90.0, say: Callable[[str], None] = print) -> None:
        self.cmd, self.folder, self.cwd, self.cases, self.per_run, self.say = cmd, folder, cwd, cases, per_run, say
        self.done_in_proc = 0
        self.fruitless = 0
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.answered: set[str] = set()
        self.progress: Path | None = None
        self.seen = 0
        self.art: Path | None = None

    def start(self) -> None:
        self.starts += 1
        for sub in ("want", "assign"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        _write(self.folder / "stream.json", {"driver_pid": os.getpid(), "slots": SLOTS, "cases": self.cases})
        self.done_in_proc = 0
        self.art = self.folder / f"p{self.starts:02d}"
        self.art.mkdir(parents=True, exist_ok=True)
        self.progress, self.seen = self.art / "explore-progress.jsonl", 0
        with open(self.art / "pytest.log", "w") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(self.cmd(self.art), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.cwd, start_new_session=True,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.say(f"[explore] one environment for the search: pytest process {self.starts} started "
                 f"(log: {self.art / 'pytest.log'})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _wants(self) -> list[dict[str, Any]]:
        out = []
        for f in sorted((self.folder / "want").glob("slot*.json"), key=lambda f: f.stat().st_mtime):
            if f.stem in self.answered:
                continue
            try:
                out.append(json.loads(f.read_text()))
            except ValueError:
                continue  # being written (it is renamed into place: a torn read is impossible, but be safe)
        return out

    def _answer(self, slot: str, data: dict[str, Any]) -> None:
        self.answered.add(slot)
        _write(self.folder / "assign" / f"{slot}.json", data)

    def _lines(self) -> list[dict[str, Any]]:
        if self.progress is None or not self.progress.is_file():
            return []
        lines = self.progress.read_text().splitlines()
        new = [json.loads(x) for x in lines[self.seen:] if x.strip()]
        self.seen = len(lines)
        return new

    def run(self, runs: list[dict[str, Any]], same_case: Callable[[str, str], bool],
            on_line: Callable[[dict[str, Any], int, int], None]) -> dict[str, dict[str, Any] | None]:
        """Run `runs` (the runs-file entries: id, case, plan, ...) on the stream; returns {run id: the run's
        explore.json (with `bundle`) or None}. `on_line(line, k, n)` is called for each finished run."""
        pending = list(runs)
        waiting: dict[str, float] = {}
        results: dict[str, dict[str, Any] | None] = {}
        k = 0

        def take_lines() -> None:
            nonlocal k
            for line in self._lines():
                rid = str(line.get("run"))
                if rid not in waiting:
                    continue
                waiting.pop(rid)
                k += 1
                self.done_in_proc += 1
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

        while pending or waiting:
            take_lines()  # before looking at the process: a run's line may be its last act
            if not (pending or waiting):
                break
            if not self.alive():
                take_lines()  # what it wrote before it ended (nothing more can come)
                if self.proc is not None and self.done_in_proc == 0:
                    self.fruitless += 1
                    if self.fruitless >= MAX_FRUITLESS:
                        tail = (self.art / "pytest.log").read_text(errors="replace")[-1500:] if self.art else ""
                        self.proc = None
                        raise HarnessError(f"explore: {self.fruitless} pytest processes in a row ended before "
                                           f"finishing a run; the end of the last one's log ({self.art}/pytest.log):"
                                           f"\n{tail}")
                elif self.proc is not None:
                    self.fruitless = 0
                if self.proc is not None:
                    self.say(f"[explore] the pytest process ended (exit {self.proc.returncode}); its runs under way "
                             f"have no result; starting another")
                for rid in waiting:
                    results[rid] = None
                waiting.clear()
                self.answered.clear()
                for sub in ("want", "assign"):
                    for f in (self.folder / sub).glob("*"):
                        f.unlink()
                self.start()
            for w in self._wants():
                i = next((j for j, r in enumerate(pending) if same_case(r["case"], w["case"])), None)
                if i is not None:
                    r = pending.pop(i)
                    self._answer(w["slot"], {"run": r})
                    waiting[r["id"]] = time.monotonic()
                elif pending:
                    self._answer(w["slot"], {"skip": "no run for this case in the batch"})
            take_lines()
            bound = self.per_run + (START_GRACE if self.done_in_proc == 0 else 0.0)
            late = [rid for rid, t in waiting.items() if time.monotonic() - t > bound]
            if late:
                self.say(f"[explore] run(s) {', '.join(late)} took more than {self.per_run:g}s: stopping the pytest "
                         "process (a new environment for the next runs)")
                self.stop()
                for rid in late:
                    results[rid] = None
                    waiting.pop(rid)
                continue
            time.sleep(POLL)
        return results

    def stop(self, why: str = "the search is over") -> None:
        """Tell every waiting slot to stop, let the process end (its teardown stops the environment), and
        kill its process group if it does not within 120 s."""
        if self.proc is None:
            return
        deadline = time.monotonic() + 120.0
        while self.alive() and time.monotonic() < deadline:
            for w in self._wants():
                self._answer(w["slot"], {"stop": why})
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

