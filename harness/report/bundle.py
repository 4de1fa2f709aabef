"""Reading a bundle: history.jsonl and its schema (HISTORY_FIELDS, docs/history.md), objects.yaml,
bundle.json's checker selection, and the re-check (the same checker composition the run used).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.checkers import Finding, Selection, compose
from harness.errors import HarnessError
from harness.names import Names

BUNDLE_SCHEMA = 1


class BundleError(HarnessError):
    """A bundle folder or archive cannot be read; the message names the missing or broken file."""


# =====================================================================================================
# Reading a bundle


def load_history(path: Path) -> list[dict[str, Any]]:
    """history.jsonl as a list of events in file order. Raises BundleError on a malformed line."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise BundleError(f"cannot read {path}: {e}. A bundle needs history.jsonl (docs/evidence.md).") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise BundleError(f"{path}:{i}: not JSON ({e})") from None
        if not isinstance(ev, dict) or "ts" not in ev or "event" not in ev:
            raise BundleError(f"{path}:{i}: an event needs `ts` and `event` (docs/history.md)")
        out.append(ev)
    return out


def load_objects(path: Path) -> dict[str, list[dict[str, Any]]]:
    """objects.yaml ({"workloads": [...], "jobs": [...], "clusterqueues": [...]}); {} if absent or a
    comment only (the harness could not read the final state)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError:
        return {}
    except yaml.YAMLError as e:
        raise BundleError(f"{path}: not YAML ({e})") from None
    return data if isinstance(data, dict) else {}


#: The fields each (source, event) of history.jsonl carries besides ts/source/event (docs/history.md is
#: the prose of this table; `history_problems` holds a history to it). Optional fields are not listed.
HISTORY_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("harness", "case_started"): ("case", "namespace"),
    ("harness", "queues_created"): ("cluster_queue", "local_queue", "nominal_cpu"),
    ("harness", "job_created"): ("job", "priority", "cpu"),
    ("harness", "plan_loaded"): ("plan", "rules"),
    ("harness", "plan_step"): ("rule", "why"),
    ("harness", "held"): ("hold", "label"),
    ("harness", "released"): ("hold", "label"),
    ("harness", "admission_answered"): ("status", "resource_version"),
    ("harness", "watch_delivered"): ("resource_version",),
    ("harness", "observed"): ("what",),
    ("harness", "verdict"): ("invariant", "held"),
    ("harness", "holds_released_at_end"): ("holds",),
    ("harness", "case_finished"): (),
    ("monitor", "quota_violation_started"): ("finding", "used_milli", "allowed_milli", "workloads"),
    ("monitor", "quota_violation_cleared"): ("finding",),
    ("monitor", "reservation_mismatch_started"): ("mismatch",),
    ("monitor", "reservation_mismatch_cleared"): ("mismatch",),
    ("monitor", "watch_error"): ("error",),
    ("harness", "teardown_problem"): ("problem",),
    ("harness", "case_objects_deleted"): ("namespace",),
    ("harness", "case_objects_not_deleted"): ("error",),
    ("harness", "kueue_restart"): ("kill",),  # optional: rule (a plan's process fault)
    ("harness", "oversubscription_lasted"): ("persisted",),
    ("proxy", "flow_error"): ("flow", "error"),
    ("proxy", "rule_added"): ("rule",),
    ("proxy", "request"): ("flow", "method", "path", "write"),
    ("proxy", "held"): ("flow", "hold", "rule", "stage", "label"),
    ("proxy", "released"): ("flow", "hold", "rule", "stage", "label", "why"),
    ("proxy", "failed"): ("flow", "rule", "stage", "status", "label"),
    ("proxy", "hold_expired"): ("flow", "hold", "rule", "label"),
    ("proxy", "hold_timeout"): ("flow", "hold", "rule", "label", "then"),
    ("proxy", "delayed"): ("flow", "rule", "stage", "seconds", "label"),
    ("proxy", "reset"): ("flow", "rule", "stage", "label"),
    ("proxy", "response"): ("flow", "status", "resource_version", "label", "write", "namespace", "name"),
    ("proxy", "watch_event"): ("flow", "type", "namespace", "name", "resource_version", "conditions", "admission"),
    ("proxy", "watch_event_dropped"): ("flow", "rule", "type", "namespace", "name", "resource_version"),
    ("proxy", "watch_event_delayed"): ("flow", "rule", "seconds", "due", "type", "namespace", "name",
                                       "resource_version"),
    ("proxy", "watch_events_undelivered"): ("flow", "lines"),
    ("proxy", "signalled"): ("rule", "action", "why"),
    ("proxy", "signal_done"): ("rule", "action", "ok", "since_signalled"),
    ("kueue", "log"): ("msg", "fields"),
}
WRITE_FIELDS = ("kind", "namespace", "name", "write", "method", "subresource", "field_manager", "patch_type",
                "strict", "resource_version", "conditions", "admission_cluster_queue")


def history_problems(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where a history departs from docs/history.md: events out of time order, unknown (source, event)
    pairs, missing fields. Returns one line per problem (at most one per kind of event), [] if none."""
    problems: dict[str, str] = {}
    last = float("-inf")
    for i, e in enumerate(history, 1):
        if not isinstance(e.get("ts"), (int, float)):
            problems.setdefault("ts", f"event {i}: `ts` is not a number")
            continue
        if e["ts"] < last:
            problems.setdefault("order", f"event {i} ({e.get('event')}): earlier than the event before it")
        last = max(last, e["ts"])
        key = (str(e.get("source")), str(e.get("event")))
        if key not in HISTORY_FIELDS:
            problems.setdefault(repr(key), f"event {i}: unknown source/event {key[0]}/{key[1]}")
            continue
        missing = [f for f in HISTORY_FIELDS[key] if f not in e]
        if key == ("proxy", "request") and isinstance(e.get("write"), Mapping):
            missing += [f"write.{f}" for f in WRITE_FIELDS if f not in e["write"]]
        if missing:
            problems.setdefault(repr(key), f"event {i} ({key[0]}/{key[1]}): missing {', '.join(missing)}")
    return list(problems.values())


# =====================================================================================================
# Checkers live in harness/checkers/; the report runs the same composition the case's verdict came from.


#: What ran before bundles recorded their checkers (bundle schema 1 without "checkers").
LEGACY_SELECTION = {"liveness": {}, "quota": {}, "log_flood": {}, "reservation": {}}


def selection_of(meta: Mapping[str, Any], bound: float | None = None) -> Selection:
    """The checkers (and parameters) the run used, from bundle.json; `bound` (seconds) overrides the
    liveness bound when given."""
    declared = meta.get("checkers") or LEGACY_SELECTION
    chosen = {k: dict(v or {}) for k, v in declared.items()}
    if bound is not None and "liveness" in chosen:
        chosen["liveness"]["bound"] = bound
    return Selection(chosen)


def recheck(history: Sequence[Mapping[str, Any]], objects: Mapping[str, Any],
            bound: float | None = None, names: Names | None = None,
            selection: Selection | None = None) -> tuple[str, list[Finding]]:
    """Run the checkers over a history. Returns (verdict, findings): "error" when an assumption failed,
    "reproduced" if a bearing check was violated, "inconclusive" if one was undecided, else "passed".
    `selection` defaults to the liveness, quota, log-flood and reservation checkers."""
    v = compose(selection or selection_of({}, bound), history, objects, names)
    return v.verdict, v.findings
