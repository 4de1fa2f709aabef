"""harness/env/cluster_lock.py: one run at a time on a cluster. A second run on a kept kind cluster undid the live
run's routing between two of its cases; now it is refused, naming the run, unless that run is gone."""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException

from harness.common.procs import proc_start_time
from harness.env import cluster_lock as cl


def test_stale_only_when_the_holder_is_gone() -> None:
    me = socket.gethostname()
    now = datetime.now(timezone.utc)
    alive = {"host": me, "pid": os.getpid(), "start_time": proc_start_time(os.getpid())}
    assert cl.stale(alive, now) is None
    assert "is gone" in cl.stale({**alive, "pid": 2 ** 22 + 7}, now)
    assert "is gone" in cl.stale({**alive, "start_time": -1}, now)  # the pid was reused by another process
    other = {"host": "elsewhere", "pid": 1}
    assert cl.stale(other, now - timedelta(seconds=30), now=now) is None
    assert "not renewed" in cl.stale(other, now - timedelta(seconds=cl.STALE + 1), now=now)


class FakeCoord:
    def __init__(self) -> None:
        self.lease = None

    def create_namespaced_lease(self, ns, body):
        if self.lease is not None:
            raise ApiException(status=409)
        self.lease = body

    def read_namespaced_lease(self, name, ns):
        if self.lease is None:
            raise ApiException(status=404)
        m = self.lease["metadata"]
        return SimpleNamespace(metadata=SimpleNamespace(annotations=m["annotations"], resource_version="1"),
                               spec=SimpleNamespace(renew_time=datetime.now(timezone.utc)))

    def replace_namespaced_lease(self, name, ns, body):
        self.lease = body

    def patch_namespaced_lease(self, name, ns, body):
        pass

    def delete_namespaced_lease(self, name, ns):
        self.lease = None


def _lock(coord, run):
    lock = cl.ClusterLock.__new__(cl.ClusterLock)
    lock.coord, lock.run_id, lock.say = coord, run, (lambda line: None)
    lock.record = cl.holder_record(run)
    lock.held, lock._thread = False, None
    import threading

    lock._stop = threading.Event()
    return lock


def test_a_second_run_is_refused_and_a_gone_one_taken_over() -> None:
    coord = FakeCoord()
    a = _lock(coord, "run-a")
    a.acquire()
    with pytest.raises(cl.ClusterInUse, match=r"in use by kueue-harness run run-a \(pid \d+ on host"):
        _lock(coord, "run-b").acquire()
    # run-a's process is gone (a SIGKILLed run): the next run takes the lock over.
    holder = json.loads(coord.lease["metadata"]["annotations"]["kueue-harness/holder"])
    coord.lease["metadata"]["annotations"]["kueue-harness/holder"] = json.dumps({**holder, "pid": 2 ** 22 + 7})
    b = _lock(coord, "run-b")
    b.acquire()
    assert json.loads(coord.lease["metadata"]["annotations"]["kueue-harness/holder"])["run"] == "run-b"
    a.release()  # not a's any more: left alone
    assert coord.lease is not None
    b.release()
    assert coord.lease is None
