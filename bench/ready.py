"""Environment ready time with binaries cached: start the local environment (etcd + kube-apiserver +
kube-controller-manager + proxy + Kueue) N times, each until Kueue's webhooks answer (and
kube-controller-manager is ready) and then until a new ClusterQueue turns Active; print the medians, each
component's spawn-to-ready time and when it was ready. Optionally profile one extra start with py-spy
(wall clock, the harness process and its Python children).

    .venv/bin/python bench/ready.py --runs 10 [--profile] [--kueue-version v0.17.0] [--no-proxy]
        [--no-template] [--full-readyz] [--apiserver-flag=--FLAG=VALUE ...] [--pods start|lazy] [--tag NAME]

"Warm" means the binaries and the etcd template of the Kueue build are cached: a start that had to make
the template (the first one for a build) is reported apart as the cold start and not counted; another
start replaces it. Experiments (what they change is in this process only, nothing is kept):
`--no-template` starts etcd empty and installs the CRDs (KUEUE_HARNESS_ETCD_TEMPLATE=0);
`--full-readyz` waits for every kube-apiserver readiness check even from a template;
`--apiserver-flag` adds a kube-apiserver flag (repeatable).
`--pods start` starts kube-scheduler and kwok with the environment (LocalEnvironment.start(pods=True));
`--pods lazy` starts them after the ClusterQueue is Active (start_pods(), what a case's `pods` marker does).
Either way a kwok Node is then created and a Pod bound to it: the time until the Node is schedulable and
the Pod Running and Ready is reported apart (`pods_*` keys). `--ab pods` compares a start with Pods (B)
with one without (A).
`--ab VARIANT` compares a variant with the current start, runs alternating (A, B, A, B, ...: the load of
a shared machine hits both alike), `--runs` pairs; variants: AB_VARIANTS.

Writes bench/results/<date>-ready[-<tag>].json. Not a test: it prints figures. Every environment is stopped.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, Profiler, categorize, load, print_profile, quiet_say, read_stacks, top_frames, write_result  # noqa: E402

from harness import objects as o  # noqa: E402
from harness.common.waiting import wait_for  # noqa: E402
from harness.env import control_plane  # noqa: E402
from harness.env import pods as pods_part  # noqa: E402
from harness.env.local import LocalEnvironment  # noqa: E402
from harness.kueue import versions  # noqa: E402

#: What the harness does inside each profiled step: the outermost frame that matches wins.
_PROBE = [("process spawn", ("Popen",)), ("probe: TLS handshake (a new connection per probe)", ("do_handshake",)),
          ("probe: sleep between probes", ("nap.py",)), ("probe: waiting for the answer", ("SSLSocket.read", "SSLSocket.recv"))]
FOCUS = {
    "_install_kueue_manifests": [
        ("CRD create calls", ("create_custom_resource_definition",)),
        ("waiting for the CRDs to be Established (polls + sleeps)", ("_wait_established",)),
        ("waiting for the template's CRDs in discovery", ("_crds_served",)),
        ("webhook configurations", ("_install_webhooks",)),
        ("YAML parsing of Kueue's manifests", ("load_all",)),
        ("namespace create", ("create_namespace",)),
        ("API client setup", ("api_client", "_find_and_load")),
    ],
    "_wait_apiserver": _PROBE, "_wait_controller_manager": _PROBE, "_wait_etcd": _PROBE,
    "_start_kueue": [("webhook dry-run probe", ("_webhooks_answer",)), *_PROBE],
    "_pki": [("key generation", ("generate_private_key", "rsa_keypair", "make_ca")), ("certificates", ("issue",))],
    "_etcd_template": [("key (hash of the CRDs)", ("key (env/etcd_template.py)",)), ("lookup", ("find",)),
                       ("making the template", ("_make_etcd_template",))],
}

#: Components, spawn → ready (overlapping), and when each was ready (seconds from the start call).
STEPS = ["etcd_template", "pki", "etcd", "kube_apiserver", "proxy", "kueue_manifests", "kueue",
         "kube_controller_manager", "kube_scheduler", "kwok"]
READY_AT = ["etcd", "proxy", "kube_apiserver_serving", "kube_apiserver", "kueue_manifests", "kueue",
            "kube_apiserver_healthz", "kube_controller_manager", "kube_scheduler", "kwok"]
#: With --pods: what each start reports about Pods that run (seconds).
POD_KEYS = ["pods_lazy_start_seconds", "pods_node_schedulable_seconds", "pods_pod_running_seconds",
            "pods_total_seconds"]
_KLOG_TS = re.compile(r"^[IWE](\d{4}) (\d\d:\d\d:\d\d\.\d+)")


def apiserver_boot(log: Path) -> dict[str, float] | None:
    """From kube-apiserver's log: seconds from its first line to "Serving securely" (its own boot, before
    the post-start hooks and readiness checks)."""
    if not log.is_file():
        return None
    first = serving = None
    for line in log.read_text(errors="replace").splitlines():
        m = _KLOG_TS.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(2), "%H:%M:%S.%f")
        if first is None:
            first = t
        if serving is None and "Serving securely on" in line:
            serving = t
            break
    if first is None or serving is None:
        return None
    return {"first_line_to_serving_s": round((serving - first).total_seconds(), 3)}


def pods_run(env, c: o.Cluster) -> dict:
    """Pods that run, once kube-scheduler and kwok are up: a kwok Node until schedulable, then a Pod (no
    Kueue) until Running and Ready on it. Seconds of each step."""
    t = time.monotonic()
    pods_part.create_nodes(c, [o.node("bench-node")], timeout=60)
    t_node = time.monotonic()
    c.core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench-pod"},
                                             "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    wait_for(lambda: pods_part.pod_running_and_ready(c.api.sanitize_for_serialization(
        c.core.read_namespaced_pod("bench-pod", "default"))), timeout=60, what="bench-pod Running and Ready",
             interval=0.02)
    return {"pods_node_schedulable_seconds": round(t_node - t, 3),
            "pods_pod_running_seconds": round(time.monotonic() - t_node, 3)}


def one_start(version: str, artifacts: Path, with_proxy: bool, tag: str, pods: str = "") -> dict:
    """Start, create a ResourceFlavor + ClusterQueue, wait until it is Active; with `pods` ("start": with the
    environment, "lazy": now) kube-scheduler and kwok, a Node and a Pod (pods_run); stop. Returns the timings."""
    before = load()
    t_call = time.monotonic()
    env = None
    extra: dict = {}
    try:
        env = LocalEnvironment.start(version, artifacts=artifacts, say=quiet_say(f"[bench ready {tag}]"),
                                     with_proxy=with_proxy, pods=pods == "start")
        t_ready = time.monotonic()
        c = o.Cluster(env.api_client())
        c.create(o.resource_flavor("bench-rf"))
        c.create(o.cluster_queue("bench-cq").flavor_quota("bench-rf", cpu="10"))
        wait_for(lambda: o.is_true(c.get("ClusterQueue", "bench-cq"), "Active"), timeout=60,
                 what="ClusterQueue bench-cq to be Active", interval=0.05)
        t_active = time.monotonic()
        if pods == "lazy":
            env.start_pods()
            extra["pods_lazy_start_seconds"] = round(time.monotonic() - t_active, 3)
        if pods:
            extra.update(pods_run(env, c))
            extra["pods_total_seconds"] = round(time.monotonic() - t_call, 3)  # call → a Pod Running
        st = dict(env.started)
        template = env.template.key if env.template else None
        extra["processes"] = sorted(env.procs.procs)
    finally:
        if env is not None:
            env.stop()
    steps = {k: round(st.get(f"{k}_seconds", 0.0), 3) for k in STEPS if f"{k}_seconds" in st}
    kueue_readyz = st.get("kueue_readyz_seconds")
    if kueue_readyz is not None:
        steps["kueue_process_to_readyz"] = round(kueue_readyz, 3)
        steps["kueue_readyz_to_webhooks"] = round(st["kueue_seconds"] - kueue_readyz, 3)
    return {
        "ready_seconds": round(st["ready_seconds"], 3),  # start of the start steps → Kueue's webhooks answer
        "before_start_seconds": round(t_ready - t_call - st["ready_seconds"], 3),  # reap + ensure binaries
        "cluster_queue_active_seconds": round(t_active - t_ready, 3),
        "ready_to_cq_active_seconds": round(t_active - t_call, 3),  # everything, call → ClusterQueue Active
        "steps": steps, "ready_at": {k.removesuffix("_at").removesuffix("_ready"): round(v, 3)
                                     for k, v in sorted(st.items(), key=lambda kv: kv[1]) if k.endswith("_at")},
        "etcd_template": template, "template_made_seconds": round(st["etcd_template_made_seconds"], 2)
        if "etcd_template_made_seconds" in st else None,
        "kube_apiserver_log": apiserver_boot(artifacts / "kube-apiserver.log"),
        "load_before": before, "load_after": load(), "pods": pods or None, **extra,
    }


#: `--ab` variants: what each changes in this process (harness.env.control_plane settings, environment variables).
AB_VARIANTS = {
    "apf-off": {"flags": ("--enable-priority-and-fairness=false",)},
    "groups-off": {"flags": ("--runtime-config=autoscaling/v1=false,autoscaling/v2=false,policy/v1=false,"
                             "certificates.k8s.io/v1=false",)},
    "watch-cache-off": {"flags": ("--watch-cache=false",)},
    "endpoint-reconciler-none": {"flags": ("--endpoint-reconciler-type=none",)},
    "proxy-after-serving": {"proxy_after_serving": True},
    "etcd-default-election": {"etcd_flags": ("--heartbeat-interval=100", "--election-timeout=1000")},
    "rbac": {"flags": ("--authorization-mode=RBAC", "--runtime-config=rbac.authorization.k8s.io/v1=true",
                       "--anonymous-auth=true")},
    "full-readyz": {"full_readyz": True},
    "no-template": {"env": {"KUEUE_HARNESS_ETCD_TEMPLATE": "0"}},
    "pods": {"pods": "start"},
    "kcm-without-node-lifecycle": {"kcm_controllers": tuple(c for c in control_plane.KCM_CONTROLLERS
                                                            if c != "node-lifecycle-controller")},
}


def apply_variant(v: dict) -> dict:
    """Apply `v` (AB_VARIANTS entry); returns what to restore."""
    saved = {"flags": control_plane.APISERVER_EXTRA_FLAGS, "proxy_after_serving": control_plane.PROXY_AFTER_SERVING,
             "etcd_flags": control_plane.ETCD_EXTRA_FLAGS, "kcm_controllers": control_plane.KCM_CONTROLLERS,
             "readyz": control_plane._TEMPLATE_READYZ_EXCLUDES, "env": {k: os.environ.get(k) for k in v.get("env", {})}}
    control_plane.APISERVER_EXTRA_FLAGS = tuple(control_plane.APISERVER_EXTRA_FLAGS) + tuple(v.get("flags", ()))
    control_plane.ETCD_EXTRA_FLAGS = tuple(control_plane.ETCD_EXTRA_FLAGS) + tuple(v.get("etcd_flags", ()))
    control_plane.PROXY_AFTER_SERVING = v.get("proxy_after_serving", control_plane.PROXY_AFTER_SERVING)
    control_plane.KCM_CONTROLLERS = v.get("kcm_controllers", control_plane.KCM_CONTROLLERS)
    if v.get("full_readyz"):
        control_plane._TEMPLATE_READYZ_EXCLUDES = ()
    os.environ.update(v.get("env", {}))
    return saved


def restore(saved: dict) -> None:
    control_plane.APISERVER_EXTRA_FLAGS, control_plane.PROXY_AFTER_SERVING = saved["flags"], saved["proxy_after_serving"]
    control_plane.ETCD_EXTRA_FLAGS = saved["etcd_flags"]
    control_plane.KCM_CONTROLLERS = saved["kcm_controllers"]
    control_plane._TEMPLATE_READYZ_EXCLUDES = saved["readyz"]
    for k, val in saved["env"].items():
        if val is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = val


def ab(a, art: Path) -> int:
    """`--ab`: A = the current start, B = the variant, alternating, `--runs` pairs; medians and paired differences."""
    variant = AB_VARIANTS[a.ab]
    one_start(a.kueue_version, art / "warm-up-A", not a.no_proxy, "warm-up", a.pods)  # the templates, page cache
    saved = apply_variant(variant)
    try:
        one_start(a.kueue_version, art / "warm-up-B", not a.no_proxy, "warm-up", variant.get("pods", a.pods))
    finally:
        restore(saved)
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    for i in range(a.runs):
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            saved = apply_variant(variant) if side == "B" else None
            try:
                r = one_start(a.kueue_version, art / f"{side}{i}", not a.no_proxy, f"{side}{i + 1}/{a.runs}",
                              variant.get("pods", a.pods) if side == "B" else a.pods)
            finally:
                if saved is not None:
                    restore(saved)
            runs[side].append(r)
            print(f"{side} {i + 1}/{a.runs}: total {r['ready_to_cq_active_seconds']:.2f}s, ready {r['ready_seconds']:.2f}s "
                  f"(load {r['load_before']['loadavg_1m']})", flush=True)
    med = {side: {k: round(statistics.median(r[k] for r in rs), 3) for k in ("ready_seconds", "ready_to_cq_active_seconds")}
           for side, rs in runs.items()}
    diff = [b["ready_to_cq_active_seconds"] - a_["ready_to_cq_active_seconds"] for a_, b in zip(runs["A"], runs["B"])]
    print(f"\nA (current) median: ready {med['A']['ready_seconds']:.2f}s, total {med['A']['ready_to_cq_active_seconds']:.2f}s")
    print(f"B ({a.ab}) median: ready {med['B']['ready_seconds']:.2f}s, total {med['B']['ready_to_cq_active_seconds']:.2f}s")
    print(f"B - A per pair, total: median {statistics.median(diff):+.2f}s (min {min(diff):+.2f}, max {max(diff):+.2f}); "
          f"B faster in {sum(d < 0 for d in diff)}/{len(diff)} pairs")
    write_result(f"ready-ab-{a.ab}" + (f"-{a.tag}" if a.tag else ""), {
        "kueue_version": a.kueue_version, "variant": a.ab, "variant_settings": variant, "pairs": a.runs,
        "medians": med, "b_minus_a_total_s": {"median": round(statistics.median(diff), 3), "all": [round(d, 3) for d in diff]},
        "b_faster_pairs": sum(d < 0 for d in diff), "runs": runs, "artifacts": str(art)})
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kueue-version", default=versions.DEFAULT_KUEUE_VERSION)
    ap.add_argument("--no-proxy", action="store_true", help="start Kueue direct (no proxy step)")
    ap.add_argument("--profile", action="store_true", help="profile one extra start with py-spy (not counted)")
    ap.add_argument("--no-template", action="store_true", help="experiment: no etcd template (CRDs installed per start)")
    ap.add_argument("--full-readyz", action="store_true",
                    help="experiment: wait for every kube-apiserver readiness check also from a template")
    ap.add_argument("--apiserver-flag", action="append", default=[], metavar="--FLAG=VALUE",
                    help="experiment: an extra kube-apiserver flag (repeatable)")
    ap.add_argument("--ab", choices=sorted(AB_VARIANTS), help="compare a variant with the current start (alternating)")
    ap.add_argument("--pods", choices=("start", "lazy"), default="",
                    help="Pods that run: kube-scheduler + kwok with the environment (start) or after it (lazy), "
                         "then a Node and a Pod")
    ap.add_argument("--tag", default="", help="suffix for the results file name (e.g. smoke)")
    a = ap.parse_args()
    if not 1 <= a.runs <= 20:
        ap.error("--runs must be 1..20")
    if a.ab:
        return ab(a, ROOT / "artifacts" / f"bench-ready-ab-{time.strftime('%Y%m%d-%H%M%S')}")
    if a.no_template:
        os.environ["KUEUE_HARNESS_ETCD_TEMPLATE"] = "0"
    if a.full_readyz:
        control_plane._TEMPLATE_READYZ_EXCLUDES = ()
    if a.apiserver_flag:
        control_plane.APISERVER_EXTRA_FLAGS = tuple(a.apiserver_flag)
    art = ROOT / "artifacts" / f"bench-ready-{time.strftime('%Y%m%d-%H%M%S')}"
    runs, cold = [], []
    i = 0
    while len(runs) < a.runs and i < a.runs + 3:
        r = one_start(a.kueue_version, art / f"run{i}", not a.no_proxy, f"{len(runs) + 1}/{a.runs}", a.pods)
        i += 1
        if r["template_made_seconds"] is not None:
            cold.append(r)
            print(f"cold start (made the etcd template in {r['template_made_seconds']:.1f}s): ready "
                  f"{r['ready_seconds']:.2f}s, total {r['ready_to_cq_active_seconds']:.2f}s; not counted", flush=True)
            continue
        runs.append(r)
        print(f"start {len(runs)}/{a.runs}: ready {r['ready_seconds']:.2f}s, ClusterQueue Active "
              f"+{r['cluster_queue_active_seconds']:.2f}s, total {r['ready_to_cq_active_seconds']:.2f}s "
              f"(load {r['load_before']['loadavg_1m']})", flush=True)

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in runs), 3)

    step_names = [k for k in runs[0]["steps"] if all(k in r["steps"] for r in runs)]
    step_medians = {k: round(statistics.median(r["steps"][k] for r in runs), 3) for k in step_names}
    ready_at = {k: round(statistics.median(r["ready_at"][k] for r in runs), 3) for k in READY_AT
                if all(k in r["ready_at"] for r in runs)}
    boots = [r["kube_apiserver_log"]["first_line_to_serving_s"] for r in runs if r["kube_apiserver_log"]]
    variant = {"etcd_template": not a.no_template, "full_readyz": a.full_readyz,
               "apiserver_extra_flags": list(a.apiserver_flag), "with_proxy": not a.no_proxy, "pods": a.pods or None}
    print(f"\nEnvironment ready (Kueue {a.kueue_version}, {'direct' if a.no_proxy else 'through the proxy'}; "
          f"{variant}), median of {len(runs)}:")
    print(f"  to Kueue's webhooks answering      {med('ready_seconds'):6.2f} s  "
          f"(min {min(r['ready_seconds'] for r in runs):.2f}, max {max(r['ready_seconds'] for r in runs):.2f})")
    print(f"  + a ClusterQueue turning Active    {med('cluster_queue_active_seconds'):6.2f} s")
    print(f"  whole call → ClusterQueue Active   {med('ready_to_cq_active_seconds'):6.2f} s  "
          f"(max {max(r['ready_to_cq_active_seconds'] for r in runs):.2f}; includes "
          f"{med('before_start_seconds'):.2f} s reaping + binary checks)")
    print("  per component, spawn → ready (median s; they overlap):")
    for k, v in step_medians.items():
        print(f"    {k:<28} {v:6.2f}")
    print("  ready at (median s after the start steps began):")
    for k, v in ready_at.items():
        print(f"    {k:<28} {v:6.2f}")
    if boots:
        print(f"  kube-apiserver, its first log line → serving TLS: median {statistics.median(boots):.2f} s")
    pod_medians = {k: round(statistics.median(r[k] for r in runs), 3) for k in POD_KEYS if all(k in r for r in runs)}
    if pod_medians:
        print(f"  Pods that run ({a.pods}), median s:")
        for k, v in pod_medians.items():
            print(f"    {k:<34} {v:6.2f}")
    result = {
        "kueue_version": a.kueue_version, "kubernetes_version": versions.KUBERNETES_VERSION,
        "with_proxy": not a.no_proxy, "variant": variant, "runs": runs, "cold_starts": cold,
        "median": {"ready_seconds": med("ready_seconds"), "cluster_queue_active_seconds": med("cluster_queue_active_seconds"),
                   "ready_to_cq_active_seconds": med("ready_to_cq_active_seconds"),
                   "before_start_seconds": med("before_start_seconds")},
        "max_ready_to_cq_active_seconds": max(r["ready_to_cq_active_seconds"] for r in runs),
        "step_medians": step_medians, "ready_at_medians": ready_at,
        "kube_apiserver_first_line_to_serving_median_s": round(statistics.median(boots), 3) if boots else None,
        "pods": a.pods or None, "pods_medians": pod_medians,
        "target_seconds": 3.0, "target_met": med("ready_to_cq_active_seconds") <= 3.0, "artifacts": str(art),
    }
    if a.profile:
        result["profile"] = profile_start(a, art)
    write_result("ready" + (f"-{a.tag}" if a.tag else ""), result)
    return 0


def profile_start(a, art: Path) -> dict:
    """One extra start under py-spy (--idle: wall clock, --subprocesses: mitmdump too)."""
    raw = art / "profile" / "ready.pyspy.raw"
    with Profiler(os.getpid(), raw, rate=100, idle=True, subprocesses=True):
        r = one_start(a.kueue_version, art / "profile", not a.no_proxy, "profiled")
    stacks = read_stacks(raw)
    main_stacks = [(f, c) for f, c in stacks if any("_start_all" in x for x in f)]
    cats = categorize(main_stacks, [
        ("etcd template (key, lookup, copy)", ("_etcd_template", "copy_data")),
        ("process spawns", ("_spawn_",)),
        ("etcd wait", ("_wait_etcd", "_etcd_listening")),
        ("kube-apiserver: waiting until it serves TLS", ("_apiserver_answers",)),
        ("kube-apiserver /readyz wait", ("_wait_apiserver",)),
        ("CRDs served + webhooks install", ("_install_kueue_manifests",)),
        ("waiting for the helper threads (the proxy's start; kube-apiserver /healthz, then kube-controller-manager's spawn)",
         ("Future.result",)),
        ("Kueue /readyz + webhook wait", ("_start_kueue",)),
        ("kube-controller-manager wait", ("_wait_controller_manager",)),
        ("PKI (key generation)", ("_pki",)),
    ], outermost=True)
    # The helper threads (harness.env.control_plane._in_helper): what they spent their time on.
    helper_stacks = [(f, c) for f, c in stacks if any("_start_proxy" in x or "_when_healthy" in x for x in f)]
    helpers = categorize(helper_stacks, [
        ("proxy start (mitmdump up, control channel answers)", ("_start_proxy",)),
        ("waiting for kube-apiserver /healthz, then spawning kube-controller-manager", ("_when_healthy",)),
    ], outermost=True)
    per_step, focus = {}, {}
    for fn in FOCUS:
        per_step[fn] = top_frames(read_stacks(raw, within=fn), n=8)
        focus[fn] = categorize(read_stacks(raw, within=fn), FOCUS[fn], outermost=True)
    print(f"\nprofiled start: ready {r['ready_seconds']:.2f}s; wall-clock share of the start (main thread):")
    for k, v in cats.items():
        print(f"  {v['share']:>6.1%}  {k}")
    print("helper threads (samples at 100 Hz):")
    for k, v in helpers.items():
        print(f"  {v['samples']:>5d}  {k}")
    slow = max(((k, v) for k, v in per_step.items()), key=lambda kv: kv[1]["samples"])
    print_profile(f"inside the longest step ({slow[0]})", slow[1], n=8)
    for fn, cats_ in focus.items():
        if cats_:
            print(f"  {fn}: " + ", ".join(f"{k} {v['share']:.0%}" for k, v in cats_.items()))
    return {"run": r, "raw": str(raw), "wall_clock_share": cats, "helper_threads": helpers, "per_step": per_step, "focus": focus,
            "slowest_profiled": slow[0]}


if __name__ == "__main__":
    sys.exit(main())
