"""Classification and recording: number every flow, classify Kueue's writes (harness.kueue.api), log
`request` and `response`, feed answers into the rules' trigger records, and own the event log file.

Two addons, because mitmproxy calls each hook on the addons in list order and the answer must be
recorded after the injector's response-stage act: `Classify` goes first, `Record` after `Inject`.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from mitmproxy import ctx, http

from harness.kueue import api as kueue_api
from harness.proxy.addons.state import ProxyState


def answer_rv(response: http.Response | None) -> str | None:
    """metadata.resourceVersion of a JSON answer (None if none, not JSON, or streamed)."""
    if response is None or response.stream:
        return None
    try:
        return (json.loads(response.content or b"{}").get("metadata") or {}).get("resourceVersion")
    except (ValueError, AttributeError, TypeError):
        return None


class Classify:
    """First in the chain: gives the flow its number and FlowState, labels Kueue's writes (mitmweb's
    comment column) and logs `request`."""

    name = "kh_classify"

    def __init__(self, state: ProxyState) -> None:
        self.state = state

    def request(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        write = kueue_api.classify_request(req.method, req.path, dict(req.headers), req.raw_content)
        label = write.summary() if write else f"{req.method} {urlsplit(req.path).path}"
        fs = self.state.new_flow(flow.id, write, label)
        if write is not None:
            flow.comment = label  # the label mitmweb shows ("admission ns/name (kueue-admission, loose)")
            self.state.log.write(
                "request", flow=fs.seq, method=req.method, path=urlsplit(req.path).path,
                user_agent=req.headers.get("user-agent", ""), write=write.to_dict(),
            )


class Record:
    """After the injector: logs `response` for classified writes once the answer goes out to Kueue, gives
    each rule record of the flow its answer (status, resourceVersion) and re-checks triggers; logs
    `flow_error`; owns the `kh_events` file (`proxy_done` closes it)."""

    name = "kh_record"

    def __init__(self, state: ProxyState) -> None:
        self.state = state

    def load(self, loader) -> None:
        loader.add_option("kh_events", str, "", "JSONL file the addon appends its events to.")

    def configure(self, updated) -> None:
        if "kh_events" in updated:
            self.state.log.open(ctx.options.kh_events)

    def response(self, flow: http.HTTPFlow) -> None:
        fs = self.state.flow(flow.id)
        if fs is None or flow.response is None:
            return
        write = fs.write
        if write is None and not fs.records:
            return  # nothing to log or to give an answer to: no JSON parse of the body
        rv = answer_rv(flow.response)
        if write is not None:
            self.state.log.write(
                "response", flow=fs.seq, status=flow.response.status_code, resource_version=rv,
                label=write.summary(), write=write.write, namespace=write.namespace, name=write.name,
            )
        if fs.records:
            for rec in fs.records.values():
                rec.answered_status, rec.answered_rv = flow.response.status_code, rv
            self.state.check_triggers()

    def error(self, flow: http.HTTPFlow) -> None:
        fs = self.state.flow(flow.id)
        if (fs is not None and fs.write is not None) or kueue_api.is_watch(flow.request.path):
            self.state.log.write("flow_error", flow=fs.seq if fs else None, error=str(flow.error))

    def done(self) -> None:
        self.state.log.write("proxy_done")
        self.state.log.close()

