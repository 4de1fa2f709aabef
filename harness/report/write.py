"""Writing a case's bundle from the live environment: Kueue's log cut to the case (`cut_kueue_log`), the
proxy's flows cut to the case and labelled (`cut_flows`), Kueue's Workload writes with their bodies
(writes.json), the final objects and their managedFields (`dump_objects`), history.jsonl with Kueue's
repeated log lines summarised (`summarize_history_file`), bundle.json, report.md and the .tar.gz
(`write_case_bundle`; `complete_bundle` is the part a manual session's bundle shares), all redacted and
scanned for the run's secrets.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.common import paths
from harness.common.errors import HarnessError
from harness.common.redact import Redactor, find_secrets, run_secrets
from harness.history import repeats
from harness.history.names import Names
from harness.history.names import kobj_key as _kobj_key
from harness.kueue import log as kueue_log
from harness.kueue import versions
from harness.report import flowfile, race
from harness.report.bundle import BUNDLE_SCHEMA, load_history, load_objects, recheck, selection_of
from harness.report.diagram import diagram_lines
from harness.report.markdown import _FILE_NOTES, render_report

# =====================================================================================================
# Writing a bundle (live environment)


def _seek_time(fh, since: float) -> None:
    """Position a binary file of time-ordered JSON log lines near the first line at or after `since`
    (binary search on byte offsets), so a long session log is not read from the start."""
    fh.seek(0, 2)
    lo, hi = 0, fh.tell()
    while hi - lo > 65536:
        mid = (lo + hi) // 2
        fh.seek(mid)
        fh.readline()
        ts = None
        for _ in range(50):
            raw = fh.readline()
            if not raw:
                break
            if raw.startswith(b"{"):
                try:
                    ts = kueue_log.parse_ts(json.loads(raw).get("ts"))
                except ValueError:
                    ts = None
                if ts is not None:
                    break
        if ts is None or ts >= since:
            hi = mid
        else:
            lo = mid
    fh.seek(lo)
    if lo:
        fh.readline()


#: Kueue's log of a case's window is written plainly up to this size, gzip-compressed above it (the stuck
#: preemption case: ~12 lines per 10 ms scheduling cycle at --zap-log-level=3, ~5.5 MB in 16 s).
LOG_PLAIN_MAX = 1 << 20
#: In kueue-excerpt.log, lines with the same message about the same Workloads after this many are left
#: out (one marker line says how many, and the last one is kept).
EXCERPT_REPEATS = 10


def _repeat_key(line: str) -> tuple[str, ...] | None:
    try:
        d = json.loads(line)
    except ValueError:
        return None
    objs = tuple(sorted(f"{k}={_kobj_key(v)}" for k, v in d.items()
                        if k in ("workload", "targetWorkload", "preemptingWorkload", "job", "clusterQueue")))
    return (str(d.get("msg")),) + objs


def cut_kueue_log(src: Path, start: float, end: float, dst_dir: Path, mentions: Sequence[str],
                  redactor: Redactor) -> tuple[str, int, int]:
    """Write the lines of Kueue's log `src` from `start` to `end` (epoch s) to `dst_dir`/kueue.log (or
    kueue.log.gz above LOG_PLAIN_MAX bytes), and those that mention any of `mentions` (namespace, Workload
    names) to kueue-excerpt.log, where a message repeated for the same Workloads is cut after
    EXCERPT_REPEATS lines (a marker line says how many were left out, from when to when). Redacted.
    Non-JSON lines take the time of the last JSON line. Returns (log file name, lines, excerpt lines)."""
    window: list[str] = []
    with open(src, "rb") as fh:
        _seek_time(fh, start)
        last = start
        for raw in fh:
            line = raw.decode("utf-8", errors="replace")
            if line.startswith("{"):
                try:
                    last = kueue_log.parse_ts(json.loads(line).get("ts")) or last
                except ValueError:
                    pass
            if last < start:
                continue
            if last > end:
                break
            window.append(redactor.text(line))
    text = "".join(window)
    for old in ("kueue.log", "kueue.log.gz"):
        (dst_dir / old).unlink(missing_ok=True)
    if len(text.encode()) > LOG_PLAIN_MAX:
        name = "kueue.log.gz"
        with gzip.open(dst_dir / name, "wt") as out:
            out.write(text)
    else:
        name = "kueue.log"
        (dst_dir / name).write_text(text)
    about = [(ln, _repeat_key(ln)) for ln in window if any(x and x in ln for x in mentions)]
    totals = Counter(k for _, k in about)
    count: dict[Any, int] = {}
    kept = 0
    with open(dst_dir / "kueue-excerpt.log", "w") as ex:
        for ln, k in about:
            count[k] = count.get(k, 0) + 1
            i, total = count[k], totals[k]
            if k is None or total <= EXCERPT_REPEATS + 1 or i <= EXCERPT_REPEATS or i == total:
                ex.write(ln)
                kept += 1
            elif i == EXCERPT_REPEATS + 1:
                ex.write(f"# kueue-harness: {total - EXCERPT_REPEATS - 1} more lines {k[0]!r} about "
                         f"{', '.join(k[1:]) or '-'} are left out here ({name} has every line; the last one "
                         "is kept below at its time)\n")
    return name, len(window), kept


def cut_flows(src: Path, start: float, end: float, flow_numbers: set[int], mentions: Sequence[str],
              redactor: Redactor, dst_mitm: Path, dst_har: Path,
              history: Sequence[Mapping[str, Any]] = (), dst_writes: Path | None = None) -> int:
    """Copy the flows of the session's .mitm `src` that belong to the case (addon flow number in
    `flow_numbers`, or a path naming one of `mentions`, started between `start` and `end`, epoch s) to
    `dst_mitm`, redacted, and the same as HAR (mitmproxy's own HAR export) to `dst_har`; Kueue's Workload
    writes among them, with their bodies and answers, to `dst_writes` (writes.json, harness/report/race.py)
    when given. Each flow's `comment` (the column `mitmweb -r` shows with --set web_columns=…,comment) is
    its label, and for a flow a fault rule touched in `history` also what the proxy did with it and when;
    those flows are `marked` (a red dot in mitmweb's list; filter `~marked`). Returns how many flows.
    writes.json holds {"_error": …} when the writes could not be read out of the flows.
    Raises OSError when a file cannot be read or written."""
    from mitmproxy import io as mio
    from mitmproxy.addons.savehar import SaveHar

    fates = race.flow_fates(history)
    picked = []
    # Not from the file's start: flows that finished before the case began are skipped (report/flowfile.py).
    for f in flowfile.flows_since(src, start):
        req = getattr(f, "request", None)
        if req is None or not (start <= (req.timestamp_start or 0) <= end):
            continue
        if f.metadata.get("kh_flow") in flow_numbers or any(x and x in req.path for x in mentions):
            picked.append(redactor.flow(f, copy=False))  # read for this cut alone
    for f in picked:
        seq = f.metadata.get("kh_flow")
        label = f.metadata.get("kh_label") or f.comment or ""
        f.comment = f"flow {seq}: {label}" if seq is not None else label
        if seq in fates:
            f.comment += f" | {fates[seq]}"
            f.marked = ":red_circle:"
    with open(dst_mitm, "wb") as out:
        w = mio.FlowWriter(out)
        for f in picked:
            w.add(f)
    dst_har.write_text(json.dumps(SaveHar().make_har(picked), indent=1))
    if dst_writes is not None:
        try:
            race.write_writes(picked, dst_writes)
        except Exception as e:  # noqa: BLE001 - evidence is best effort: say why, keep the rest of the bundle
            dst_writes.write_text(json.dumps({"_error": f"{type(e).__name__}: {e}"}))
    return len(picked)


def summarize_history_file(path: Path, keep: int = repeats.KEEP) -> tuple[int, int]:
    """Rewrite history.jsonl `path` with Kueue's repeated log lines summarised (harness/history/repeats.py: the
    first `keep` lines of each message about the same Workloads, then one `log_repeated` event with the
    rest's count and times). Returns (events before, events after). Raises BundleError for a malformed
    history, OSError when it cannot be written."""
    history = load_history(path)
    small = repeats.summarize(history, keep)
    if len(small) < len(history):
        path.write_text("".join(json.dumps(e, sort_keys=True, default=str) + "\n" for e in small))
    return len(history), len(small)


def dump_objects(d: Path, objs: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
    """objects.yaml (the objects without metadata.managedFields, for reading) and managed-fields.yaml
    ({"Kind ns/name": managedFields}: who owns which field, e.g. status.conditions) in folder `d`.
    Raises OSError when they cannot be written."""
    plain, managed = race.split_managed_fields(objs)
    (d / "objects.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
    if managed:
        (d / race.MANAGED_FILE).write_text(yaml.safe_dump(managed, sort_keys=False))


def harness_version() -> dict[str, Any]:
    """{"version": the installed kueue-harness version, "commit": the checkout's git commit (None outside a
    git checkout), "dirty": uncommitted changes in it}: which harness wrote a bundle."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("kueue-harness")
    except PackageNotFoundError:
        v = None
    root = paths.ROOT
    commit, dirty = None, None
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            commit = r.stdout.strip()
            st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
            dirty = bool(st.stdout.strip()) if st.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {"version": v, "commit": commit, "dirty": dirty}


def rerun_command(nodeid: str, spec_args: Sequence[str], target: str = "local") -> str:
    """The shell command that runs one case again, as pytest selects it (its node id; run from the
    harness checkout's root): `.venv/bin/python -m pytest NODEID --kueue-version … --target=…`."""
    root = paths.ROOT
    exe = Path(sys.executable)
    python = str(exe.relative_to(root)) if exe.is_relative_to(root) else str(exe)
    nodeid = re.sub(r"\[(r\d+|slot\d+|[pnmh]\d+(-\d+)*(-r\d+)?)\]$", "", nodeid)  # a --repeat repetition, an explore run: the case
    return shlex.join([python, "-m", "pytest", nodeid, *spec_args, f"--target={target}", "-p", "no:cacheprovider"])


def _feature_gates(env: Any) -> dict[str, Any] | None:
    try:
        cfg = env._kueue_config()  # noqa: SLF001 - the local target's generated Configuration
        return dict(cfg.get("featureGates") or {})
    except Exception:  # noqa: BLE001 - other targets: read the config file if there is one
        try:
            cfg = yaml.safe_load((Path(env.state) / "kueue-config.yaml").read_text())
            return dict((cfg or {}).get("featureGates") or {})
        except Exception:  # noqa: BLE001
            return None


def _redact_files(d: Path, redactor: Redactor, names: Sequence[str]) -> None:
    for name in names:
        p = d / name
        if p.exists():
            text = p.read_text(errors="replace")
            red = redactor.text(text)
            if red != text:
                p.write_text(red)


def complete_bundle(d: Path, meta: dict[str, Any], start: float, end: float, secrets: Sequence[str],
                    kueue_log_path: Path | None, session_flows: Path | None, mentions: Sequence[str]) -> Path:
    """Complete folder `d`, which holds history.jsonl (and objects.yaml, managed-fields.yaml), into a
    bundle and pack it as `<d>.tar.gz` beside it; returns the archive.

    `meta`: bundle.json's fields so far (case, verdict, versions, namespace, checkers, …; "notes" is
    extended); `start`, `end`: the window (epoch s) cut out of Kueue's log `kueue_log_path` and the
    session's flow file `session_flows` (None or missing: noted); `mentions`: namespace and Workload names
    whose log lines and flows belong to the bundle; `secrets`: the run's secret values. Redacts every file,
    summarises history.jsonl's repeated log lines, writes writes.json, timeline.mmd, bundle.json and
    report.md, scans every file (and the archive) for the secrets: a file holding one is removed and named
    in bundle.json, an archive holding one is not written (HarnessError). Raises OSError when the folder
    cannot be written."""
    redactor = Redactor(secrets)
    _redact_files(d, redactor, ("history.jsonl", "harness-events.jsonl", "objects.yaml", race.MANAGED_FILE))
    notes: list[str] = meta.setdefault("notes", [])
    if (d / "history.jsonl").exists():
        before, after = summarize_history_file(d / "history.jsonl")
        meta["history_events"] = {"recorded": before, "written": after}
    history = load_history(d / "history.jsonl") if (d / "history.jsonl").exists() else []
    names = Names(history, meta.get("namespace") or "", meta.get("prefix") or "")
    if kueue_log_path is not None and Path(kueue_log_path).exists():
        cut_kueue_log(Path(kueue_log_path), start, end, d, mentions, redactor)
    else:
        notes.append("Kueue's log was not available")
    if session_flows is not None and session_flows.exists():
        numbers = {int(e["flow"]) for e in history if e.get("source") == "proxy" and e.get("event") == "request"
                   and e.get("flow") is not None}
        cut_flows(session_flows, start, end, numbers, mentions, redactor, d / "flows.mitm", d / "flows.har",
                  history, d / race.WRITES_FILE)
    else:
        notes.append("no proxy flows were recorded")
    objects = load_objects(d / "objects.yaml")
    _, findings = recheck(history, objects, names=names, selection=selection_of(meta))
    (d / "timeline.mmd").write_text("\n".join(diagram_lines(history, names, meta["verdict"], findings)) + "\n")
    _finish(d, meta, history, objects, secrets)
    tar = d.with_name(d.name + ".tar.gz")
    part = d.with_name(d.name + ".tar.gz.part")  # renamed when complete: a killed run leaves no half archive
    try:
        with tarfile.open(part, "w:gz") as tf:
            tf.add(d, arcname=d.name)
        leaks = find_secrets([part], secrets)
        if leaks:  # cannot happen unless redaction missed a form: never leave such an archive behind
            raise HarnessError(f"the bundle archive of {d.name} would hold a secret ({leaks[0]}); not written")
        os.replace(part, tar)
    finally:
        part.unlink(missing_ok=True)
    return tar


def write_case_bundle(ctx: Any, env: Any, outcome: Mapping[str, Any]) -> Path:
    """Complete a case's folder (`ctx.dir`, which already holds history.jsonl and objects.yaml) into its
    evidence bundle and pack it as `<folder>.tar.gz` beside it; returns the archive's path.

    `ctx`: the pytest plugin's CaseContext; `env`: the running environment (its tokens and keys are what
    redaction removes); `outcome`: the case's verdict entry ("case", "verdict", "expected", "detail",
    "seconds", optional "message", "bug", "checkers", "target", "rerun": the command that runs the case
    again). Every file written is redacted; afterwards every file (the archive and .mitm included) is
    scanned for the run's secrets and any file that holds one is removed and named in bundle.json. Raises
    OSError when the folder cannot be written, HarnessError when the archive would hold a secret."""
    d: Path = ctx.dir
    end = time.time()
    start = ctx.history.started
    secrets = run_secrets(env)
    redactor = Redactor(secrets)
    history = load_history(d / "history.jsonl") if (d / "history.jsonl").exists() else []
    names = Names(history, ctx.ns, ctx.prefix)
    mentions = [ctx.ns] + sorted(names.workloads)
    proxy = getattr(env, "proxy", None)
    session_flows = Path(proxy.events_file).with_name("flows.mitm") if proxy is not None else None
    meta: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA,
        "case": outcome.get("case"),
        "slug": d.name,
        "verdict": outcome.get("verdict", "error"),
        "expected": outcome.get("expected"),
        "detail": outcome.get("detail", ""),
        "message": redactor.text(str(outcome.get("message") or "")),
        "seconds": outcome.get("seconds"),
        "bug": outcome.get("bug"),
        "kueue_version": getattr(env, "kueue_version", None),
        "kueue": env.kueue_build_info() if hasattr(env, "kueue_build_info") else None,
        "kubernetes_version": getattr(env, "kubernetes_version", None) or versions.KUBERNETES_VERSION,
        # kube-scheduler's and kwok's versions once Pods ran in the environment (harness/env/pods.py), else None.
        "pods": env.pods_info() if hasattr(env, "pods_info") else None,
        "target": outcome.get("target") or getattr(env, "target", None) or "local",
        "feature_gates": _feature_gates(env),
        # The declared configuration, the Configuration file Kueue ran with, the gates it reported.
        "kueue_config": outcome.get("kueue_config"),
        "namespace": ctx.ns,
        "prefix": ctx.prefix,
        "workloads": sorted(getattr(ctx, "workload_keys", ()) or ()),
        "window": [start, end],
        "notes": [],
        "checkers": outcome.get("checkers"),
        "harness": harness_version(),
        "rerun": outcome.get("rerun"),
        # Kueue's own view at a verdict other than passed (harness/scenarios/verdicts.py _kueue_view).
        **({"kueue_view": outcome["kueue_view"]} if outcome.get("kueue_view") else {}),
    }
    return complete_bundle(d, meta, start, end, secrets, getattr(env, "kueue_log", None), session_flows, mentions)


def _finish(d: Path, meta: dict[str, Any], history: list[dict[str, Any]], objects: Mapping[str, Any],
            secrets: Sequence[str]) -> None:
    """Scan, record file sizes, write bundle.json and report.md (twice: the report lists its neighbours)."""
    found = find_secrets([p for p in sorted(d.iterdir()) if p.is_file()], secrets)
    for leak in found:
        bad = d / leak.split(":", 1)[0].split("!", 1)[0]
        bad.unlink(missing_ok=True)
    meta["redaction"] = {"secrets": len(secrets), "found": found}
    order = list(_FILE_NOTES)
    files = sorted((p for p in d.iterdir() if p.is_file() and p.name not in ("report.md",)),
                   key=lambda p: (order.index(p.name) if p.name in order else len(order), p.name))
    meta["files"] = {p.name: p.stat().st_size for p in files if p.name != "bundle.json"}
    size = 0
    for _ in range(4):  # bundle.json lists its own size: render until that number is right
        meta["files"]["bundle.json"] = size
        text = json.dumps(meta, indent=1, sort_keys=True)
        if len(text.encode()) == size:
            break
        size = len(text.encode())
    (d / "bundle.json").write_text(text)
    md, verdict, _ = render_report(meta, history, objects, writes=race.load_writes(d), managed=race.load_managed(d))
    (d / "report.md").write_text(md)
