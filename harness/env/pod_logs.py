"""Kueue's log in a cluster, followed through the API into the run's kueue.log as the local target writes it:
`PodLogFollower` streams the manager container's log of one Pod, follows it again across container restarts,
and says so when it cannot.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any


class PodLogFollower:
    """Follows one container's log through the API (`pods/log?follow=true`) into a file, in a thread.

    When the stream ends: a restarted container is followed from its start; the same container is followed
    again from a second before the last bytes received (lines of that second may appear twice). Marker
    lines (not JSON, so log readers skip them) say so in the file.
    """

    def __init__(self, api_client, namespace: str, pod: str, container: str, path: Path,
                 restarts: int = 0, poll: float = 1.0) -> None:
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.namespace, self.pod, self.container, self.path = namespace, pod, container, path
        self.restarts, self.poll = restarts, poll
        self._stop = threading.Event()
        self._resp = None
        self._thread = threading.Thread(target=self._run, name=f"log-{pod}", daemon=True)

    def start(self) -> "PodLogFollower":
        self._thread.start()
        return self

    def _container_state(self) -> tuple[int, str] | None:
        """(restartCount, "running"/"waiting"/"terminated") of the container, None if the Pod is gone."""
        try:
            pod = self.core.read_namespaced_pod(self.pod, self.namespace)
        except Exception:  # noqa: BLE001 - gone (or unreachable): nothing more to follow
            return None
        if pod.metadata.deletion_timestamp is not None:
            return None
        for c in pod.status.container_statuses or []:
            if c.name == self.container:
                st = c.state
                state = "running" if st and st.running else "terminated" if st and st.terminated else "waiting"
                return c.restart_count or 0, state
        return None

    def _run(self) -> None:
        last: float | None = None
        with open(self.path, "ab", buffering=0) as fh:
            while not self._stop.is_set():
                kwargs: dict[str, Any] = {}
                if last is not None:
                    kwargs["since_seconds"] = max(1, int(time.time() - last) + 1)
                try:
                    self._resp = self.core.read_namespaced_pod_log(
                        self.pod, self.namespace, container=self.container, follow=True,
                        _preload_content=False, _request_timeout=(10, None), **kwargs)
                    for chunk in self._resp.stream(65536, decode_content=False):
                        fh.write(chunk)
                        last = time.time()
                        if self._stop.is_set():
                            break
                except Exception:  # noqa: BLE001 - stream cut; decided below
                    pass
                finally:
                    resp, self._resp = self._resp, None
                    if resp is not None:
                        try:
                            resp.release_conn()
                        except Exception:  # noqa: BLE001
                            pass
                while not self._stop.wait(self.poll):
                    st = self._container_state()
                    if st is None:
                        return
                    restarts, state = st
                    if state != "running":
                        continue
                    if restarts != self.restarts:
                        self.restarts, last = restarts, None
                        fh.write(f"# kueue-harness: container {self.pod}/{self.container} restarted "
                                 f"(restartCount {restarts}); following its new log\n".encode())
                    else:
                        fh.write(f"# kueue-harness: log stream of {self.pod}/{self.container} ended; "
                                 "following again\n".encode())
                    break

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            try:
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()
            except Exception:  # noqa: BLE001
                pass
        self._thread.join(timeout)
