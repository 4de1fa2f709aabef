"""`kueue-harness`: the command line. `run` runs the cases under cases/ on real Kueue and prints a verdict
table; `up`/`status`/`holds`/`release`/`fail`/`plan load`/`logs`/`down` drive a long-running session by
hand; `build` builds the real components; `versions` lists what is pinned and served.

Exit codes: 0 every case got the verdict its Kueue version should give; 1 some case did not (or errored);
2-7 a foreseeable problem before any case ran (see harness/common/errors.py and README "When things go wrong").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from harness.common import paths
from harness.common.errors import HarnessError
from harness.kueue import bugs, versions

CASES_DIR = paths.CASES_DIR
#: What `run` and `matrix` run: every scenario folder under cases/ (pytest finds the cases; adding a bug
#: folder adds its cases, nothing is listed here).


def _spec(args: argparse.Namespace):
    """The Kueue build the command's --kueue-version/--kueue-ref/--kueue-source/--kueue-repo name."""
    from harness.build.kueue import KueueSpec

    return KueueSpec.from_options(args.kueue_version, getattr(args, "kueue_ref", None),
                                  getattr(args, "kueue_source", None), getattr(args, "kueue_repo", None),
                                  getattr(args, "kueue_patch", None))


def _add_kueue_options(p: argparse.ArgumentParser, what: str = "Kueue to run") -> None:
    p.add_argument("--kueue-version", default=os.environ.get("KUEUE_HARNESS_KUEUE_VERSION", versions.DEFAULT_KUEUE_VERSION),
                   help=f"{what}: a release tag (default {versions.DEFAULT_KUEUE_VERSION}), from the Go module proxy "
                        "where served, else built from --kueue-repo")
    p.add_argument("--kueue-ref", help="a branch, tag or commit of --kueue-repo instead (env KUEUE_HARNESS_KUEUE_REF)")
    p.add_argument("--kueue-source", help="a local Kueue working tree instead, uncommitted changes included "
                                          "(env KUEUE_HARNESS_KUEUE_SOURCE_DIR)")
    p.add_argument("--kueue-repo", help="Kueue git repository: URL, path, or .tar of a bare repository "
                                        f"(env KUEUE_HARNESS_KUEUE_REPO; default {versions.UPSTREAM_KUEUE_REPO})")
    p.add_argument("--kueue-patch", action="append", metavar="FILE",
                   help="a unified diff applied on top of --kueue-version/--kueue-ref before building (repeatable; "
                        "e.g. a one-line backport of a fix: cases/kueue_14863/backport.patch)")


def _cmd_run(args: argparse.Namespace) -> int:
    import pytest

    local = args.target == "local"
    spec = _spec(args)
    if not local and not spec.version:
        raise HarnessError(f"--target {args.target} installs Kueue from its release manifests: give --kueue-version TAG, "
                           "not --kueue-ref or --kueue-source")
    keep = args.keep_env and local
    if args.name and not keep:
        raise HarnessError("--name names the session that `run --keep-env` keeps (local target): give --keep-env too")
    if keep:
        from harness.cli import session

        name = session.check_name(args.name)
        rec = session.describe(name)
        # Said before anything is built (a session whose supervisor died is cleaned up by session.start).
        if rec is not None and rec["phase"] == "running":
            raise HarnessError(f"session {name} is already running (supervisor pid {rec['supervisor']['pid']}, Kueue "
                               f"{rec.get('kueue_version', '?')}): `run --keep-env` keeps its environment as a session "
                               f"of that name. Stop it with `kueue-harness down{session.name_option(name)}`, or "
                               "choose another name with --name")
        if rec is not None and rec["phase"] == "starting":
            raise HarnessError(f"another `kueue-harness up{session.name_option(name)}` is starting session {name} right "
                               "now: wait for it and stop it, or choose another name with --name")
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    from harness.build import binaries
    from harness.env.local import check_free_space
    from harness.env.runs import run_folder

    art, note = run_folder(args.artifacts_dir, run_id)  # never over an earlier run: beside it, inside
    art = art.resolve()
    if note:
        print(f"[kueue-harness] {note}", file=sys.stderr)

    art.mkdir(parents=True, exist_ok=True)
    # Foreseeable problems as one clear paragraph now, not as a fixture error inside pytest's report;
    # building here also keeps Go's progress lines apart from the cases' output.
    check_free_space(art)
    if local:
        binaries.ensure_all(spec)
        _kubectl_too(optional=True)  # for the first `up` afterwards; the cases do not need it
    targets = [str(CASES_DIR)]
    if args.k:
        targets += ["-k", args.k]
    pytest_args = [*targets, "-p", "no:cacheprovider", "-qq", "-rN", "--no-verdict-table", *spec.cli_args(),
                   f"--artifacts-dir={art}", f"--junitxml={art / 'junit.xml'}", f"--target={args.target}",
                   *(["--keep-env"] if args.keep_env and not local else []), *args.pytest_args]
    kept = None
    if keep:
        # The environment's processes die with the process that started them (PR_SET_PDEATHSIG), so the
        # cases run inside a session supervisor, on its environment, which stays up as session `name`.
        kept = session.start(name, spec, None, False, str(art), timeout=KEEP_ENV_TIMEOUT, cases=pytest_args,
                             again=f"kueue-harness run --keep-env{session.name_option(name)}")
        code = kept["cases"]["exit"]
        if code in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR):
            print(f"[kueue-harness] {session.stop(name)} (no case ran: nothing to keep)", file=sys.stderr)
            kept = None
    else:
        code = pytest.main(pytest_args)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise HarnessError(f"no case matched -k {args.k}: -k takes a pytest expression over case names, e.g. "
                           "-k stuck_preemption or -k 'not control'; `kueue-harness run -- --collect-only -q` lists "
                           "the cases" if args.k else f"no case was collected from {CASES_DIR}: is the checkout complete?")
    if code == pytest.ExitCode.USAGE_ERROR:
        extra = f" or the options after `--` ({' '.join(args.pytest_args)})" if args.pytest_args else ""
        raise HarnessError(f"pytest refused the cases folder {CASES_DIR}{extra}: its message is above")
    summary = art / "summary.json"
    if summary.exists():
        data = json.loads(summary.read_text())
        kb = data.get("kueue") or {}
        commit = f", commit {str(kb['commit'])[:10]}" if kb.get("commit") else ""
        print(f"\n{verdict_table_title(data)} on Kueue {data['kueue_version']}{commit} "
              f"(as the binary reported; kube-apiserver {data['kubernetes_version']}, target {data['target']}):")
        print(f"  {'case':<40} {'verdict':<11} {'expected':<11} {'seconds':>7}")
        for c in data["cases"]:
            bundle = c.get("bundle") or c.get("evidence") or ""
            rel = os.path.relpath(bundle, Path.cwd()) if bundle else ""
            print(f"  {c['case'].split('::')[-1]:<40} {c['verdict']:<11} {c.get('expected', ''):<11} "
                  f"{c['seconds']:>7.1f}  {rel}")
        print(f"Evidence: {art}  (summary.json, junit.xml, env/ logs and proxy events; per case: report.md, "
              "history.jsonl, flows, logs and a .tar.gz to attach to a bug report)")
    if kept is not None:
        n = session.name_option(name)
        print(f"""Environment kept as session {name} (supervisor pid {kept['supervisor']['pid']}, Kueue {kept['kueue_version']}); the cases ran on it and left no rules or holds.
  export KUBECONFIG={kept['admin_kubeconfig']}
  `kueue-harness status{n}`, `kueue-harness holds{n}`, `kueue-harness plan load{n} FILE`, `kueue-harness logs{n}`; stop it with `kueue-harness down{n}`""")
    return 0 if code == 0 else 1


def verdict_table_title(summary: dict) -> str:
    """"Scenarios (kubernetes-sigs/kueue#14863)": the head of `run`'s verdict table, naming the bugs of the
    cases that ran (summary.json's `cases[].kueue_bug`, the case's @pytest.mark.kueue_bug key), sorted; "Cases"
    when none of them has a bug."""
    bugs = sorted({c["kueue_bug"] for c in summary.get("cases") or () if c.get("kueue_bug")})
    return f"Scenarios ({', '.join(bugs)})" if bugs else "Cases"


#: Seconds `run --keep-env` waits for its session to start and run the cases (builds are done before).
KEEP_ENV_TIMEOUT = 6 * 3600.0


def _cmd_build(args: argparse.Namespace) -> int:
    from harness.build import binaries

    b = binaries.ensure_all(_spec(args))
    for k, v in b.__dict__.items():
        if k == "kueue_build":
            print(f"{'kueue version':<24} {v.version} (commit {v.commit or 'unknown'}; {v.source})")
        else:
            print(f"{k:<24} {v}")
    kubectl = _kubectl_too(optional=False)
    print(f"{'kubectl':<24} {kubectl or 'not built: Go is not on PATH (KUEUE_HARNESS_KUBECTL names one; or use yours)'}")
    if args.pods:  # Pods that run (docs/pods.md); otherwise built the first time a case asks
        print(f"{'kube_scheduler':<24} {binaries.kube_scheduler()}")
        print(f"{'kwok':<24} {binaries.kwok()}")
    return 0


def _kubectl_too(optional: bool):
    """The pinned kubectl, built now if needed (sessions print it), so the first `up` after `run` or
    `build` does not wait for it; None when Go is not on PATH to build it (every other binary may be given
    through KUEUE_HARNESS_* variables; then Go is not needed). `optional`: a failed kubectl build is a
    note, not an error (for `run`, whose cases do not use kubectl)."""
    from harness.build import binaries

    try:
        return binaries.kubectl_if_buildable()
    except HarnessError as e:
        if not optional:
            raise
        print(f"[kueue-harness] kubectl was not built ({str(e).splitlines()[0]}); `kueue-harness up` will try again",
              file=sys.stderr)
        return None


def _cmd_up(args: argparse.Namespace) -> int:
    from harness.cli import session

    name = session.check_name(args.name)
    spec = _spec(args)
    if args.plan:
        from harness.plan.load import load_plan

        load_plan(args.plan)  # file:line errors before anything starts
    if args.kueue_config:
        from harness.kueue.config import load_file

        load_file(args.kueue_config)  # its problems before anything starts (gates are checked at start)
    s = session.start(name, spec, args.plan, args.ui, args.artifacts_dir, intercept=args.intercept, pods=args.pods,
                      kueue_config=args.kueue_config)
    n = session.name_option(name)
    kubectl = (f"  kubectl {versions.KUBERNETES_VERSION} (built, if yours differs):    {s['kubectl']}\n" if s.get("kubectl")
               else "  kubectl:                                      your own (none built: Go is not on PATH)\n")
    print(f"""
kueue-harness session {name} is up (Kueue {s['kueue_version']}; supervisor pid {s['supervisor']['pid']}).
  kubectl as admin (direct to kube-apiserver):  export KUBECONFIG={s['admin_kubeconfig']}
{kubectl}  Kueue talks to kube-apiserver through:        {s['proxy_url']}
  proxy control channel (loopback, token):      127.0.0.1:{s['control_port']} (token in {s['control_token_file']})""")
    if s.get("web_url"):
        print(f"  mitmweb UI (loopback only, no login):        {s['web_url']}")
    if s.get("pods"):
        print(f"  Pods run (kube-scheduler {s['pods'].get('kube_scheduler')}, kwok {s['pods'].get('kwok')}): "
              "create Nodes annotated kwok.x-k8s.io/node=fake (docs/pods.md)")
    print(f"""  evidence:                                     {s['artifacts']}
Next: `kueue-harness holds{n}`, `kueue-harness release{n} ID`, `kueue-harness plan load{n} FILE`,
      `kueue-harness logs{n}`, `kueue-harness down{n}` (docs/manual-session.md walks through scenario 1).""")
    return 0


def _attach(args: argparse.Namespace):
    from harness.cli import session
    from harness.proxy.client import Proxy

    return Proxy.attach(session.require_session(args.name))


def _cmd_status(args: argparse.Namespace) -> int:
    from harness.cli import session
    from harness.common.procs import is_alive

    if args.all:
        return _cmd_sessions(args)
    name = session.check_name(args.name)
    s = session.describe(name)
    if s is None:
        print(f"no session named {name} is running (`kueue-harness up{session.name_option(name)}` starts one)."
              + session._others(name))
        return 1
    if s["phase"] == "starting":
        print(f"session {name} is starting (supervisor pid {s['supervisor']['pid']}; log: {s.get('log')})")
        return 0
    try:
        procs = json.loads((Path(s["state"]) / "processes.json").read_text())["procs"] if s.get("state") else []
    except (OSError, ValueError):
        procs = []
    if s["phase"] == "died":
        print(f"session {name}: {session.died_message(s)}")
        for r in procs:
            left = is_alive(r["pid"], r.get("start"))
            print(f"  {r['name']:<24} pid {r['pid']:<8} {'still running' if left else 'gone'}")
        return 1
    print(f"session {name}: supervisor pid {s['supervisor']['pid']}, Kueue {s['kueue_version']}, started {s['started']}")
    exited = [r["name"] for r in procs if not is_alive(r["pid"], r.get("start"))]
    for r in procs:
        print(f"  {r['name']:<24} pid {r['pid']:<8} {'EXITED' if r['name'] in exited else 'running'}")
    if "proxy" not in exited:
        st = _attach(args).state()
        print(f"  rules loaded: {len(st['rules'])}, holds: {len(st['holds'])}, proxy events: {st['events']}")
        for line in _rule_lines(st) + _expired_lines(st):
            print(f"    {line}")
    print(f"  KUBECONFIG={s['admin_kubeconfig']}")
    if exited:
        print(f"{', '.join(exited)} exited: see {s['artifacts']}/env/ for its log; "
              f"`kueue-harness down{session.name_option(name)}` ends the session")
        return 1
    return 0


def _cmd_sessions(args: argparse.Namespace) -> int:
    from harness.cli import session

    found = session.list_sessions()
    if not found:
        print("no sessions (`kueue-harness up [--name NAME]` starts one)")
        return 0
    print(f"{'name':<16} {'state':<9} {'Kueue':<22} {'supervisor':>10}  {'started':<19}  artifacts")
    for s in found:
        print(f"{s['name']:<16} {s['phase']:<9} {str(s.get('kueue_version') or '-'):<22} {s['supervisor']['pid']:>10}  "
              f"{s.get('started', ''):<19}  {s.get('artifacts', '')}")
    for s in found:
        if s["phase"] == "died":
            print(f"{s['name']}: {session.died_message(s)}")
    return 0


def _hold_lines(st: dict) -> list[str]:
    """The held flows of a proxy state (GET /state) as a table: id, age, seconds until its max_hold
    releases it, stage, rule, label (and its release.timeout when that comes first)."""
    if not st["holds"]:
        return ["nothing is held"]
    lines = [f"{'id':<6} {'age s':>7} {'expires in s':>12}  {'stage':<8} {'rule':<22} what"]
    for h in st["holds"]:
        left = h.get("expires_in")
        timeout = f"  (its release.timeout ends it in {h['timeout_in']:.1f} s)" if h.get("timeout_in") is not None else ""
        lines.append(f"{h['id']:<6} {h['age']:>7.1f} {left if left is None else f'{left:.1f}':>12}  {h['stage']:<8} "
                     f"{h['rule']:<22} {h['label']}{timeout}")
    return lines


def _rule_lines(st: dict, now: float | None = None) -> list[str]:
    """The loaded rules with their hits (requests or events they acted on, of `times`) — or, for a plan step
    or process fault, its state (`signal_state`); for a rule without hits, a warning when a write came by
    that it names wrongly (`name: job1` for job-job1-62dce), else a note of the first write of its kind that
    came by with another name; the facts that can never hold (a glob that matched several objects)."""
    from harness.proxy.notices import unmatched_sentence

    if not st["rules"]:
        return []
    signals = {s["rule"]: s for s in st.get("signals") or ()}
    # Steps and process faults show their state under the hits column (docs/manual-session.md's layout otherwise).
    lines = [f"{'rule':<22} {'action':<18} {'hits':>9}" + (" / state of a step or process fault" if signals else "")]
    for r in st["rules"]:
        rule = r["rule"]
        if rule["id"] in signals:
            lines.append(f"{rule['id']:<22} {rule.get('action', ''):<18} {signal_state(signals[rule['id']], now)}")
            continue
        times = rule.get("times")
        hits = f"{r['hits']} of {times}" if times is not None else f"{r['hits']}"
        lines.append(f"{rule['id']:<22} {rule.get('action', ''):<18} {hits:>9}")
        if r.get("warning"):
            lines.append(f"  WARNING: {unmatched_sentence(rule['id'], r['warning'])}")
        elif r.get("near_miss"):
            lines.append(f"  note: nothing matched yet; {r['near_miss']['label']} came by: {r['near_miss']['hint']}")
    for problem in (st.get("fact_problems") or {}).values():
        lines.append(f"PROBLEM: {problem}")
    return lines


def signal_state(sig: dict, now: float | None = None) -> str:
    """A plan step's or process fault's state from `GET /state`'s `signals` entry (the proxy's `signalled` and
    `signal_done`): "waiting for triggers: step queues done, Workload/w1 QuotaReserved=True", "running (1.2 s)",
    "done ok (0.049 s)", "failed (StepError: …)"."""
    if sig.get("done"):
        res = sig.get("result") or {}
        if sig.get("ok"):
            from harness.proxy.notices import seconds_text

            return f"done ok ({seconds_text(res.get('seconds'))})" if "seconds" in res else "done ok"
        return f"failed ({res.get('error') or 'no error given'})"
    if sig.get("fired") is not None:
        return f"running ({max(0.0, (now or time.time()) - float(sig['fired'])):.1f} s)"
    waiting = list(sig.get("waiting_for") or ())
    timeout = f"; fires after its release.timeout of {sig['timeout']:g} s" if sig.get("timeout") else ""
    if waiting:
        return f"waiting for triggers: {', '.join(waiting)}{timeout}"
    return f"waiting{timeout or ' (its triggers hold: firing now)'}"


def _expired_lines(st: dict) -> list[str]:
    """The holds that reached their max_hold lately (the proxy released them): id, rule, label, when."""
    expired = st.get("expired") or []
    if not expired:
        return []
    lines = ["EXPIRED holds (they reached their max_hold; the proxy released them):"]
    for e in expired:
        ago = time.time() - e["ended"]
        lines.append(f"  {e['id']:<6} rule {e['rule']}, {e['label']}: expired at {e['at']} ({ago:.0f} s ago) after "
                     f"{e['max_hold']:g} s")
    return lines


def _cmd_holds(args: argparse.Namespace) -> int:
    from harness.cli import session

    proxy = _attach(args)
    if not args.watch:
        st = proxy.state()
        if args.json:
            print(json.dumps(st["holds"], indent=1))
            return 0
        print("\n".join(_hold_lines(st) + [""] * bool(st["rules"]) + _rule_lines(st) + _expired_lines(st)))
        return 0
    if not (HOLDS_WATCH_INTERVAL[0] <= args.interval <= HOLDS_WATCH_INTERVAL[1]):
        raise HarnessError(f"--interval must be {HOLDS_WATCH_INTERVAL[0]:g} to {HOLDS_WATCH_INTERVAL[1]:g} seconds, "
                           f"got {args.interval:g}")
    clear = sys.stdout.isatty()
    try:
        while True:
            st = proxy.state()
            if args.json:
                print(json.dumps(st["holds"]), flush=True)
            else:
                if clear:
                    sys.stdout.write("\x1b[H\x1b[2J")
                head = (f"kueue-harness holds{session.name_option(args.name)} at {time.strftime('%H:%M:%S')}, every "
                        f"{args.interval:g} s (Ctrl-C stops)")
                print("\n".join([head] + _hold_lines(st) + [""] * bool(st["rules"]) + _rule_lines(st)
                                + _expired_lines(st)) + "\n", flush=True)
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


#: Bounds of `holds --watch --interval` (seconds).
HOLDS_WATCH_INTERVAL = (0.2, 60.0)
#: Bounds of `wait --timeout` (seconds).
WAIT_TIMEOUT_MAX = 24 * 3600.0


def _cmd_wait(args: argparse.Namespace) -> int:
    """Wait until a flow of rule RULE reached --state (as a release trigger sees it: now or earlier since the
    rule was loaded). 0 when it did; 1 after --timeout seconds, or when RULE is a plan step or process fault
    that ended failed (its error is said); 2 for a --status outside 100-599; 7 when the proxy refuses (rule not
    loaded, a state its action never reaches) or cannot be reached."""
    import math

    from harness.cli import session
    from harness.common.errors import ProxyError
    from harness.common.waiting import WaitTimeout, wait_for
    from harness.proxy.notices import unmatched_sentence

    if not (math.isfinite(args.timeout) and 0 < args.timeout <= WAIT_TIMEOUT_MAX):
        raise HarnessError(f"--timeout must be seconds above 0 (at most {WAIT_TIMEOUT_MAX:g}), got {args.timeout:g}")
    if args.status is not None and not HTTP_STATUS[0] <= args.status <= HTTP_STATUS[1]:
        raise HarnessError(f"--status must be an HTTP status code, {HTTP_STATUS[0]} to {HTTP_STATUS[1]}, got "
                           f"{args.status} (e.g. --status 409)")
    proxy = _attach(args)
    what = f"rule {args.rule} to be {args.state}" + (f" with status {args.status}" if args.status is not None else "")
    last = [proxy.reached(args.rule, args.state, args.status)]  # a refusal is exit 7 at once

    def probe() -> bool:
        last[0] = proxy.reached(args.rule, args.state, args.status)
        return bool(last[0]["reached"])

    t0 = time.monotonic()
    if not last[0]["reached"]:
        try:
            wait_for(probe, timeout=args.timeout, interval=0.1, what=what, fatal=(ProxyError,))
        except WaitTimeout:
            r = last[0]
            warn = (f" {unmatched_sentence(args.rule, r['warning'])}." if r.get("warning") else
                    f" Nothing matched it; {r['near_miss']['label']} came by: {r['near_miss']['hint']}."
                    if r.get("near_miss") else "")
            err = HarnessError(f"timed out after {args.timeout:g}s waiting for {what} (it has {r['hits']} hit(s)).{warn} "
                               f"`kueue-harness holds{session.name_option(args.name)}` shows the rules' hits and what "
                               "is held")
            err.exit_code = 1
            raise err from None
    took = time.monotonic() - t0
    failed = _failed_signal(proxy.state(), args.rule)
    if failed is not None:
        # A plan step or process fault that ended with an error is `released` too (it is over), but what
        # a script waits for did not happen: say so and exit 1.
        err = HarnessError(f"rule {args.rule}: {args.state} after {took:.1f} s, but it FAILED: {failed}. "
                           f"`kueue-harness holds{session.name_option(args.name)}` shows every step's state")
        err.exit_code = 1
        raise err
    print(f"rule {args.rule}: {args.state}{f' with status {args.status}' if args.status is not None else ''} "
          f"(after {took:.1f} s)")
    return 0


#: The HTTP status codes `wait --status` takes (RFC 9110 section 15: three digits, 1xx to 5xx).
HTTP_STATUS = (100, 599)


def _failed_signal(st: dict, rule_id: str) -> str | None:
    """The error of plan step or process fault `rule_id` if it is done and failed (`GET /state` signals:
    harness/proxy/addons/state.py signal_views), else None (not a step, not done, or done ok)."""
    sig = next((s for s in st.get("signals") or () if s.get("rule") == rule_id), None)
    if sig is None or not sig.get("done") or sig.get("ok"):
        return None
    return str((sig.get("result") or {}).get("error") or "no error given")


def _cmd_release(args: argparse.Namespace) -> int:
    proxy = _attach(args)
    if args.all:
        ids = proxy.release_all(why="kueue-harness release --all")
        print(f"released: {', '.join(ids) or 'nothing was held'}")
        return 0
    if not args.id:
        raise HarnessError("say which hold to release (`kueue-harness holds` lists them), or use --all")
    with _hold_remedy(args):
        proxy.release(args.id, why="kueue-harness release")
    print(f"released {args.id}")
    return 0


def _cmd_fail(args: argparse.Namespace) -> int:
    proxy = _attach(args)
    with _hold_remedy(args):
        proxy.fail(args.id, status=args.status, reason=args.reason, message=args.message, why="kueue-harness fail")
    print(f"failed {args.id} with {args.status} {args.reason}")
    return 0


@contextlib.contextmanager
def _hold_remedy(args: argparse.Namespace) -> Iterator[None]:
    """Add where to look to the proxy refusing a hold id (e.g. "no hold h9"); same error type and exit code."""
    from harness.cli import session
    from harness.common.errors import ProxyError

    try:
        yield
    except ProxyError as e:
        if "refused" not in str(e):
            raise
        raise ProxyError(f"{e}. `kueue-harness holds{session.name_option(args.name)}` lists what is held now") from None


def _cmd_plan_load(args: argparse.Namespace) -> int:
    from harness.plan.load import load_plan

    plan = load_plan(args.file, namespace=args.namespace)
    try:
        _attach(args).load_plan(plan, by="plan load")
    except HarnessError as e:
        raise HarnessError(f"{e}. Nothing of plan {plan.name} was loaded; `kueue-harness plan clear` removes "
                           "the rules loaded before") from None
    print(f"plan {plan.name} loaded: {', '.join(r.id for r in plan.rules)}")
    return 0


def _cmd_plan_validate(args: argparse.Namespace) -> int:
    """Check plan files offline (no session): each valid one gets a line on stdout, every problem of the
    invalid ones a `file:line: …` line on stderr. 0 when all are valid, 2 otherwise."""
    from harness.plan.load import PlanError, load_plan

    bad = 0
    for f in args.files:
        try:
            plan = load_plan(f, namespace=args.namespace)
        except PlanError as e:
            bad += 1
            for line in e.errors:
                print(line, file=sys.stderr)
            continue
        rules = ", ".join(r.id for r in plan.rules if r.id not in plan.steps)
        steps = f"steps {', '.join(plan.steps)}" if plan.steps else ""
        print(f"{plan.source}: valid, plan {plan.name}: {'; '.join(x for x in (rules, steps) if x)}")
    if bad:
        print(f"kueue-harness: {bad} of {len(args.files)} plan{'s' if len(args.files) > 1 else ''} invalid "
              "(docs/fault-plans.md, Validation)", file=sys.stderr)
        return 2
    return 0


def _cmd_plan_clear(args: argparse.Namespace) -> int:
    proxy = _attach(args)
    ids = [r["rule"]["id"] for r in proxy.state()["rules"]]
    for rid in ids:
        proxy.remove_rule(rid)
    print(f"removed rules: {', '.join(ids) or 'none were loaded'} (held flows stay held: `kueue-harness release --all`)")
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    from harness.cli import session
    from harness.kueue import log as kueue_log

    s = None if args.file else session.describe(args.name)
    # A session whose supervisor died still has its log: read it.
    path = Path(args.file) if args.file else Path(s["kueue_log"]) if s and s.get("kueue_log") else None
    if path is None:
        name = session.check_name(args.name)
        raise HarnessError(f"no session named {name} is running (or it is still starting); pass --file "
                           "artifacts/<run>/env/kueue.log to read a saved log")
    if not path.is_file():
        raise HarnessError(f"{path} is not a Kueue log file (artifacts/<run>/env/kueue.log)")
    shown = 0
    for line in kueue_log.lines(path):
        if args.grep and args.grep not in line.get("msg", ""):
            continue
        if args.workload and not any(kueue_log.mentions(line, k) for k in (args.workload,)) and \
                not any(isinstance(v, dict) and v.get("name") == args.workload for v in line.values()):
            continue
        if args.level and line.get("level") != args.level:
            continue
        shown += 1
        extra = {k: v for k, v in line.items() if k not in ("ts", "level", "msg", "caller", "logger")}
        print(f"{line.get('ts', '')} {line.get('level', ''):<9} {line.get('logger', ''):<12} {line.get('msg', '')} "
              f"{json.dumps(extra, default=str) if extra else ''}")
    if shown == 0:
        print(f"no matching lines in {path}", file=sys.stderr)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    from harness.cli import session

    if args.session and args.name and args.session != args.name:
        raise HarnessError(f"`down {args.session} --name {args.name}` names two sessions: give one")
    print(session.stop(args.session or args.name))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from harness import report

    return report.cli(args.bundle, args.out, args.liveness_bound)


def _cmd_bundle(args: argparse.Namespace) -> int:
    from harness.cli import bundle as from_session

    return from_session.cli(args.name, args.namespace, args.out)


def _cmd_versions(args: argparse.Namespace) -> int:
    print(f"kube-apiserver / kube-controller-manager  {versions.KUBERNETES_VERSION}")
    print(f"etcd                                      {versions.ETCD_VERSION}")
    print(f"kube-scheduler, kwok (Pods that run)      {versions.KUBERNETES_VERSION}, {versions.KWOK_VERSION}")
    print(f"Kueue                                     any tag from {versions.KUEUE_PROFILES[0].since} on, any ref or "
          f"source tree (module proxy served here: {', '.join(versions.MODULE_PROXY_SERVED)}; the rest from "
          f"--kueue-repo, default {versions.UPSTREAM_KUEUE_REPO})")
    for prof in versions.KUEUE_PROFILES:
        print(f"  from {prof.since}: Configuration {prof.config_api}, Workloads stored as {prof.storage_version}")
    for bug in bugs.KNOWN_BUGS.values():
        fixed = f"; fixed in {', '.join(bug.fixed_in)}" if bug.fixed_in else "; no fix known"
        commits = f" (fix commits: {', '.join(f'{b} {c}' for b, c in bug.fix_commits.items())})" if bug.fix_commits else ""
        print(f"{bug.issue}: affected {' or '.join(bug.affected)}{fixed}{commits}")
    return 0


def _cmd_matrix(args: argparse.Namespace) -> int:
    from harness.cli import matrix

    return matrix.cli(args)


def _cmd_bisect(args: argparse.Namespace) -> int:
    from harness.cli import bisect

    return bisect.cli(args)


def _add_name(p: argparse.ArgumentParser, what: str = "the session's name (default: default)") -> None:
    p.add_argument("--name", default=None, help=what)


def _shipped_plans() -> str:
    from harness.plan.load import shipped_plans

    return ", ".join(sorted(shipped_plans()))


def _version() -> str:
    """The installed project's version (package metadata, from pyproject.toml)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kueue-harness")
    except PackageNotFoundError:
        return "unknown (not installed: `pip install -e .` in the checkout)"


#: Options that name a path the user chose: (argparse dest, option, default when not given).
_PATH_OPTIONS = (("artifacts_dir", "--artifacts-dir", "artifacts"), ("out", "--out", None), ("file", "--file", None))


def _os_error(e: OSError, args: argparse.Namespace) -> str:
    """One paragraph for an OSError: what failed on which path, and the remedy for that path (the option
    that chose it, when one did)."""
    what = f"{e.strerror or e}{': ' + os.fsdecode(e.filename) if e.filename else ''}"
    if e.filename:
        failed = Path(os.fsdecode(e.filename)).resolve()
        for dest, option, default in _PATH_OPTIONS:
            if not hasattr(args, dest):
                continue
            given = getattr(args, dest) or default
            if not given:
                continue
            chosen = Path(given).resolve()
            if failed == chosen or chosen in failed.parents or (failed in chosen.parents and failed != Path("/")):
                return (f"{what}. It is on the path {option} names{'' if getattr(args, dest) else ' by default'}: "
                        f"check its permissions and free space, or choose another with {option}.")
    return f"{what}. Check that path's permissions and the free space there."


def _stdout_gone() -> bool:
    """True when standard output's reader has gone; then stdout is pointed at /dev/null, so Python's own
    flush at exit does not complain a second time."""
    import select

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        gone = any(ev & select.POLLERR for _, ev in poll.poll(0))  # a pipe whose read end is closed
    except (OSError, ValueError):
        return False
    if gone:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return gone


#: `kueue-harness run --help`'s description.
RUN_DESCRIPTION = ("Build what is missing, then run every case under cases/ (each bug's scenario and its control; "
                   "-k selects some by a pytest expression over case names) on real Kueue, and print each case's "
                   "verdict, the verdict its bug should give on the Kueue that ran, and where the evidence is.")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kueue-harness", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="build what is missing, run every case under cases/ (-k selects some) on "
                                   "real Kueue, print the verdicts", description=RUN_DESCRIPTION)
    _add_kueue_options(r)
    r.add_argument("--artifacts-dir", help="where the evidence goes (default artifacts/<run-id>); a folder that "
                                           "already holds a run is not written over: the run goes to <folder>/<run-id>")
    r.add_argument("--keep-env", action="store_true",
                   help="keep the environment afterwards as a session (the cases run inside it): `kueue-harness "
                        "status`, `holds`, `down` work on it. With --target kind: keep a kind cluster created here")
    r.add_argument("--name", help="with --keep-env: the kept session's name (default: default)")
    r.add_argument("-k", help="only cases matching this pytest -k expression")
    r.add_argument("--target", choices=("local", "kind", "kubeconfig"), default=os.environ.get("KUEUE_HARNESS_TARGET", "local"),
                   help="where Kueue runs (docs/kind.md); kind/kubeconfig options go after `--` as pytest options, "
                        "e.g. `-- --kind-cluster NAME`")
    r.add_argument("pytest_args", nargs="*", help="extra pytest options after `--`")
    r.set_defaults(func=_cmd_run)
    b = sub.add_parser("build", help="build (or find in the cache) every real component")
    _add_kueue_options(b, "Kueue to build with the rest")
    b.add_argument("--pods", action="store_true",
                   help="also kube-scheduler and kwok, for Pods that run (else built when a case first asks)")
    b.set_defaults(func=_cmd_build)
    v = sub.add_parser("versions", help="pinned component versions and the Kueue builds a known bug affects")
    v.set_defaults(func=_cmd_versions)
    mx = sub.add_parser("matrix", help="run the cases under cases/ (-k selects some) on several Kueue builds; write "
                                        "matrix.json and matrix.md")
    mx.add_argument("builds", nargs="+", help="Kueue tags, or ref:REF / source:DIR, e.g. v0.17.0 v0.17.4 ref:main")
    mx.add_argument("--kueue-repo", help="Kueue git repository for tags the module proxy lacks and for refs "
                                         f"(env KUEUE_HARNESS_KUEUE_REPO; default {versions.UPSTREAM_KUEUE_REPO})")
    mx.add_argument("--runs", type=int, default=1, help="runs of every case per build (default 1)")
    mx.add_argument("-k", help="only cases matching this pytest -k expression")
    mx.add_argument("--out", help="folder for matrix.json, matrix.md and each build's run (default artifacts/matrix-<time>)")
    mx.set_defaults(func=_cmd_matrix)
    from harness.explore import driver as explore  # `explore` and `explore merge` (harness/explore/driver.py)

    explore.add_parser(sub, _add_kueue_options)
    bs = sub.add_parser("bisect", help="find the first commit where a case's verdict changes (drives git bisect)")
    bs.add_argument("--case", required=True, help="a case name, e.g. test_stuck_preemption")
    bs.add_argument("--good", required=True, help="a ref with the old verdict (e.g. v0.17.0)")
    bs.add_argument("--bad", required=True, help="a later ref with the new verdict (e.g. v0.17.4)")
    bs.add_argument("--kueue-repo", help="Kueue git repository (env KUEUE_HARNESS_KUEUE_REPO; default upstream)")
    bs.add_argument("--runs", type=int, default=1, help="runs of the case per step; differing verdicts skip the "
                                                         "commit (default 1)")
    bs.add_argument("--out", help="folder for the steps' evidence and bisect.json (default artifacts/bisect-<time>)")
    bs.set_defaults(func=_cmd_bisect)
    u = sub.add_parser("up", help="start a local environment + proxy and leave it running (manual sessions)")
    _add_kueue_options(u)
    u.add_argument("--plan", help="a fault plan to load at start (a file, or a shipped name: "
                                  f"{_shipped_plans()})")
    u.add_argument("--kueue-config", metavar="FILE",
                   help="a Kueue configuration to start Kueue with: YAML with featureGates, fairSharing, "
                        "waitForPodsReady, integrations, overrides (or a plan's `kueue:` section; docs/kueue-config.md); "
                        "it wins over --plan's `kueue:` section")
    u.add_argument("--ui", action="store_true", help="run mitmweb (UI on loopback) instead of mitmdump")
    u.add_argument("--intercept", help="with --ui: a mitmproxy filter whose flows the UI pauses, "
                                       "e.g. '~q & ~m PATCH & ~u /workloads/[^/]+/status\\b' (~u sees the query string, "
                                       "so not 'status$'); or by the addon's label: '~comment ^admission'")
    u.add_argument("--artifacts-dir", help="where the session's logs and events go (default artifacts/<run-id>); a "
                                           "folder that already holds a run is not written over: the session's go "
                                           "to <folder>/<run-id>")
    u.add_argument("--pods", action="store_true",
                   help="Pods that run: start kube-scheduler and kwok too, so Pods bound to kwok's fake Nodes run "
                        "(create Nodes annotated kwok.x-k8s.io/node=fake; docs/pods.md)")
    _add_name(u, "a name for this session, so several can run side by side (default: default)")
    u.set_defaults(func=_cmd_up)
    st = sub.add_parser("status", help="is a session running; its processes, rules and holds")
    _add_name(st)
    st.add_argument("--all", action="store_true", help="list every session instead (as `kueue-harness sessions`)")
    st.set_defaults(func=_cmd_status)
    ss = sub.add_parser("sessions", help="list the sessions: name, state (starting, running, died), Kueue, artifacts")
    ss.set_defaults(func=_cmd_sessions)
    h = sub.add_parser("holds", help="requests and responses the proxy holds now (age, seconds until max_hold "
                                     "releases each), the rules' hits and warnings, holds that expired lately")
    h.add_argument("--json", action="store_true", help="the holds as JSON (with --watch: one line per refresh)")
    h.add_argument("--watch", action="store_true", help="refresh every --interval seconds until Ctrl-C")
    h.add_argument("--interval", type=float, default=2.0,
                   help=f"seconds between refreshes with --watch ({HOLDS_WATCH_INTERVAL[0]:g} to "
                        f"{HOLDS_WATCH_INTERVAL[1]:g}; default 2)")
    _add_name(h)
    h.set_defaults(func=_cmd_holds)
    w = sub.add_parser("wait", help="wait until a rule's flow was held, released or answered (for scripts: exit 0 "
                                    "when it happened, 1 on --timeout or when the plan step or process fault it "
                                    "names failed)")
    w.add_argument("rule", help="a loaded rule's id")
    w.add_argument("--state", choices=("held", "released", "answered"), default="held",
                   help="what to wait for, as a release trigger means it (default held)")
    w.add_argument("--status", type=int, help="with answered (or held, for a response hold): that HTTP status")
    w.add_argument("--timeout", type=float, default=60.0, help="seconds to wait at most (default 60)")
    _add_name(w)
    w.set_defaults(func=_cmd_wait)
    rl = sub.add_parser("release", help="let a held request or response go on")
    rl.add_argument("id", nargs="?", help="hold id from `kueue-harness holds` (h1, h2, ...)")
    rl.add_argument("--all", action="store_true", help="release every hold")
    _add_name(rl)
    rl.set_defaults(func=_cmd_release)
    f = sub.add_parser("fail", help="answer a held request with an error instead")
    f.add_argument("id", help="hold id from `kueue-harness holds`")
    f.add_argument("--status", type=int, default=409, help="HTTP status (default 409)")
    f.add_argument("--reason", default="Conflict", help="Status reason (default Conflict)")
    f.add_argument("--message", default="injected by kueue-harness", help="Status message")
    _add_name(f)
    f.set_defaults(func=_cmd_fail)
    pl = sub.add_parser("plan", help="fault plans")
    plsub = pl.add_subparsers(dest="plan_cmd", required=True)
    pll = plsub.add_parser("load", help="validate a plan and load it into the running proxy (all or nothing)")
    pll.add_argument("file", help=f"plan file, or a shipped name ({_shipped_plans()})")
    pll.add_argument("--namespace", help="act only on this namespace (rules that name none)")
    _add_name(pll)
    pll.set_defaults(func=_cmd_plan_load)
    plv = plsub.add_parser("validate", help="check plan files offline, no session needed: every problem as "
                                           "file:line (exit 0 all valid, 2 otherwise)")
    plv.add_argument("files", nargs="+", metavar="FILE", help=f"plan files, or shipped names ({_shipped_plans()})")
    plv.add_argument("--namespace", help="check as `plan load --namespace NS` would load it")
    plv.set_defaults(func=_cmd_plan_validate)
    plc = plsub.add_parser("clear", help="remove every loaded rule (held flows stay held until released)")
    _add_name(plc)
    plc.set_defaults(func=_cmd_plan_clear)
    lg = sub.add_parser("logs", help="Kueue's log of the running session (or --file), filtered")
    lg.add_argument("--grep", help="only messages containing this text")
    lg.add_argument("--workload", help="only lines about this Workload (name or ns/name)")
    lg.add_argument("--level", help="only this level (info, error, Level(-3) ...)")
    lg.add_argument("--file", help="a saved kueue.log instead of the session's")
    _add_name(lg)
    lg.set_defaults(func=_cmd_logs)
    d = sub.add_parser("down", help="stop a session, or clean up after one whose supervisor died (does nothing "
                                    "if none runs)")
    d.add_argument("session", nargs="?", help="the session's name (default: default); same as --name")
    d.add_argument("--name", help="the session's name (default: default)")
    d.set_defaults(func=_cmd_down)
    rp = sub.add_parser("report", help="re-check a case's evidence bundle offline into report.recheck.md (exit 0 "
                                       "when the verdict agrees with the run's, 1 when it differs, 8 when the "
                                       "bundle cannot be read)")
    rp.add_argument("bundle", help="a bundle folder (artifacts/<run>/cases/<case>) or its .tar.gz")
    rp.add_argument("--out", help="folder for report.recheck.md (default: the bundle folder; for an archive "
                                  "<archive>.recheck/, where it is unpacked); report.md is never rewritten")
    rp.add_argument("--liveness-bound", type=float, default=None,
                    help="seconds a preempting Workload may take to get quota (default: the bound the run used)")
    rp.set_defaults(func=_cmd_report)
    bd = sub.add_parser("bundle", help="write an evidence bundle (report.md, history, logs, flows, final objects) "
                                       "from a running session; `kueue-harness report` re-checks it")
    bd.add_argument("--namespace", help="the namespace whose Workloads the bundle is about (default: the one the "
                                        "session's Workloads are in)")
    bd.add_argument("--out", help="the bundle's folder, new (default <session artifacts>/bundles/<namespace>-<time>); "
                                  "the archive goes beside it")
    _add_name(bd)
    bd.set_defaults(func=_cmd_bundle)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except HarnessError as e:
        print(f"kueue-harness: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:
        if _stdout_gone():
            return 141  # the reader went away (`kueue-harness logs | head`): as a shell reports SIGPIPE
        print("kueue-harness: a connection was closed while writing to it (broken pipe); run the command again, "
              "and if it persists check `kueue-harness status`", file=sys.stderr)
        return 2
    except OSError as e:
        # Files and folders that cannot be created or written (a file in the way, read-only or full disk).
        print(f"kueue-harness: {_os_error(e, args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kueue-harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
