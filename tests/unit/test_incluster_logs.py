"""Unit tests of PodLogFollower (harness/env/incluster.py), the thread that copies Kueue's log from the
API (`pods/log?follow=true`) into kueue.log, against a synthetic CoreV1Api: chunks are written as they
come, a restarted container is followed from its start, a cut stream of the same container is followed
again from shortly before its last bytes, and a deleted Pod ends the thread."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from harness.env.incluster import PodLogFollower


class _Stream:
    def __init__(self, chunks):
        self.chunks = chunks
        self.released = False

    def stream(self, amt, decode_content=False):
        yield from self.chunks

    def release_conn(self):
        self.released = True


def _pod(restarts, state="running", deleted=False):
    st = SimpleNamespace(running=object() if state == "running" else None,
                         terminated=object() if state == "terminated" else None)
    return SimpleNamespace(
        metadata=SimpleNamespace(deletion_timestamp="now" if deleted else None),
        status=SimpleNamespace(container_statuses=[SimpleNamespace(name="manager", restart_count=restarts, state=st)]),
    )


class _Core:
    """Plays the API: `streams` are returned by successive log calls, `pods` by successive pod reads
    (an Exception instance is raised)."""

    def __init__(self, streams, pods):
        self.streams, self.pods = list(streams), list(pods)
        self.log_calls: list[dict] = []
        self.done = threading.Event()

    def read_namespaced_pod_log(self, name, namespace, **kw):
        self.log_calls.append(kw)
        return self.streams.pop(0)

    def read_namespaced_pod(self, name, namespace):
        p = self.pods.pop(0) if self.pods else RuntimeError("gone")
        if not self.pods:
            self.done.set()  # the last answer: the follower must stop after it
        if isinstance(p, Exception):
            raise p
        return p


def _follow(tmp_path, core, restarts=0):
    f = PodLogFollower(None, "kueue-system", "kueue-controller-manager-abc", "manager", tmp_path / "kueue.log",
                       restarts=restarts, poll=0.02)
    f.core = core
    f.start()
    assert core.done.wait(10), "the follower did not read the Pod's last state"
    f._thread.join(5)
    assert not f._thread.is_alive(), "the follower did not end by itself"
    f.stop()
    return (tmp_path / "kueue.log").read_text()


def test_restarted_container_is_followed_from_its_start(tmp_path):
    s1, s2 = _Stream([b'{"msg":"a"}\n{"ms', b'g":"b"}\n']), _Stream([b'{"msg":"c"}\n'])
    core = _Core([s1, s2], [_pod(0, "terminated"), _pod(1), RuntimeError("pod deleted")])
    text = _follow(tmp_path, core)
    lines = text.splitlines()
    assert lines[0] == '{"msg":"a"}' and lines[1] == '{"msg":"b"}'
    assert lines[2].startswith("# kueue-harness: container kueue-controller-manager-abc/manager restarted")
    assert lines[3] == '{"msg":"c"}'
    assert core.log_calls[0]["follow"] is True and core.log_calls[0]["container"] == "manager"
    assert "since_seconds" not in core.log_calls[1]  # a new container: from its first line
    assert s1.released and s2.released


def test_cut_stream_of_the_same_container_is_followed_again_from_shortly_before(tmp_path):
    core = _Core([_Stream([b'{"msg":"a"}\n']), _Stream([])], [_pod(0), _pod(0, deleted=True)])
    text = _follow(tmp_path, core)
    assert "log stream of kueue-controller-manager-abc/manager ended; following again" in text
    assert core.log_calls[1]["since_seconds"] >= 1


def test_deleted_pod_ends_the_follower(tmp_path):
    core = _Core([_Stream([b'{"msg":"a"}\n'])], [RuntimeError("404")])
    assert _follow(tmp_path, core) == '{"msg":"a"}\n'
    assert len(core.log_calls) == 1
