"""report.md proves the race: for the writes a fault rule touched it shows the request body (redacted), the
field manager and apply mode, who owns status.conditions after each write (the answers' managedFields), and
what the later forced apply removed; the final objects' managedFields are kept (managed-fields.yaml); the
flows in flows.mitm carry their label and fate as `comment` and the forced ones are `marked`, which
`mitmweb -r` shows; bundle.json and report.md name the harness version and the command that runs the case
again. Synthetic flows and a stand-in environment: no cluster."""

from __future__ import annotations

import json
import tarfile
import types
from pathlib import Path

import yaml
from mitmproxy import io as mio
from mitmproxy.test import tflow

from harness import report
from harness.common.redact import Redactor
from harness.history.record import History
from harness.report import race
from harness.report.write import cut_flows, dump_objects, write_case_bundle
from tests.unit.test_report import NS, T0, WL1, WL2, stuck_history

TOKEN = "s3cret-kueue-token-0123456789"
PATH = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads/{WL1}/status?fieldManager=kueue-admission&force=true"


def _cond(t: str) -> dict:
    return {"type": t, "status": "True", "reason": t}


def _owner(*types_: str) -> dict:
    return {"manager": "kueue-admission", "operation": "Apply", "subresource": "status", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:conditions": {f'k:{{"type":"{t}"}}': {".": {}} for t in types_}}}}


def _write_flow(seq: int, label: str, body_types: list[str], rv: str, after_types: list[str], ts: float):
    f = tflow.tflow(resp=True)
    f.request.method = "PATCH"
    f.request.path = PATH
    f.request.headers["content-type"] = "application/apply-patch+yaml"
    f.request.headers["authorization"] = f"Bearer {TOKEN}"
    f.request.content = json.dumps({"kind": "Workload", "metadata": {"name": WL1, "namespace": NS},
                                    "status": {"conditions": [_cond(t) for t in body_types]}}).encode()
    f.request.timestamp_start = ts
    f.response.status_code = 200
    f.response.content = json.dumps({"kind": "Workload", "metadata": {
        "name": WL1, "namespace": NS, "resourceVersion": rv,
        "managedFields": [_owner(*after_types), {"manager": "kueue", "operation": "Update", "fieldsV1": {}}]},
        "status": {"conditions": [_cond(t) for t in after_types]}}).encode()
    f.comment = label
    f.metadata.update({"kh_flow": seq, "kh_label": label})
    return f


def _session_flows(path: Path) -> Path:
    """The session's flow file: the eviction (flow 6, rv 263) then the late admission (flow 5, rv 264)."""
    flows = [
        _write_flow(5, f"admission {NS}/{WL1} (kueue-admission, loose)", ["QuotaReserved", "Admitted"], "264",
                    ["QuotaReserved", "Admitted"], T0 + 0.25),
        _write_flow(6, f"eviction {NS}/{WL1} (kueue-admission, loose)",
                    ["QuotaReserved", "Evicted", "Admitted", "Preempted"], "263",
                    ["QuotaReserved", "Evicted", "Admitted", "Preempted"], T0 + 0.35),
    ]
    refused = _write_flow(7, f"quota_release {NS}/{WL1} (kueue-admission, strict)", [], "0", [], T0 + 0.5)
    refused.response.status_code = 409
    refused.response.content = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                           "reason": "Conflict", "message": "the object has been modified"}).encode()
    flows.append(refused)
    with open(path, "wb") as fh:
        w = mio.FlowWriter(fh)
        for f in flows:
            w.add(f)
    return path


def _cut(tmp_path: Path) -> Path:
    out = tmp_path / "b"
    out.mkdir()
    cut_flows(_session_flows(tmp_path / "session.mitm"), T0, T0 + 20, {5, 6, 7}, [NS], Redactor([TOKEN]),
              out / "flows.mitm", out / "flows.har", stuck_history(), out / "writes.json")
    return out


def test_flows_carry_their_label_and_fate_and_the_forced_ones_are_marked(tmp_path):
    out = _cut(tmp_path)
    with open(out / "flows.mitm", "rb") as fh:
        flows = {f.metadata["kh_flow"]: f for f in mio.FlowReader(fh).stream()}
    adm = flows[5]
    assert adm.comment.startswith(f"flow 5: admission {NS}/{WL1} (kueue-admission, loose) | ")
    assert "held as h1 by rule `admission-job1` 0.260s" in adm.comment and "h1 released 0.380s" in adm.comment
    assert "the answer held as h2" in flows[6].comment
    assert adm.marked and flows[6].marked
    assert adm.request.headers["authorization"] == "Bearer <redacted>"


def test_writes_json_keeps_bodies_answers_and_managed_fields_redacted(tmp_path):
    out = _cut(tmp_path)
    text = (out / "writes.json").read_text()
    assert TOKEN not in text
    w = json.loads(text)
    assert set(w) == {"5", "6", "7"}
    assert w["7"]["status"] == 409 and w["7"]["answer"] == {"reason": "Conflict", "message": "the object has been modified"}
    assert [c["type"] for c in w["5"]["body"]["status"]["conditions"]] == ["QuotaReserved", "Admitted"]
    assert w["5"]["answer"]["resource_version"] == "264" and w["5"]["status"] == 200
    assert race.conditions_owned(w["5"]["answer"]["managed_fields"][0]) == ["Admitted", "QuotaReserved"]


def test_the_report_shows_the_bodies_the_owners_and_what_the_forced_apply_removed(tmp_path):
    out = _cut(tmp_path)
    h = stuck_history()
    managed = {f"Workload {NS}/{WL1}": [_owner("QuotaReserved", "Admitted")]}
    md, _, _ = report.render_report({"case": "c::t", "verdict": "reproduced", "namespace": NS, "prefix": NS},
                                    h, {}, writes=race.load_writes(out), managed=managed)
    sec = md.split("## The writes that decided the verdict", 1)[1].split("\n## ", 1)[0]
    assert sec.index("### flow 5: admission job1") < sec.index("### flow 6: eviction job1")  # as Kueue sent them
    assert "`kueue-admission`, server-side apply, forced (`force=true`)" in sec
    assert "none (loose: no metadata.resourceVersion in the body)" in sec
    assert '"type": "Evicted"' in sec and "request body (redacted)" in sec
    assert "`kueue-admission` (Apply, status): Admitted, QuotaReserved" in sec
    proof = sec.split("**What the forced apply did:**", 1)[1]
    assert "flow 5" in proof and "after flow 6" in proof
    assert "its body has no Evicted, Preempted condition, so server-side apply removed them" in proof
    assert "same field manager `kueue-admission`" in proof
    assert "Final owners of status.conditions" in sec and "Workload job1" in sec


def test_a_late_admission_that_turns_a_quota_release_back_is_named():
    """Scenario 2: job1's quota release (not held) is applied, then its held admission turns it back."""
    def w(label, types_, rv):
        return {"label": label, "method": "PATCH", "path": PATH, "content_type": "application/apply-patch+yaml",
                "status": 200, "body": {"status": {"conditions": [{"type": t, "status": v} for t, v in types_]}},
                "answer": {"resource_version": rv, "conditions": [{"type": t, "status": v} for t, v in types_
                                                                   if t in ("QuotaReserved", "Admitted")]}}
    writes = {"5": w("admission job1", [("QuotaReserved", "True"), ("Admitted", "True")], "276"),
              "44": w("quota release job1", [("QuotaReserved", "False"), ("Evicted", "True"), ("Admitted", "False"),
                                             ("Requeued", "True")], "270")}
    md = "\n".join(race.race_section(stuck_history(), report.Names(stuck_history()), writes, {}))
    proof = md.split("**What the forced apply did:**", 1)[1]
    assert "flow 5 (admission job1), applied after flow 44 (quota release job1) (resourceVersion 276 after 270)" in proof
    assert "it turned QuotaReserved False→True, Admitted False→True" in proof
    assert "no Evicted, Requeued condition" in proof


def test_old_bundles_get_their_writes_from_flows_mitm(tmp_path):
    out = _cut(tmp_path)
    (out / "writes.json").unlink()
    assert set(race.load_writes(out)) == {"5", "6", "7"}
    (out / "flows.mitm").unlink()
    assert race.load_writes(out) == {}


def test_managed_fields_are_kept_apart_from_objects_yaml(tmp_path):
    wl = {"metadata": {"name": WL1, "namespace": NS, "managedFields": [_owner("Admitted")]}, "status": {}}
    objs = {"workloads": [wl], "jobs": [], "clusterqueues": [{"metadata": {"name": "cq"}}]}
    dump_objects(tmp_path, objs)
    assert "managedFields" not in (tmp_path / "objects.yaml").read_text()
    managed = yaml.safe_load((tmp_path / "managed-fields.yaml").read_text())
    assert list(managed) == [f"Workload {NS}/{WL1}"]
    assert wl["metadata"]["managedFields"], "the caller's objects are not changed"


def _stand_in(tmp_path: Path):
    """A finished case folder and the environment it ran in, as the plugin leaves them."""
    art = tmp_path / "env"
    art.mkdir()
    _session_flows(art / "flows.mitm")
    (art / "proxy-events.jsonl").write_text("")
    (art / "kueue.log").write_text("")
    state = tmp_path / "state"
    state.mkdir()
    (state / "control.token").write_text(TOKEN)
    d = tmp_path / "cases" / "test-stuck"
    hist = History(d / "history.jsonl")
    hist.started = T0 - 1
    hist._fh.close()
    (d / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in stuck_history()))
    dump_objects(d, {"workloads": [{"metadata": {"name": WL1, "namespace": NS,
                                                 "managedFields": [_owner("QuotaReserved", "Admitted")]},
                                    "status": {}}], "jobs": [], "clusterqueues": []})
    ctx = types.SimpleNamespace(dir=d, history=hist, ns=NS, prefix=NS, workload_keys={f"{NS}/{WL1}", f"{NS}/{WL2}"})
    env = types.SimpleNamespace(kueue_version="v0.17.0", kubernetes_version="v1.35.4", state=state,
                                kueue_log=art / "kueue.log",
                                proxy=types.SimpleNamespace(events_file=art / "proxy-events.jsonl", _token=TOKEN))
    return ctx, env


def test_a_case_bundle_names_the_harness_and_the_rerun_command_and_proves_the_race(tmp_path):
    ctx, env = _stand_in(tmp_path)
    rerun = ".venv/bin/python -m pytest cases/x.py::test_stuck --kueue-version v0.17.0 --target=local"
    tar = write_case_bundle(ctx, env, {"case": "cases/x.py::test_stuck", "verdict": "reproduced",
                                       "checkers": {"liveness": {}, "log_flood": {}}, "rerun": rerun})
    meta = json.loads((ctx.dir / "bundle.json").read_text())
    assert meta["rerun"] == rerun and meta["harness"]["version"] and meta["harness"]["commit"]
    assert meta["history_events"]["recorded"] > 1500 > meta["history_events"]["written"]
    assert {"writes.json", "managed-fields.yaml", "flows.mitm"} <= set(meta["files"])
    md = (ctx.dir / "report.md").read_text()
    assert f"| run it again | `{rerun}` (from the kueue-harness checkout) |" in md
    assert "| kueue-harness | " in md and "## The writes that decided the verdict" in md
    assert "web_columns=tls,icon,path,comment" in md
    with tarfile.open(tar) as tf:
        assert TOKEN.encode() not in b"".join(tf.extractfile(m).read() for m in tf.getmembers() if m.isfile())
    # The re-check of the archive agrees, and its report proves the race too.
    r = report.report_bundle(tar, out=tmp_path / "re")
    assert r.verdict == r.recorded == "reproduced"
    assert "**What the forced apply did:**" in r.report.read_text()
