"""The fault proxy's mitmproxy addons, as small parts sharing one ProxyState (state.py):

| part | module | job |
|---|---|---|
| Classify | classify.py | number the flow, classify Kueue's write, log `request` |
| Inject | inject.py | match rules (harness.plan.rules.RuleBook), let the rule's action act; holds |
| Record | classify.py | log `response`, feed answers to triggers; the event log file |
| WatchTap | watch.py | Workload watch streams: line framing, watch rules (drop/delay), `watch_event` |
| FlowFile | flowfile.py | the redacted .mitm file of the flows that matter |
| Control | control.py | the loopback control channel |
| Forget | here | last: drops the flow's FlowState |

mitmproxy calls each hook on the parts in this order (awaiting async hooks one after the other), so a
part may rely on what the ones before it did to the same flow. proxy_addons/kueue_faults.py, the script
mitmdump loads, only imports `addons` from here: this is a normal package, so dataclasses work in it.
"""

from __future__ import annotations

import inspect
from typing import Any

from harness.proxy.addons.classify import Classify, Record
from harness.proxy.addons.control import Control
from harness.proxy.addons.flowfile import FlowFile
from harness.proxy.addons.inject import Inject
from harness.proxy.addons.state import ProxyState
from harness.proxy.addons.watch import WatchTap


class Forget:
    """Last in the chain: a finished flow's FlowState is dropped."""

    name = "kh_forget"

    def __init__(self, state: ProxyState) -> None:
        self.state = state

    def response(self, flow) -> None:
        self.state.forget(flow.id)

    def error(self, flow) -> None:
        self.state.forget(flow.id)


def make_addons(state: ProxyState | None = None) -> list[Any]:
    """A fresh set of parts in hook order, all sharing `state` (a new ProxyState if None)."""
    state = state or ProxyState()
    return [Classify(state), Inject(state), Record(state), WatchTap(state), FlowFile(state), Control(state),
            Forget(state)]


#: What mitmdump loads (through proxy_addons/kueue_faults.py).
addons = make_addons()

class KueueFaults:
    """All parts as one object whose hooks call each part in chain order: for tests and tools that drive
    hooks by hand (mitmproxy.test.taddons). mitmdump itself loads `addons`, the parts."""

    def __init__(self, state: ProxyState | None = None) -> None:
        self.state = state or ProxyState()
        self.parts = make_addons(self.state)
        self.control: Control = next(p for p in self.parts if isinstance(p, Control))
        self.watch: WatchTap = next(p for p in self.parts if isinstance(p, WatchTap))
        self.flows_file: FlowFile = next(p for p in self.parts if isinstance(p, FlowFile))

    # Shared state, under the names the single-file addon had.
    @property
    def rules(self):
        """The loaded rules (a RuleBook)."""
        return self.state.rules

    @property
    def holds(self):
        """Parked flows by hold id."""
        return self.state.holds

    @property
    def log(self):
        """The event log (its `events` list)."""
        return self.state.log

    @property
    def delivered(self):
        """Last watch event delivered per "ns/name"."""
        return self.state.delivered

    @property
    def delivered_rv(self):
        """Highest resourceVersion delivered per "ns/name"."""
        return self.state.delivered_rv

    @property
    def rule_flows(self):
        """Each rule's FlowRecords (for triggers)."""
        return self.state.rule_flows

    @property
    def _token(self) -> str:
        return self.control.token

    @_token.setter
    def _token(self, value: str) -> None:
        self.control.token = value

    def _handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return self.control.handle(method, path, body)

    async def _serve(self, reader, writer) -> None:
        await self.control.serve(reader, writer)

    # Hooks: each part's, in order.
    def _sync(self, hook: str, *args: Any) -> None:
        for p in self.parts:
            f = getattr(p, hook, None)
            if f is not None:
                f(*args)

    async def _async(self, hook: str, *args: Any) -> None:
        for p in self.parts:
            f = getattr(p, hook, None)
            if f is not None:
                res = f(*args)
                if inspect.isawaitable(res):
                    await res

    def load(self, loader) -> None:
        self._sync("load", loader)

    def configure(self, updated) -> None:
        self._sync("configure", updated)

    async def running(self) -> None:
        await self._async("running")

    async def request(self, flow) -> None:
        await self._async("request", flow)

    def responseheaders(self, flow) -> None:
        self._sync("responseheaders", flow)

    async def response(self, flow) -> None:
        await self._async("response", flow)

    def error(self, flow) -> None:
        self._sync("error", flow)

    def done(self) -> None:
        self._sync("done")


__all__ = ["Classify", "Control", "FlowFile", "Forget", "Inject", "KueueFaults", "ProxyState", "Record", "WatchTap",
           "addons", "make_addons"]
