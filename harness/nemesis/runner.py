"""The harness side of the faults the proxy cannot do alone, started per case (and by `kueue-harness up`):

- **process faults** (harness/plan/actions.py signal kinds, e.g. `restart_kueue`): the proxy emits `signalled`
  when the rule's release triggers hold; the Nemesis performs the action (restarts Kueue through the
  environment, records `kueue_restart` in the case's history and counts it as a restart the case asked
  for) and reports it done to the proxy (`signal_done`), which other rules' triggers can wait for
  (`{rule: ID, state: released}`);
- **plan steps** (harness/plan/actions.py step kinds: create, patch, delete, wait): signalled like a process
  fault when their `after` triggers hold; the Nemesis does them directly against kube-apiserver with the
  admin identity (harness/plan/steps.py KubeRest, never through the proxy) and reports them done with ok,
  seconds and what they did, or the error;
- **facts** for `{log: …}` / `{object: …}` triggers and `wait` steps, which the proxy cannot see: from each
  `rule_added` the Nemesis learns what to observe (harness/plan/steps.py FactObserver: Kueue's log lines since
  the plan loaded, the object read and watched) and reports each fact once it happened (`POST /facts`), so
  the proxy re-evaluates its triggers;
- **watch ticks** for `delay_watch_events`: the proxy holds a delayed watch line until a chunk of the same
  watch arrives after its due time (mitmproxy 11's stream callable is synchronous), so at each due time
  (`watch_event_delayed`'s `due`) the Nemesis touches a throwaway Workload, `kueue-harness-tick`, in a
  namespace of its own (the case's namespace + "-tick"): its MODIFIED event is the chunk that carries the
  held lines out. The proxy's watch rules never act on that Workload.

It follows the proxy's event file (proxy-events.jsonl, flushed per event) from where it was when started,
every `poll` seconds, in one thread; a process fault runs in a thread of its own. Everything it waits for
is bounded.

pytest: the `case` fixture (harness/scenarios/plugin.py) starts a Nemesis for its CaseContext (`start_for_case`)
as soon as the case has started — before any plan is loaded: `pytest --plan FILE` loads its plan while the
case is set up (harness/explore/plugin.py), and a step with no `after` is signalled at once — and
`pytest_runtest_call` below stops it after the body — after any restart in progress finished — before the
case's verdict (the fixture's teardown stops one whose body never ran).
"""

from __future__ import annotations

import fnmatch
import heapq
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

from harness.common.jsonl import JsonlTail
from harness.nemesis import facts, kube
from harness.plan import actions, steps
from harness.plan.actions import TICK_WORKLOAD as TICK_NAME  # the throwaway Workload a tick patches

#: Namespace of the tick Workload in a `kueue-harness up` session.
SESSION_TICK_NAMESPACE = "kueue-harness-tick"
#: Annotation the tick patches.
TICK_ANNOTATION = "kueue-harness/tick"
#: Seconds a process fault may take (a Kueue restart waits for its webhooks).
SIGNAL_TIMEOUT = 180.0


_PROCESS_THREAD: ThreadPoolExecutor | None = None
_PROCESS_THREAD_LOCK = threading.Lock()


def _process_thread() -> ThreadPoolExecutor:
    """One worker thread for the life of this process, where the Nemesis starts processes (Kueue after a
    restart). harness/common/procs.py gives every child PR_SET_PDEATHSIG, which the kernel ties to the *thread*
    that forked it: a Kueue started from a thread that then exits gets SIGKILL (seen: the restarted Kueue
    died ~1 s after the restart returned). This thread never exits before the process does."""
    global _PROCESS_THREAD
    with _PROCESS_THREAD_LOCK:
        if _PROCESS_THREAD is None:
            _PROCESS_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kueue-harness-procs")
        return _PROCESS_THREAD


class Nemesis:
    """Follows one proxy's events and performs process faults and watch ticks (module docstring).

    `proxy`: a harness.proxy.client.Proxy (its `events_file` and control channel); `restart`: called as
    restart(kill, rule) to restart Kueue and record it (None: process faults are refused and reported
    failed); `api_client`: a kubernetes ApiClient direct to kube-apiserver for the tick, the steps and the
    object facts (None: none of them can be done); `tick_namespace`: where the tick Workload lives (created
    when first needed); `kueue_log`: Kueue's JSON log, for `{log: …}` facts; `namespace`: where steps put
    namespaced objects that name no namespace; `say`: progress lines.
    """

    def __init__(self, proxy: Any, *, restart: Callable[[bool, str], None] | None = None, api_client: Any = None,
                 tick_namespace: str | None = None, say: Callable[[str], None] = lambda s: None,
                 poll: float = 0.02, kueue_log: Any = None, namespace: str = steps.DEFAULT_NAMESPACE,
                 on_workload: Callable[[str], None] | None = None) -> None:
        self.proxy, self._restart, self.api_client = proxy, restart, api_client
        #: Called with "ns/name" of every Workload of `namespace` seen in the proxy's events (a case's history
        #: keeps the events of its Workloads, also those a plan's steps or Kueue created).
        self.on_workload = on_workload
        self.tick_namespace, self.say, self.poll = tick_namespace, say, poll
        self.namespace = namespace
        self.rest = kube.KubeRest(api_client) if api_client is not None else None
        self.facts = facts.FactObserver(self.rest, kueue_log, self._report_fact, namespace, say,
                                        report_problem=self._report_fact_problem)
        self._cancel = threading.Event()  # set by stop(): wait steps still waiting give up
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: list[threading.Thread] = []
        self._events: JsonlTail | None = None
        self._due: list[float] = []  # heap of epoch seconds
        self._tick_ready = False
        self._tick_namespace_created = False
        self._ticks = 0
        #: What was done: {"event": "kueue_restart"|"tick", …} (for tests and the session log).
        self.done: list[dict[str, Any]] = []
        #: Rule id -> epoch seconds of its `signalled` (a wait step's `since: STEP` counts from then).
        self.signalled_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stopped: bool | None = None  # stop()'s answer once stopped

    # ---- for a case / a session ------------------------------------------------------------------
    @classmethod
    def for_case(cls, case: Any) -> "Nemesis":
        """A Nemesis for a pytest CaseContext: restarts go through the case's environment, are recorded as
        `kueue_restart` (with `rule`) in its history and counted in `expected_kueue_restarts`; the tick
        lives in namespace `<case namespace>-tick`."""

        def restart(kill: bool, rule: str) -> None:
            case.restart_kueue(kill=kill, rule=rule)  # records kueue_restart, counts it as asked for

        can_restart = hasattr(case.env, "restart_kueue")
        return cls(case.proxy, restart=restart if can_restart else None, api_client=case.cluster.api,
                   tick_namespace=f"{case.ns}-tick", kueue_log=getattr(case.env, "kueue_log", None),
                   namespace=case.ns, on_workload=case.workload_keys.add)

    @classmethod
    def for_session(cls, env: Any, say: Callable[[str], None]) -> "Nemesis":
        """A Nemesis for a `kueue-harness up` session's environment (restarts are printed to the session log)."""

        def restart(kill: bool, rule: str) -> None:
            say(f"[kueue-harness] process fault {rule}: restarting Kueue ({'SIGKILL' if kill else 'SIGTERM'})")
            env.restart_kueue(kill=kill)

        return cls(env.proxy, restart=restart, api_client=env.api_client(), tick_namespace=SESSION_TICK_NAMESPACE,
                   say=say, kueue_log=getattr(env, "kueue_log", None))

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self) -> "Nemesis":
        """Follow the proxy's events from now on (in a daemon thread). Returns self."""
        self._events = JsonlTail(self.proxy.events_file, from_end=True)
        self._thread = threading.Thread(target=self._run, name="kueue-harness-nemesis", daemon=True)
        self._thread.start()
        return self

    def settle(self, timeout: float = SIGNAL_TIMEOUT) -> bool:
        """Read what the proxy logged so far and wait until every process fault already signalled is
        done, at most `timeout` seconds. Returns False if one is still running then."""
        deadline = time.monotonic() + timeout
        self._read()
        for w in list(self._workers):
            w.join(max(0.0, deadline - time.monotonic()))
        return not any(w.is_alive() for w in self._workers)

    def stop(self, timeout: float = SIGNAL_TIMEOUT) -> bool:
        """Settle (at most `timeout` seconds; `wait` steps still waiting give up at once and are reported
        failed: the case ended before what they wait for), then stop following and observing; delete the
        tick's namespace. Returns False if a process fault was still running (it goes on in its thread; the
        caller decides). A second call returns the first one's answer."""
        if self._stopped is not None:
            return self._stopped
        self._cancel.set()
        ok = self.settle(timeout)
        self._stop.set()
        self.facts.stop()
        if self._thread is not None:
            self._thread.join(10)
        if self._tick_namespace_created and self.api_client is not None:
            try:
                from kubernetes import client

                client.CoreV1Api(self.api_client).delete_namespace(self.tick_namespace)
            except Exception as e:  # noqa: BLE001 - best effort: the environment goes away with the run
                self.say(f"[kueue-harness] could not delete namespace {self.tick_namespace}: {e}")
        self._stopped = ok
        return ok

    @property
    def stopped(self) -> bool:
        """Whether stop() was called."""
        return self._stopped is not None

    def busy(self) -> bool:
        """Whether a process fault is being performed right now (Kueue may be down for a moment)."""
        return any(w.is_alive() for w in self._workers)

    # ---- the runner protocol of harness.plan.actions (perform) ---------------------------------------
    def restart_kueue(self, kill: bool, rule: str) -> float:
        """Restart Kueue (SIGKILL with `kill`) for process-fault rule `rule`; returns the seconds it took
        until Kueue's webhooks answered again. Raises RuntimeError where the environment cannot restart."""
        if self._restart is None:
            raise RuntimeError("this environment cannot restart Kueue")
        t0 = time.monotonic()
        # Not on this (short-lived) thread: children die with the thread that started them.
        _process_thread().submit(self._restart, kill, rule).result(timeout=SIGNAL_TIMEOUT)
        seconds = round(time.monotonic() - t0, 3)
        with self._lock:
            self.done.append({"event": "kueue_restart", "rule": rule, "kill": kill, "seconds": seconds})
        return seconds

    def _rest(self) -> kube.KubeRest:
        if self.rest is None:
            raise RuntimeError("no API client: this Nemesis cannot do plan steps")
        return self.rest

    def _step_done(self, action: str, t0: float, **detail: Any) -> dict[str, Any]:
        seconds = round(time.monotonic() - t0, 3)
        with self._lock:
            self.done.append({"event": "step", "action": action, "seconds": seconds, **detail})
        return {"seconds": seconds, **detail}

    def step_create(self, objs: list[dict[str, Any]]) -> dict[str, Any]:
        """Create `objs` in order (a `create` step). Returns {"seconds", "objects": ["Workload ns/w1 rv 12"]}.
        Raises harness.plan.steps.StepError with kube-apiserver's answer (the objects before it were created)."""
        t0, done = time.monotonic(), []
        for obj in objs:
            created = self._rest().create(obj, self.namespace)
            meta = created.get("metadata") or {}
            done.append(f"{steps.object_label(created)} rv {meta.get('resourceVersion')}")
            if created.get("kind") == "Workload" and meta.get("namespace") == self.namespace and self.on_workload:
                self.on_workload(f"{self.namespace}/{meta.get('name')}")
        return self._step_done("create", t0, objects=done)

    def step_patch(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Do a `patch` step. Returns {"seconds", "objects": [each patched object and its resourceVersion]}."""
        t0 = time.monotonic()
        patched = self._rest().patch_each(spec, self.namespace)
        return self._step_done("patch", t0, objects=[
            f"{steps.object_label(o)} rv {(o.get('metadata') or {}).get('resourceVersion')}" for o in patched])

    def step_delete(self, spec: dict[str, Any], rule_id: str = "delete") -> dict[str, Any]:
        """Do a `delete` step (rule `rule_id`); with `keep_terminating: S`, the object gets finalizer
        steps.KEEP_FINALIZER first and loses it S seconds after the delete was answered (it stays Terminating
        that long). Returns {"seconds", "objects": [what was deleted]} (+ "kept_terminating": S). Raises
        StepError (refused), InterruptedError (the case ended while the object was kept)."""
        t0, started = time.monotonic(), time.time()
        keep = spec.get("keep_terminating")
        plain = {k: v for k, v in spec.items() if k != "keep_terminating"}
        if keep:
            self._keep_finalizer(plain, add=True)
        answer = self._rest().delete(plain, self.namespace)
        self._note_gone(plain, answer, started, rule_id)
        if keep:
            if self._cancel.wait(float(keep)):
                raise InterruptedError("cancelled: the case ended while the deleted object was kept Terminating")
            self._keep_finalizer(plain, add=False)
        return self._step_done("delete", t0, objects=[str(spec.get("object"))],
                               **({"kept_terminating": keep} if keep else {}))

    def _keep_finalizer(self, spec: dict[str, Any], add: bool) -> None:
        """Add (or remove) steps.KEEP_FINALIZER on the object of a delete spec, by a merge patch that names the
        object's resourceVersion (a concurrent change of its finalizers is refused, 409, not overwritten).
        Raises StepError."""
        _kind, _group, name = steps.parse_ref(spec.get("object"))
        items, _ = self._rest().list_objects(spec, self.namespace)
        objs = [o for o in items if fnmatch.fnmatchcase((o.get("metadata") or {}).get("name", ""), name)]
        if not objs:
            if add:
                raise steps.StepError(f"keep_terminating: no {spec.get('object')} to keep")
            return
        meta = objs[0]["metadata"]
        fins = list(meta.get("finalizers") or [])
        new = fins + [steps.KEEP_FINALIZER] if add else [f for f in fins if f != steps.KEEP_FINALIZER]
        if new != fins:
            ref = str(spec["object"]).rsplit("/", 1)[0] + "/" + meta["name"]
            self._rest().patch({**{k: v for k, v in spec.items() if k == "namespace"}, "object": ref,
                                "merge": {"metadata": {"finalizers": new, "resourceVersion": meta["resourceVersion"]}}},
                               self.namespace)

    def _note_gone(self, spec: dict[str, Any], answer: dict[str, Any], started: float, rule_id: str) -> None:
        """After a `delete` step: read the object back; if it is gone already (deleted at once), tell the
        FactObserver, so a `deleted: true` fact whose first read came too late still holds (facts.py
        `note_deleted`)."""
        name = (answer.get("metadata") or {}).get("name") or (answer.get("details") or {}).get("name")
        if not name:
            return
        ref = f"{str(spec.get('object')).rsplit('/', 1)[0]}/{name}"
        try:
            items, _ = self._rest().list_objects({**spec, "object": ref}, self.namespace)
            namespace = self._rest().target({**spec, "object": ref}, self.namespace)[3]
        except Exception:  # noqa: BLE001 - only a help for facts; their own watch still runs
            return
        if not items:
            self.facts.note_deleted(ref, namespace, name, started, rule_id)

    def step_wait(self, fact: dict[str, Any], timeout: float, rule_id: str = "wait",
                  since: str | None = None) -> dict[str, Any]:
        """Wait until fact `fact` (a `wait` step's {log} or {object, …}) happened since its plan loaded — or,
        with `since`, since plan step `since` was signalled —, at most `timeout` seconds. Returns {"seconds",
        "matched": what was seen}. Raises TimeoutError (with what was last observed), InterruptedError (the
        case ended first), or StepError when step `since` has not begun."""
        t0 = time.monotonic()
        if since:
            start = self.signalled_at.get(since)
            if start is None:
                raise steps.StepError(f"since: step {since} has not begun, so there is nothing to count from; name "
                                      "a step that runs before this wait")
            # A fact of this step alone, counted from that step's start (not told to the proxy: no rule waits).
            key = self.facts.register(fact, since=start, owner=rule_id, private=True)
        else:
            # Observed since the step's rule was added (rule_added); registering again keeps that start.
            key = self.facts.register(fact, since=time.time(), owner=rule_id)
        matched = self.facts.wait(key, timeout, self._cancel)
        return self._step_done("wait", t0, matched=matched)

    def step_sleep(self, seconds: float) -> dict[str, Any]:
        """Let `seconds` of wall time pass (a `sleep` step: the rare plan where time itself is the point).
        Returns {"seconds"}. Raises InterruptedError when the case ended first."""
        t0 = time.monotonic()
        if self._cancel.wait(seconds):
            raise InterruptedError("cancelled: the case ended first")
        return self._step_done("sleep", t0)

    def _report_fact(self, key: str, detail: dict[str, Any]) -> None:
        self.proxy.add_fact(key, detail)

    def _report_fact_problem(self, key: str, problem: str) -> None:
        self.proxy.fact_problem(key, problem)

    # ---- the loop --------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._read()
                self.facts.poll()
                self._tick_if_due()
            except Exception as e:  # noqa: BLE001 - keep following; say what went wrong
                self.say(f"[kueue-harness] nemesis: {type(e).__name__}: {e}")
            wait = self.poll
            if self._due:
                wait = max(0.0, min(wait, self._due[0] - time.time()))
            self._stop.wait(wait)

    def _read(self) -> None:
        with self._lock:
            events = self._events.read() if self._events is not None else []
        for ev in events:
            self._on_event(ev)

    def _on_event(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        if self.on_workload is not None:
            w = ev.get("write") if kind == "request" and isinstance(ev.get("write"), dict) else None
            if w is not None and w.get("kind") == "Workload" and w.get("namespace") == self.namespace and w.get("name"):
                self.on_workload(f"{self.namespace}/{w['name']}")
            elif kind == "watch_event" and ev.get("namespace") == self.namespace and ev.get("name"):
                self.on_workload(f"{self.namespace}/{ev['name']}")
        if kind == "rule_added":
            self._observe_facts(ev)
        elif kind == "rule_removed" and isinstance(ev.get("rule"), str):
            self.facts.unregister(ev["rule"])
        if kind == "rule_added" and not self._tick_ready and self.api_client is not None:
            try:
                needs = actions.get((ev.get("rule") or {}).get("action")).needs_ticks
            except KeyError:
                needs = False
            if needs:  # create the tick Workload now, so that the first tick is a quick patch
                try:
                    self.tick()
                except Exception as e:  # noqa: BLE001 - the first due tick tries again
                    self.say(f"[kueue-harness] could not prepare the watch tick: {type(e).__name__}: {e}")
        elif kind == "watch_event_delayed" and isinstance(ev.get("due"), (int, float)):
            with self._lock:
                heapq.heappush(self._due, float(ev["due"]))
        elif kind == "signalled":
            if isinstance(ev.get("rule"), str):
                self.signalled_at[ev["rule"]] = float(ev.get("ts") or time.time())
            w = threading.Thread(target=self._perform, args=(ev,), name=f"kueue-harness-signal-{ev.get('rule')}",
                                 daemon=True)
            with self._lock:
                self._workers.append(w)
            w.start()

    def _observe_facts(self, ev: dict[str, Any]) -> None:
        """Start observing the facts a newly loaded rule waits for (its log/object triggers; a wait step's
        condition), counted from when it was loaded (the event's time)."""
        rule = ev.get("rule") if isinstance(ev.get("rule"), dict) else {}
        rid = str(rule.get("id"))
        specs = [t for t in ((rule.get("release") or {}).get("after") or [])
                 if isinstance(t, dict) and (t.get("log") or t.get("object"))]
        if rule.get("action") == "wait" and isinstance(rule.get("wait"), dict) and not rule.get("since"):
            specs.append(rule["wait"])  # with `since`, the step registers its own fact when it runs
        for spec in specs:
            try:
                self.facts.register(spec, since=float(ev.get("ts") or time.time()), owner=rid)
            except Exception as e:  # noqa: BLE001 - a bad spec was refused by the proxy already; say it
                self.say(f"[kueue-harness] cannot observe {spec} for rule {rid}: {type(e).__name__}: {e}")

    def _perform(self, ev: dict[str, Any]) -> None:
        rule = {k: v for k, v in ev.items() if k not in ("ts", "source", "event", "rule", "why")}
        rule["id"] = ev.get("rule")
        kind = "step" if actions.get(ev.get("action")).is_step else "process fault"
        try:
            detail = actions.get(ev.get("action")).perform(self, rule)
            ok, extra = True, {k: v for k, v in detail.items() if k in ("kill", "seconds", "objects", "matched")}
        except Exception as e:  # noqa: BLE001 - reported to the proxy (signal_done ok=false; a session's log says it)
            ok, extra = False, {"error": f"{type(e).__name__}: {e}"}
        try:
            self.proxy.signal_done(str(rule["id"]), ok=ok, **extra)
        except Exception as e:  # noqa: BLE001 - the rule may have been removed meanwhile
            self.say(f"[kueue-harness] could not report {kind} {rule['id']} {'done' if ok else 'failed'}: {e}"
                     + ("" if ok else f" (it failed: {extra['error']})"))

    # ---- ticks -----------------------------------------------------------------------------------
    def _tick_if_due(self) -> None:
        now = time.time()
        with self._lock:
            if not self._due or self._due[0] > now:
                return
            while self._due and self._due[0] <= now + 0.005:  # one tick for every line due by now
                heapq.heappop(self._due)
        try:
            self.tick()
        except Exception as e:  # noqa: BLE001 - try again shortly; the held lines wait meanwhile
            self.say(f"[kueue-harness] watch tick failed ({type(e).__name__}: {e}); retrying in 0.2s")
            with self._lock:
                heapq.heappush(self._due, time.time() + 0.2)

    def tick(self) -> None:
        """Touch the tick Workload (create it, and its namespace, the first time) so that every Workload
        watch through the proxy gets a chunk now. Raises kubernetes ApiException, or RuntimeError without
        an API client."""
        if self.api_client is None or not self.tick_namespace:
            raise RuntimeError("no API client for watch ticks")
        from kubernetes import client

        custom = client.CustomObjectsApi(self.api_client)
        self._ticks += 1
        stamp = f"{self._ticks}-{time.time():.3f}"
        if not self._tick_ready:
            self._create_tick(custom, stamp)
            self._tick_ready = True
        else:
            custom.patch_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", self.tick_namespace, "workloads", TICK_NAME,
                {"metadata": {"annotations": {TICK_ANNOTATION: stamp}}})
        with self._lock:
            self.done.append({"event": "tick", "ts": time.time()})

    def _create_tick(self, custom: Any, stamp: str) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            client.CoreV1Api(self.api_client).create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.tick_namespace}})
            self._tick_namespace_created = True
        except ApiException as e:
            if e.status != 409:
                raise
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": TICK_NAME, "namespace": self.tick_namespace,
                             "annotations": {TICK_ANNOTATION: stamp}},
                # No queue: Kueue marks it inadmissible once ("LocalQueue doesn't exist") and leaves it.
                "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "tick", "image": "none", "resources": {"requests": {"cpu": "1m"}}}]}}}]}}
        try:
            custom.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", self.tick_namespace, "workloads",
                                                   body)
        except ApiException as e:
            if e.status != 409:
                raise
            custom.patch_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", self.tick_namespace, "workloads",
                                                  TICK_NAME, {"metadata": {"annotations": {TICK_ANNOTATION: stamp}}})


# ---- pytest glue (registered by harness/scenarios/plugin.py: pytest_plugins) --------------------------


def start_for_case(ctx: Any) -> "Nemesis | None":
    """Start a Nemesis for a pytest CaseContext (None without a proxy), following the proxy's events from
    now: called by the `case` fixture once the case started and before anything loads a plan, so that no
    `signalled` or `rule_added` of the case is missed (a step with no `after` fires when its plan loads)."""
    if getattr(ctx, "proxy", None) is None:
        return None
    return Nemesis.for_case(ctx).start()


def stop_for_case(ctx: Any) -> None:
    """Stop the case's Nemesis if it still runs; a process fault still running then is a `teardown_problem`."""
    nem = getattr(ctx, "nemesis", None)
    if nem is not None and not nem.stopped and not nem.stop():
        ctx.record("teardown_problem", problem="a process fault was still running when the case ended")


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    """After a case's body: its Nemesis (started by the `case` fixture) is stopped — any process fault in
    progress finished first — before the plugin judges the case (this wrapper is the innermost, so its tail
    runs before the verdict's)."""
    try:
        return (yield)
    finally:
        ctx = getattr(item, "_kh_case", None)
        if ctx is not None:
            stop_for_case(ctx)
