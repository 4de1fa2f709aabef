"""`pytest CASE --plan FILE` on the real components (Kueue v0.17.0 by default), in a child pytest as a user
runs it:

- the plan's first step waits for nothing, so the proxy signals it the moment the plan loads, while the case
  is still being set up (harness/explore/plugin.py); a later step waits for a Kueue log line (a fact trigger)
  that Kueue logs during set-up too. The case's Nemesis starts before the plan loads (the `case` fixture),
  so both run: every step done ok, the fact seen, the verdict `passed` (it was `error`: "step queues was
  still running when the case was judged");
- the same command again with the same `--artifacts-dir`: the first run's evidence stays as it was and the
  second run's goes to <dir>/<run-id>, said on stderr (docs/evidence.md).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASE = "cases/kueue_11480/test_stuck_preemption.py::test_stuck_preemption_control"

PLAN = r"""apiVersion: kueue-harness/v1
kind: FaultPlan
name: first-steps
steps:
  - id: queues
    create:
      - {builder: resource_flavor, args: ["${namespace}-prf"]}
      - {builder: cluster_queue, args: ["${namespace}-pcq"], with: [{flavor_quota: {flavor: "${namespace}-prf", cpu: "1"}}]}
      - {builder: local_queue, args: {name: plq, cluster_queue: "${namespace}-pcq"}}
  - id: plq-active
    wait: {object: LocalQueue/plq, condition: Active}
  - id: after-reconcile
    after: [{log: 'Reconcile ClusterQueue .*name=${namespace}-pcq\b'}]
    create: {builder: local_queue, args: {name: plq2, cluster_queue: "${namespace}-pcq"}}
"""


def _run(plan: Path, art: Path, kueue_version: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", CASE, "-q", "-p", "no:cacheprovider", f"--plan={plan}",
                           f"--artifacts-dir={art}", f"--kueue-version={kueue_version}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_plans_first_steps_run_and_a_reused_artifacts_dir_keeps_the_first_run(tmp_path: Path,
                                                                                kueue_version: str) -> None:
    plan = tmp_path / "first-steps.yaml"
    plan.write_text(PLAN)
    art = tmp_path / "art"
    r = _run(plan, art, kueue_version)
    out = r.stdout + r.stderr
    [case] = json.loads((art / "summary.json").read_text())["cases"]
    assert case["verdict"] == "passed", (case, out)
    [d] = [p for p in (art / "cases").iterdir() if p.is_dir()]
    h = [json.loads(x) for x in (d / "history.jsonl").read_text().splitlines()]
    done = {e["rule"]: e for e in h if e.get("event") == "signal_done"}
    assert set(done) == {"queues", "plq-active", "after-reconcile"} and all(e["ok"] for e in done.values()), done
    signalled = {e["rule"]: e for e in h if e.get("event") == "signalled"}
    body = next(e for e in h if e.get("source") == "harness" and e.get("event") == "queues_created")
    # The first step fired when the plan loaded, during set-up, before the case's body began.
    assert signalled["queues"]["ts"] < body["ts"], (signalled["queues"], body)
    assert signalled["after-reconcile"]["why"].startswith("triggers: "), signalled["after-reconcile"]
    fact = next(e for e in h if e.get("event") == "fact" and "after-reconcile" in (e.get("rules") or ()))
    print(f"\nfirst step signalled {body['ts'] - signalled['queues']['ts']:.3f} s before the body's first step; "
          f"log fact {fact['what']!r}; steps: " + ", ".join(f"{k} {v.get('seconds')} s" for k, v in done.items()))

    first = _digest(art)
    r2 = _run(plan, art, kueue_version)
    out2 = r2.stdout + r2.stderr
    assert f"kueue-harness: {art} already holds a run (" in r2.stderr, out2
    second = Path(r2.stderr.split("so this run's goes to ", 1)[1].split()[0])
    assert second.parent == art, second
    assert json.loads((second / "summary.json").read_text())["cases"][0]["verdict"] == "passed", out2
    # Every file of the first run is as it was (the second run's folder is new, inside art).
    now = _digest(art)
    assert {k: v for k, v in now.items() if not k.startswith(second.name + "/")} == first
    assert {"summary.json", "env/kueue.log", "env/proxy-events.jsonl"} <= set(first)
