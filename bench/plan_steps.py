"""How fast plan steps and fact triggers are, and how reliably the scheduler barrier puts two Workloads in
one scheduling cycle, on the real components (docs/fault-plans.md, Steps and "A scheduler barrier").

Starts a local environment (binaries cached) and runs a Nemesis (harness/nemesis/runner.py) the way a case does;
each round loads the barrier plan below into a namespace of its own and measures, from the proxy's events
and Kueue's log:

- trigger → step signalled (the barrier's `held` → step w1's `signalled`, both in the proxy);
- signalled → done per step kind (create, patch, delete): the Nemesis reading the proxy's events, then
  its API calls;
- a Kueue log line → its `fact` in the proxy → the hold waiting for it released;
- whether w1 and w2 were "Attempting to schedule workload" in one cycle (and the barrier's own cycle).

    .venv/bin/python bench/plan_steps.py --rounds 10

Writes bench/results/<date>-plan-steps.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load, quiet_say, summary, write_result  # noqa: E402

from harness import objects as o  # noqa: E402
from harness.common.waiting import wait_for  # noqa: E402
from harness.env.local import LocalEnvironment  # noqa: E402
from harness.kueue import log as kueue_log  # noqa: E402
from harness.nemesis.runner import Nemesis  # noqa: E402
from harness.plan.load import parse_plan  # noqa: E402

PLAN = """
apiVersion: kueue-harness/v1
kind: FaultPlan
name: bench-barrier
rules:
  - id: barrier
    match: {write: pending, name: barrier}
    action: hold
    release:
      after: [{step: w2}, {log: 'Workload create event .*workload=${namespace}/w2 '}]
      timeout: 60
steps:
  - id: queues
    create:
      - {builder: resource_flavor, args: ["${namespace}-rf"]}
      - {builder: cluster_queue, args: ["${namespace}-a"], with: [{flavor_quota: {flavor: "${namespace}-rf", cpu: "1"}}]}
      - {builder: cluster_queue, args: ["${namespace}-b"], with: [{flavor_quota: {flavor: "${namespace}-rf", cpu: "1"}}]}
      - {builder: local_queue, args: {name: lq-a, cluster_queue: "${namespace}-a"}}
      - {builder: local_queue, args: {name: lq-b, cluster_queue: "${namespace}-b"}}
  - id: queues-ready
    wait: {object: LocalQueue/lq-b, condition: Active}
  - id: barrier-objects
    create: {builder: barrier}
  - id: w1
    after: [{rule: barrier, state: held}]
    create: {builder: workload, args: {name: w1}, with: [{queue: lq-a}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
  - id: w2
    create: {builder: workload, args: {name: w2}, with: [{queue: lq-b}, {pod_set: {name: main, count: 1, cpu: "1"}}]}
  - id: w1-reserved
    after: [{rule: barrier, state: released}]
    wait: {object: Workload/w1, condition: QuotaReserved}
    timeout: 30
  - id: deactivate-w1
    patch: {object: Workload/w1, merge: {spec: {active: false}}}
  - id: cleanup
    delete: Workload/barrier
"""


def _one(events: list[dict], **want) -> dict:
    return next(e for e in events if all(e.get(k) == v for k, v in want.items()))


def round_(env, nem_factory, cluster: o.Cluster, i: int) -> dict:
    ns = f"bench-steps-{i}-{int(time.time()) % 10000}"
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    env.proxy.begin_case()
    nem = nem_factory(ns).start()
    plan = parse_plan(PLAN, "bench-barrier.yaml", namespace=ns)
    env.proxy.load_plan(plan)
    try:
        wait_for(lambda: next((e for e in env.proxy.case_events() if e["event"] == "signal_done"
                               and e.get("rule") == "cleanup"), None), timeout=90, interval=0.05,
                 what="the plan's last step")
    finally:
        nem.stop(30)
        for r in plan.rules:
            env.proxy.remove_rule(r.id)
    ev = env.proxy.case_events()
    done = {e["rule"]: e for e in ev if e["event"] == "signal_done"}
    fired = {e["rule"]: e for e in ev if e["event"] == "signalled"}
    held = _one(ev, event="held", rule="barrier")
    released = _one(ev, event="released", rule="barrier")
    fact = _one(ev, event="fact", rules=["barrier"])
    cycles: dict[str, list[int]] = {}
    for line in kueue_log.lines(env.kueue_log):
        wl = line.get("workload") or {}
        if line.get("msg") == "Attempting to schedule workload" and wl.get("namespace") == ns:
            cycles.setdefault(wl["name"], []).append(line.get("schedulingCycle"))
    return {"namespace": ns, "ok": all(d["ok"] for d in done.values()),
            "held_to_w1_signalled": fired["w1"]["ts"] - held["ts"],
            "signalled_to_done": {k: done[k]["since_signalled"] for k in ("queues", "barrier-objects", "w1", "w2",
                                                                           "deactivate-w1", "cleanup")},
            "log_to_fact": fact["ts"] - fact["detail"]["log_ts"], "fact_to_released": released["ts"] - fact["ts"],
            "w2_done_to_fact": fact["ts"] - done["w2"]["ts"],
            "cycles": cycles, "one_cycle": bool(cycles.get("w1")) and cycles.get("w1", [None])[0] == cycles.get("w2", [0])[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--kueue-version", default=None)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    kw = {"kueue_version": args.kueue_version} if args.kueue_version else {}
    env = LocalEnvironment.start(artifacts=Path("artifacts") / f"bench-plan-steps-{time.strftime('%H%M%S')}" / "env",
                                 say=quiet_say(), **kw)
    try:
        c = o.Cluster(env.api_client())

        def factory(ns: str) -> Nemesis:
            return Nemesis(env.proxy, api_client=env.api_client(), kueue_log=env.kueue_log, namespace=ns)

        started_load = load()
        rounds = [round_(env, factory, c, i) for i in range(args.rounds)]
        kinds = {"create": ("queues", "barrier-objects", "w1", "w2"), "patch": ("deactivate-w1",),
                 "delete": ("cleanup",)}
        result = {
            "kueue_version": env.kueue_version, "load_before": started_load, "load_after": load(),
            "rounds": rounds,
            "all_steps_ok": sum(r["ok"] for r in rounds),
            "w1_w2_in_one_cycle": sum(r["one_cycle"] for r in rounds),
            "trigger_to_signalled_s": summary([r["held_to_w1_signalled"] for r in rounds], 4),
            **{f"signalled_to_done_{k}_s": summary([r["signalled_to_done"][s] for r in rounds for s in steps], 4)
               for k, steps in kinds.items()},
            "log_line_to_fact_s": summary([r["log_to_fact"] for r in rounds], 4),
            "fact_to_hold_released_s": summary([r["fact_to_released"] for r in rounds], 4),
        }
        print(f"{args.rounds} rounds on Kueue {env.kueue_version}: steps ok {result['all_steps_ok']}, w1 and w2 in one "
              f"cycle {result['w1_w2_in_one_cycle']}")
        for k in ("trigger_to_signalled_s", "signalled_to_done_create_s", "signalled_to_done_patch_s",
                  "signalled_to_done_delete_s", "log_line_to_fact_s", "fact_to_hold_released_s"):
            s = result[k]
            print(f"  {k}: p50 {s['p50'] * 1000:.1f} ms, p90 {s['p90'] * 1000:.1f} ms, max {s['max'] * 1000:.1f} ms")
        write_result("plan-steps" + (f"-{args.tag}" if args.tag else ""), result)
    finally:
        env.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
