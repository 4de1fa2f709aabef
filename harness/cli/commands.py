"""`kueue-harness`: the command line. `run` runs the cases under cases/ on real Kueue and prints a verdict
table; `up`/`status`/`holds`/`release`/`fail`/`plan load`/`logs`/`down` drive a long-running session by
hand; `build` builds the real components; `versions` lists what is pinned and served.

Exit codes: 0 every case got the verdict its Kueue version should give; 1 some case did not (or errored);
2-7 a foreseeable problem before any case ran (see harness/common/errors.py and docs/troubleshooting.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

from harness.cli.manual import (
    HOLDS_WATCH_INTERVAL,
    _cmd_down,
    _cmd_fail,
    _cmd_holds,
    _cmd_logs,
    _cmd_plan_clear,
    _cmd_plan_load,
    _cmd_plan_validate,
    _cmd_release,
    _cmd_sessions,
    _cmd_status,
    _cmd_up,
    _cmd_wait,
    _kubectl_too,
)
from harness.cli.selection import _no_case_message, select_cases
from harness.cli.options import (
    KEEP_ENV_TIMEOUT,
    _add_kueue_options,
    _add_name,
    _os_error,
    _shipped_plans,
    _spec,
    _stdout_gone,
    _version,
)
from harness.common import paths
from harness.common.errors import HarnessError
from harness.kueue import bugs, versions

CASES_DIR = paths.CASES_DIR


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
    targets = [str(CASES_DIR)]
    if args.k:
        targets += ["-k", args.k]
    # Which cases run, before anything is built: a typo in -k must not cost a cold build (issue 24).
    selected = select_cases(targets, [*spec.cli_args(), f"--target={args.target}", *args.pytest_args])
    if not selected:
        raise HarnessError(_no_case_message(args.k))
    run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    from harness.build import binaries
    from harness.env.local import check_free_space
    from harness.env.runs import run_folder

    art, note = run_folder(args.artifacts_dir, run_id)  # never over an earlier run: beside it, inside
    art = art.resolve()
    if note:
        print(f"[kueue-harness] {note}", file=sys.stderr)

    made = _missing_parents(art)
    art.mkdir(parents=True, exist_ok=True)
    try:
        # Foreseeable problems as one clear paragraph now, not as a fixture error inside pytest's report;
        # building here also keeps Go's progress lines apart from the cases' output. The cases do not
        # use kubectl: only `up` and `build` build it.
        check_free_space(art)
        if local and not {"--collect-only", "--co"} & set(args.pytest_args):
            binaries.ensure_all(spec)
    except BaseException:
        _remove_if_empty(made)  # a refused run leaves no empty evidence folder
        raise
    pytest_args = [*targets, "-p", "no:cacheprovider", "-qq", "-rs", "--no-verdict-table", *spec.cli_args(),
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
        raise HarnessError(_no_case_message(args.k))
    if code == pytest.ExitCode.USAGE_ERROR:
        extra = f" or the options after `--` ({' '.join(args.pytest_args)})" if args.pytest_args else ""
        raise HarnessError(f"pytest refused the cases folder {CASES_DIR}{extra}: its message is above")
    summary = art / "summary.json"
    data = None
    if summary.exists():
        data = json.loads(summary.read_text())
        kb = data.get("kueue") or {}
        commit = f", commit {str(kb['commit'])[:10]}" if kb.get("commit") else ""
        ran = (f"Kueue {data['kueue_version']}{commit} (as the binary reported; " if data.get("kueue_version") else
               f"Kueue {data.get('kueue_requested') or '?'} (asked for: it never reported a version, see env/kueue.log; ")
        print(f"\n{verdict_table_title(data)} on {ran}kube-apiserver {data['kubernetes_version']}, "
              f"target {data['target']}):")
        print(f"  {'case':<40} {'verdict':<11} {'expected':<11} {'seconds':>7}")
        for c in data["cases"]:
            bundle = c.get("bundle") or c.get("evidence") or ""
            rel = os.path.relpath(bundle, Path.cwd()) if bundle else ""
            print(f"  {c['case'].split('::')[-1]:<40} {c['verdict']:<11} {c.get('expected', ''):<11} "
                  f"{c['seconds']:>7.1f}  {rel}")
        left = [f"{c['case'].split('::')[-1]}: {x}" for c in data["cases"] for x in c.get("not_deleted") or []]
        if left:
            print(f"Not deleted from the cluster ({len(left)}; delete them by hand):")
            for line in left:
                print(f"  {line}")
        print(f"Evidence: {art}  (summary.json, junit.xml, env/ logs and proxy events; per case: report.md, "
              "history.jsonl, flows, logs and a .tar.gz to attach to a bug report)")
    if kept is not None:
        n = session.name_option(name)
        print(f"""Environment kept as session {name} (supervisor pid {kept['supervisor']['pid']}, Kueue {kept['kueue_version']}); the cases ran on it and left no rules or holds.
  export KUBECONFIG={kept['admin_kubeconfig']}
  `kueue-harness status{n}`, `kueue-harness holds{n}`, `kueue-harness plan load{n} FILE`, `kueue-harness logs{n}`; stop it with `kueue-harness down{n}`""")
    if data and data.get("stopped"):
        print(f"[kueue-harness] {data['stopped']}", file=sys.stderr)  # names the path, and summary.json
        return 1
    if data and data.get("interrupted"):
        decided = [c for c in data["cases"] if not str(c.get("detail", "")).startswith("did not finish")]
        print(f"[kueue-harness] interrupted by {data['interrupted']}: {len(decided)} verdict(s) decided before it are "
              f"kept in {summary} (the table above); the cases that did not finish have verdict error", file=sys.stderr)
        return 128 + int(getattr(signal, data["interrupted"]))
    return 0 if code == 0 else 1


#: The levels Kueue's zap logger writes: zapcore's level names, and "Level(-N)" for logr's V(N) lines.
_LOG_LEVEL = re.compile(r"debug|info|warn|error|dpanic|panic|fatal|Level\(-\d+\)")


def _log_level(value: str) -> str:
    """argparse type of `logs --level`: one of Kueue's log levels (zapcore.Level's names, "Level(-N)"),
    else argparse's error (exit 2) listing them."""
    if _LOG_LEVEL.fullmatch(value):
        return value
    raise argparse.ArgumentTypeError(f"{value!r} is not a level Kueue logs: give one of debug, info, warn, error, "
                                     "dpanic, panic, fatal, or Level(-N) for V(N) lines (e.g. Level(-3))")


def _missing_parents(folder: Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, deepest first (what mkdir -p creates)."""
    out = []
    while not folder.exists() and folder != folder.parent:
        out.append(folder)
        folder = folder.parent
    return out


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove the folders a refused run created, deepest first, as long as they are empty."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            return


def verdict_table_title(summary: dict) -> str:
    """"Scenarios (kubernetes-sigs/kueue#14863)": the head of `run`'s verdict table, naming the bugs of the
    cases that ran (summary.json's `cases[].kueue_bug`, the case's @pytest.mark.kueue_bug key), sorted; "Cases"
    when none of them has a bug."""
    bugs = sorted({c["kueue_bug"] for c in summary.get("cases") or () if c.get("kueue_bug")})
    return f"Scenarios ({', '.join(bugs)})" if bugs else "Cases"


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


def _cmd_kind_image(args: argparse.Namespace) -> int:
    """Make (or find) the offline kind node image and the Kueue image of the build; print their tags."""
    from harness.build import kueue as kueue_build
    from harness.env import engine, kind_image, kueue_image

    eng = engine.ensure(keep=args.keep_engine)
    try:
        node = kind_image.node_image()
        kb = kueue_build.build(_spec(args))
        image = kueue_image.kueue_image(kb, engine._say)
        docs = kueue_image.render_manifests(kb, image, kind_image.node_binaries() / "kubectl", engine._say)
    finally:
        if not args.keep_engine:
            eng.stop()
    print(f"{'node image':<16} {node}")
    print(f"{'kueue image':<16} {image} (Kueue {kb.version}; {kb.source})")
    print(f"{'manifests':<16} {len(docs)} objects, {kind_image.cache_root() / 'kind' / 'manifests'}")
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
    ki = sub.add_parser("kind-image", help="make (or find) the kind target's offline images: the node image from "
                        "harness-built Kubernetes binaries and the Kueue image of the build (docs/kind.md)")
    _add_kueue_options(ki, "Kueue whose image to make")
    ki.add_argument("--keep-engine", action="store_true",
                    help="leave a container engine started for this running (default: stopped again)")
    ki.set_defaults(func=_cmd_kind_image)
    v = sub.add_parser("versions", help="pinned component versions and the Kueue builds a known bug affects")
    v.set_defaults(func=_cmd_versions)
    mx = sub.add_parser("matrix", help="run the cases under cases/ (-k selects some) on several Kueue builds; write "
                                        "matrix.json and matrix.md")
    mx.add_argument("builds", nargs="+", help="Kueue tags, or ref:REF / source:DIR, e.g. v0.17.0 v0.17.4 ref:main")
    mx.add_argument("--kueue-repo", help="Kueue git repository for tags the module proxy lacks and for refs "
                                         f"(env KUEUE_HARNESS_KUEUE_REPO; default {versions.UPSTREAM_KUEUE_REPO})")
    mx.add_argument("--kueue-race", action="store_true",
                    help="build every Kueue with Go's race detector (no_data_race judges every case)")
    mx.add_argument("--runs", type=int, default=1, help="runs of every case per build (default 1)")
    mx.add_argument("-k", help="only cases matching this pytest -k expression")
    mx.add_argument("--out", help="folder for matrix.json, matrix.md and each build's run (default artifacts/matrix-<time>)")
    mx.set_defaults(func=_cmd_matrix)
    from harness.explore import command as explore  # `explore` and `explore merge` (harness/explore/command.py)

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
    lg.add_argument("--level", type=_log_level, help="only this level: debug, info, warn, error, dpanic, panic, "
                                                      "fatal, or Level(-N) (Kueue's V(N) lines, e.g. Level(-3))")
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
