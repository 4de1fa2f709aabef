"""Unit tests of PodLogFollower (harness/env/pod_logs.py), the thread that copies Kueue's log from the
API (`pods/log?follow=true`) into kueue.log, against a synthetic CoreV1Api: chunks are written as they
come, a restarted container is followed from its start, a cut stream of the same container is followed
again from shortly before its last bytes, a deleted Pod ends the thread, and a stream that cannot be
opened is a problem said in the file, on the run's output and in health() (issue 22: a swallowed
pydantic error left kueue.log empty). One test calls the real kubernetes client with the follower's
timeouts: it must get as far as connecting."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException

from harness.env.incluster import PodLogFollower
from harness.env.pod_logs import CONNECT_TIMEOUT, READ_TIMEOUT


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
        s = self.streams.pop(0) if self.streams else _Stream([])
        if isinstance(s, Exception):
            raise s
        return s

    def read_namespaced_pod(self, name, namespace, **kw):
        p = self.pods.pop(0) if self.pods else _gone()
        if not self.pods:
            self.done.set()  # the last answer: the follower must stop after it
        if isinstance(p, Exception):
            raise p
        return p


def _gone():
    return ApiException(status=404, reason="Not Found")


def _follow(tmp_path, core, restarts=0, said=None):
    f = PodLogFollower(None, "kueue-system", "kueue-controller-manager-abc", "manager", tmp_path / "kueue.log",
                       restarts=restarts, poll=0.02, say=(said.append if said is not None else None))
    f.core = core
    f.start()
    assert core.done.wait(10), "the follower did not read the Pod's last state"
    f._thread.join(5)
    assert not f._thread.is_alive(), "the follower did not end by itself"
    f.stop()
    core.health = f.health()
    return (tmp_path / "kueue.log").read_text()


def test_restarted_container_is_followed_from_its_start(tmp_path):
    s1, s2 = _Stream([b'{"msg":"a"}\n{"ms', b'g":"b"}\n']), _Stream([b'{"msg":"c"}\n'])
    core = _Core([s1, s2], [_pod(0, "terminated"), _pod(1), _gone()])
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
    core = _Core([_Stream([b'{"msg":"a"}\n'])], [_gone()])
    text = _follow(tmp_path, core)
    assert text.startswith('{"msg":"a"}\n') and "is gone; its log ends here" in text
    assert len(core.log_calls) == 1
    assert core.health["problems"] == 0 and core.health["bytes"] == len('{"msg":"a"}\n')


def test_timeouts_are_finite_numbers(tmp_path):
    core = _Core([_Stream([b'{"msg":"a"}\n'])], [_gone()])
    _follow(tmp_path, core)
    connect, read = core.log_calls[0]["_request_timeout"]
    assert connect == CONNECT_TIMEOUT and read == READ_TIMEOUT
    assert all(isinstance(t, float) and 0 < t < 3600 for t in (connect, read))


def test_a_stream_that_cannot_be_opened_is_reported(tmp_path):
    """The client refusing the request (as kubernetes 37.x refused `(10, None)`): a marker line with the
    error and its stack, one line on the run's output, problems counted; the follower keeps trying."""
    said: list[str] = []
    boom = TypeError("Input should be a valid number")
    core = _Core([boom, boom], [_pod(0), _gone()])
    text = _follow(tmp_path, core, said=said)
    assert "cannot follow the log of kueue-controller-manager-abc/manager: the log request failed: TypeError: " \
           "Input should be a valid number" in text
    assert "Traceback" in text  # not a cluster failure: its stack is kept
    assert len(said) == 1 and "verdicts that read Kueue's log will be `error`" in said[0]
    assert core.health["problems"] == 2 and core.health["bytes"] == 0 and not core.health["alive"]
    assert "TypeError" in core.health["last"]


def test_an_api_error_is_reported_without_a_stack(tmp_path):
    core = _Core([ApiException(status=500, reason="Internal Server Error")], [_gone()])
    text = _follow(tmp_path, core)
    assert "the log request failed: ApiException" in text and "Traceback" not in text
    assert core.health["problems"] == 1


def test_the_real_client_accepts_the_followers_timeouts():
    """kubernetes' own client, pointed at a port nothing listens on: with the follower's timeouts it tries to
    connect (urllib3 fails); the tuple the old follower passed, (10, None), is refused before that."""
    from kubernetes import client
    from urllib3.exceptions import HTTPError

    cfg = client.Configuration(host="http://127.0.0.1:9")
    cfg.retries = 0
    core = client.CoreV1Api(client.ApiClient(cfg))
    with pytest.raises(HTTPError):
        core.read_namespaced_pod_log("p", "ns", container="manager", follow=True, _preload_content=False,
                                     _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    with pytest.raises(Exception) as bad:
        core.read_namespaced_pod_log("p", "ns", container="manager", follow=True, _preload_content=False,
                                     _request_timeout=(10, None))
    assert not isinstance(bad.value, HTTPError)
