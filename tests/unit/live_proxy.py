"""A proxy without mitmdump for CLI tests: the real addon parts (harness.proxy.addons.KueueFaults) with their
control channel served on a loopback port from an asyncio loop in a thread, and a session record naming
it, so that `kueue-harness holds/release/status/wait` talk to the real routes. Synthetic Kueue requests
(tests/unit/addon_flows.py) go through the parts on that loop.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from mitmproxy import http

from harness.common.procs import proc_start_time
from harness.common.waiting import wait_for
from harness.proxy.addons import KueueFaults

TOKEN = "t0ken"


class LiveProxy:
    """Start with `LiveProxy(cache, tmp)`; `close()` stops everything it started (by its own handles).

    `cache`: the KUEUE_HARNESS_CACHE the CLI will use (the session record goes in it); `name`: the session's
    name. The "supervisor" the record names is a `sleep` this object starts and kills."""

    def __init__(self, cache: Path, tmp: Path, name: str = "default") -> None:
        self.addon = KueueFaults()
        self.addon._token = TOKEN
        self.events_file = tmp / "art" / "env" / "proxy-events.jsonl"
        self.events_file.parent.mkdir(parents=True, exist_ok=True)
        self.addon.log.open(str(self.events_file))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="live-proxy", daemon=True)
        self.thread.start()
        self.tasks: list[asyncio.Future] = []
        self.server = self.run(asyncio.start_server(self.addon._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.supervisor = subprocess.Popen(["sleep", "300"])
        token = tmp / "control.token"
        token.write_text(TOKEN)
        (tmp / "state").mkdir(exist_ok=True)
        d = cache / "sessions" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "session.json").write_text(json.dumps({
            "name": name, "phase": "running",
            "supervisor": {"pid": self.supervisor.pid, "start": proc_start_time(self.supervisor.pid)},
            "kueue_version": "v0.17.0", "proxy_url": "https://127.0.0.1:1", "control_port": self.port,
            "control_token_file": str(token), "state": str(tmp / "state"), "artifacts": str(tmp / "art"),
            "admin_kubeconfig": str(tmp / "admin.kubeconfig"), "started": "2026-01-01T00:00:00"}))

    def run(self, coro: Any, timeout: float = 10) -> Any:
        """Run `coro` on the proxy's loop and return its result (at most `timeout` seconds)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def handle(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """A control-channel call on the proxy's loop (as the control server would make it)."""
        async def call() -> tuple[int, Any]:
            return self.addon._handle(method, path, body or {})

        return self.run(call())

    def request(self, flow: http.HTTPFlow) -> asyncio.Future:
        """Send `flow` through the parts in the background (it may be held); returns its future."""
        fut = asyncio.run_coroutine_threadsafe(self.addon.request(flow), self.loop)
        self.tasks.append(fut)
        return fut

    def wait_held(self, n: int = 1, timeout: float = 5) -> list[str]:
        """Wait until `n` flows are held; their hold ids."""
        return wait_for(lambda: sorted(self.addon.holds) if len(self.addon.holds) >= n else None, timeout=timeout,
                        what=f"{n} hold(s)")

    def close(self) -> None:
        """Release every hold, stop the server and the loop, kill the stand-in supervisor."""
        self.handle("POST", "/release-all", {"why": "test end"})
        for fut in self.tasks:
            try:
                fut.result(5)
            except Exception:  # noqa: BLE001 - a flow the test failed on purpose
                pass
        self.server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.addon.log.close()
        self.supervisor.kill()
        self.supervisor.wait(5)
