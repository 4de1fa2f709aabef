"""The writes that decided the verdict, with their bodies and field ownership: the evidence that a write
raced another (kubernetes-sigs/kueue#11480: the late admission, a forced server-side apply by the same
field manager `kueue-admission` as the eviction, removed the eviction's `Evicted` condition).

`writes.json` of a bundle holds Kueue's Workload writes of the case as the proxy saw them (from flows.mitm,
already redacted): method, path, the request body, and of the answer its status, resourceVersion,
conditions and `metadata.managedFields`. `managed-fields.yaml` holds the final objects' managedFields
(objects.yaml leaves them out). `race_section` renders the writes a fault rule touched (held, failed,
delayed, reset), what their bodies set, who owns `status.conditions` after each, and what a later forced
apply removed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.history.names import Names, case_t0

WRITES_FILE = "writes.json"
MANAGED_FILE = "managed-fields.yaml"
#: History events by which a fault rule touched a flow.
FAULT_EVENTS = ("held", "failed", "delayed", "reset", "hold_expired", "hold_timeout")
#: Request bodies longer than this (characters) are cut in report.md (writes.json keeps them whole).
BODY_SHOWN = 6000
#: RFC 3339 times in a body (lastTransitionTime): alike writes may differ in them only.
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


# ---- from flows ----------------------------------------------------------------------------------------

def _json(content: bytes | None) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", errors="replace")


def _conditions(obj: Any) -> list[dict[str, Any]]:
    """[{type, status, reason}] of an object's status.conditions; [] for anything else (a Status answer's
    `status` is a string)."""
    st = obj.get("status") if isinstance(obj, Mapping) else None
    conds = st.get("conditions") if isinstance(st, Mapping) else None
    return [{k: c.get(k) for k in ("type", "status", "reason") if k in c}
            for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []


def writes_from_flows(flows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """{"<flow number>": write} for the Workload writes among mitmproxy `flows` (those with the proxy's
    `kh_flow` number and a label that names a Workload write). A write: "label", "method", "path" (with
    the query: fieldManager, force), "content_type", "body" (the request body, parsed JSON or text),
    "status" (None without an answer) and "answer": "resource_version", "conditions" ([{type, status,
    reason}]), "managed_fields" (the answer's metadata.managedFields) when the answer is a JSON object."""
    out: dict[str, dict[str, Any]] = {}
    for f in flows:
        req = getattr(f, "request", None)
        seq = f.metadata.get("kh_flow")
        if req is None or seq is None or "/workloads" not in req.path:
            continue
        if req.method not in ("PATCH", "PUT", "POST"):
            continue
        try:
            body = _json(req.get_content(strict=False))
        except ValueError:
            body = None
        resp = getattr(f, "response", None)
        answer: dict[str, Any] = {}
        if resp is not None:
            try:
                obj = _json(resp.get_content(strict=False))
            except ValueError:
                obj = None
            if isinstance(obj, Mapping) and obj.get("kind") != "Status" and isinstance(obj.get("metadata"), Mapping):
                md = obj["metadata"]
                answer = {"resource_version": md.get("resourceVersion"), "conditions": _conditions(obj),
                          "managed_fields": md.get("managedFields") or []}
            elif isinstance(obj, Mapping):  # a Status: the refusal's reason and message
                answer = {"reason": obj.get("reason"), "message": obj.get("message")}
        out[str(seq)] = {"label": f.metadata.get("kh_label") or f.comment or "", "method": req.method,
                         "path": req.path, "content_type": req.headers.get("content-type", ""), "body": body,
                         "status": resp.status_code if resp is not None else None, "answer": answer}
    return out


def write_writes(flows: Iterable[Any], path: Path) -> int:
    """Write `writes_from_flows(flows)` to `path` (JSON); returns how many writes. Raises OSError."""
    w = writes_from_flows(flows)
    path.write_text(json.dumps(w, indent=1, sort_keys=True))
    return len(w)


def load_writes(folder: Path) -> dict[str, dict[str, Any]]:
    """A bundle's writes.json; made from its flows.mitm when the bundle predates writes.json; {} when
    neither can be read."""
    p = folder / WRITES_FILE
    try:
        data = json.loads(p.read_bytes())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        pass
    mitm = folder / "flows.mitm"
    if not mitm.is_file():
        return {}
    from mitmproxy import io as mio
    from mitmproxy.exceptions import FlowReadException

    flows = []
    try:
        with open(mitm, "rb") as fh:
            for f in mio.FlowReader(fh).stream():
                flows.append(f)
    except (FlowReadException, OSError, ValueError):
        pass
    return writes_from_flows(flows)


# ---- managedFields of the final objects -----------------------------------------------------------

def split_managed_fields(objs: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[dict[str, list], dict[str, list]]:
    """(the objects without metadata.managedFields, {"Kind ns/name": managedFields}) of an objects.yaml
    mapping ({"workloads": [...], ...}). The input is not changed."""
    kinds = {"workloads": "Workload", "jobs": "Job", "clusterqueues": "ClusterQueue", "cohorts": "Cohort"}
    plain: dict[str, list] = {}
    managed: dict[str, list] = {}
    for group, items in objs.items():
        plain[group] = []
        for o in items or []:
            md = dict(o.get("metadata") or {})
            mf = md.pop("managedFields", None)
            plain[group].append({**o, "metadata": md})
            if mf:
                ns = f"{md['namespace']}/" if md.get("namespace") else ""
                managed[f"{kinds.get(group, group)} {ns}{md.get('name')}"] = mf
    return plain, managed


def load_managed(folder: Path) -> dict[str, list]:
    """A bundle's managed-fields.yaml ({"Kind ns/name": managedFields}); {} if absent or unreadable."""
    try:
        data = yaml.safe_load((folder / MANAGED_FILE).read_bytes())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def conditions_owned(entry: Mapping[str, Any]) -> list[str]:
    """The condition types one managedFields entry owns in status.conditions (from its fieldsV1 keys
    'k:{"type":"Evicted"}'), sorted."""
    fields = entry.get("fieldsV1") if isinstance(entry, Mapping) else None
    conds = ((fields or {}).get("f:status") or {}).get("f:conditions") or {} if isinstance(fields, Mapping) else {}
    out = []
    for k in conds if isinstance(conds, Mapping) else ():
        if k.startswith("k:"):
            try:
                out.append(str(json.loads(k[2:]).get("type")))
            except (ValueError, AttributeError):
                continue
    return sorted(out)


def _owners(managed: Sequence[Mapping[str, Any]]) -> list[str]:
    """"kueue-admission (Apply, status): Admitted, QuotaReserved" per managedFields entry that owns
    conditions."""
    out = []
    for m in managed or []:
        if not isinstance(m, Mapping):
            continue
        owned = conditions_owned(m)
        if owned:
            sub = f", {m['subresource']}" if m.get("subresource") else ""
            out.append(f"`{m.get('manager')}` ({m.get('operation')}{sub}): {', '.join(owned)}")
    return out


# ---- report.md ---------------------------------------------------------------------------------------------

def _query(path: str) -> dict[str, str]:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(path).query))


def _types(body: Any) -> list[str]:
    return [str(c.get("type")) for c in _conditions(body)] if isinstance(body, Mapping) else []


def _rv(w: Mapping[str, Any]) -> int | None:
    try:
        return int((w.get("answer") or {}).get("resource_version"))
    except (TypeError, ValueError):
        return None


def decisive_flows(history: Sequence[Mapping[str, Any]]) -> list[int]:
    """The flows a fault rule touched (held, failed, delayed, reset, timed out), in the order Kueue sent
    them."""
    touched = {int(e["flow"]) for e in history if e.get("source") == "proxy" and e.get("event") in FAULT_EVENTS
               and isinstance(e.get("flow"), int)}
    sent = {int(e["flow"]): e["ts"] for e in history if e.get("source") == "proxy" and e.get("event") == "request"
            and isinstance(e.get("flow"), int)}
    return sorted(touched, key=lambda f: (sent.get(f, float("inf")), f))


def _fate(history: Sequence[Mapping[str, Any]], flow: int, t0: float) -> str:
    """What happened to a flow in the proxy, with times since the case started (as the diagram)."""
    parts = []
    for e in history:
        if e.get("source") != "proxy" or e.get("flow") != flow:
            continue
        t = f"{e['ts'] - t0:.3f}s"
        ev = e.get("event")
        if ev == "request":
            parts.append(f"sent {t}")
        elif ev == "held":
            what = "the answer" if e.get("stage") == "response" else "the request"
            parts.append(f"{what} held as {e.get('hold')} by rule `{e.get('rule')}` {t}")
        elif ev == "released":
            parts.append(f"{e.get('hold')} released {t} ({e.get('why')})")
        elif ev == "failed" and e.get("stage") == "response":
            parts.append(f"the answer replaced with {e.get('status')} by rule `{e.get('rule')}` {t}")
        elif ev == "failed":
            parts.append(f"answered {e.get('status')} by the proxy, rule `{e.get('rule')}` {t} (kube-apiserver "
                         "never saw it)")
        elif ev in ("delayed", "reset", "hold_expired", "hold_timeout"):
            parts.append(f"{ev.replace('_', ' ')} by rule `{e.get('rule')}` {t}")
        elif ev == "response":
            rv = f" rv {e.get('resource_version')}" if e.get("resource_version") else ""
            parts.append(f"Kueue got {e.get('status')}{rv} {t}")
    return "; ".join(parts) or "-"


def flow_fates(history: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """{flow: its fate as `race_section` words it} for every flow a fault rule touched (the comments of
    the bundle's flows.mitm, which `mitmweb -r` shows)."""
    t0 = case_t0(history)
    evs = _by_flow(history, decisive_flows(history))  # one pass: 7,000 failed evictions x 21,000 events was 220 s
    return {f: _fate(evs[f], f, t0) for f in evs}


def _statuses(body: Any) -> dict[str, str]:
    return {str(c.get("type")): str(c.get("status")) for c in _conditions(body)}


def _removed_by(writes: Mapping[str, Mapping[str, Any]], order: Sequence[int]) -> list[str]:
    """Sentences, one per forced server-side apply among the flows `order` that kube-apiserver applied:
    what it did to the conditions of the write applied just before it on the same object by the same
    field manager (any of `writes`): conditions whose status it turned, and conditions its body leaves
    out, which server-side apply removes because that manager owned them."""
    out = []

    def base_path(w: Mapping[str, Any]) -> str:
        return str(w.get("path", "")).split("?")[0]

    applied = sorted(((int(k), w) for k, w in writes.items() if k.isdigit() and isinstance(w, Mapping)
                      and w.get("status") == 200 and _rv(w) is not None), key=lambda fw: _rv(fw[1]))
    for fb in order:
        b = writes.get(str(fb))
        if not isinstance(b, Mapping) or b.get("status") != 200 or _rv(b) is None:
            continue
        qb = _query(str(b.get("path", "")))
        if "apply" not in str(b.get("content_type")) or qb.get("force") != "true":
            continue
        before = [(fa, a) for fa, a in applied if _rv(a) < _rv(b) and base_path(a) == base_path(b)
                  and _query(str(a.get("path", ""))).get("fieldManager") == qb.get("fieldManager")]
        if not before:
            continue
        fa, a = before[-1]
        sa, sb = _statuses(a.get("body")), _statuses(b.get("body"))
        after = {str(c.get("type")) for c in (b.get("answer") or {}).get("conditions") or []}
        turned = [f"{t} {sa[t]}→{sb[t]}" for t in sb if t in sa and sa[t] != sb[t]]
        gone = [t for t in sa if t not in sb and t not in after]
        if not turned and not gone:
            continue
        did = []
        if turned:
            did.append(f"it turned {', '.join(turned)}")
        if gone:
            did.append(f"its body has no {', '.join(gone)} condition, so server-side apply removed "
                       f"{'it' if len(gone) == 1 else 'them'} (that manager owned {'it' if len(gone) == 1 else 'them'})")
        out.append(f"flow {fb} ({b.get('label')}), applied after flow {fa} ({a.get('label')}) (resourceVersion "
                   f"{_rv(b)} after {_rv(a)}), is a forced server-side apply (`force=true`) by the same field "
                   f"manager `{qb.get('fieldManager')}`: {'; '.join(did)}. Its answer has conditions "
                   f"{', '.join(sorted(after)) or 'none'}.")
    return out


def _by_flow(history: Sequence[Mapping[str, Any]], flows: Iterable[int]) -> dict[int, list[Mapping[str, Any]]]:
    """{flow: its proxy events in history order} for `flows`."""
    out: dict[int, list[Mapping[str, Any]]] = {f: [] for f in flows}
    for e in history:
        if e.get("source") == "proxy" and isinstance(e.get("flow"), int) and e["flow"] in out:
            out[e["flow"]].append(e)
    return out


def _likeness(evs: Sequence[Mapping[str, Any]], w: Mapping[str, Any]) -> tuple:
    """What makes two decisive writes alike: the rules that touched them, the kind of write, the object,
    and the outcome (what the proxy did, at which stage, with which status; not when, nor hold ids)."""
    req = next((e for e in evs if e.get("event") == "request"), {})
    wr = req.get("write") if isinstance(req.get("write"), Mapping) else {}
    what = (wr.get("write"), wr.get("kind"), wr.get("namespace"), wr.get("name")) if wr else (w.get("label"),)
    rules = tuple(sorted({str(e.get("rule")) for e in evs if e.get("event") in FAULT_EVENTS}))
    outcome = tuple((e.get("event"), e.get("stage"), e.get("status")) for e in evs
                    if e.get("event") in FAULT_EVENTS + ("released", "response"))
    return rules, what, outcome, w.get("status")


def _write_section(f: int, w: Mapping[str, Any], evs: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]],
                   names: Names, t0: float) -> tuple[list[str], str]:
    """One decisive write's section ("### flow N: label", its table, its body) and what it says apart from
    its fate (to tell whether two alike writes differ in anything but their times)."""
    label = names.text(str(w.get("label") or next((e.get("label") for e in evs if e.get("label")), f"flow {f}")))
    out = [f"### flow {f}: {label}", ""]
    rows = [["in the proxy", _fate(evs, f, t0)]]
    # A fail or reset rule at the request stage answers in kube-apiserver's place.
    by_proxy = any(e.get("event") in ("failed", "reset") and e.get("stage") == "request" for e in evs)
    if w:
        q = _query(str(w.get("path", "")))
        mode = "server-side apply" if "apply" in str(w.get("content_type")) else str(w.get("content_type") or "-")
        rows.append(["request", f"{w.get('method')} `{w.get('path', '')}`"])
        rows.append(["field manager", f"`{q.get('fieldManager', '-')}`, {mode}"
                                      + (", forced (`force=true`)" if q.get("force") == "true" else "")])
        body = w.get("body")
        meta = body.get("metadata") if isinstance(body, Mapping) else None
        strict = isinstance(meta, Mapping) and bool(meta.get("resourceVersion"))
        rows.append(["conditions in the body", ", ".join(f"{c.get('type')}={c.get('status')}"
                                                        for c in _conditions(body)) or "none"])
        rows.append(["precondition", "resourceVersion " + str(meta.get("resourceVersion")) if strict
                     else "none (loose: no metadata.resourceVersion in the body)"])
        ans = w.get("answer") or {}
        if w.get("status") is not None:
            got = f"{w.get('status')}"
            if ans.get("resource_version"):
                got += f", resourceVersion {ans['resource_version']}, conditions " + (
                    ", ".join(f"{c.get('type')}={c.get('status')}" for c in ans.get("conditions") or []) or "none")
            elif ans.get("reason"):
                got += f" {ans.get('reason')}: {names.text(str(ans.get('message', '')))}"
            rows.append(["the proxy answered (kube-apiserver never saw the request)" if by_proxy
                         else "kube-apiserver answered", got])
        owners = _owners(ans.get("managed_fields") or [])
        if owners:
            rows.append(["status.conditions owned after it (the answer's managedFields)", "<br>".join(owners)])
    out += _table(rows) + [""]
    text = ""
    if w.get("body") is not None:
        text = json.dumps(w["body"], indent=1) if not isinstance(w["body"], str) else w["body"]
        if len(text) > BODY_SHOWN:
            text = text[:BODY_SHOWN] + f"\n… ({len(text) - BODY_SHOWN} more characters in writes.json)"
        out += ["<details><summary>request body (redacted)</summary>", "", "```json", text.replace("```", "'''"),
                "```", "", "</details>", ""]
    return out, _TIMESTAMP.sub("·", json.dumps(rows[1:]) + text)


def race_section(history: Sequence[Mapping[str, Any]], names: Names, writes: Mapping[str, Mapping[str, Any]],
                 managed: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Markdown lines of "The writes that decided the verdict" ([] when no fault rule touched a flow): per
    write its fate in the proxy, the conditions its body sets, the field manager and apply mode, the
    answer's owners of status.conditions, its request body (redacted, in a collapsed block); then what a
    later forced apply removed, and the final objects' owners of status.conditions. Writes alike (the same
    rules, kind of write, object and outcome: a `fail` rule with `times: null` failing one write again and
    again, kubernetes-sigs/kueue#14863) are shown once: the first, the last when it differs in more than
    its times, and "…and N more like it (flows a–b)" for the rest, with when they were sent."""
    order = decisive_flows(history)
    if not order:
        return []
    t0 = case_t0(history)
    out = ["## The writes that decided the verdict", "",
           "The writes a fault rule touched, as the proxy recorded them (bodies from flows.mitm, redacted; "
           "writes.json has them whole). Times are seconds since the case started, as in the timeline. Writes "
           "alike (the same rules, kind of write, object and outcome) are shown once: the first, and the last "
           "when it differs in more than its times.", ""]
    if writes.get("_error"):
        out += [f"writes.json could not be made from the flows ({writes['_error']}); flows.mitm has the bodies.", ""]
    elif not writes:
        out += ["The bundle has no writes.json and no readable flows.mitm, so the bodies cannot be shown.", ""]
    evs = _by_flow(history, order)
    groups: dict[tuple, list[int]] = {}
    for f in order:
        groups.setdefault(_likeness(evs[f], writes.get(str(f)) or {}), []).append(f)
    for members in groups.values():
        first, last = members[0], members[-1]
        lines, said = _write_section(first, writes.get(str(first)) or {}, evs[first], history, names, t0)
        out += lines
        if len(members) == 1:
            continue
        last_lines, last_said = _write_section(last, writes.get(str(last)) or {}, evs[last], history, names, t0)
        shown_last = last_said != said
        rest = members[1:-1] if shown_last else members[1:]
        if rest:
            sent = [e["ts"] - t0 for f in rest for e in evs[f] if e.get("event") == "request"]
            when = (f", sent from {min(sent):.3f}s to {max(sent):.3f}s" if len(sent) > 1
                    else f", sent {sent[0]:.3f}s" if sent else "")
            flows = f"flows {rest[0]}–{rest[-1]}" if len(rest) > 1 else f"flow {rest[0]}"
            out += [f"…and {len(rest)} more like it ({flows}{when}): the same rules, write, object and outcome as "
                    f"flow {first}" + ("" if shown_last else ", differing only in times (when sent, lastTransitionTime)")
                    + "; writes.json has each.", ""]
        if shown_last:
            out += last_lines
    proofs = _removed_by(writes, order)
    if proofs:
        out += ["**What the forced apply did:** " + " ".join(names.text(p) for p in proofs), ""]
    touched = {str(e.get("name")) for e in history if e.get("source") == "proxy" and e.get("event") == "response"
               and e.get("flow") in order and e.get("name")}
    final = [(k, v) for k, v in managed.items() if k.split("/")[-1] in touched]
    if final:
        out += ["Final owners of status.conditions (managed-fields.yaml):", ""]
        out += _table([[names.text(k), "<br>".join(_owners(v)) or "none"] for k, v in final],
                      head=["object", "manager (operation, subresource): conditions"]) + [""]
    return out


def _table(rows: Sequence[Sequence[str]], head: Sequence[str] = ("", "")) -> list[str]:
    def cell(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", "<br>")

    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows])
