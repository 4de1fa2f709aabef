"""Environment ready time with binaries cached: start the local environment (etcd + kube-apiserver +
kube-controller-manager + proxy + Kueue) N times, each until Kueue's webhooks answer and then until a new
ClusterQueue turns Active; print the median and each start step's median. Optionally profile one extra
start with py-spy (wall clock, the harness process and its Python children).

    .venv/bin/python bench/ready.py --runs 5 [--profile] [--kueue-version v0.17.0] [--no-proxy] [--libyaml]

`--libyaml` is an experiment: it makes this process parse Kueue's CRD manifests with libyaml, to measure
what that change in harness/env/local.py would save (results file <date>-ready-libyaml.json).

Writes bench/results/<date>-ready.json. Not a test: it prints figures. Every environment is stopped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Profiler, categorize, load, print_profile, quiet_say, read_stacks, top_frames, write_result  # noqa: E402

from harness import objects as o  # noqa: E402
from harness import versions  # noqa: E402
from harness.env.local import LocalEnvironment  # noqa: E402
from harness.waiting import wait_for  # noqa: E402

#: What the harness does inside each profiled step: the outermost frame that matches wins.
_PROBE = [("process spawn", ("Popen",)), ("probe: TLS handshake (a new connection per probe)", ("do_handshake",)),
          ("probe: sleep between probes", ("nap.py",)), ("probe: waiting for the answer", ("SSLSocket.read", "SSLSocket.recv"))]
FOCUS = {
    "_install_kueue_manifests": [
        ("CRD create calls", ("create_custom_resource_definition",)),
        ("waiting for the CRDs to be Established (polls + sleeps)", ("wait_for",)),
        ("webhook configurations", ("_install_webhooks",)),
        ("YAML parsing of Kueue's manifests", ("load_all",)),
        ("namespace create", ("create_namespace",)),
        ("API client setup", ("api_client", "_find_and_load")),
    ],
    "_start_apiserver": _PROBE, "_start_controller_manager": _PROBE,
    "_start_kueue": [("webhook dry-run probe", ("_webhooks_answer",)), *_PROBE],
    "_pki": [("key generation", ("generate_private_key", "rsa_keypair", "make_ca")), ("certificates", ("issue",))],
}

STEPS = ["pki", "etcd", "kube_apiserver", "kueue_manifests", "kube_controller_manager", "proxy", "kueue"]


def one_start(version: str, artifacts: Path, with_proxy: bool, tag: str) -> dict:
    """Start, create a ResourceFlavor + ClusterQueue, wait until it is Active, stop. Returns the timings."""
    before = load()
    t_call = time.monotonic()
    env = None
    try:
        env = LocalEnvironment.start(version, artifacts=artifacts, say=quiet_say(f"[bench ready {tag}]"),
                                     with_proxy=with_proxy)
        t_ready = time.monotonic()
        c = o.Cluster(env.api_client())
        c.create(o.resource_flavor("bench-rf"))
        c.create(o.cluster_queue("bench-cq").flavor_quota("bench-rf", cpu="10"))
        wait_for(lambda: o.is_true(c.get("ClusterQueue", "bench-cq"), "Active"), timeout=60,
                 what="ClusterQueue bench-cq to be Active", interval=0.05)
        t_active = time.monotonic()
        st = dict(env.started)
    finally:
        if env is not None:
            env.stop()
    steps = {k: round(st.get(f"{k}_seconds", 0.0), 3) for k in STEPS if f"{k}_seconds" in st}
    kueue_readyz = st.get("kueue_readyz_seconds")
    if kueue_readyz is not None:
        steps["kueue_process_to_readyz"] = round(kueue_readyz, 3)
        steps["kueue_readyz_to_webhooks"] = round(st["kueue_seconds"] - kueue_readyz, 3)
    return {
        "ready_seconds": round(st["ready_seconds"], 3),  # start of PKI → Kueue's webhooks answer
        "before_start_seconds": round(t_ready - t_call - st["ready_seconds"], 3),  # reap + ensure binaries
        "cluster_queue_active_seconds": round(t_active - t_ready, 3),
        "ready_to_cq_active_seconds": round(t_active - t_call, 3),  # everything, call → ClusterQueue Active
        "steps": steps, "load_before": before, "load_after": load(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kueue-version", default=versions.DEFAULT_KUEUE_VERSION)
    ap.add_argument("--no-proxy", action="store_true", help="start Kueue direct (no proxy step)")
    ap.add_argument("--profile", action="store_true", help="profile one extra start with py-spy (not counted)")
    ap.add_argument("--libyaml", action="store_true",
                    help="experiment: parse Kueue's manifests with libyaml (yaml.CSafeLoader) in this process")
    ap.add_argument("--tag", default="", help="suffix for the results file name (e.g. smoke)")
    a = ap.parse_args()
    if a.libyaml:
        import yaml

        def _c_safe_load_all(stream):  # what local.py would get from Loader=yaml.CSafeLoader
            return yaml.load_all(stream, Loader=yaml.CSafeLoader)

        yaml.safe_load_all = _c_safe_load_all
    if not 1 <= a.runs <= 20:
        ap.error("--runs must be 1..20")
    art = ROOT / "artifacts" / f"bench-ready-{time.strftime('%Y%m%d-%H%M%S')}"
    runs = []
    for i in range(a.runs):
        r = one_start(a.kueue_version, art / f"run{i}", not a.no_proxy, f"{i + 1}/{a.runs}")
        runs.append(r)
        print(f"start {i + 1}/{a.runs}: ready {r['ready_seconds']:.2f}s, ClusterQueue Active "
              f"+{r['cluster_queue_active_seconds']:.2f}s, total {r['ready_to_cq_active_seconds']:.2f}s "
              f"(load {r['load_before']['loadavg_1m']})", flush=True)

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in runs), 3)

    step_names = list(runs[0]["steps"])
    step_medians = {k: round(statistics.median(r["steps"][k] for r in runs), 3) for k in step_names}
    top_level = {k: v for k, v in step_medians.items() if k in STEPS}
    slowest = max(top_level, key=top_level.get)
    print(f"\nEnvironment ready (Kueue {a.kueue_version}, {'direct' if a.no_proxy else 'through the proxy'}), "
          f"median of {len(runs)}:")
    print(f"  to Kueue's webhooks answering      {med('ready_seconds'):6.2f} s  "
          f"(min {min(r['ready_seconds'] for r in runs):.2f}, max {max(r['ready_seconds'] for r in runs):.2f})")
    print(f"  + a ClusterQueue turning Active    {med('cluster_queue_active_seconds'):6.2f} s")
    print(f"  whole call → ClusterQueue Active   {med('ready_to_cq_active_seconds'):6.2f} s  "
          f"(max {max(r['ready_to_cq_active_seconds'] for r in runs):.2f}; includes "
          f"{med('before_start_seconds'):.2f} s reaping + binary checks)")
    print("  steps (median s):")
    for k, v in step_medians.items():
        mark = "  <- slowest" if k == slowest else ""
        print(f"    {k:<28} {v:6.2f}{mark}")
    result = {
        "kueue_version": a.kueue_version, "kubernetes_version": versions.KUBERNETES_VERSION,
        "with_proxy": not a.no_proxy, "libyaml_experiment": a.libyaml, "runs": runs,
        "median": {"ready_seconds": med("ready_seconds"), "cluster_queue_active_seconds": med("cluster_queue_active_seconds"),
                   "ready_to_cq_active_seconds": med("ready_to_cq_active_seconds"),
                   "before_start_seconds": med("before_start_seconds")},
        "max_ready_to_cq_active_seconds": max(r["ready_to_cq_active_seconds"] for r in runs),
        "step_medians": step_medians, "slowest_step": slowest, "target_seconds": 10.0,
        "target_met": med("ready_to_cq_active_seconds") <= 10.0, "artifacts": str(art),
    }
    if a.profile:
        result["profile"] = profile_start(a, art)
    write_result("ready" + ("-libyaml" if a.libyaml else "") + (f"-{a.tag}" if a.tag else ""), result)
    return 0


def profile_start(a, art: Path) -> dict:
    """One extra start under py-spy (--idle: wall clock, --subprocesses: mitmdump too)."""
    raw = art / "profile" / "ready.pyspy.raw"
    with Profiler(os.getpid(), raw, rate=100, idle=True, subprocesses=True):
        r = one_start(a.kueue_version, art / "profile", not a.no_proxy, "profiled")
    stacks = read_stacks(raw)
    main_stacks = [(f, c) for f, c in stacks if any("_start_all" in x for x in f)]
    cats = categorize(main_stacks, [
        ("kube-apiserver /readyz wait", ("_start_apiserver",)),
        ("Kueue /readyz + webhook wait", ("_start_kueue",)),
        ("kube-controller-manager wait", ("_start_controller_manager",)),
        ("CRDs + webhooks install", ("_install_kueue_manifests",)),
        ("proxy start", ("Proxy.start", "start (harness/proxy.py", "proxy.py")),
        ("etcd wait", ("_start_etcd",)),
        ("PKI (key generation)", ("_pki",)),
    ])
    per_step, focus = {}, {}
    for fn in ("_start_apiserver", "_start_kueue", "_install_kueue_manifests", "_start_controller_manager", "_pki"):
        per_step[fn] = top_frames(read_stacks(raw, within=fn), n=8)
        focus[fn] = categorize(read_stacks(raw, within=fn), FOCUS[fn], outermost=True)
    print(f"\nprofiled start: ready {r['ready_seconds']:.2f}s; wall-clock share of the start steps:")
    for k, v in cats.items():
        print(f"  {v['share']:>6.1%}  {k}")
    slow = max(((k, v) for k, v in per_step.items()), key=lambda kv: kv[1]["samples"])
    print_profile(f"inside the slowest step ({slow[0]})", slow[1], n=8)
    for fn, cats_ in focus.items():
        if cats_:
            print(f"  {fn}: " + ", ".join(f"{k} {v['share']:.0%}" for k, v in cats_.items()))
    return {"run": r, "raw": str(raw), "wall_clock_share": cats, "per_step": per_step, "focus": focus,
            "slowest_profiled": slow[0]}


if __name__ == "__main__":
    sys.exit(main())
