"""Facts for `{log: …}` and `{object: …}` triggers and `wait` steps, which the proxy cannot see:
FactObserver reads Kueue's log and reads-then-watches objects (through harness/nemesis/kube.py) from when a
plan was loaded, and reports each fact once it happened; globs must match exactly one object when it
matters.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import objects
from harness.common.jsonl import JsonlTail
from harness.kueue import log as kueue_log
from harness.nemesis.kube import KubeRest, watch_events
from harness.plan.steps import DEFAULT_NAMESPACE, StepError, is_glob, parse_ref


def object_fact_match(fact: Mapping[str, Any], obj: Mapping[str, Any] | None) -> str | None:
    """What of `obj` (a version of the object; None: absent) satisfies an `{object: …}` fact's condition or
    field, in words — "QuotaReserved=True(QuotaReserved)", "$.spec.suspend = false" — or None when it does not
    hold. Deletion is judged by `FactObserver`, which sees the object go."""
    if obj is None:
        return None
    if fact.get("condition"):
        c = objects.condition(dict(obj), str(fact["condition"]))
        if c is None or c.get("status") != fact.get("status", "True"):
            return None
        return f"{c.get('type')}={c.get('status')}({c.get('reason', '')})"
    if fact.get("field"):
        from harness.plan.match import _jsonpath, fact_value

        found = [m.value for m in _jsonpath(str(fact["field"])).find(dict(obj))]
        if fact.get("equals") is not None:
            found = [v for v in found if fact_value(v) == fact_value(fact["equals"])]
        return f"{fact['field']} = {fact_value(found[0])}" if found else None
    return None


def object_fact_holds(fact: Mapping[str, Any], obj: Mapping[str, Any] | None) -> bool:
    """Whether an `{object: …}` fact's condition or field holds on `obj` (see `object_fact_match`)."""
    return object_fact_match(fact, obj) is not None


def _rv(obj: Mapping[str, Any] | None) -> Any:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _state_line(fact: Mapping[str, Any], obj: Mapping[str, Any] | None) -> str:
    """What a fact's object looks like now, for "last observed": the field's values for a field fact
    ("$.spec.suspend = true at rv 129", "$.status.admission: not set at rv 129"), else its conditions."""
    if obj is None:
        return "absent"
    if fact.get("field"):
        from harness.plan.match import _jsonpath, fact_value

        found = [fact_value(m.value) for m in _jsonpath(str(fact["field"])).find(dict(obj))]
        return f"{fact['field']} {'= ' + ', '.join(found) if found else 'not set'} at rv {_rv(obj)}"
    return f"rv {_rv(obj)}: {objects.conditions_summary(dict(obj))}"


class _Fact:
    def __init__(self, key: str, spec: dict[str, Any], since: float, private: bool = False) -> None:
        self.key, self.spec, self.since, self.private = key, spec, since, private
        self.owners: set[str] = set()
        self.detail: dict[str, Any] | None = None
        #: Why the fact can never hold (a glob that matched several objects when it mattered): a wait fails.
        self.error: str | None = None
        self.regex = re.compile(spec["log"]) if spec.get("log") else None
        self.last = "not observed yet"


class FactObserver:
    """Watches for the facts of the loaded plans (module docstring) and reports each once it happened:
    `report(key, detail)` (the Nemesis tells the proxy, which logs `fact` and re-evaluates triggers).

    `rest`: a KubeRest for `{object: …}` facts (None: they are never seen); `kueue_log`: Kueue's JSON log
    for `{log: …}` facts (None: never seen); `namespace`: for object specs without one. A fact counts from
    `since` (epoch seconds: when its plan was loaded): log lines with an earlier `ts` don't count; an
    object is read and then watched from then on (one thread per object). Log lines are read by `poll()`,
    which the Nemesis calls in its loop; the last LOOKBACK seconds of lines are kept so that a fact
    registered a moment after its plan loaded still sees the lines in between.

    An object's name may be a glob (GLOB_CHARS; `Workload/job-a-*`, the Workload Kueue made for Job a): every
    object of the kind and namespace is watched and those the glob matches are judged. It must match exactly
    one object *when it matters*: when a matching object satisfies the condition or field, or is deleted,
    no other matching object may exist then. If one does, the fact can never hold: `report_problem(key,
    problem)` tells the proxy (it logs `fact_problem`) and a `wait` on it fails with StepError at once.
    """

    LOOKBACK = 10.0

    def __init__(self, rest: KubeRest | None, kueue_log_path: Path | None, report: Callable[[str, dict[str, Any]], None],
                 namespace: str = DEFAULT_NAMESPACE, say: Callable[[str], None] = lambda s: None,
                 report_problem: Callable[[str, str], None] | None = None) -> None:
        self.rest, self.report, self.namespace, self.say = rest, report, namespace, say
        self.report_problem = report_problem
        self._tail = JsonlTail(kueue_log_path, from_end=True) if kueue_log_path is not None else None
        self._recent: deque[tuple[float, str]] = deque()
        self._facts: dict[str, _Fact] = {}
        self._watchers: dict[str, threading.Thread] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.lines_read = 0

    # ---- registration
    def register(self, spec: Mapping[str, Any], since: float, owner: str, private: bool = False) -> str:
        """Observe fact `spec` (a trigger's mapping: {log} or {object, namespace, …}) for rule `owner`,
        counting from `since`. Returns its key (harness.plan.rules.Trigger.fact_key). Registering a key again
        keeps what was seen (it happened already). `private`: a fact of `owner` alone with its own `since`
        (a wait step's `since: STEP`), keyed apart from the shared one and not reported to the proxy. Log
        lines older than LOOKBACK seconds before the call are not searched."""
        from harness.plan.triggers import Trigger

        t = Trigger(**{k: v for k, v in spec.items() if k in Trigger.__dataclass_fields__})
        key = t.fact_key()
        spec_of_key = {k: v for k, v in json.loads(key).items()}
        if private:
            key = f"{key} since {since:.6f} for {owner}"
        with self._cond:
            f = self._facts.get(key)
            if f is None:
                f = self._facts[key] = _Fact(key, spec_of_key, since, private)
                new = True
            else:
                f.since = min(f.since, since)
                new = False
            f.owners.add(owner)
        if new and f.regex is not None:
            for ts, text in list(self._recent):
                if ts >= f.since and f.regex.search(text):
                    self._seen(f, {"line": text[:300], "log_ts": ts})
                    break
        if new and f.spec.get("object"):
            self._watch(f)
        return key

    def unregister(self, owner: str) -> None:
        """Forget the facts only rule `owner` observed (its rule was removed)."""
        with self._cond:
            for key, f in list(self._facts.items()):
                f.owners.discard(owner)
                if not f.owners:
                    del self._facts[key]

    def seen(self, key: str) -> dict[str, Any] | None:
        """What was seen of fact `key` (None: not yet)."""
        with self._cond:
            f = self._facts.get(key)
            return f.detail if f is not None else None

    def wait(self, key: str, timeout: float, cancel: threading.Event) -> dict[str, Any]:
        """Block until fact `key` was seen (returns what was seen), at most `timeout` seconds. Raises
        TimeoutError (saying what was last observed), StepError when the fact can never hold (its glob
        matched several objects when it mattered), or InterruptedError when `cancel` is set."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                f = self._facts.get(key)
                if f is not None and f.detail is not None:
                    return f.detail
                if f is not None and f.error is not None:
                    raise StepError(f.error)
                if cancel.is_set():
                    raise InterruptedError("cancelled: the case ended first")
                left = deadline - time.monotonic()
                if left <= 0:
                    last = f.last if f is not None else "not observed"
                    raise TimeoutError(f"not seen within {timeout:g} s (last observed: {last})")
                self._cond.wait(min(left, 0.1))

    def note_deleted(self, ref: str, namespace: str | None, name: str, at: float, step: str) -> int:
        """A `delete` step (`step`) of a loaded plan deleted object `name` (kind of `ref`, "Kind[.group]/…";
        `namespace`: None for a cluster-scoped kind), having started at `at` (epoch seconds), and the object
        was read back absent. Every unseen `{object: Kind/name, deleted: true}` fact about exactly that object
        (not a glob) that counts from `at` or earlier then holds: the step's DELETE found the object after the
        fact's plan loaded, and it is gone. Without this, a fact whose first read came after an immediate
        deletion (a Job without finalizers deleted in the Background) never saw the object exist and waited
        for ever (kubernetes-sigs/kueue#1789's control). Returns how many facts it made hold."""
        kind, group, _ = parse_ref(ref)
        with self._cond:
            hits = []
            for f in self._facts.values():
                if not f.spec.get("deleted") or f.detail is not None or f.error is not None or f.since > at:
                    continue
                fkind, fgroup, pattern = parse_ref(str(f.spec.get("object")))
                if (fkind, fgroup) == (kind, group) and not is_glob(pattern) and pattern == name \
                        and f.spec.get("namespace") == namespace:
                    hits.append(f)
        for f in hits:
            label = f"{kind} {namespace + '/' if namespace else ''}{name}"
            self._seen(f, {"observed": f"deleted (by step {step}; absent when read back)", "object": label})
        return len(hits)

    def stop(self) -> None:
        """Stop every object watch (they end within their watch timeout; threads are daemons)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    # ---- log lines
    def poll(self) -> None:
        """Read Kueue's new log lines and match them against the unseen log facts."""
        if self._tail is None:
            return
        lines = self._tail.read()
        if not lines:
            return
        now = time.time()
        with self._cond:
            pending = [f for f in self._facts.values() if f.regex is not None and f.detail is None]
        for line in lines:
            ts = kueue_log.parse_ts(line.get("ts")) or now
            text = kueue_log.normalized(line)
            self.lines_read += 1
            self._recent.append((ts, text))
            for f in pending:
                if f.detail is None and ts >= f.since and f.regex.search(text):
                    self._seen(f, {"line": text[:300], "log_ts": ts})
        while self._recent and self._recent[0][0] < now - self.LOOKBACK:
            self._recent.popleft()
        with self._cond:
            for f in pending:
                if f.detail is None:
                    f.last = f"{self.lines_read} log lines read, none matched"

    # ---- objects
    def _watch(self, f: _Fact) -> None:
        if self.rest is None:
            f.last = "no API client to watch objects"
            return
        w = threading.Thread(target=self._watch_loop, args=(f,), name=f"kueue-harness-fact-{f.spec.get('object')}",
                             daemon=True)
        self._watchers[f.key] = w
        w.start()

    def _watch_loop(self, f: _Fact) -> None:
        spec = f.spec
        kind, _, pattern = parse_ref(spec["object"])
        glob = is_glob(pattern)
        current: dict[str, dict[str, Any]] = {}  # name -> the latest version of each object the name matches
        existed: set[str] = set()  # the names seen to exist (a deletion counts only for those)
        while not self._stop.is_set() and f.detail is None and f.error is None and f.key in self._facts:
            try:
                items, rv = self.rest.list_objects(spec, self.namespace)
                listed = {n: o for o in items if fnmatch.fnmatchcase(n := str((o.get("metadata") or {}).get("name")),
                                                                      pattern)}
                gone = [n for n in current if n not in listed]
                current = listed
                for n in gone:  # deleted while no watch was open (between two watches)
                    self._judge(f, kind, glob, n, None, current, existed, "read")
                for n in sorted(listed):
                    self._judge(f, kind, glob, n, listed[n], current, existed, "read")
                if not listed:
                    f.last = f"no {kind} matches {pattern} (read)" if glob else "absent"
                if f.detail is not None or f.error is not None:
                    return
                resp = self.rest.watch_objects(spec, self.namespace, rv)
                for etype, o in watch_events(resp):
                    if self._stop.is_set() or f.detail is not None or f.error is not None:
                        return
                    if etype == "ERROR":
                        break  # e.g. 410 Gone: list again
                    if etype == "BOOKMARK":
                        continue
                    n = str((o.get("metadata") or {}).get("name"))
                    if not fnmatch.fnmatchcase(n, pattern):
                        continue  # another object of the kind (a glob watches them all)
                    if etype == "DELETED":
                        current.pop(n, None)
                        self._judge(f, kind, glob, n, None, current, existed, etype)
                    else:
                        current[n] = o
                        self._judge(f, kind, glob, n, o, current, existed, etype)
            except Exception as e:  # noqa: BLE001 - a watch that broke (StepError, urllib3): read and watch again
                f.last = f"{type(e).__name__}: {e}"
                self._stop.wait(0.2)

    def _judge(self, f: _Fact, kind: str, glob: bool, name: str, obj: Mapping[str, Any] | None,
               current: Mapping[str, Any], existed: set[str], how: str) -> None:
        """Record object `name`'s state (`obj`; None: deleted) for `f`; report the fact once it holds, or its
        problem when the glob matches another object too at that moment (`current`: the matching objects
        that exist now). `existed` collects the names seen to exist."""
        ns = f.spec.get("namespace")  # set for a namespaced kind (default_namespace), absent for a cluster-scoped one
        label = f"{kind} {ns + '/' if ns else ''}{name}"
        state = _state_line(f.spec, obj)
        f.last = f"{label}: {state}" if glob else state
        if obj is not None:
            existed.add(name)
        if f.spec.get("deleted"):
            if obj is None and name in existed:
                if current:
                    self._problem(f, kind, f"{name} was deleted ({how})", current)
                else:
                    self._seen(f, {"observed": f"{label + ' ' if glob else ''}deleted ({how})", "object": label})
            return
        matched = object_fact_match(f.spec, obj)
        if matched is None:
            return
        if len(current) > 1:
            self._problem(f, kind, f"{name} had {matched} at rv {_rv(obj)}", current)
            return
        self._seen(f, {"observed": f"{label + ': ' if glob else ''}{matched} at rv {_rv(obj)}",
                       "resource_version": _rv(obj), "object": label})

    def _problem(self, f: _Fact, kind: str, what: str, current: Mapping[str, Any]) -> None:
        """The glob of `f` matched several objects when `what` happened: the fact can never hold."""
        where = f" in namespace {f.spec['namespace']}" if f.spec.get("namespace") else ""
        names = sorted({*current, what.split(" ", 1)[0]})  # the object it is about, and the others that match
        problem = (f"{f.spec['object']} matched {len(names)} {kind}s{where} when {what} ({', '.join(names[:5])}"
                   f"{', …' if len(names) > 5 else ''}): a name glob in a wait or an {{object: …}} trigger must match "
                   "exactly one object then, so this never holds; make the glob narrower (job-a-????? is Job a's "
                   "Workload, job-a-* also takes Job a-b's)")
        with self._cond:
            if f.detail is not None or f.error is not None:
                return
            f.error = f.last = problem
            self._cond.notify_all()
        if f.private or self.report_problem is None:
            return
        try:
            self.report_problem(f.key, problem)
        except Exception as e:  # noqa: BLE001 - the rule may be gone; a wait step still fails with it
            self.say(f"[kueue-harness] {problem} (could not tell the proxy: {e})")

    def _seen(self, f: _Fact, detail: dict[str, Any]) -> None:
        with self._cond:
            if f.detail is not None:
                return
            f.detail = {**detail, "seen_ts": time.time()}
            self._cond.notify_all()
        if f.private:
            return
        try:
            self.report(f.key, f.detail)
        except Exception as e:  # noqa: BLE001 - the rule may be gone; a wait step still sees it locally
            self.say(f"[kueue-harness] could not report fact {f.key}: {e}")


