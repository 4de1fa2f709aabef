"""For tests that signal a child process: start it with SIGHUP, SIGINT and SIGTERM at their default dispositions,
as a user's terminal does. A test run under `nohup` ignores SIGHUP, and one started as a background job by a shell
without job control ignores SIGINT; a child inherits both, and the harness rightly leaves an ignored signal
ignored, so a test that sends it would wait for an exit that never comes (seen on 2026-12-02 in CI runs started
that way)."""

from __future__ import annotations

import signal


def default_signals() -> None:
    """`preexec_fn` for subprocess: reset the three stop signals to SIG_DFL in the child before it execs."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
