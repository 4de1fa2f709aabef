"""Keeps secrets out of evidence: redacts bearer tokens, private keys and the run's known secret values
from text, bytes, headers and mitmproxy flows before they go into a bundle, and finds any that got in.

Two layers: patterns (any `Authorization:` value, `Bearer …`, PEM private key blocks, kubeconfig
`token:`/`client-key-data:` values) and exact values (the run's tokens and keys, also base64-encoded),
so a token is removed even where no pattern would recognise it.
"""

from __future__ import annotations

import base64
import gzip
import io
import re
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

MARK = "<redacted>"

#: Header names whose values are credentials (compared lower-case).
SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie", "x-auth-token")

_PEM_PRIVATE = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----")
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)(?!<redacted)[A-Za-z0-9._~+/=-]{8,}")
_AUTH_HEADER = re.compile(r"(?im)^((?:proxy-)?authorization\s*:\s*)\S.*$")
# kubeconfig / JSON / YAML fields that carry credentials: token, client-key-data, password.
_CRED_FIELD = re.compile(
    r"""(?i)(["']?\b(?:token|client-key-data|client-key|password|access_token)["']?\s*[:=]\s*["']?)"""
    r"""(?!<redacted)[A-Za-z0-9._~+/=-]{8,}""")


def _b64(s: bytes) -> str:
    return base64.b64encode(s).decode()


class Redactor:
    """Redacts credentials. `secrets`: exact values to remove wherever they appear (tokens, PEM keys);
    values shorter than 8 characters are ignored (they would match ordinary text)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values: set[str] = set()
        for raw in secrets:
            s = raw.strip()
            if len(s) < 8:
                continue
            values.add(s)
            # base64 of the value as stored (a PEM file ends with a newline) and as trimmed
            values.update(_b64(v.encode()) for v in {raw, s, s + "\n"})
            if "PRIVATE KEY" in s:
                body = "".join(l for l in s.splitlines() if l and not l.startswith("-----"))
                if len(body) >= 8:
                    values.add(body)
        self.secrets = sorted(values, key=len, reverse=True)
        self._exact = re.compile("|".join(re.escape(v) for v in self.secrets)) if self.secrets else None

    def text(self, s: str) -> str:
        """`s` with every known secret and credential pattern replaced by "<redacted>"."""
        if self._exact is not None:
            s = self._exact.sub(MARK, s)
        # A pattern can only match where its literal part occurs (casefold: what re.IGNORECASE equates), and
        # a substring test is far cheaper than a case-insensitive regex scan (the proxy redacts every flow
        # it saves: docs/benchmarks.md).
        if "PRIVATE KEY" in s:
            s = _PEM_PRIVATE.sub(lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY-----{MARK}-----END {m.group(1)}PRIVATE KEY-----", s)
        folded = s.casefold()
        if "authorization" in folded:
            s = _AUTH_HEADER.sub(lambda m: m.group(1) + MARK, s)
        if "bearer" in folded:
            s = _BEARER.sub(lambda m: m.group(1) + m.group(2) + MARK, s)
        if "token" in folded or "client-key" in folded or "password" in folded:
            s = _CRED_FIELD.sub(lambda m: m.group(1) + MARK, s)
        return s

    def bytes(self, b: bytes) -> bytes:
        """As `text`, for UTF-8 (or Latin-1) bytes; undecodable bytes are kept as they are."""
        try:
            return self.text(b.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            return self.text(b.decode("latin-1")).encode("latin-1")

    def header_value(self, name: str, value: str) -> str:
        """A header value as it may be shown: credentials keep only their scheme ("Bearer <redacted>")."""
        if name.lower() in SECRET_HEADERS:
            scheme = value.split(" ", 1)[0] if " " in value.strip() else ""
            return f"{scheme} {MARK}".strip()
        return self.text(value)

    def flow(self, flow: Any, copy: bool = True) -> Any:
        """A redacted copy of a mitmproxy HTTPFlow: credential headers, and every known secret or
        credential pattern in URLs and (decoded) bodies. The original flow is not changed unless `copy` is
        False (a flow just read from a file, used once: the flow itself is redacted and returned; a copy
        is half the cost of cutting a case's flows, 17 s of 34 s for 7,232 flows)."""
        f = flow.copy() if copy else flow
        for msg in (f.request, f.response):
            if msg is None:
                continue
            for name in list(msg.headers.keys()):
                values = msg.headers.get_all(name)
                msg.headers.set_all(name, [self.header_value(name, v) for v in values])
            try:
                content, decoded = msg.get_content(), True
            except ValueError:  # an encoding mitmproxy cannot undo: redact the bytes as they are
                content, decoded = msg.raw_content, False
            if content:
                red = self.bytes(content)
                if red != content:
                    if decoded:
                        msg.set_content(red)
                    else:
                        msg.raw_content = red
        f.request.path = self.text(f.request.path)
        return f

    def flow_state(self, flow: Any) -> dict[str, Any]:
        """What `self.flow(flow).get_state()` is (a fresh id included), made from one `get_state()` of the
        flow instead of a copy and a second serialization: the flow file's hot path. Bodies with a
        content-encoding go through `flow()` (they must be decoded to be redacted)."""
        import uuid

        for msg in (flow.request, flow.response):
            if msg is not None and msg.headers.get("content-encoding"):
                return self.flow(flow).get_state()
        state = flow.get_state()
        state["id"] = str(uuid.uuid4())
        for key in ("request", "response"):
            msg = state.get(key)
            if msg is None:
                continue
            # mitmproxy's Headers keep bytes and show them as UTF-8 with surrogateescape
            headers = [(n, self.header_value(n.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
                        .encode("utf-8", "surrogateescape")) for n, v in msg["headers"]]
            content = msg.get("content")
            if content:
                red = self.bytes(content)
                if red != content:
                    msg["content"] = red
                    # as Message.set_content does: content-length set (the first kept, others dropped)
                    if not any(n.lower() == b"transfer-encoding" for n, _ in headers):
                        cl, seen, kept = str(len(red)).encode(), False, []
                        for n, v in headers:
                            if n.lower() == b"content-length":
                                if not seen:
                                    kept.append((n, cl))
                                seen = True
                            else:
                                kept.append((n, v))
                        headers = kept if seen else [*kept, (b"content-length", cl)]
            msg["headers"] = tuple(headers)
        req = state["request"]
        req["path"] = self.text(req["path"].decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        return state


def run_secrets(env: Any) -> list[str]:
    """The secret values of a running environment: its bearer tokens (admin, Kueue, kube-controller-
    manager, kube-scheduler, kwok, the proxy's control token; also read from the state folder's tokens.csv and *.token files, so
    a stand-in with only `state` — a manual session's bundle — finds them) and every PEM private key in
    its state folder (and Kueue's metrics key). Attributes that an environment does not have are skipped."""
    out: list[str] = []
    for attr in ("admin_token", "kueue_token", "kcm_token", "scheduler_token", "kwok_token"):
        v = getattr(env, attr, None)
        if isinstance(v, str) and v:
            out.append(v)
    proxy = getattr(env, "proxy", None)
    tok = getattr(proxy, "_token", None) if proxy is not None else None
    if isinstance(tok, str) and tok:
        out.append(tok)
    state = getattr(env, "state", None)
    files: list[Path] = []
    if state is not None and Path(state).is_dir():
        files = [p for p in Path(state).rglob("*") if p.is_file() and "etcd-data" not in p.parts]
    files.append(Path("/etc/kueue/metrics/certs/tls.key"))
    for p in files:
        try:
            if p.stat().st_size > 1 << 20:
                continue
            text = p.read_text(errors="replace")
        except OSError:
            continue
        if p.name == "control.token" or p.name.endswith(".token"):
            out.append(text.strip())
        elif p.name == "tokens.csv":  # kube-apiserver's static tokens: token,user,uid,"groups" per line
            out.extend(line.split(",", 1)[0].strip() for line in text.splitlines() if "," in line)
        out.extend(m.group(0) for m in _PEM_PRIVATE.finditer(text))
    return out


def blobs(path: Path, name: str | None = None) -> Iterator[tuple[str, bytes]]:
    """Every readable form of a bundle file: its bytes; for .tar.gz/.tgz each member (recursively);
    for .gz the decompressed bytes; for .mitm each flow's headers, URL and decoded bodies."""
    name = name or path.name
    data = path.read_bytes()
    yield from _blobs_of(name, data)


def _blobs_of(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    yield name, data
    if name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                if m.isfile():
                    fh = tar.extractfile(m)
                    if fh is not None:
                        yield from _blobs_of(f"{name}!{m.name}", fh.read())
    elif name.endswith(".gz"):
        yield from _blobs_of(f"{name}!gunzip", gzip.decompress(data))
    elif name.endswith(".mitm"):
        yield from _flow_blobs(name, data)


def _flow_blobs(name: str, data: bytes) -> Iterator[tuple[str, bytes]]:
    from mitmproxy import io as mio
    from mitmproxy.exceptions import FlowReadException

    try:
        for i, f in enumerate(mio.FlowReader(io.BytesIO(data)).stream()):
            for part, msg in (("request", getattr(f, "request", None)), ("response", getattr(f, "response", None))):
                if msg is None:
                    continue
                head = "\n".join(f"{k}: {v}" for k, v in msg.headers.items(multi=True))
                url = getattr(msg, "url", "")
                try:
                    body = msg.get_content(strict=False) or b""
                except ValueError:
                    body = msg.raw_content or b""
                yield f"{name}!flow{i}.{part}", f"{url}\n{head}\n".encode() + body
    except FlowReadException:
        return


def find_secrets(paths: Iterable[Path], secrets: Iterable[str]) -> list[str]:
    """Where any of `secrets` (or its base64 form, or a line of a PEM key's body) appears in the files
    `paths` (every form `blobs` yields). Returns "file: which secret" strings; [] when clean."""
    needles: list[tuple[str, bytes]] = []
    for i, raw in enumerate(secrets):
        s = raw.strip()
        if len(s) < 8:
            continue
        label = f"secret #{i} ({'private key' if 'PRIVATE KEY' in s else 'token'})"
        needles.append((label, s.encode()))
        needles += [(label + " base64", _b64(v.encode()).encode()) for v in {raw, s, s + "\n"}]
        for line in s.splitlines():
            if len(line) >= 40 and not line.startswith("-----"):
                needles.append((label + " key line", line.encode()))
    found: list[str] = []
    for p in paths:
        for where, blob in blobs(p):
            for label, needle in needles:
                if needle in blob:
                    found.append(f"{where}: {label}")
    return sorted(set(found))
