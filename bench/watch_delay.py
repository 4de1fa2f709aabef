"""How precise `delay_watch_events` is, and how long a plan's `restart_kueue` takes, on the real components.

Starts a local environment (binaries cached), runs the harness's Nemesis (harness/nemesis/runner.py) the way a
case does, and measures:

- watch delays: for each delay in --delays, --jobs Jobs whose Workloads' ADDED events are delayed; per
  event the proxy's own `late` (delivered − due time), held → delivered, and held → Kueue's "Workload
  create event" log line (Kueue's informer got it);
- process faults: --restarts plan restarts each with SIGTERM and SIGKILL (a `restart_kueue` rule without
  triggers fires when loaded): signalled → done, and the environment's restart time (until Kueue's
  webhooks answer).

    .venv/bin/python bench/watch_delay.py --jobs 10 --delays 1 3 --restarts 3

Writes bench/results/<date>-watch-delay.json.
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
from harness.plan.rules import Rule  # noqa: E402

NS = "bench-delay"


def _event(env, pred, timeout: float, what: str):
    return wait_for(lambda: next((e for e in env.proxy.case_events() if pred(e)), None), timeout=timeout,
                    interval=0.02, what=what)


def measure_delays(env, nem_factory, delay: float, jobs: int, round_: int) -> dict:
    c = o.Cluster(env.api_client())
    env.proxy.begin_case()
    rid = f"delay-{round_}"
    env.proxy.add_rule(Rule.from_dict({"id": rid, "action": "delay_watch_events", "delay": delay, "times": None,
                                       "match": {"name": f"job-r{round_}-*", "namespace": NS,
                                                 "event_type": "ADDED"}}))
    nem = nem_factory(f"{NS}-tick-{round_}").start()  # a fresh namespace: the last one may still be terminating
    names = []
    try:
        for i in range(jobs):
            c.create(o.job(f"r{round_}-{i}", NS).queue("lq").requests(cpu="10m"))
            wl = wait_for(lambda i=i: c.workload_for_job(NS, f"r{round_}-{i}"), timeout=30, what="the Workload")
            names.append(wl["metadata"]["name"])
            time.sleep(0.1 + (i % 5) * 0.07)  # spread the due times
        late, held_out, held_kueue = [], [], []
        for n in names:
            held = _event(env, lambda e, n=n: e["event"] == "watch_event_delayed" and e.get("name") == n, 30, "held")
            out = _event(env, lambda e, n=n: e["event"] == "watch_event" and e.get("name") == n
                         and e.get("delay_rule") == rid, delay + 30, "delivered")
            saw = wait_for(lambda n=n: next((kueue_log.parse_ts(l.get("ts")) for l in kueue_log.lines(env.kueue_log)
                                             if l.get("msg") == "Workload create event"
                                             and (l.get("workload") or {}).get("name") == n), None),
                           timeout=30, what="Kueue's create event")
            late.append(out["late"])
            held_out.append(out["ts"] - held["ts"])
            held_kueue.append(saw - held["ts"])
    finally:
        nem.stop(30)
        env.proxy.remove_rule(rid)
    return {"delay": delay, "events": len(names), "late_s": summary(late, 4),
            "held_to_delivered_s": summary(held_out, 4), "held_to_kueue_log_s": summary(held_kueue, 4)}


def measure_restarts(env, nem_factory, kill: bool, n: int) -> dict:
    since, env_seconds = [], []
    nem = nem_factory(None).start()
    try:
        for i in range(n):
            env.proxy.begin_case()
            rid = f"restart-{'kill' if kill else 'term'}-{i}"
            env.proxy.add_rule(Rule.from_dict({"id": rid, "action": "restart_kueue", "kill": kill}))
            done = _event(env, lambda e: e["event"] == "signal_done" and e.get("rule") == rid, 180, "the restart")
            assert done["ok"], done
            since.append(done["since_signalled"])
            env_seconds.append(done["seconds"])
            env.proxy.remove_rule(rid)
            time.sleep(1)
    finally:
        nem.stop(60)
    return {"kill": kill, "restarts": n, "signalled_to_done_s": summary(since, 3),
            "environment_restart_s": summary(env_seconds, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--delays", type=float, nargs="+", default=[1.0, 3.0])
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--kueue-version", default=None)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    kw = {"kueue_version": args.kueue_version} if args.kueue_version else {}
    env = LocalEnvironment.start(artifacts=Path("artifacts") / f"bench-watch-delay-{time.strftime('%H%M%S')}" / "env",
                                 say=quiet_say(), **kw)
    try:
        c = o.Cluster(env.api_client())
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        c.create(o.resource_flavor("bench-rf"))
        c.create(o.cluster_queue("bench-cq").flavor_quota("bench-rf", cpu="100"))
        c.create(o.local_queue("lq", NS, "bench-cq"))
        wait_for(lambda: o.is_true(c.get("ClusterQueue", "bench-cq"), "Active"), timeout=30, what="the ClusterQueue")

        def factory(tick_namespace: str | None) -> Nemesis:
            return Nemesis(env.proxy, restart=lambda kill, rule: env.restart_kueue(kill=kill),
                           api_client=env.api_client(), tick_namespace=tick_namespace)

        started_load = load()
        delays = [measure_delays(env, factory, d, args.jobs, r) for r, d in enumerate(args.delays)]
        restarts = [measure_restarts(env, factory, k, args.restarts) for k in (False, True)] if args.restarts else []
        result = {"kueue_version": env.kueue_version, "load_before": started_load, "load_after": load(),
                  "watch_delays": delays, "restarts": restarts}
        for d in delays:
            print(f"delay {d['delay']:g}s x{d['events']}: late p50 {d['late_s']['p50'] * 1000:.1f} ms, "
                  f"max {d['late_s']['max'] * 1000:.1f} ms; held->Kueue log p50 {d['held_to_kueue_log_s']['p50']:.3f} s")
        for r in restarts:
            print(f"restart {'SIGKILL' if r['kill'] else 'SIGTERM'} x{r['restarts']}: signalled->done p50 "
                  f"{r['signalled_to_done_s']['p50']:.2f} s (max {r['signalled_to_done_s']['max']:.2f})")
        write_result("watch-delay" + (f"-{args.tag}" if args.tag else ""), result)
    finally:
        env.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
