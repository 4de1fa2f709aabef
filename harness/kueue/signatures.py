"""Root-cause signatures of known bugs: what a perturbed run's writes show when a violation comes from a bug
that is already reported (bug.yaml `signature:`, harness/kueue/bugs.py). `kueue-harness explore` tests them on
every violating run and records a match as that bug ("known", counted apart) instead of a finding, so its search
moves on (docs/explore.md, "Known bugs").

A signature is a mapping with one kind key, and optionally `violates` (the checkers whose violations it explains:
#11480's stuck preemption is `liveness`, its oversubscription `quota`). Kinds:

- `late_write: {write: CLASS, strict: BOOL, after: [CLASS, …]}` — a Workload status write of class `write`
  (harness/kueue/api.py WRITE_CLASSES; `strict`: whether it carried metadata.resourceVersion, left out = either)
  was sent before, and applied (answered 200) after, a write of one of the `after` classes to the same Workload
  was applied. kubernetes-sigs/kueue#11480: the scheduler's loose admission, sent from a goroutine with a copy
  taken before the preemption, lands after the Workload's eviction or quota release and overwrites it.

The events read are those of a perturbed run's explore.json (harness/explore/plugin.py `result`): `request`
({ts, flow, write: {kind, name, write, strict, …}}) and `response` ({ts, flow, status, write: CLASS, name}).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from harness.common.errors import HarnessError

KINDS = {"late_write": {"write", "strict", "after"}}


def check(sig: Any, where: str) -> dict[str, Any]:
    """`sig` validated (one kind and its keys; optional `violates`: the checkers whose violations it explains);
    returns it. Raises HarnessError naming `where`."""
    kinds = [k for k in sig if k in KINDS] if isinstance(sig, Mapping) else []
    if len(kinds) != 1 or set(sig) - {kinds[0], "violates"}:
        raise HarnessError(f"{where}: signature must be one of {', '.join(KINDS)} with its keys (and optionally "
                           "violates: [checker, …]), e.g. {late_write: {write: admission, strict: false, after: "
                           "[eviction, quota_release]}, violates: [quota]}")
    kind, body = kinds[0], sig[kinds[0]]
    if not isinstance(body, Mapping) or not set(body) <= KINDS[kind] or "write" not in body or not body.get("after"):
        raise HarnessError(f"{where}: signature {kind} takes {', '.join(sorted(KINDS[kind]))} (write and after required)")
    if "strict" in body and not isinstance(body["strict"], bool):
        raise HarnessError(f"{where}: signature {kind}: strict is true or false")
    violates = sig.get("violates", [])
    if not isinstance(violates, list) or not all(isinstance(v, str) for v in violates):
        raise HarnessError(f"{where}: signature violates: a list of checker names (liveness, quota, …)")
    return {kind: dict(body), **({"violates": list(violates)} if violates else {})}


def explains(sig: Mapping[str, Any], key: str) -> bool:
    """Whether a violation `key` ("quota:cq", "liveness:job2:stuck": harness/explore/findings.py) is of a checker
    the signature explains (every checker without `violates`)."""
    return not sig.get("violates") or key.split(":", 1)[0] in sig["violates"]


def matches(sig: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> str | None:
    """Why `events` show the signature `sig` (one line), or None when they do not."""
    kind = next(k for k in sig if k in KINDS)
    if kind == "late_write":
        return _late_write(sig[kind], list(events))
    return None


def _late_write(body: Mapping[str, Any], events: list[Mapping[str, Any]]) -> str | None:
    after = set(body["after"]) if isinstance(body["after"], (list, tuple)) else {body["after"]}
    sent: dict[Any, Mapping[str, Any]] = {}
    for e in events:
        w = e.get("write")
        if e.get("event") == "request" and isinstance(w, Mapping) and w.get("kind") == "Workload" \
                and w.get("write") == body["write"] and ("strict" not in body or w.get("strict") == body["strict"]):
            sent[e.get("flow")] = e
    applied = [(e.get("name"), e.get("write"), float(e["ts"])) for e in events
               if e.get("event") == "response" and e.get("status") == 200 and e.get("write") in after]
    for e in events:
        req = sent.get(e.get("flow")) if e.get("event") == "response" and e.get("status") == 200 else None
        if req is None:
            continue
        name, t_sent, t_applied = req["write"].get("name"), float(req["ts"]), float(e["ts"])
        for other, cls, t in applied:
            if other == name and t_sent < t < t_applied:
                how = "loose " if body.get("strict") is False else ""
                return (f"the {how}{body['write']} of Workload {name}, sent {t - t_sent:.3f}s before its {cls} was "
                        f"applied, was applied {t_applied - t:.3f}s after it")
    return None
