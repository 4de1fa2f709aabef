"""harness/plan/steps.py and the Nemesis doing plan steps, without an environment: the objects a `create` step
builds by name, patch/delete specs, namespace defaults, Kueue's log lines as `{log: …}` sees them
(kueue_log.normalized), KubeRest's requests against a fake ApiClient, FactObserver on a log file and a
fake object watch, and harness/nemesis/runner.py performing steps and reporting facts to a fake proxy. Waits are
bounded (harness.common.waiting.wait_for)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.common.waiting import wait_for
from harness.kueue import log as kueue_log
from harness.nemesis import facts, kube
from harness.nemesis.runner import Nemesis
from harness.plan import steps
from harness.plan.rules import Trigger
from tests.unit.test_nemesis import FakeProxy

NS = "team-a"


# ---------------------------------------------------------------------------------------------------------
# The pure part


def test_build_objects_by_builder_inline_and_lists() -> None:
    objs = steps.build_objects([
        {"builder": "cluster_queue", "args": ["cq"], "with": [{"flavor_quota": {"flavor": "rf", "cpu": "1"}},
                                                               {"preemption": {"within_cluster_queue": "LowerPriority"}}]},
        {"builder": "job", "args": {"name": "j", "namespace": NS}, "with": [{"queue": "lq"}, {"requests": {"cpu": "1"}}]},
        {"kind": "Namespace", "metadata": {"name": "x"}},
        {"builder": "barrier", "args": {"namespace": NS}},
    ])
    assert [o["kind"] for o in objs] == ["ClusterQueue", "Job", "Namespace", "ResourceFlavor", "ClusterQueue",
                                         "LocalQueue", "Workload"]
    assert objs[0]["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert objs[1]["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "lq"}
    assert objs[2]["apiVersion"] == "v1"  # filled in for a known kind
    barrier_cq = objs[4]
    assert barrier_cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [{"name": "cpu", "nominalQuota": "0"}]
    assert objs[6]["spec"]["queueName"] == "barrier" and objs[5]["spec"]["clusterQueue"] == f"{NS}-barrier"


@pytest.mark.parametrize("spec, words", [
    ({"builder": "nope"}, "builder 'nope' is not one of"),
    ({"builder": "workload", "args": {"nme": "x"}}, "got an unexpected keyword argument 'nme'; it takes (name"),
    ({"builder": "workload", "args": ["w"], "with": {"queue": "lq"}}, "`with` must be a list"),
    ({"builder": "workload", "args": ["w"], "with": [{"queue": "a", "label": "b"}]}, "must be one {method: args}"),
    ({"builder": "workload", "args": ["w"], "with": [{"obj": None}]}, "has no step 'obj'"),
    ({"builder": "workload", "args": ["w"], "with": [{"_obj": None}]}, "has no step '_obj'"),
    ({"builder": "workload", "extra": 1}, "unknown key(s) extra next to `builder`"),
    ({"kind": "Widget", "metadata": {"name": "w"}}, "Widget needs an `apiVersion`"),
    ({"apiVersion": "v1", "kind": "ConfigMap"}, "ConfigMap has no metadata.name"),
    ("just text", "expected an object"),
    ([], "an empty list"),
])
def test_bad_create_specs(spec: Any, words: str) -> None:
    with pytest.raises(steps.StepError) as exc:
        steps.build_objects(spec)
    assert words in str(exc.value), str(exc.value)


def test_patch_and_delete_specs() -> None:
    assert steps.patch_spec({"object": "Workload/w", "apply": {"status": {}}, "subresource": "status"}) == {
        "object": "Workload/w", "apply": {"status": {}}, "subresource": "status", "field_manager": "kueue-harness",
        "force": True}
    assert steps.delete_spec("Job.batch/j") == {"object": "Job.batch/j"}
    for spec, words in [({"object": "Workload/w"}, "give exactly one of merge"),
                        ({"object": "Workload/w", "merge": {}, "json": []}, "give exactly one of merge"),
                        ({"object": "Workload/w", "json": [{"path": "/a"}]}, "list of JSON patch operations"),
                        ({"object": "Workload/w", "merge": {}, "field_manager": "x"}, "go with apply only"),
                        ({"object": "Workload/w", "merge": {}, "subresource": "scale"}, "only status"),
                        ({"object": "Workload/w", "merge": {}, "nope": 1}, "unknown key(s) nope")]:
        with pytest.raises(steps.StepError, match=None) as exc:
            steps.patch_spec(spec)
        assert words in str(exc.value)
    with pytest.raises(steps.StepError, match="propagation 'x' is not one of"):
        steps.delete_spec({"object": "Workload/w", "propagation": "x"})


def test_default_namespace_fills_in_what_names_none() -> None:
    rule = {"action": "create", "create": [{"builder": "workload", "args": {"name": "w"}},
                                           {"builder": "cluster_queue", "args": ["cq"]},
                                           {"kind": "ClusterQueue", "metadata": {"name": "c"}},
                                           {"kind": "Widget", "apiVersion": "x/v1", "metadata": {"name": "w"}},
                                           {"kind": "Job", "metadata": {"name": "j", "namespace": "other"}}],
            "release": {"after": [{"object": "Workload/w", "deleted": True},
                                  {"object": "ClusterQueue/c", "condition": "Active"},
                                  {"object": "Job/j", "namespace": "other", "deleted": True}, {"log": "x"}]}}
    out = steps.default_namespace(rule, NS)
    c = out["create"]
    assert c[0]["args"] == {"name": "w", "namespace": NS} and c[1]["args"] == ["cq"]  # cluster_queue takes none
    assert "namespace" not in c[2]["metadata"] and c[3]["metadata"]["namespace"] == NS  # unknown kind: namespaced
    assert c[4]["metadata"]["namespace"] == "other"
    after = out["release"]["after"]
    assert after[0]["namespace"] == NS and "namespace" not in after[1] and after[2]["namespace"] == "other"
    assert rule["release"]["after"][0] == {"object": "Workload/w", "deleted": True}  # a copy


def test_template_replaces_the_namespace_deeply_and_names_unknown_variables() -> None:
    assert steps.template({"a": ["${namespace}-cq", 3], "b": "x"}, NS) == {"a": [f"{NS}-cq", 3], "b": "x"}
    assert steps.unknown_variables("${namespace} ${ns} ${x}") == ["ns", "x"]


def test_the_log_text_a_log_trigger_searches() -> None:
    admitted = {"level": "Level(-2)", "ts": "2026-11-30T14:01:00.947382437Z", "logger": "scheduler",
                "caller": "scheduler/scheduler.go:713", "msg": "Workload successfully admitted and assigned flavors",
                "schedulingCycle": 6, "workload": {"name": "job-job2-d4d7c", "namespace": NS},
                "clusterQueue": {"name": "cq"}, "assignments": [{"name": "main"}]}
    assert kueue_log.normalized(admitted) == (
        "Workload successfully admitted and assigned flavors level=Level(-2) logger=scheduler schedulingCycle=6 "
        f"workload={NS}/job-job2-d4d7c clusterQueue=cq assignments=[{{\"name\":\"main\"}}]")
    reconcile = {"msg": "Reconcile LocalQueue", "namespace": NS, "name": "lq", "reconcileID": "e4"}
    assert kueue_log.normalized(reconcile) == f"Reconcile LocalQueue namespace={NS} name=lq reconcileID=e4 object={NS}/lq"


# ---------------------------------------------------------------------------------------------------------
# KubeRest against a fake ApiClient


class FakeResp:
    def __init__(self, status: int, body: Any) -> None:
        self.status, self._body = status, json.dumps(body).encode()
        self.response = self

    def read(self) -> bytes:
        return self._body


class FakeApi:
    """param_serialize/call_api as kubernetes 37 has them; answers from `routes` ((method, path) -> (status,
    body)), records every request."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, Any]]) -> None:
        self.routes, self.calls = routes, []

    def param_serialize(self, method, path, header_params=None, body=None, auth_settings=None):
        assert auth_settings == ["BearerToken"]
        return method, "https://apiserver" + path, header_params, body, None

    def call_api(self, method, url, header_params=None, body=None, _request_timeout=None):
        path = url.removeprefix("https://apiserver")
        self.calls.append((method, path, header_params.get("Content-Type"), body))
        status, data = self.routes.get((method, path.split("?")[0]), (404, {"reason": "NotFound", "message": "nope"}))
        return FakeResp(status, data)


def test_kube_rest_creates_patches_deletes_by_kind() -> None:
    wl = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
    api = FakeApi({("POST", wl): (201, {"kind": "Workload", "metadata": {"name": "w", "namespace": NS}}),
                   ("PATCH", wl + "/w/status"): (200, {"kind": "Workload", "metadata": {"name": "w"}}),
                   ("DELETE", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"): (200, {}),
                   ("GET", "/apis"): (200, {"groups": [{"name": "example.io", "preferredVersion": {"groupVersion": "example.io/v1"},
                                                        "versions": [{"groupVersion": "example.io/v1"}]}]}),
                   ("GET", "/api/v1"): (200, {"resources": []}),
                   ("GET", "/apis/example.io/v1"): (200, {"resources": [{"name": "widgets", "kind": "Widget",
                                                                         "namespaced": False}]}),
                   ("POST", "/apis/example.io/v1/widgets"): (201, {"kind": "Widget", "metadata": {"name": "x"}})})
    rest = kube.KubeRest(api)
    rest.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}}, NS)
    assert api.calls[-1][:3] == ("POST", wl, "application/json")
    assert api.calls[-1][3]["metadata"]["namespace"] == NS
    rest.patch({"object": "Workload/w", "namespace": NS, "subresource": "status", "apply": {"status": {}},
                "field_manager": "kueue-admission", "force": True}, "ignored")
    method, path, ctype, body = api.calls[-1]
    assert (method, ctype) == ("PATCH", "application/apply-patch+yaml")
    assert path == wl + "/w/status?fieldManager=kueue-admission&force=true"
    assert body["metadata"] == {"name": "w", "namespace": NS} and body["kind"] == "Workload"
    rest.delete({"object": "ClusterQueue/cq", "namespace": NS, "propagation": "Foreground"}, NS)
    assert api.calls[-1][3] == {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
    # A kind the table does not know is found by discovery (once), its namespace dropped when cluster-scoped.
    rest.create({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": NS}}, NS)
    assert api.calls[-1][1] == "/apis/example.io/v1/widgets" and "namespace" not in api.calls[-1][3]["metadata"]
    with pytest.raises(steps.StepError, match="answered 404 NotFound: nope"):
        rest.patch({"object": "Workload/absent", "merge": {}}, NS)
    with pytest.raises(steps.StepError, match="serves no kind Gadget"):
        rest.resolve("Gadget")


# ---------------------------------------------------------------------------------------------------------
# FactObserver


def log_line(path: Path, ts: float, msg: str, **kv: Any) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1e9):09d}Z"
    with open(path, "a") as fh:
        fh.write(json.dumps({"level": "info", "ts": stamp, "msg": msg, **kv}) + "\n")


def test_log_facts_count_from_when_their_plan_loaded(tmp_path: Path) -> None:
    log = tmp_path / "kueue.log"
    log.write_text("")
    seen: list[tuple[str, dict]] = []
    obs = facts.FactObserver(None, log, lambda k, d: seen.append((k, d)))
    t0 = time.time()
    log_line(log, t0 - 5, "Workload create event", workload={"name": "w2", "namespace": NS})  # before the plan
    key = obs.register({"log": f"create event .*workload={NS}/w2"}, since=t0, owner="r")
    obs.poll()
    assert seen == [] and obs.seen(key) is None
    log_line(log, t0 + 0.01, "Workload create event", workload={"name": "w2", "namespace": NS})
    obs.poll()
    ((k, detail),) = seen
    assert k == key == Trigger(log=f"create event .*workload={NS}/w2").fact_key()
    assert detail["line"].startswith("Workload create event level=info workload=team-a/w2")
    # A fact registered a moment late still sees the lines since its plan loaded (the lookback).
    log_line(log, t0 + 0.02, "Preempted", targetWorkload={"name": "w1", "namespace": NS})
    obs.poll()
    late = obs.register({"log": "Preempted .*targetWorkload=team-a/w1"}, since=t0, owner="r2")
    assert obs.seen(late) is not None and len(seen) == 2
    obs.unregister("r2")
    assert obs.seen(late) is None  # forgotten with its rule


def test_wait_times_out_saying_what_was_seen_and_gives_up_when_cancelled(tmp_path: Path) -> None:
    log = tmp_path / "kueue.log"
    log.write_text("")
    obs = facts.FactObserver(None, log, lambda k, d: None)
    key = obs.register({"log": "never"}, since=time.time(), owner="r")
    log_line(log, time.time(), "something else")
    obs.poll()
    with pytest.raises(TimeoutError, match="not seen within 0.05 s .last observed: 1 log lines read, none matched"):
        obs.wait(key, 0.05, threading.Event())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(InterruptedError, match="the case ended first"):
        obs.wait(key, 5, cancel)


class FakeWatchRest:
    """list_objects/watch_objects over a script of object versions: the list answers `first` (one object, a
    list of them, or None), each watch yields the next batch of (type, object) events."""

    def __init__(self, first: dict | list | None, batches: list[list[tuple[str, dict]]]) -> None:
        self.first, self.batches = first, list(batches)
        self.left: dict[str, list] = {}  # per fact (one watch each): the script from its start

    def list_objects(self, spec, ns):
        return (list(self.first) if isinstance(self.first, list) else [self.first] if self.first else []), "10"

    def watch_objects(self, spec, ns, rv, seconds=10):
        left = self.left.setdefault(json.dumps(spec, sort_keys=True), list(self.batches))
        if not left:
            time.sleep(0.05)
            return iter(())
        return iter(left.pop(0))


def wl(conds: dict[str, str], rv: str = "11") -> dict:
    return {"metadata": {"name": "w1", "namespace": NS, "resourceVersion": rv},
            "status": {"conditions": [{"type": k, "status": v} for k, v in conds.items()]}}


@pytest.fixture(autouse=True)
def _plain_watch_events(monkeypatch: pytest.MonkeyPatch) -> None:
    # FakeWatchRest yields (type, object) pairs already.
    monkeypatch.setattr(facts, "watch_events", lambda resp: resp)


def test_object_facts_condition_field_and_deletion() -> None:
    seen: dict[str, dict] = {}
    rest = FakeWatchRest(None, [[("ADDED", wl({"QuotaReserved": "False"}, "11")),
                                 ("MODIFIED", wl({"QuotaReserved": "True"}, "12")),
                                 ("DELETED", wl({"QuotaReserved": "True"}, "13"))]])
    obs = facts.FactObserver(rest, None, lambda k, d: seen.__setitem__(k, d), NS)
    reserved = obs.register({"object": "Workload/w1", "namespace": NS, "condition": "QuotaReserved"}, time.time(), "a")
    try:
        detail = obs.wait(reserved, 5, threading.Event())
    finally:
        obs.stop()
    assert detail["resource_version"] == "12" and "QuotaReserved=True" in detail["observed"]
    assert seen[reserved] == detail

    rest = FakeWatchRest(wl({}), [[("MODIFIED", wl({}, "14")), ("DELETED", wl({}, "15"))]])
    obs = facts.FactObserver(rest, None, lambda k, d: None, NS)
    gone = obs.register({"object": "Workload/w1", "deleted": True}, time.time(), "b")
    field = obs.register({"object": "Workload/w1", "field": "$.metadata.resourceVersion", "equals": "14"},
                         time.time(), "b")
    try:
        assert obs.wait(gone, 5, threading.Event())["observed"] == "deleted (DELETED)"
        assert obs.wait(field, 5, threading.Event())["resource_version"] == "14"
    finally:
        obs.stop()


def test_an_object_a_delete_step_deleted_at_once_counts_as_deleted_though_never_seen() -> None:
    # kueue#1789's control: the Job goes in the Background at once, before the fact's first read; the
    # delete step read it back absent, so the fact holds. A glob, another namespace or a fact counting
    # from after the deletion do not take it.
    obs = facts.FactObserver(FakeWatchRest(None, []), None, lambda k, d: None, NS)
    t = time.time()
    gone = obs.register({"object": "Job/j1", "namespace": NS, "deleted": True}, t - 1, "b")
    glob = obs.register({"object": "Job/j*", "namespace": NS, "deleted": True}, t - 1, "b")
    other = obs.register({"object": "Job/j1", "namespace": "elsewhere", "deleted": True}, t - 1, "b")
    later = obs.register({"object": "Job/j2", "namespace": NS, "deleted": True}, t + 5, "b")
    try:
        assert obs.note_deleted("Job/j1", NS, "j1", t, "delete-j1") == 1
        assert obs.note_deleted("Job/j2", NS, "j2", t, "delete-j2") == 0
        assert obs.wait(gone, 1, threading.Event())["observed"] == "deleted (by step delete-j1; absent when read back)"
        for key in (glob, other, later):
            assert obs.seen(key) is None
    finally:
        obs.stop()


def test_an_object_that_never_existed_is_not_deleted() -> None:
    obs = facts.FactObserver(FakeWatchRest(None, []), None, lambda k, d: None, NS)
    gone = obs.register({"object": "Workload/w1", "deleted": True}, time.time(), "b")
    try:
        with pytest.raises(TimeoutError, match="last observed: absent"):
            obs.wait(gone, 0.3, threading.Event())
    finally:
        obs.stop()


# ---------------------------------------------------------------------------------------------------------
# The Nemesis doing steps


class RecordingRest:
    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail = fail

    def create(self, obj, ns):
        self.calls.append(("create", obj["metadata"]["name"]))
        if obj["metadata"]["name"] == self.fail:
            raise steps.StepError(f"create {obj['kind']} {obj['metadata']['name']}: kube-apiserver answered 409 "
                                  "AlreadyExists: exists")
        return {**obj, "metadata": {**obj["metadata"], "namespace": ns, "resourceVersion": "7"}}

    def patch(self, spec, ns):
        self.calls.append(("patch", spec["object"]))
        return {"kind": "Workload", "metadata": {"name": "w1", "namespace": ns, "resourceVersion": "8"}}

    def patch_each(self, spec, ns):  # the runner's call (a glob with each: true patches several)
        return [self.patch(spec, ns)]

    def delete(self, spec, ns):
        self.calls.append(("delete", spec["object"]))
        return {}


@pytest.fixture
def proxy(tmp_path: Path) -> FakeProxy:
    p = FakeProxy(tmp_path / "proxy-events.jsonl")
    p.facts = []  # type: ignore[attr-defined]
    p.add_fact = lambda key, detail: p.facts.append((key, detail))  # type: ignore[attr-defined]
    p.append("proxy_ready")
    return p


def create_event(rid: str, *names: str) -> dict[str, Any]:
    return {"rule": rid, "action": "create", "why": "loaded",
            "create": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": n}}
                       for n in names]}


def test_the_nemesis_does_steps_and_reports_them(proxy: FakeProxy) -> None:
    keys: list[str] = []
    nem = Nemesis(proxy, namespace=NS, on_workload=keys.append)
    nem.rest = RecordingRest(fail="bad")
    nem.start()
    try:
        proxy.append("signalled", **create_event("c", "w1", "w2"))
        proxy.append("signalled", rule="p", action="patch", why="triggers: x held",
                     patch={"object": "Workload/w1", "merge": {"spec": {"active": False}}})
        proxy.append("signalled", rule="d", action="delete", why="loaded", delete={"object": "Workload/w2"})
        proxy.append("signalled", **create_event("boom", "w3", "bad", "w4"))
        wait_for(lambda: len(proxy.done) == 4, timeout=5, what="four signal_done")
    finally:
        nem.stop(5)
    done = {r: (ok, d) for r, ok, d in proxy.done}
    assert done["c"][0] and done["c"][1]["objects"] == [f"Workload {NS}/w1 rv 7", f"Workload {NS}/w2 rv 7"]
    assert done["c"][1]["seconds"] >= 0
    assert done["p"] == (True, {"seconds": done["p"][1]["seconds"], "objects": [f"Workload {NS}/w1 rv 8"]})
    assert done["d"][0] and done["d"][1]["objects"] == ["Workload/w2"]
    ok, detail = done["boom"]
    assert not ok and "409 AlreadyExists" in detail["error"]
    assert ("create", "w4") not in nem.rest.calls  # the step stops at its first failure
    assert {"team-a/w1", "team-a/w2", "team-a/w3"} <= set(keys)


def test_the_nemesis_observes_a_plans_facts_and_tells_the_proxy(proxy: FakeProxy, tmp_path: Path) -> None:
    log = tmp_path / "kueue.log"
    log.write_text("")
    nem = Nemesis(proxy, namespace=NS, kueue_log=log).start()
    try:
        proxy.append("rule_added", rule={"id": "adm", "action": "hold",
                                         "release": {"after": [{"log": "Preempted"}, {"rule": "x", "state": "held"}]}})
        proxy.append("rule_added", rule={"id": "w", "action": "wait", "wait": {"log": "admitted"}, "timeout": 5})
        time.sleep(0.05)  # not a wait for an outcome: the rule_added must be read before the line is written
        log_line(log, time.time(), "Preempted", targetWorkload={"name": "w1", "namespace": NS})
        wait_for(lambda: proxy.facts, timeout=5, what="the fact to be reported")
        proxy.append("signalled", rule="w", action="wait", why="loaded", wait={"log": "admitted"}, timeout=5)
        log_line(log, time.time(), "Workload successfully admitted and assigned flavors")
        wait_for(lambda: proxy.done, timeout=5, what="the wait step to be done")
    finally:
        nem.stop(5)
    assert proxy.facts[0][0] == Trigger(log="Preempted").fact_key()
    ((rule, ok, detail),) = proxy.done
    assert rule == "w" and ok and detail["matched"]["line"].startswith("Workload successfully admitted")


def test_stop_gives_up_a_wait_step_still_waiting(proxy: FakeProxy, tmp_path: Path) -> None:
    nem = Nemesis(proxy, namespace=NS, kueue_log=tmp_path / "none.log").start()
    proxy.append("signalled", rule="w", action="wait", why="loaded", wait={"log": "never"}, timeout=120)
    wait_for(lambda: nem.busy(), timeout=5, what="the wait step to start")
    t0 = time.monotonic()
    assert nem.stop(10) is True
    assert time.monotonic() - t0 < 5
    ((rule, ok, detail),) = proxy.done
    assert rule == "w" and not ok and "cancelled: the case ended first" in detail["error"]


def test_patch_and_delete_find_an_object_by_glob() -> None:
    """`Workload/job-b-*` names the one Workload Kueue created for Job b; none or several matches are refused."""
    wl = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
    items = [{"metadata": {"name": n}} for n in ("job-b-1a2b3", "job-bb-9f8e7", "job-v-00000")]
    api = FakeApi({("GET", wl): (200, {"items": items}),
                   ("PATCH", wl + "/job-b-1a2b3"): (200, {"kind": "Workload", "metadata": {"name": "job-b-1a2b3"}}),
                   ("DELETE", wl + "/job-v-00000"): (200, {})})
    rest = kube.KubeRest(api)
    assert rest.patch({"object": "Workload/job-b-*", "merge": {"spec": {"active": False}}}, NS)["metadata"]["name"] \
        == "job-b-1a2b3"
    assert api.calls[-1][:2] == ("PATCH", wl + "/job-b-1a2b3")
    rest.delete({"object": "Workload/job-v-?????"}, NS)
    assert api.calls[-1][:2] == ("DELETE", wl + "/job-v-00000")
    with pytest.raises(steps.StepError, match=r"exactly one Workload in namespace team-a; it matches 2 "
                                              r"\(job-b-1a2b3, job-bb-9f8e7; there are 3\)"):
        rest.patch({"object": "Workload/job-b*", "merge": {}}, NS)
    with pytest.raises(steps.StepError, match=r"it matches 0 \(none; there are 3\)"):
        rest.delete({"object": "Workload/job-x-*"}, NS)
    # A name without glob characters is used as it is (no list), and an unbalanced '[' is refused offline.
    n = len(api.calls)
    with pytest.raises(steps.StepError, match="answered 404"):
        rest.patch({"object": "Workload/job-b", "merge": {}}, NS)
    assert len(api.calls) == n + 1 and api.calls[-1][0] == "PATCH"
    with pytest.raises(steps.StepError, match="unbalanced"):
        steps.patch_spec({"object": "Workload/job-[b", "merge": {}})
