"""harness/common/redact.py: what the bundle writer removes (patterns and the run's exact secrets, in text,
headers and mitmproxy flows, compressed bodies included) and what its scanner finds (in archives, gzip
files and .mitm flows). Uses mitmproxy's own test helpers for flows."""

from __future__ import annotations

import base64
import gzip
import io
import tarfile

from mitmproxy import io as mio
from mitmproxy.test import tflow, tutils

from harness.common.pki import make_ca, rsa_keypair
from harness.common.redact import MARK, Redactor, find_secrets

TOKEN = "Zq8Vb1xkP0s7Yt3mW2aE9cLr"


def _key() -> str:
    priv, _ = rsa_keypair()
    return priv.decode()


def test_patterns_without_known_secrets():
    r = Redactor()
    text = ("Authorization: Bearer abc.def-ghi_123456\n"
            "curl -H 'authorization: bearer 0123456789abcdef'\n"
            "users:\n- user:\n    token: kubeconfigtoken123\n    client-key-data: LS0tLS1CRUdJTiBSU0Eg\n"
            '{"password": "hunter2hunter2"}\n' + _key())
    out = r.text(text)
    for secret in ("abc.def-ghi_123456", "0123456789abcdef", "kubeconfigtoken123", "LS0tLS1CRUdJTiBSU0Eg",
                   "hunter2hunter2", "MII"):
        assert secret not in out, (secret, out)
    assert "-----BEGIN PRIVATE KEY-----<redacted>-----END PRIVATE KEY-----" in out or "BEGIN RSA" in out
    assert out.count(MARK) >= 6


def test_ordinary_text_is_kept():
    r = Redactor([TOKEN])
    text = '{"msg":"Preemption already issued, waiting for observation","workload":{"name":"job-job1-2e273"}}'
    assert r.text(text) == text
    assert r.text("bearer of bad news") == "bearer of bad news"


def test_exact_secrets_also_base64_and_key_bodies():
    key = _key()
    body = "".join(l for l in key.splitlines() if not l.startswith("-----"))
    r = Redactor([TOKEN, key, "short"])
    out = r.text(f"x {TOKEN} y {base64.b64encode(TOKEN.encode()).decode()} z {body} "
                 f"{base64.b64encode(key.encode()).decode()} short")
    assert TOKEN not in out and body not in out and "short" in out
    assert out.count(MARK) == 4


def test_flow_copy_is_redacted_and_the_original_is_not():
    f = tflow.tflow(req=tutils.treq(method=b"PATCH", path=b"/apis/x?access_token=" + TOKEN.encode()),
                    resp=tutils.tresp())
    f.request.headers["Authorization"] = f"Bearer {TOKEN}"
    f.response.headers["content-encoding"] = "gzip"
    f.response.content = f'{{"token": "{TOKEN}", "kind": "Secret"}}'.encode()  # stored gzip-compressed
    assert TOKEN.encode() not in f.response.raw_content
    red = Redactor([TOKEN]).flow(f)
    assert red.request.headers["authorization"] == "Bearer <redacted>"
    assert TOKEN not in red.request.path
    assert TOKEN.encode() not in red.response.get_content() and b'"kind": "Secret"' in red.response.get_content()
    assert red.response.headers["content-encoding"] == "gzip"
    assert f.request.headers["Authorization"] == f"Bearer {TOKEN}", "the live flow must not change"


def test_flow_without_copy_redacts_the_flow_itself():
    # cut_flows reads each flow from the file for one use; redacting it in place halves the cut's cost.
    f = tflow.tflow(req=tutils.treq(method=b"PATCH", path=b"/apis/x?access_token=" + TOKEN.encode()),
                    resp=tutils.tresp())
    f.request.headers["Authorization"] = f"Bearer {TOKEN}"
    f.response.content = f'{{"token": "{TOKEN}"}}'.encode()
    red = Redactor([TOKEN]).flow(f, copy=False)
    assert red is f
    assert f.request.headers["authorization"] == "Bearer <redacted>" and TOKEN not in f.request.path
    assert TOKEN.encode() not in f.response.get_content()


def test_scanner_opens_archives_gzip_and_flows(tmp_path):
    key = _key()
    line = next(l for l in key.splitlines() if len(l) == 64)
    clean = tmp_path / "clean.txt"
    clean.write_text("nothing here")
    gz = tmp_path / "kueue.log.gz"
    gz.write_bytes(gzip.compress(f"log {line}".encode()))
    mitm = tmp_path / "flows.mitm"
    f = tflow.tflow(resp=tutils.tresp())
    f.response.headers["content-encoding"] = "gzip"
    f.response.content = TOKEN.encode()
    with open(mitm, "wb") as fh:
        mio.FlowWriter(fh).add(f)
    assert TOKEN.encode() not in mitm.read_bytes()  # only the decoded body shows it
    tar = tmp_path / "b.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        data = f"inside {TOKEN}".encode()
        info = tarfile.TarInfo("b/history.jsonl")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    found = find_secrets([clean, gz, mitm, tar], [TOKEN, key])
    assert not any(x.startswith("clean.txt") for x in found)
    assert any(x.startswith("kueue.log.gz!gunzip") and "key line" in x for x in found), found
    assert any(x.startswith("flows.mitm!flow0.response") for x in found), found
    assert any(x.startswith("b.tar.gz!b/history.jsonl") for x in found), found


def test_run_secrets_reads_tokens_and_keys(tmp_path):
    from harness.common.redact import run_secrets

    class Env:
        admin_token, kueue_token, kcm_token = "a" * 20, "k" * 20, "c" * 20
        state = tmp_path

    (tmp_path / "control.token").write_text("t" * 20)
    (tmp_path / "apiserver.key").write_text(_key())
    (tmp_path / "ca.crt").write_bytes(make_ca().cert_pem)
    s = run_secrets(Env())
    assert {"a" * 20, "k" * 20, "c" * 20, "t" * 20} <= set(s)
    assert sum("PRIVATE KEY" in x for x in s) >= 1 and not any("CERTIFICATE" in x for x in s)


def test_run_secrets_reads_the_static_token_file_of_a_state_folder(tmp_path):
    """A manual session's bundle knows only the session's state folder: its tokens.csv names every token."""
    from types import SimpleNamespace

    from harness.common.redact import run_secrets

    (tmp_path / "tokens.csv").write_text(f'{"a" * 24},kueue-harness-admin,1,"system:masters"\n'
                                         f'{"k" * 24},kueue-manager,2,"system:masters"\n')
    assert {"a" * 24, "k" * 24} <= set(run_secrets(SimpleNamespace(state=tmp_path)))


def _old_text(r: Redactor, s: str) -> str:
    """Redactor.text before its substring pre-checks: every pattern always applied."""
    import harness.common.redact as rd

    if r._exact is not None:
        s = r._exact.sub(MARK, s)
    s = rd._PEM_PRIVATE.sub(lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY-----{MARK}-----END {m.group(1)}PRIVATE KEY-----", s)
    s = rd._AUTH_HEADER.sub(lambda m: m.group(1) + MARK, s)
    s = rd._BEARER.sub(lambda m: m.group(1) + m.group(2) + MARK, s)
    s = rd._CRED_FIELD.sub(lambda m: m.group(1) + MARK, s)
    return s


def test_text_prechecks_change_nothing():
    import random

    r = Redactor([TOKEN])
    pieces = ["Authorization: Bearer abcdefgh12345", "AUTHORIZATION:x", "bearer  0123456789", "BeArEr zzzzzzzzzz",
              '"token": "abcdefghij"', "TOKEN=abcdefghijk", "client-key-data: QUJDREVGR0hJSks=", "passWord:hunter2hunter2",
              "paſſword: hunter2hunter2", "\u212aey", "toKen:\u212a\u212a\u212a\u212a\u212a\u212a\u212a\u212a",
              "access_token=abcdefghijkl", _key(), TOKEN, "plain text", '{"kind":"Workload"}', "\n", " ", "é", "ß"]
    rnd = random.Random(7)
    for _ in range(400):
        s = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 6)))
        assert r.text(s) == _old_text(r, s), s


def _flows():
    body = f'{{"metadata":{{"name":"w"}},"token":"{TOKEN}","note":"Bearer abcdefghijkl"}}'.encode()
    f1 = tflow.tflow(req=tutils.treq(method=b"PATCH", path=b"/apis/x/workloads/w/status?access_token=" + TOKEN.encode(),
                                     content=body), resp=tutils.tresp(content=body))
    f1.request.headers["Authorization"] = f"Bearer {TOKEN}"
    f1.request.headers["X-Note"] = "caf\u00e9 bearer abcdefghijkl"
    f2 = tflow.tflow(req=tutils.treq(content=b'{"kind":"Workload","spec":{}}'), resp=tutils.tresp(content=b'{"kind":"Workload"}'))
    f3 = tflow.tflow(req=tutils.treq(content=b""), resp=False, err=True)
    f4 = tflow.tflow(resp=tutils.tresp())
    f4.response.headers["content-encoding"] = "gzip"
    f4.response.content = f'{{"token": "{TOKEN}"}}'.encode()
    f5 = tflow.tflow(req=tutils.treq(content=_key().encode()), resp=tutils.tresp(content=b"ok"))
    f5.request.headers["transfer-encoding"] = "chunked"
    del f5.request.headers["content-length"]
    return [f1, f2, f3, f4, f5]


def test_flow_state_is_the_redacted_copys_state():
    r = Redactor([TOKEN])
    for f in _flows():
        before = f.get_state()
        got, want = r.flow_state(f), r.flow(f).get_state()
        assert got.pop("id") != f.id and want.pop("id") != f.id
        assert got == want
        after = f.get_state()
        assert after == before, "the live flow must not change"
        assert TOKEN.encode() not in tnetstring_bytes(got)


def tnetstring_bytes(state) -> bytes:
    from mitmproxy.io import tnetstring

    return tnetstring.dumps(state)
