"""Offline warnings for a valid plan: rules that can never match what Kueue writes (`plan validate`,
`up --plan`)."""

from __future__ import annotations

from harness.plan.load import Plan


def name_warnings(plan: Plan) -> list[str]:
    """Offline warnings for a valid plan: "file:line: WARNING: …" for each rule that matches Workload
    writes (a `write` class, `kind: Workload` or `resource: workloads`) by a literal `match.name` with no
    glob, while no step of the plan creates a Workload of that name. Kueue names the Workload of a Job
    `job1` `job-job1-<5 hex>` (jobframework.GetWorkloadNameForOwnerWithGVK: <kind>-<name>-<hash>), so
    `name: job1` can never match it; the session says the same at run time once such a write came by
    (harness/proxy/addons/state.py near_miss_hint). [] when there is nothing to warn about."""
    from harness.kueue.api import WRITE_CLASSES

    created = set()
    for r in plan.rules:
        if r.id in plan.steps and r.action == "create":
            for obj in r.param("create") or []:
                if isinstance(obj, dict) and obj.get("kind") == "Workload":
                    created.add(str((obj.get("metadata") or {}).get("name")))
    out = []
    for r in plan.rules:
        m = r.match
        if r.id in plan.steps or not m.name or any(c in m.name for c in "*?[") or m.name in created:
            continue
        if m.write in WRITE_CLASSES or m.kind == "Workload" or m.resource == "workloads":
            out.append(f"{plan.source}:{plan.lines.get(r.id, 1)}: WARNING: rule {r.id}: match.name {m.name!r} is a "
                       f"literal name, but Kueue names a Job's Workload job-<job name>-<hash>, so it never matches the "
                       f"Workload of a Job {m.name!r}: write match.name 'job-{m.name}-*' (keep {m.name!r} only for a "
                       "Workload created under that exact name)")
    return out
