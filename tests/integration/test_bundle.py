"""The evidence bundle on the real environment: a case with a real hold writes its bundle at the end of
the `case` fixture, and no secret of the run (bearer tokens, the control token, private keys) is in any
file of it: plain files, the .tar.gz's members, the .mitm's flows (decoded), the HAR's bodies, gzip files.

The scan here is written apart from harness/common/redact.py on purpose, so that a gap in the redactor's own
scanner cannot hide a leak. The second test reads the bundle the first one's teardown wrote (pytest runs
a module's tests in file order).
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
import tarfile
from pathlib import Path

import pytest

from harness import report
from harness import scenarios as seed
from harness.plan.rules import Match
from harness.scenarios.case import _slug

STEP = 30.0
_BUNDLE_CASE = "test_bundle_case_with_a_hold"


@pytest.mark.checkers("quota")
def test_bundle_case_with_a_hold(case):
    """Hold job1's admission PATCH, release it, see it answered: Kueue's flows carry its bearer token."""
    q = seed.setup_queues(case)
    rule = case.proxy.hold(Match(write="admission", namespace=case.ns, name="job-job1-*"), rule_id="bundle-admission")
    seed.submit_job(case, q, "job1", q.low)
    held = rule.wait_held(STEP)
    case.proxy.release(held, why="bundle test")
    answer = case.proxy.wait_answered(held.flow, STEP)
    assert answer["status"] == 200


def _secrets(env) -> dict[str, bytes]:
    """The run's secrets, gathered here from the environment and its state folder."""
    out = {
        "admin token": env.admin_token.encode(),
        "kueue token": env.kueue_token.encode(),
        "control token": (Path(env.state) / "control.token").read_text().strip().encode(),
    }
    if getattr(env, "kcm_token", None):
        out["kube-controller-manager token"] = env.kcm_token.encode()
    for attr, what in (("scheduler_token", "kube-scheduler token"), ("kwok_token", "kwok token")):
        if getattr(env, attr, None):
            out[what] = getattr(env, attr).encode()
    keys = [p for p in Path(env.state).rglob("*") if p.is_file() and "etcd-data" not in p.parts]
    keys.append(Path("/etc/kueue/metrics/certs/tls.key"))
    for p in keys:
        try:
            text = p.read_text(errors="replace")
        except OSError:
            continue
        for i, m in enumerate(re.finditer(r"-----BEGIN [A-Z ]*PRIVATE KEY-----(.*?)-----END", text, re.S)):
            for j, line in enumerate(l for l in m.group(1).split() if len(l) >= 40):
                out[f"{p.name} key {i} line {j}"] = line.encode()
    for name, value in list(out.items()):
        if "token" in name:
            out[name + " (base64)"] = base64.b64encode(value)
    assert any("key" in n for n in out), "found no private key in the run's state folder to look for"
    return out


def _forms(name: str, data: bytes):
    """Every form a reader of the bundle could see `data` in."""
    yield name, data
    if name.endswith(".tar.gz"):
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for m in tf.getmembers():
                if m.isfile():
                    yield from _forms(f"{name}:{m.name}", tf.extractfile(m).read())
    elif name.endswith(".gz"):
        yield from _forms(name[:-3], gzip.decompress(data))
    elif name.endswith(".mitm"):
        from mitmproxy import io as mio

        for i, f in enumerate(mio.FlowReader(io.BytesIO(data)).stream()):
            for part in (f.request, f.response):
                if part is None:
                    continue
                head = "\n".join(f"{k}: {v}" for k, v in part.headers.items(multi=True))
                yield f"{name}#{i}", (getattr(part, "url", "") + "\n" + head).encode()
                yield f"{name}#{i} body", part.get_content(strict=False) or b""
    elif name.endswith(".har"):
        for i, entry in enumerate(json.loads(data)["log"]["entries"]):
            content = entry["response"].get("content", {})
            if content.get("encoding") == "base64" and content.get("text"):
                yield f"{name}#{i} body", base64.b64decode(content["text"])


def test_bundle_holds_no_secret_of_the_run(kueue_env, artifacts_dir):
    folder = artifacts_dir / "cases" / _slug(f"x::{_BUNDLE_CASE}")
    archive = folder.with_name(folder.name + ".tar.gz")
    if not archive.exists():
        pytest.fail(f"no bundle at {archive}: run this module whole ({_BUNDLE_CASE} writes it at its end)")
    secrets = _secrets(kueue_env)
    files = sorted(p for p in folder.iterdir() if p.is_file()) + [archive]
    names = {p.name for p in files}
    for wanted in ("report.md", "history.jsonl", "objects.yaml", "kueue-excerpt.log", "flows.mitm", "flows.har",
                   "bundle.json"):
        assert wanted in names, f"{wanted} missing from the bundle {folder}"
    assert {"kueue.log", "kueue.log.gz"} & names
    leaks = []
    scanned = 0
    for p in files:
        for where, blob in _forms(p.name, p.read_bytes()):
            scanned += 1
            leaks += [f"{where}: {what}" for what, value in secrets.items() if value in blob]
    assert not leaks, "secrets in the bundle:\n" + "\n".join(leaks)
    assert scanned > len(files), "the archive and the flows were not opened"

    # The flows are real: Kueue's requests with its Authorization header, redacted.
    from mitmproxy import io as mio

    with open(folder / "flows.mitm", "rb") as fh:
        flows = list(mio.FlowReader(fh).stream())
    auth = [f.request.headers.get("authorization") for f in flows if "authorization" in f.request.headers]
    assert auth and all(a == "Bearer <redacted>" for a in auth), auth[:3]
    labels = [f.metadata.get("kh_label") or "" for f in flows]
    assert any(lb.startswith("admission ") for lb in labels), labels
    # The session's own flow file (the addon redacts as it writes) holds no token either.
    session = (kueue_env.artifacts / "flows.mitm").read_bytes()
    assert kueue_env.kueue_token.encode() not in session and kueue_env.admin_token.encode() not in session

    meta = json.loads((folder / "bundle.json").read_text())
    assert meta["redaction"]["found"] == [] and meta["redaction"]["secrets"] >= 4
    md = (folder / "report.md").read_text()
    assert "```mermaid\nsequenceDiagram" in md and "HOLD" in md
    assert report.validate_sequence_diagram((folder / "timeline.mmd").read_text()) == []


def test_bundle_rechecks_offline(artifacts_dir, tmp_path):
    """The archive alone re-checks to the verdict the run recorded."""
    archive = artifacts_dir / "cases" / (_slug(f"x::{_BUNDLE_CASE}") + ".tar.gz")
    r = report.report_bundle(archive, out=tmp_path / "recheck")
    assert (r.recorded, r.verdict) == ("passed", "passed"), [f.evidence for f in r.findings]
    assert (tmp_path / "recheck" / "report.recheck.md").read_text().startswith(f"# {_BUNDLE_CASE}: passed")
    assert (tmp_path / "recheck" / "report.md").read_text().startswith(f"# {_BUNDLE_CASE}: passed")  # the run's own
