"""The watch tap: Kueue's Workload watch responses stream through `WatchStream`, which owns the line
framing (once) and asks the loaded watch rules (harness/plan/actions.py: drop_watch_events, delay_watch_events)
what to do with each event line; every line that goes out to Kueue is recorded (`watch_event`, the
`delivered` trigger's data).

With no watch rule loaded and nothing held back, every chunk goes out as it came in, byte for byte; while
a watch rule is loaded (or lines are held back) a partial line waits for its newline, so that a whole
event line can be left out or held.

Delays: mitmproxy 11's stream callable is synchronous — it can only return bytes when a chunk arrives.
A delayed line, and every line after it on the same stream (a watch is ordered), waits in the stream's
queue and goes out with the first chunk that arrives at or after its due time (or at the end of the
stream, early). `watch_event_delayed` carries the due time so the harness can make a chunk arrive then
(harness/nemesis/runner.py touches a Workload). A watch that errors (Kueue cancels it, the connection drops)
loses what it held back: `watch_events_undelivered`.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from mitmproxy import http

from harness.kueue import api as kueue_api
from harness.plan.actions import TICK_WORKLOAD
from harness.proxy.addons.state import ProxyState


@dataclass
class _Pending:
    line: bytes
    due: float  # epoch seconds: not before
    arrived: float
    rec: dict[str, Any] | None  # the event's record (None: a line not parsed or not an event)
    rule: str | None  # the delay rule that held it; None: queued behind an earlier line


def event_record(ev: kueue_api.WatchEvent) -> dict[str, Any]:
    """The fields of `watch_event` for one Workload event."""
    return {"type": ev.type, "namespace": ev.namespace, "name": ev.name, "resource_version": ev.resource_version,
            "conditions": ev.conditions, "admission": ev.has_admission}


class WatchStream:
    """The stream callable of one Workload watch (flow number `seq`). `clock`: epoch seconds (tests)."""

    def __init__(self, state: ProxyState, seq: int | None, clock: Callable[[], float] = time.time,
                 resource: str = "workloads") -> None:
        self.state, self.seq, self.clock, self.resource = state, seq, clock, resource
        #: Workload watches are recorded (`watch_event`: the checkers' and the `delivered` trigger's data); other
        #: resources' lines are read only while a watch rule acts on them, and recorded only when one did.
        self.workloads = resource == "workloads"
        self.buf = bytearray()  # bytes not yet framed into complete lines
        self.sent = 0  # how many leading bytes of buf Kueue already received (pass-through of partial lines)
        self.pending: deque[_Pending] = deque()
        self.ruled, self.tracked = False, self.workloads  # set per chunk in __call__

    def __call__(self, data: bytes) -> bytes:
        now = self.clock()
        if not data:  # end of stream: everything held back goes out now
            out = self._flush(now, everything=True) + bytes(self.buf[self.sent:])
            self.buf.clear()
            self.sent = 0
            return out
        self.buf.extend(data)
        # What the loaded rules ask of this stream, once per chunk (not per line: the rules change only between
        # chunks, when triggers are checked).
        self.ruled, self.tracked = self._ruled(), self._tracked()
        framing = self.ruled or bool(self.pending)
        out = bytearray()
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                break
            line = bytes(self.buf[: nl + 1])
            del self.buf[: nl + 1]
            already = min(self.sent, len(line))
            self.sent -= already
            out += self._line(line, already, now)
        out += self._flush(now)
        if not framing and not self.pending:
            out += self.buf[self.sent:]
            self.sent = len(self.buf)
        if self.state.waiting():
            self.state.check_triggers()
        return bytes(out)

    def _ruled(self) -> bool:
        """A loaded watch rule acts on this stream's resource."""
        return self.state.rules.has_watch(self.resource)

    def _tracked(self) -> bool:
        """What this stream delivers is noted for `delivered` triggers: always for Workloads, for another resource
        while a loaded `{delivered: ID}` names a rule on it (RuleBook.delivered_resources)."""
        if self.workloads:
            return True
        wanted = self.state.rules.delivered_resources()
        return self.resource in wanted or "*" in wanted

    def _line(self, line: bytes, already: int, now: float) -> bytes:
        """One complete line: what goes out now (b"" if dropped or queued)."""
        ruled, tracked = self.ruled, self.tracked
        ev = kueue_api.parse_watch_line(line) if tracked or ruled else None
        rec = event_record(ev) if ev is not None and ev.name is not None else None
        if rec is not None and not self.workloads:
            rec["resource"], rec["object_kind"] = self.resource, ev.kind
        rule = None
        if rec is not None and already == 0 and ev.name != TICK_WORKLOAD and ruled:  # a line Kueue partly has goes on
            rule = self.state.rules.watch_rule(ev, self.resource)
        if rule is not None:
            verdict, seconds = rule.kind.on_watch_event(rule, ev)
            if verdict == "drop":
                self.state.log.write("watch_event_dropped", flow=self.seq, rule=rule.id, **rec)
                return b""
            if verdict == "delay":
                due = max(now + seconds, self.pending[-1].due if self.pending else 0.0)
                self.pending.append(_Pending(line, due, now, rec, rule.id))
                self.state.log.write("watch_event_delayed", flow=self.seq, rule=rule.id, seconds=seconds,
                                     due=due, **rec)
                return b""
        if self.pending:
            self.pending.append(_Pending(line[already:], now, now, rec, None))
            return b""
        if rec is not None and tracked:
            self._deliver(rec, logged=self.workloads)
        return line[already:]

    def _flush(self, now: float, everything: bool = False) -> bytes:
        """The held-back lines that are due (all of them at the end of the stream), in order."""
        out = bytearray()
        while self.pending and (everything or self.pending[0].due <= now):
            p = self.pending.popleft()
            if p.rec is not None and (p.rule is not None or self.tracked):
                extra: dict[str, Any] = {"delayed": round(now - p.arrived, 3)} if now > p.arrived else {}
                if p.rule is not None:
                    extra["delayed"] = round(now - p.arrived, 3)
                    extra["delay_rule"] = p.rule
                    extra["late"] = round(now - p.due, 3)  # > 0: after its due time; < 0: early (stream end)
                self._deliver(p.rec, logged=self.workloads or p.rule is not None, **extra)
            out += p.line
        return bytes(out)

    def _deliver(self, rec: dict[str, Any], logged: bool = True, **extra: Any) -> None:
        """Note `rec` delivered to Kueue (the `delivered` trigger's data) and, when `logged`, record `watch_event`
        (every Workload event; another resource's only when a watch rule acted on it)."""
        if self.tracked:
            self.state.delivered_event(rec)
        if logged:
            self.state.log.write("watch_event", flow=self.seq, **rec, **extra)

    def lost(self) -> int:
        """Drop what is held back (the watch ended without an end of stream); returns how many lines."""
        n = len(self.pending)
        self.pending.clear()
        return n


class WatchTap:
    """Puts a WatchStream on every watch response (a non-Workload one is read only while a watch rule acts on its
    resource; plain GETs do not stream), and logs `watch_open` / `watch_closed` (Workload watches) and
    `watch_events_undelivered`."""

    name = "kh_watch"

    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self.streams: dict[str, WatchStream] = {}

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if not kueue_api.is_watch(flow.request.path):
            return
        ref = kueue_api.parse_path(flow.request.path)
        if ref is None:
            flow.response.stream = True
            return
        # Every watch Kueue opens is tapped (its informers open them at start and keep them): a rule loaded later
        # on ProvisioningRequests or Jobs acts on a watch already open. Without such a rule, a non-Workload
        # stream's chunks go out as they came, unread.
        fs = self.state.flow(flow.id)
        seq = fs.seq if fs is not None else None
        stream = self.streams[flow.id] = WatchStream(self.state, seq, resource=ref.resource)
        flow.response.stream = stream
        if ref.resource == "workloads":
            self.state.log.write("watch_open", flow=seq, path=flow.request.path)

    def response(self, flow: http.HTTPFlow) -> None:
        if kueue_api.is_watch(flow.request.path):
            fs = self.state.flow(flow.id)
            stream = self.streams.pop(flow.id, None)
            if stream is not None and stream.workloads:
                self.state.log.write("watch_closed", flow=fs.seq if fs else None, path=flow.request.path)

    def error(self, flow: http.HTTPFlow) -> None:
        stream = self.streams.pop(flow.id, None)
        if stream is not None:
            n = stream.lost()
            if n:
                self.state.log.write("watch_events_undelivered", flow=stream.seq, lines=n)
