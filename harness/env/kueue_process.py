"""The Kueue manager of the local environment (a mixin of LocalEnvironment, harness/env/local.py): its CRDs
and webhook configurations (config/components of the build, webhooks rewritten to url: + caBundle), the
Configuration it is given (docs/kueue-notes.md §2; a declared harness/kueue/config.py KueueConfig over it),
starting and restarting it, what version and feature gates it reported, and per-case reconfiguration.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
import urllib.request
from typing import Any

import yaml

from harness.common import pki
from harness.common.errors import EnvironmentNotReady
from harness.common.waiting import wait_for
from harness.env import control_plane as cp
from harness.env import etcd_template, visibility
from harness.kueue import config as kconfig
from harness.kueue import log as kueue_log
from harness.kueue import versions
from harness.objects import webhooks_answer


class KueueProcess:
    """Kueue's part of a LocalEnvironment: the methods that install, start, restart and configure the Kueue
    manager. Uses the environment's fields (bins, state, ports, procs, proxy, kueue_config, …)."""

    def _install_kueue_manifests(self) -> None:
        """Kueue's CRDs (and the ProvisioningRequest CRD) and namespace, then its webhook configurations.

        Without an etcd template: create the CRDs, wait until they are Established, create kueue-system.
        From a template both are in etcd already: wait until this kube-apiserver serves every CRD version
        in its aggregated discovery (what Kueue's REST mapper reads when it starts). The webhook
        configurations are never in a template: their caBundle is this run's CA.
        """
        from kubernetes import client

        api = self.api_client()
        if self.template is None:
            files = etcd_template.crd_files(self.bins.kueue_source, self.bins.extra_crds)
            names = [c["name"] for c in cp._create_crds(api, files)]
            cp._wait_established(api, names)
            client.CoreV1Api(api).create_namespace({"metadata": {"name": cp.KUEUE_NAMESPACE}})
        else:
            missing: list[str] = []
            wait_for(lambda: self._crds_served(self.template.crds, missing), timeout=30, interval=0.02,
                     what=f"kube-apiserver to serve the {len(self.template.crds)} Kueue CRDs of the etcd template",
                     describe=lambda: f"not in discovery: {', '.join(missing) or '(discovery not answered)'}")
        self._install_webhooks()

    def _crds_served(self, crds: list[dict[str, Any]], missing: list[str]) -> bool:
        """True when discovery lists every served version of every CRD in `crds`; `missing` gets the rest."""
        st, body = self._get(f"{self.api_url}/apis", self.admin_token, headers={"Accept": cp._AGGREGATED_DISCOVERY})
        if st != 200:
            return False
        doc = json.loads(body)
        served: dict[tuple[str, str], set[str]] = {}
        if doc.get("kind") == "APIGroupDiscoveryList":
            for g in doc.get("items") or []:
                for v in g.get("versions") or []:
                    served[(g["metadata"]["name"], v["version"])] = {r["resource"] for r in v.get("resources") or []}
        else:  # a kube-apiserver without aggregated discovery: one request per group version
            for gv in {(c["group"], v) for c in crds for v in c["versions"]}:
                st, body = self._get(f"{self.api_url}/apis/{gv[0]}/{gv[1]}", self.admin_token)
                if st == 200:
                    served[gv] = {r["name"] for r in json.loads(body).get("resources") or []}
        missing[:] = [f"{c['plural']}.{c['group']}/{v}" for c in crds for v in c["versions"]
                      if c["plural"] not in served.get((c["group"], v), set())]
        return not missing

    def _install_webhooks(self) -> None:
        from kubernetes import client

        adm = client.AdmissionregistrationV1Api(self.api_client())
        from kubernetes.client.exceptions import ApiException

        path = self.bins.kueue_source / "config" / "components" / "webhook" / "manifests.yaml"
        ca_b64 = base64.b64encode(self.ca.cert_pem).decode()
        # Kueue's own kinds and the enabled integrations (batch/job, plus what a declared configuration adds).
        frameworks = list(self._kueue_config().get("integrations", {}).get("frameworks") or [])
        for doc in yaml.load_all(path.read_text(), Loader=cp._YAML_LOADER):
            if not doc:
                continue
            kept = []
            for hook in doc.get("webhooks", []):
                svc_path = hook["clientConfig"]["service"]["path"]
                if not kconfig.webhook_wanted(svc_path, frameworks):
                    continue
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.ports['webhook']}{svc_path}", "caBundle": ca_b64,
                }
                kept.append(hook)
            doc["webhooks"] = kept
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            kind = "mutating" if doc["kind"] == "MutatingWebhookConfiguration" else "validating"
            try:
                getattr(adm, f"create_{kind}_webhook_configuration")(doc)
            except ApiException as e:  # installed before: the integrations changed (configure_kueue)
                if e.status != 409:
                    raise
                old = getattr(adm, f"read_{kind}_webhook_configuration")(doc["metadata"]["name"])
                doc["metadata"]["resourceVersion"] = old.metadata.resource_version
                getattr(adm, f"replace_{kind}_webhook_configuration")(doc["metadata"]["name"], doc)

    def _kueue_config(self) -> dict[str, Any]:
        """The Configuration Kueue is given: the harness's own (docs/kueue-notes.md §2), the overrides, then
        the declared `kueue_config` (harness/kueue/config.py KueueConfig.apply)."""
        return self._with_visibility(self.kueue_config.apply({
            "apiVersion": versions.kueue_profile(self.bins.kueue_build.base_tag).config_api,
            "kind": "Configuration",
            "namespace": cp.KUEUE_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.ports['kueue_health']}"},
            # Goroutine stacks for a stuck verdict's evidence (kueue_dump): controller-runtime's pprof handlers.
            "pprofBindAddress": f"127.0.0.1:{self.ports['kueue_pprof']}",
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": self.ports["webhook"],
                        "certDir": str(self.state / "webhook-certs")},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "manageJobsWithoutQueueName": False,
            "integrations": {"frameworks": ["batch/job"]},
            "featureGates": {"VisibilityOnDemand": False},
            **self.kueue_config_overrides,
        }))

    def pending_workloads(self, cluster_queue: str) -> list[dict[str, Any]]:
        """The pending Workloads of `cluster_queue` as Kueue's visibility server lists them, in queue order
        (harness/env/visibility.py). Raises HarnessError when the server is off (declare
        `kueue_config(feature_gates={"VisibilityOnDemand": True})`) or does not answer 200."""
        from harness.common.errors import HarnessError

        if getattr(self, "visibility_ca", None) is None:  # set while the Configuration given turns it on
            raise HarnessError("Kueue's visibility server is off: declare "
                               "kueue_config(feature_gates={'VisibilityOnDemand': True}) for the case")
        return visibility.pending_workloads(self.ports["kueue_visibility"], self.admin_token, cluster_queue,
                                            self.visibility_ca)

    def _with_visibility(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The visibility server, when the declared configuration turns it on: on 127.0.0.1 at the environment's
        port, its certificate in /visibility (harness/env/visibility.py)."""
        self.visibility_ca = None
        if not visibility.enabled(cfg):
            return cfg
        base = self.bins.kueue_build.base_tag
        m = re.match(r"v?(\d+)\.(\d+)\.", base or "")
        if m and (int(m.group(1)), int(m.group(2))) < (0, 17):
            raise EnvironmentNotReady("VisibilityOnDemand on the local target needs Kueue >= v0.17.0 "
                                      "(visibilityServer.bindPort in its Configuration)")
        self.visibility_ca = visibility.ensure_certificate()
        return {**cfg, "visibilityServer": {"bindPort": self.ports["kueue_visibility"], "bindAddress": "127.0.0.1",
                                            **(cfg.get("visibilityServer") or {})}}

    def _start_kueue(self) -> None:
        s = self.state
        t_kueue = time.monotonic()
        (s / "kueue-config.yaml").write_text(yaml.safe_dump(self._kueue_config()))
        if self.proxy is not None:
            server, ca = self.proxy.url, self.proxy.ca_file
        else:
            server, ca = self.api_url, self.ca_file
        pki.write_private(s / "kueue.kubeconfig",
                          yaml.safe_dump(cp._kubeconfig(server, ca, self.kueue_token, "kueue")).encode())
        self.procs.start(
            "kueue",
            [
                str(self.bins.kueue), f"--config={s / 'kueue-config.yaml'}",
                f"--kubeconfig={s / 'kueue.kubeconfig'}", "--zap-log-level=3",
            ],
            self.kueue_log,
            env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        )
        self._wait_process(
            "kueue",
            lambda: urllib.request.urlopen(
                f"http://127.0.0.1:{self.ports['kueue_health']}/readyz", timeout=2).status == 200,
            90, "Kueue /readyz",
        )
        self.started["kueue_readyz_seconds"] = time.monotonic() - t_kueue
        self._read_reported_version()
        self._wait_process("kueue", self._webhooks_answer, 60, "Kueue's webhooks to answer (dry-run create)")

    def kueue_dump(self, stall: float = 10.0) -> dict[str, Any] | None:
        """Kueue's own view, now: SIGUSR2 makes it log its scheduler cache snapshot and queues
        (harness/kueue/dump.py), read back from kueue.log, and its goroutine stacks from pprof. Returns
        {"dump": …, "goroutines": text or None, "problem": …} or None when Kueue is not running. Never raises:
        evidence is best effort."""
        import signal
        import urllib.request

        from harness.common.waiting import WaitTimeout, wait_progressing
        from harness.kueue import dump as kueue_dump
        from harness.kueue import log as kueue_log

        if not self.kueue_alive():
            return None
        since = time.time() - 0.5
        out: dict[str, Any] = {"dump": None, "goroutines": None}
        try:
            os.kill(self.procs.procs["kueue"][0].pid, signal.SIGUSR2)
            out["dump"] = wait_progressing(
                lambda: kueue_dump.last_dump(kueue_log.lines(self.kueue_log), since),
                state=lambda: self.kueue_log.stat().st_size, stall=stall, cap=6 * stall, interval=0.2,
                what="Kueue's dump (SIGUSR2) in its log")
        except (OSError, KeyError, WaitTimeout) as e:
            out["problem"] = f"no dump: {type(e).__name__}: {e}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['kueue_pprof']}/debug/pprof/goroutine?debug=2",
                                        timeout=stall) as r:
                out["goroutines"] = r.read().decode(errors="replace")
        except (OSError, ValueError) as e:
            out["problem"] = (out.get("problem", "") + f"; no goroutines: {type(e).__name__}: {e}").lstrip("; ")
        return out

    def _read_reported_version(self) -> None:
        """What the binary says it is: the last "Initializing" line of its log (gitVersion, gitCommit)."""
        for line in kueue_log.lines(self.kueue_log):
            if line.get("msg") == "Initializing" and "gitVersion" in line:
                self.kueue_reported = {k: str(line.get(k, "")) for k in ("gitVersion", "gitCommit", "buildDate")}
            elif line.get("msg") == "Loaded feature gates" and isinstance(line.get("featureGates"), dict):
                self.kueue_reported_gates = dict(line["featureGates"])
        if self.kueue_reported.get("gitVersion"):
            self.kueue_version = self.kueue_reported["gitVersion"]

    def kueue_identity(self) -> versions.BuildIdentity:
        """The running Kueue as known bugs judge it (reported version and commit, ancestry in its repo)."""
        return self.bins.kueue_build.identity(self.kueue_reported.get("gitVersion"),
                                              self.kueue_reported.get("gitCommit"))

    def kueue_build_info(self) -> dict[str, Any]:
        """For summary.json / bundle.json: what ran (reported) and how it was built."""
        reported = self.kueue_reported.get("gitCommit", "")
        commit = reported if re.fullmatch(r"[0-9a-f]{7,40}", reported) else self.bins.kueue_build.commit
        return {"version": self.kueue_version, "commit": commit,
                "reported": dict(self.kueue_reported), "build": self.bins.kueue_build.to_json()}

    def _webhooks_answer(self) -> bool:
        return webhooks_answer(self.api_client())

    def kueue_alive(self) -> bool:
        return "kueue" in self.procs.procs and self.procs.alive("kueue")

    def kueue_starts(self) -> int:
        """How many times Kueue was started in this environment (1 unless restart_kueue() was used)."""
        return self.started.get("kueue_starts", 1)

    def restart_kueue(self, kill: bool = False) -> None:
        """A process fault: stop Kueue (SIGTERM, or SIGKILL with `kill`), start it again with the same
        configuration, and wait until its webhooks answer. Its log continues in the same kueue.log."""
        import signal as _signal

        if "kueue" in self.procs.procs:
            if kill and self.procs.alive("kueue"):
                os.killpg(self.procs.procs["kueue"][1].pgid, _signal.SIGKILL)
            self.procs.stop("kueue")
        self._start_kueue()
        self.started["kueue_starts"] = self.kueue_starts() + 1

    # ---- per-case Kueue configuration (harness/kueue/config.py, docs/kueue-config.md) --------------
    def resolve_kueue_config(self, cfg: kconfig.KueueConfig) -> kconfig.KueueConfig:
        """`cfg` with its "if-known" feature gates (kconfig.IF_KNOWN) resolved for this build: on where its
        pkg/features/kube_features.go has the gate, else (no copy of that file at hand) where the running
        Kueue reported it in its "Loaded feature gates" line; left out otherwise. `cfg` itself when it has
        none. Raises KueueConfigError when neither source is at hand."""
        if not cfg.if_known:
            return cfg
        found = kconfig.features_text(self.bins.kueue_build)
        if found is not None:
            return cfg.resolve(kconfig.parse_gates(found[0]))
        if self.kueue_reported_gates:
            return cfg.resolve(self.kueue_reported_gates)
        raise kconfig.KueueConfigError(
            f"cannot tell whether Kueue {self.kueue_version} knows {', '.join(cfg.if_known)} (declared "
            f"{kconfig.IF_KNOWN!r}): no copy of its {kconfig.FEATURES_FILE} is at hand and Kueue has not reported "
            "its gates yet. Give the Kueue repository (--kueue-repo / KUEUE_HARNESS_KUEUE_REPO) or say true/false")

    def check_kueue_config(self, cfg: kconfig.KueueConfig) -> None:
        """Refuse `cfg` (resolved: resolve_kueue_config) before Kueue sees it: the feature gates it gives must
        be in this build's pkg/features/kube_features.go and not set against a locked default. Raises
        KueueConfigError. Without a copy of that file at hand the gates are left to Kueue (which exits on an
        unknown one)."""
        gates = cfg.effective_gates()
        if not gates:
            return
        found = kconfig.features_text(self.bins.kueue_build)
        if found is None:
            self.say(f"cannot check feature gates {', '.join(gates)}: no copy of Kueue's "
                     f"{kconfig.FEATURES_FILE} of this build is at hand; Kueue itself will refuse an unknown one")
            return
        kconfig.check_gates(gates, kconfig.parse_gates(found[0]), self.kueue_version)

    def configure_kueue(self, cfg: "kconfig.KueueConfig | None", fresh: bool = False) -> dict[str, Any]:
        """Give Kueue the configuration `cfg` declares (None: the harness's default). Kueue is restarted
        only when the Configuration file this makes differs from the one the running Kueue was started with;
        the webhooks follow the integrations. Returns {"restarted": bool, "seconds": restart seconds (0 when
        not restarted)}, plus "if_known": {gate: given (bool)} when `cfg` declares "if-known" gates (resolved
        for this build: resolve_kueue_config); `fresh`: restart it even when nothing changed (a race build: Go's
        race detector reports a pair of racing accesses once per process, so every case starts a new one), said
        as "fresh": True. Raises KueueConfigError before touching Kueue for a bad gate;
        when Kueue does not start with the new file, it is started again with the previous one and
        KueueConfigError says why."""
        cfg = self.resolve_kueue_config(cfg or kconfig.DEFAULT)
        extra = {"if_known": cfg.if_known_given()} if cfg.if_known else {}
        previous = self.kueue_config
        written = self.state / "kueue-config.yaml"
        running = yaml.safe_load(written.read_text()) if written.is_file() else None
        self.kueue_config = cfg
        wanted = self._kueue_config()
        if running == wanted and self.kueue_alive() and not fresh:
            return {"restarted": False, "seconds": 0.0, **extra}
        extra.update({"fresh": True} if fresh and running == wanted else {})
        try:
            self.check_kueue_config(cfg)
        except BaseException:
            self.kueue_config = previous
            raise
        t = time.monotonic()
        hooks = (running or {}).get("integrations") != wanted.get("integrations")
        try:
            if hooks:
                self._install_webhooks()
            self.restart_kueue()
        except EnvironmentNotReady as e:
            self.kueue_config = previous
            if hooks:
                self._install_webhooks()
            self.restart_kueue()
            raise kconfig.KueueConfigError(
                f"Kueue did not start with {cfg.summary()}: {str(e).splitlines()[0]}\n(its log: {self.kueue_log}). "
                "Kueue runs again with the previous configuration; fix the declaration") from None
        self.started["kueue_config_changes"] = self.started.get("kueue_config_changes", 0) + 1
        return {"restarted": True, "seconds": round(time.monotonic() - t, 3), **extra}

    def kueue_config_info(self) -> dict[str, Any]:
        """For summary.json, bundle.json and report.md: what was declared, the Configuration file the running
        Kueue was started with (no secrets: ports and paths), and the feature gates Kueue reported."""
        written = self.state / "kueue-config.yaml"
        try:
            configuration = yaml.safe_load(written.read_text())
        except OSError:
            configuration = None
        info = {"declared": self.kueue_config.to_json(), "summary": self.kueue_config.summary(),
                "configuration": configuration, "feature_gates_reported": dict(self.kueue_reported_gates)}
        if self.kueue_config.if_known:
            info["if_known"] = self.kueue_config.if_known_given()  # "if-known" gate -> given (on) to this build
        return info
