"""Fault injection on flows: find the rules that take a request (RuleBook), record the flow for their
triggers, and let the rule's action (harness/plan/actions.py) act on it at the request or the response stage.
Holds — the parking machinery the `hold` action uses — live here too.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mitmproxy import http

from harness.plan.rules import Rule, kubernetes_status
from harness.proxy.addons.state import Decision, FlowState, ProxyState


def fail_flow(flow: http.HTTPFlow, status: int, reason: str, message: str) -> None:
    """Answer `flow` with a Kubernetes Status body of HTTP `status` (replacing any server answer)."""
    body = json.dumps(kubernetes_status(status, reason, message)).encode()
    flow.response = http.Response.make(status, body, {"content-type": "application/json"})


class FlowAct:
    """What an action's `apply` works with (harness.plan.actions.FlowAct): one flow, one rule, one stage."""

    def __init__(self, state: ProxyState, flow: http.HTTPFlow, fs: FlowState, rule: Rule, stage: str) -> None:
        self.state, self.flow, self.fs, self.rule, self.stage = state, flow, fs, rule, stage
        self.seq, self.label = fs.seq, fs.label

    def log(self, event: str, **fields: Any) -> None:
        """Log a proxy event about this flow: flow, rule, stage, label and `fields`."""
        self.state.log.write(event, flow=self.seq, rule=self.rule.id, stage=self.stage, label=self.label, **fields)

    def fail(self, status: int, reason: str, message: str) -> None:
        """Answer the flow with a Kubernetes Status of HTTP `status`."""
        fail_flow(self.flow, status, reason, message)

    def kill(self) -> None:
        """Reset the stream (HTTP/2) or close the connection (HTTP/1.1)."""
        self.flow.kill()

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` on the event loop (other flows go on)."""
        await asyncio.sleep(seconds)

    async def hold(self) -> None:
        """Park the flow until its release triggers hold, a command decides, `release.timeout` (then as
        the plan says: `hold_timeout`) or `max_hold` (then released: `hold_expired`). Logs `held`, then
        `released` or `failed`, and keeps the rule's trigger record up to date."""
        state, rule, stage, flow = self.state, self.rule, self.stage, self.flow
        record = self.fs.records.get(rule.id)
        hold = state.new_hold(rule, stage, self.fs)
        extra: dict[str, Any] = {}
        if stage == "response" and flow.response is not None:
            extra = {"status": flow.response.status_code}
            try:
                extra["resource_version"] = (json.loads(flow.response.content or b"{}").get("metadata") or {}).get(
                    "resourceVersion")
            except (ValueError, AttributeError):
                pass
        state.log.write("held", flow=self.seq, hold=hold.id, rule=rule.id, stage=stage, label=self.label, **extra)
        if record is not None:
            record.held, record.held_status = True, extra.get("status")
        state.check_triggers()
        rel = rule.release
        max_hold = rule.param("max_hold")
        limit = min(max_hold, rel.timeout) if rel is not None and rel.timeout else max_hold
        how = None
        try:
            await asyncio.wait_for(hold.event.wait(), timeout=limit)
        except asyncio.TimeoutError:
            if rel is not None and rel.timeout and rel.timeout <= max_hold:
                # The plan's own timeout: an expected outcome, done as the plan says.
                hold.decision = Decision(rel.on_timeout, why=f"release.timeout {rel.timeout}s", status=rel.status,
                                         reason=rel.reason, message=rel.fail_message(timed_out=True))
                state.log.write("hold_timeout", flow=self.seq, hold=hold.id, rule=rule.id, label=self.label,
                                then=rel.on_timeout)
                how = "timeout"
            else:
                hold.decision = Decision("release", why=f"max_hold {max_hold:g}s expired")
                state.log.write("hold_expired", flow=self.seq, hold=hold.id, rule=rule.id, label=self.label,
                                max_hold=max_hold, since=hold.since)
                how = "expired"
        finally:
            d = hold.decision or Decision()
            state.end_hold(hold, how or ("failed" if d.action == "fail" else "released"), d.why)
        if d.action == "fail":
            status = int(d.status)
            fail_flow(flow, status, d.reason, d.message)
            state.log.write("failed", flow=self.seq, hold=hold.id, rule=rule.id, stage=stage, status=status,
                            label=self.label, why=d.why)
        else:
            state.log.write("released", flow=self.seq, hold=hold.id, rule=rule.id, stage=stage, label=self.label,
                            why=d.why)
        if record is not None:
            record.released = True
            state.check_triggers()


class Inject:
    """The fault injector: at the request stage it records the flow for observe rules and for the first
    acting rule of each stage, then acts; at the response stage it acts with the response rule."""

    name = "kh_inject"

    def __init__(self, state: ProxyState) -> None:
        self.state = state

    async def request(self, flow: http.HTTPFlow) -> None:
        state, req = self.state, flow.request
        fs = state.flow(flow.id)
        if fs is None:
            return
        body = None
        if any(st.rule.match.body_jsonpath for st in state.rules.rules.values()):
            try:
                body = json.loads(req.raw_content or b"null")
            except ValueError:
                body = None
        write = fs.write
        for obs in state.rules.observers(write, req.method, req.path, body):
            state.record_flow(fs, obs)
            state.log.write("observed", flow=fs.seq, rule=obs.id, label=write.summary() if write else req.path)
        rule = state.rules.first(write, req.method, req.path, "request", body)
        fs.response_rule = state.rules.first(write, req.method, req.path, "response", body)
        if fs.response_rule is not None:
            state.record_flow(fs, fs.response_rule)
        if write is not None and state.rules.rules and state.unmatched.keys() != state.rules.rules.keys():
            state.near_misses(write, req.method, req.path, body)  # rules that missed only by name: warn
        if rule is not None:
            state.record_flow(fs, rule)
            await rule.kind.apply(FlowAct(state, flow, fs, rule, "request"), rule, "request")
            if flow.response is not None and fs.response_rule is not None:
                # The proxy answered: no server answer for the response rule, so give its use back.
                state.unrecord_flow(fs, fs.response_rule)
                fs.response_rule = None

    async def response(self, flow: http.HTTPFlow) -> None:
        fs = self.state.flow(flow.id)
        if fs is not None and fs.response_rule is not None:
            rule = fs.response_rule
            await rule.kind.apply(FlowAct(self.state, flow, fs, rule, "response"), rule, "response")

    def done(self) -> None:
        for h in list(self.state.holds.values()):
            h.decide(Decision("release", why="proxy shutting down"))
