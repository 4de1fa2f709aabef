"""harness/env/webhook_ready.py: which endpoints kube-proxy routes to, and the answered streak."""

import pytest

from harness.env.webhook_ready import ready_addresses, streak


def test_ready_addresses_leave_out_endpoints_not_ready():
    slices = [{"endpoints": [
        {"addresses": ["10.244.0.5"], "conditions": {"ready": True}},
        {"addresses": ["10.244.0.4"], "conditions": {"ready": False, "terminating": True}},
        {"addresses": ["10.244.0.6"]},  # no conditions: ready (discovery.k8s.io/v1)
    ]}, {"endpoints": None}]
    assert ready_addresses(slices) == {"10.244.0.5", "10.244.0.6"}


def test_ready_addresses_of_no_slices_is_empty():
    assert ready_addresses([]) == set()


def test_streak_needs_n_answers_in_a_row():
    answers = iter([True, True, False, True, True, True])
    probe = streak(lambda: next(answers), n=3)
    assert [probe() for _ in range(6)] == [False, False, False, False, False, True]


def test_streak_starts_again_after_an_error_and_lets_it_through():
    calls = iter([True, True, RuntimeError("context deadline exceeded"), True, True, True])

    def call():
        v = next(calls)
        if isinstance(v, Exception):
            raise v
        return v

    probe = streak(call, n=3)
    assert probe() is False and probe() is False
    with pytest.raises(RuntimeError):
        probe()
    assert [probe(), probe(), probe()] == [False, False, True]
