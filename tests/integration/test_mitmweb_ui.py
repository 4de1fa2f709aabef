"""The mitmweb mode (`kueue-harness up --ui --intercept FILTER`) in a real browser: headless Debian
chromium driven by Playwright (never `playwright install`: the browser is the system's).

One manual session, as a person would run it: `up --ui` with an intercept filter on Workload status
PATCHes, the seed queues and job1 applied with kubectl, then in the browser: the page lists job1's
admission PATCH as intercepted, labelled by the addon ("admission demo/job-job1-… (kueue-admission,
loose)"); clicking Resume lets it through, and kube-apiserver then has QuotaReserved=True on job1's
Workload (and had not before). `down` always runs, and no process of the session may be left.

Skips (with the reason) when chromium or Playwright is missing; .ci/run installs chromium and the
`dev` extra brings Playwright.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.build.binaries import cache_root
from harness.common.procs import is_alive
from harness.common.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "kueue-harness"
EXAMPLES = ROOT / "docs" / "examples"
CHROMIUM = os.environ.get("KUEUE_HARNESS_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

#: Kueue's admission request, as Kueue v0.17 sends it (server-side apply on the status subresource).
ADMISSION_PATH = ("/apis/kueue.x-k8s.io/v1beta2/namespaces/demo/workloads/job-job1-0ec7f/status"
                  "?fieldManager=kueue-admission&force=true")
#: The intercept filter of the session: Workload status PATCHes, by URL only (the label is the addon's job).
#: Not `…/status$`: mitmproxy's `~u` matches the whole URL, query string included.
INTERCEPT = r"~q & ~m PATCH & ~u /workloads/[^/]+/status\b"


def test_intercept_filters_match_kueues_admission_path():
    """The filters the CLI help suggests pause Kueue's admission PATCH; the `status$` form does not."""
    from mitmproxy import flowfilter
    from mitmproxy.test import tflow

    f = tflow.tflow()
    f.request.method, f.request.path = "PATCH", ADMISSION_PATH
    f.comment = "admission demo/job-job1-0ec7f (kueue-admission, loose)"
    assert flowfilter.parse(INTERCEPT)(f)
    assert flowfilter.parse("~comment ^admission")(f)
    assert not flowfilter.parse("~q & ~m PATCH & ~u /workloads/.*/status$")(f)
    f.request.path = ADMISSION_PATH.replace("/status?", "?")
    assert not flowfilter.parse(INTERCEPT)(f)


@pytest.fixture
def browser_driver() -> Any:
    """Playwright's sync API, after checking chromium and Playwright are there (before any session starts)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium is not installed ({CHROMIUM} missing): `apt-get install -y chromium` "
                    "(.ci/run does it); the mitmweb UI test needs a real browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright (Python) is not installed: `pip install -e '.[dev]'` (never `playwright install`: "
                    "the test uses Debian's chromium)")
    return sync_playwright


def _harness(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def ui_session(tmp_path: Path, kueue_version: str, artifacts_dir: Path):
    """`kueue-harness up --name ui-<pid> --ui --intercept INTERCEPT` (a session of its own); `down` at the end, then
    every process the session recorded (and its supervisor) must be gone."""
    env = {k: v for k, v in os.environ.items() if k != "KUEUE_HARNESS_SESSION"}
    name = f"ui-{os.getpid()}"  # a session of its own, beside any the user runs
    evidence = artifacts_dir / "mitmweb-ui"
    started: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []

    def down() -> None:
        r = _harness(env, "down", name, timeout=120)
        assert r.returncode == 0, f"`kueue-harness down` failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        for sup, recs in started:
            left = lambda: [r["name"] for r in recs if is_alive(r["pid"], r.get("start"))]  # noqa: E731
            wait_for(lambda: not is_alive(sup["pid"], sup["start"]) and not left(), timeout=30,
                     what="the session's supervisor and processes to exit after `down`", describe=left)

    try:
        r = _harness(env, "up", "--name", name, "--ui", "--intercept", INTERCEPT, "--kueue-version", kueue_version,
                     "--artifacts-dir", str(evidence / "session"), timeout=1500)
        assert r.returncode == 0, f"`kueue-harness up --ui` failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}"
        s = json.loads((cache_root() / "sessions" / name / "session.json").read_text())
        # What `down` must stop, read while it runs (stopping empties processes.json).
        recs = json.loads((Path(s["state"]) / "processes.json").read_text())["procs"]
        started.append((s["supervisor"], recs))
        assert {r["name"] for r in recs} >= {"etcd", "kube-apiserver", "kueue", "proxy"}, recs
        assert s["web_url"] and s["web_url"].startswith("http://127.0.0.1:"), s
        assert s["web_url"] in r.stdout, r.stdout
        kube_env = {**env, "KUBECONFIG": s["admin_kubeconfig"]}
        yield s, kube_env, evidence
    finally:
        down()


def _kubectl(s: dict[str, Any], env: dict[str, str], *args: str) -> str:
    r = subprocess.run([s["kubectl"], *args], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"kubectl {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def _job1_workload(s: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | None:
    items = json.loads(_kubectl(s, env, "get", "workloads", "-n", "demo", "-o", "json"))["items"]
    return next((w for w in items if w["metadata"]["name"].startswith("job-job1-")), None)


def _quota_reserved(wl: dict[str, Any] | None) -> bool:
    conds = ((wl or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in conds)


def test_admission_intercepted_and_resumed_in_the_browser(browser_driver, ui_session):
    s, kube_env, evidence = ui_session
    shots = evidence / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)

    _kubectl(s, kube_env, "apply", "-f", str(EXAMPLES / "seed-queues.yaml"))
    _kubectl(s, kube_env, "apply", "-f", str(EXAMPLES / "job1.yaml"))
    wl = wait_for(lambda: _job1_workload(s, kube_env), timeout=30, what="job1's Workload to be created")
    name = wl["metadata"]["name"]

    with browser_driver() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 700})
            page.goto(s["web_url"])
            # The flow list is virtualised: narrow it to Workload writes of job1 (by URL, not by label).
            page.fill("input[placeholder=Search]", "~u /workloads/job-job1-")
            row = page.locator("tr.intercepted", has_text=f"/workloads/{name}/status")
            row.wait_for(timeout=30_000)
            assert row.count() == 1, f"{row.count()} intercepted flows of {name}"
            assert row.locator("td.col-method").inner_text().strip() == "PATCH"
            assert "fieldManager=kueue-admission" in row.locator("td.col-path").inner_text()
            label = row.locator("td.col-comment").inner_text().strip()  # the column shows it cut at 150 px
            assert label == f"admission demo/{name} (kueue-admission, loose)", label
            page.screenshot(path=str(shots / "0-flow-list.png"))

            # Held: kube-apiserver has not seen the admission, some seconds on.
            time.sleep(3)
            wl = _job1_workload(s, kube_env)
            assert not _quota_reserved(wl) and not (wl.get("status") or {}).get("admission"), wl.get("status")

            # The flow's detail: its Comment tab shows the whole label. (Its Request tab would show
            # Kueue's bearer token, so the screenshot is taken on the Comment tab.)
            row.click()
            page.locator(".flow-detail nav a", has_text="Comment").click()
            detail = page.locator(".flow-detail section")
            assert f"admission demo/{name} (kueue-admission, loose)" in detail.inner_text()
            page.screenshot(path=str(shots / "1-admission-intercepted.png"))

            page.locator("button[title='[a]ccept intercepted flow']").click()  # "Resume" (key `a`)
            page.locator("tr", has_text=f"/workloads/{name}/status").locator("td.col-status",
                                                                             has_text="200").wait_for(timeout=30_000)
            assert page.locator("tr.intercepted").count() == 0
            page.screenshot(path=str(shots / "2-admission-resumed.png"))
        finally:
            browser.close()

    wl = wait_for(lambda: (lambda w: w if _quota_reserved(w) else None)(_job1_workload(s, kube_env)),
                  timeout=30, what=f"Workload demo/{name} to get QuotaReserved=True after the UI resumed it",
                  describe=lambda: (_job1_workload(s, kube_env) or {}).get("status"))
    assert wl["status"]["admission"]["clusterQueue"] == "cq"
