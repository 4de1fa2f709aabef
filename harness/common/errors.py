"""Errors the harness raises for foreseeable problems, each with what to do next.

The CLI prints `str(err)` (one paragraph) and exits with `err.exit_code`; see docs/troubleshooting.md.
"""

from __future__ import annotations


class HarnessError(Exception):
    """A foreseeable problem. `str()` is a paragraph that says what to do; exit code 2 by default."""

    exit_code = 2


class UnservedVersion(HarnessError):
    """The requested Kueue version is not in the pinned table or not served by the Go module proxy."""

    exit_code = 3


class BuildError(HarnessError):
    """A Go build of a real component failed; the message quotes the tail of Go's output."""

    exit_code = 4


class EnvironmentNotReady(HarnessError):
    """A component did not start or did not become ready in its bound; quotes its log tail."""

    exit_code = 5


class PortInUse(HarnessError):
    """A port the harness wants to listen on is taken by another process."""

    exit_code = 6


class ProxyError(HarnessError):
    """The fault proxy failed to start, or its control channel refused a command."""

    exit_code = 7
