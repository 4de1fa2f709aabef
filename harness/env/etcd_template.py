"""Cached etcd data directories with Kueue's CRDs (and the kueue-system namespace) already installed, so a
local environment starts from a copy instead of installing 1.6 MB of CRDs and waiting for them each time.

A template is made once per (Kueue's CRDs, kube-apiserver, etcd) by harness/env/local.py with a throwaway
PKI and no kube-controller-manager, so it holds no Secret, no ServiceAccount and no token: only what
kube-apiserver bootstraps for itself (namespaces, RBAC roles, priority classes, flow schemas, the
`kubernetes` Service) plus the CRDs and the namespace; the one object that names the throwaway CA
(extension-apiserver-authentication) is deleted, and the stored keys are checked (`leaks`). Each run gets its own copy (`copy_data`), never
the template itself. Webhook configurations are not in it: their caBundle is per run.

Cache layout (root: $KUEUE_HARNESS_CACHE or ~/.cache/kueue-harness):
  etcd-templates/<key>/data           etcd's data directory (stored sparse: the WAL is 64 MB of zeros)
  etcd-templates/<key>/template.json  what the key was made of, the CRDs it holds, when it was made
Key: sha256 over FORMAT, the CRD files' names and bytes (config/components/crd/bases of the Kueue build and
the ProvisioningRequest CRD),
kube-apiserver's and etcd's version and binary (path, size, mtime) and the flags that shape what is
stored (service CIDR, extra flags). Any change
gives a new key, so a template is never reused across a change; unused ones are pruned after PRUNE_DAYS.

`KUEUE_HARNESS_ETCD_TEMPLATE=0` turns templates off (every start installs the CRDs into a fresh etcd).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.build import binaries

#: Bump when what a template holds or how it is made changes: every cached template is then remade.
FORMAT = 2
PRUNE_DAYS = 30
_CHUNK = 1 << 20
#: etcd keys a template must not hold. Secrets and ServiceAccounts (tokens, and what
#: kube-controller-manager would make); and kube-apiserver's extension-apiserver-authentication
#: ConfigMap: it holds the client CA of the kube-apiserver that wrote it, and kube-apiserver *merges*
#: the CAs it finds there with its own (pkg/controlplane/controller/clusterauthenticationtrust), so a
#: run would keep trusting the template's CA. `scrub` deletes it; `leaks` lists what is left of these.
FORBIDDEN_PREFIXES = ("/registry/secrets/", "/registry/serviceaccounts/")
SCRUBBED_KEYS = ("/registry/configmaps/kube-system/extension-apiserver-authentication",)


def enabled() -> bool:
    """False when $KUEUE_HARNESS_ETCD_TEMPLATE is "0", "false", "no" or "off"."""
    return os.environ.get("KUEUE_HARNESS_ETCD_TEMPLATE", "1").strip().lower() not in ("0", "false", "no", "off")


def root() -> Path:
    return binaries.cache_root() / "etcd-templates"


def crd_files(kueue_source: Path, extra: tuple[Path, ...] | list[Path] = ()) -> list[Path]:
    """The CRD manifests the environment installs, in a stable order: Kueue's (config/components/crd/bases
    of `kueue_source`), then `extra` (Binaries.extra_crds: the ProvisioningRequest API) — none at all when
    `kueue_source` holds no Kueue CRD."""
    kueue = sorted((kueue_source / "config" / "components" / "crd" / "bases").glob("*.yaml"))
    return [*kueue, *extra] if kueue else []


def _binary_identity(path: Path) -> str:
    p = Path(path).resolve()
    st = p.stat()
    return f"{p}:{st.st_size}:{st.st_mtime_ns}"


def key(crds: list[Path], kube_apiserver: Path, etcd: Path, kubernetes_version: str, etcd_version: str,
        settings: str) -> str:
    """The template key (24 hex digits) for these inputs; see the module doc. `settings`: the flags that
    shape what kube-apiserver stores (its service CIDR, extra flags)."""
    h = hashlib.sha256(f"format {FORMAT}\n".encode())
    h.update(f"kube-apiserver {kubernetes_version} {_binary_identity(kube_apiserver)}\n".encode())
    h.update(f"etcd {etcd_version} {_binary_identity(etcd)}\n".encode())
    h.update(f"settings {settings}\n".encode())
    for f in crds:
        data = f.read_bytes()
        h.update(f"crd {f.name} {len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()[:24]


@dataclass(frozen=True)
class Template:
    """A usable template: `data` is etcd's data directory; `crds` the CRDs in it
    ([{"name", "group", "plural", "versions": [served versions]}])."""

    key: str
    dir: Path
    crds: list[dict[str, Any]]

    @property
    def data(self) -> Path:
        return self.dir / "data"


def find(k: str) -> Template | None:
    """The template with key `k`, or None when there is none (or only an incomplete one)."""
    d = root() / k
    meta = d / "template.json"
    try:
        info = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    if info.get("format") != FORMAT or info.get("key") != k or not (d / "data" / "member").is_dir():
        return None
    try:
        os.utime(meta)  # last use, for pruning
    except OSError:
        pass
    return Template(k, d, list(info.get("crds") or []))


def store(k: str, data: Path, crds: list[dict[str, Any]], inputs: dict[str, Any], seconds: float) -> Template:
    """Copy a stopped etcd's data directory `data` into the cache as template `k` (sparse: runs of zeros
    become holes), atomically: a half-written template is never found. Returns it. If another process
    stored `k` meanwhile, that one is kept. Also prunes templates unused for PRUNE_DAYS days."""
    base = root()
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    tmp = base / f".{k}.tmp-{os.getpid()}-{secrets.token_hex(2)}"
    try:
        tmp.mkdir(mode=0o700)
        copy_data(data, tmp / "data", find_zeros=True)
        info = {"format": FORMAT, "key": k, "crds": crds, "inputs": inputs, "made": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": round(seconds, 2)}
        (tmp / "template.json").write_text(json.dumps(info, indent=1) + "\n")
        try:
            tmp.rename(base / k)
        except OSError as e:
            if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    prune(keep=k)
    t = find(k)
    assert t is not None, f"etcd template {k} was stored but cannot be read back"
    return t


def remove(k: str) -> None:
    """Drop template `k` (e.g. etcd could not start from a copy of it): the next start makes it again."""
    d = root() / k
    if d.is_dir():
        gone = d.with_name(f".{k}.bad-{os.getpid()}-{secrets.token_hex(2)}")
        try:
            d.rename(gone)
        except OSError:
            return
        shutil.rmtree(gone, ignore_errors=True)


def prune(keep: str, days: float = PRUNE_DAYS) -> list[str]:
    """Remove templates not used for `days` days or of another FORMAT (and leftovers of interrupted stores
    older than a day)."""
    base = root()
    now = time.time()
    removed = []
    for d in base.iterdir() if base.is_dir() else []:
        if d.name == keep:
            continue
        try:
            if d.name.startswith("."):
                if now - d.stat().st_mtime > 86400:
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(d.name)
                continue
            meta = d / "template.json"
            used = meta.stat().st_mtime if meta.exists() else d.stat().st_mtime
            old_format = meta.exists() and json.loads(meta.read_text()).get("format") != FORMAT
        except (OSError, ValueError):
            continue
        if old_format or now - used > days * 86400:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


# ---- what is in it ------------------------------------------------------------------------------------

def _etcd_call(port: int, what: str, body: dict[str, Any]) -> dict[str, Any]:
    import base64
    import urllib.request

    data = {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in body.items()}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v3/kv/{what}", data=json.dumps(data).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def keys(port: int) -> list[str]:
    """Every key of the etcd listening on 127.0.0.1:`port` (its v3 JSON gateway)."""
    import base64

    out = _etcd_call(port, "range", {"key": b"\0", "range_end": b"\0", "keys_only": True})
    return [base64.b64decode(kv["key"]).decode(errors="replace") for kv in out.get("kvs") or []]


def scrub(port: int) -> None:
    """Delete SCRUBBED_KEYS from the etcd on `port` (kube-apiserver stopped: it would write them again)."""
    for k in SCRUBBED_KEYS:
        _etcd_call(port, "deleterange", {"key": k.encode()})


def leaks(all_keys: list[str]) -> list[str]:
    """The keys among `all_keys` a template must not hold (FORBIDDEN_PREFIXES, SCRUBBED_KEYS)."""
    return [k for k in all_keys if k.startswith(FORBIDDEN_PREFIXES) or k in SCRUBBED_KEYS]


# ---- copying -------------------------------------------------------------------------------------------

def copy_data(src: Path, dst: Path, find_zeros: bool = False) -> int:
    """Copy the directory tree `src` to `dst` (which must not exist), directories 0700, files 0600,
    keeping holes (SEEK_DATA/SEEK_HOLE), so etcd's preallocated 64 MB WAL costs only what it holds.
    `find_zeros`: also turn all-zero 1 MiB blocks into holes (etcd preallocates with fallocate, whose
    unwritten blocks read as zeros). Returns the bytes written."""
    written = 0
    dst.mkdir(mode=0o700)
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        for d in dirnames:
            (dst / rel / d).mkdir(mode=0o700)
        for f in filenames:
            written += _copy_file_sparse(Path(dirpath) / f, dst / rel / f, find_zeros)
    return written


def _data_ranges(fd: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of the regions of `fd` that hold data; the whole file when holes cannot be told."""
    ranges = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:  # only a hole is left
                    break
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            ranges.append((start, min(end, size)))
            pos = end
    except (OSError, AttributeError):
        return [(0, size)]
    return ranges


def _copy_file_sparse(src: Path, dst: Path, find_zeros: bool) -> int:
    written = 0
    with open(src, "rb") as fi:
        size = os.fstat(fi.fileno()).st_size
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fo:
            for start, end in _data_ranges(fi.fileno(), size):
                fi.seek(start)
                pos = start
                while pos < end:
                    block = fi.read(min(_CHUNK, end - pos))
                    if not block:
                        break
                    if not (find_zeros and block.count(0) == len(block)):
                        fo.seek(pos)
                        fo.write(block)
                        written += len(block)
                    pos += len(block)
            fo.truncate(size)
    return written
