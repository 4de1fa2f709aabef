"""The flow file: completed flows as a .mitm file (`mitmweb -r` opens it), flushed per flow, each a copy
with its credentials redacted (harness.common.redact) and the proxy's flow number and label in its metadata.

Only the flows that matter are saved: Kueue's classified writes, anything a rule touched, and failed
answers — not every GET and LIST (copying and redacting those was 13-17 % of the proxy's CPU:
docs/benchmarks.md).
"""

from __future__ import annotations

import logging

from mitmproxy import ctx, http
from mitmproxy.io import tnetstring

from harness.proxy.addons.state import ProxyState


class FlowFile:
    """The `kh_flows` option's .mitm file (empty: off)."""

    name = "kh_flowfile"

    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self._fh = None
        self._writer = None
        self._redactor = None
        self._pending: list[tuple[http.HTTPFlow, int | None, str | None]] = []

    def load(self, loader) -> None:
        loader.add_option("kh_flows", str, "", "A .mitm file the addon appends every completed flow to, "
                          "credentials redacted (empty: off).")

    def configure(self, updated) -> None:
        if "kh_flows" in updated:
            self.open(ctx.options.kh_flows)

    def open(self, path: str) -> None:
        """Append flows to `path` from now on (empty: stop). Raises OSError if it cannot be opened."""
        from mitmproxy import io as mio

        from harness.common.redact import Redactor

        self.close()
        if path:
            self._fh = open(path, "ab")
            self._writer, self._redactor = mio.FlowWriter(self._fh), Redactor()

    def save(self, flow: http.HTTPFlow, seq: int | None, label: str | None) -> None:
        """Append a redacted copy of `flow`; a flow that cannot be saved is a warning, never an error."""
        if self._writer is None:
            return
        try:
            # The redacted copy's state, made from one serialization of the flow (Redactor.flow_state):
            # what FlowWriter.add would write for Redactor.flow's copy, at about half the CPU.
            state = self._redactor.flow_state(flow)
            state["metadata"].update({"kh_flow": seq, "kh_label": label})
            tnetstring.dump(state, self._fh)
            self._fh.flush()
        except Exception as e:  # noqa: BLE001 - evidence only: never let saving break the traffic
            logging.getLogger(__name__).warning("kh_flows: could not save flow %s: %s", seq, e)

    def response(self, flow: http.HTTPFlow) -> None:
        fs = self.state.flow(flow.id)
        if fs is None:
            return
        if fs.write is not None or fs.records or (flow.response is not None and flow.response.status_code >= 400):
            self._after_answer(flow, fs.seq, fs.write.summary() if fs.write is not None else None)

    def _after_answer(self, flow: http.HTTPFlow, seq: int | None, label: str | None) -> None:
        """Save `flow` one event-loop turn later, once mitmproxy has sent the answer on (the save is about
        half a millisecond that Kueue would otherwise wait for); at once when no loop runs (tests)."""
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.save(flow, seq, label)
            return
        self._pending.append((flow, seq, label))
        if len(self._pending) == 1:
            loop.call_soon(self._drain)

    def _drain(self) -> None:
        pending, self._pending = self._pending, []
        for flow, seq, label in pending:
            self.save(flow, seq, label)

    def error(self, flow: http.HTTPFlow) -> None:
        fs = self.state.flow(flow.id)
        write = fs.write if fs is not None else None
        self.save(flow, fs.seq if fs else None, write.summary() if write is not None else None)

    def close(self) -> None:
        """Save what is pending, close the file (nothing more is saved until `open`)."""
        self._drain()
        if self._fh:
            self._fh.close()
        self._fh = self._writer = None

    def done(self) -> None:
        self.close()
