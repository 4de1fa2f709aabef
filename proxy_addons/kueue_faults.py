"""mitmproxy addon between Kueue and kube-apiserver: classifies Kueue's requests (harness.kueue_api),
applies fault rules (harness.faults), records every event as JSONL, and serves a control channel.

Run as `mitmdump -s proxy_addons/kueue_faults.py --set kh_control_port=N --set kh_token_file=F
--set kh_events=F.jsonl` (harness/proxy.py does this). Unmatched traffic passes unchanged; watch
responses stream (a watch that is buffered looks like a Kueue bug: notes/mitmproxy-11.md).
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import json
import logging
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from mitmproxy import ctx, http

from harness import kueue_api
from harness.faults import (FlowRecord, Rule, RuleBook, RuleError, kubernetes_status, trigger_satisfied,
                            validate_rule_set)

_MAX_CONTROL_BODY = 1 << 20
_CONTROL_READ_TIMEOUT = 10.0  # seconds a control client may take to send its request


class Hold:
    """A parked request or response, waiting for release/fail from the control channel.

    A plain class: mitmproxy loads this file as a script outside sys.modules, where @dataclass fails.
    """

    def __init__(self, id: str, rule_id: str, stage: str, flow: int, label: str, since: float,
                 max_hold: float) -> None:
        self.id, self.rule_id, self.stage, self.flow = id, rule_id, stage, flow
        self.label, self.since, self.max_hold = label, since, max_hold
        self.event = asyncio.Event()
        self.decision: dict[str, Any] = {}

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id, "rule": self.rule_id, "stage": self.stage, "flow": self.flow,
            "label": self.label, "since": self.since, "age": round(time.time() - self.since, 3),
        }


class EventLog:
    """Append-only JSONL, flushed per event (the primary record: .mitm files can lose the tail)."""

    def __init__(self) -> None:
        self._fh = None
        self.events: list[dict[str, Any]] = []

    def open(self, path: str) -> None:
        if self._fh:
            self._fh.close()
        self._fh = open(path, "a", buffering=1) if path else None

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        ev = {"ts": time.time(), "source": "proxy", "event": kind, **fields}
        self.events.append(ev)
        if self._fh:
            self._fh.write(json.dumps(ev, sort_keys=True) + "\n")
        return ev

    def close(self) -> None:
        if self._fh:
            self._fh.close()
            self._fh = None


class FlowFile:
    """Completed flows as a .mitm file (`mitmweb -r` opens it), flushed per flow, each a copy with its
    credentials redacted (harness.redact) and the addon's flow number and label in its metadata."""

    def __init__(self) -> None:
        self._fh = None
        self._writer = None
        self._redactor = None

    def open(self, path: str) -> None:
        from mitmproxy import io as mio

        from harness.redact import Redactor

        self.close()
        if path:
            self._fh = open(path, "ab")
            self._writer, self._redactor = mio.FlowWriter(self._fh), Redactor()

    def save(self, flow: http.HTTPFlow, seq: int | None, label: str | None) -> None:
        if self._writer is None:
            return
        try:
            copy = self._redactor.flow(flow)
            copy.metadata.update({"kh_flow": seq, "kh_label": label})
            self._writer.add(copy)
            self._fh.flush()
        except Exception as e:  # noqa: BLE001 - evidence only: never let saving break the traffic
            logging.getLogger(__name__).warning("kh_flows: could not save flow %s: %s", seq, e)

    def close(self) -> None:
        if self._fh:
            self._fh.close()
        self._fh = self._writer = None


class KueueFaults:
    def __init__(self) -> None:
        self.rules = RuleBook()
        self.holds: dict[str, Hold] = {}
        self.log = EventLog()
        self.flows_file = FlowFile()
        self.delivered: dict[str, dict[str, Any]] = {}  # "ns/name" -> last watch event delivered
        self.delivered_rv: dict[str, int] = {}  # "ns/name" -> highest resourceVersion delivered
        self.rule_flows: dict[str, list[FlowRecord]] = {}  # rule id -> flows it caught (for triggers)
        self._seq = itertools.count(1)
        self._hold_seq = itertools.count(1)
        self._server: asyncio.AbstractServer | None = None
        self._token = ""
        # Per-flow state kept off flow.metadata, which mitmproxy serializes when saving flows.
        self._flows: dict[str, dict[str, Any]] = {}

    def _info(self, flow: http.HTTPFlow) -> dict[str, Any]:
        return self._flows.setdefault(flow.id, {})

    # ---- mitmproxy hooks -------------------------------------------------------------------------
    def load(self, loader) -> None:
        loader.add_option("kh_control_port", int, 0, "Loopback port of the control channel (0: off).")
        loader.add_option("kh_token_file", str, "", "File holding the control channel's bearer token.")
        loader.add_option("kh_events", str, "", "JSONL file the addon appends its events to.")
        loader.add_option("kh_flows", str, "", "A .mitm file the addon appends every completed flow to, "
                          "credentials redacted (empty: off).")

    def configure(self, updated) -> None:
        if "kh_events" in updated:
            self.log.open(ctx.options.kh_events)
        if "kh_flows" in updated:
            self.flows_file.open(ctx.options.kh_flows)
        if "kh_token_file" in updated and ctx.options.kh_token_file:
            with open(ctx.options.kh_token_file) as fh:
                self._token = fh.read().strip()

    async def running(self) -> None:
        port = ctx.options.kh_control_port
        if port and self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
            self.log.write("proxy_ready", control_port=port)

    async def request(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        seq = next(self._seq)
        write = kueue_api.classify_request(req.method, req.path, dict(req.headers), req.raw_content)
        info = self._info(flow)
        info["seq"], info["write"] = seq, write
        if write is not None:
            flow.comment = write.summary()  # the label mitmweb shows ("admission ns/name (kueue-admission, loose)")
            self.log.write(
                "request", flow=seq, method=req.method, path=urlsplit(req.path).path,
                user_agent=req.headers.get("user-agent", ""), write=write.to_dict(),
            )
        body = None
        if any(st.rule.match.body_jsonpath for st in self.rules.rules.values()):
            try:
                body = json.loads(req.raw_content or b"null")
            except ValueError:
                body = None
        info["records"] = {}
        for obs in self.rules.observers(write, req.method, req.path, body):
            self._record_flow(flow, obs)
            self.log.write("observed", flow=seq, rule=obs.id, label=write.summary() if write else req.path)
        rule = self.rules.first(write, req.method, req.path, "request", body)
        info["response_rule"] = self.rules.first(write, req.method, req.path, "response", body)
        if info["response_rule"] is not None:
            self._record_flow(flow, info["response_rule"])
        if rule is not None:
            self._record_flow(flow, rule)
            await self._act(flow, rule, "request")
            resp_rule = info["response_rule"]
            if flow.response is not None and resp_rule is not None:
                # The proxy answered: no server answer for the response rule, so give its use back.
                st = self.rules.rules.get(resp_rule.id)
                if st is not None and st.rule is resp_rule:
                    st.hits -= 1
                    flows = self.rule_flows.get(resp_rule.id, [])
                    info["records"].pop(resp_rule.id, None)
                    self.rule_flows[resp_rule.id] = [f for f in flows if f.flow != seq]
                info["response_rule"] = None

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if kueue_api.is_watch(flow.request.path):
            ref = kueue_api.parse_path(flow.request.path)
            if ref is not None and ref.resource == "workloads":
                flow.response.stream = self._watch_tap(flow)
                self.log.write("watch_open", flow=self._info(flow).get("seq"), path=flow.request.path)
            else:
                flow.response.stream = True

    async def response(self, flow: http.HTTPFlow) -> None:
        info = self._info(flow)
        seq = info.get("seq")
        rule = info.get("response_rule")
        if rule is not None:
            await self._act(flow, rule, "response")
        write = info.get("write")
        if write is not None and flow.response is not None:
            rv = None
            if not flow.response.stream:
                try:
                    rv = (json.loads(flow.response.content or b"{}").get("metadata") or {}).get("resourceVersion")
                except (ValueError, AttributeError):
                    rv = None
            self.log.write(
                "response", flow=seq, status=flow.response.status_code, resource_version=rv,
                label=write.summary(), write=write.write, namespace=write.namespace, name=write.name,
            )
        if info.get("records") and flow.response is not None:
            rv = None
            try:
                rv = (json.loads(flow.response.content or b"{}").get("metadata") or {}).get("resourceVersion")
            except (ValueError, AttributeError, TypeError):
                pass
            for rec in info["records"].values():
                rec.answered_status, rec.answered_rv = flow.response.status_code, rv
            self._check_triggers()
        if kueue_api.is_watch(flow.request.path):
            self.log.write("watch_closed", flow=seq, path=flow.request.path)
        # Saved: Kueue's writes, anything a rule touched, and failed answers; not every GET and LIST
        # (copying and redacting those was 13-17 % of the proxy's CPU: docs/benchmarks.md).
        if write is not None or info.get("records") or (flow.response is not None and flow.response.status_code >= 400):
            self.flows_file.save(flow, seq, write.summary() if write is not None else None)
        self._flows.pop(flow.id, None)

    def error(self, flow: http.HTTPFlow) -> None:
        info = self._flows.pop(flow.id, {})
        if info.get("write") is not None or kueue_api.is_watch(flow.request.path):
            self.log.write("flow_error", flow=info.get("seq"), error=str(flow.error))
        write = info.get("write")
        self.flows_file.save(flow, info.get("seq"), write.summary() if write is not None else None)

    def done(self) -> None:
        for h in list(self.holds.values()):
            h.decision = {"action": "release", "why": "proxy shutting down"}
            h.event.set()
        if self._server is not None:
            self._server.close()
            self._server = None
        self.log.write("proxy_done")
        self.log.close()
        self.flows_file.close()

    # ---- faults ----------------------------------------------------------------------------------
    async def _act(self, flow: http.HTTPFlow, rule: Rule, stage: str) -> None:
        info = self._info(flow)
        seq, write = info.get("seq"), info.get("write")
        label = write.summary() if write else f"{flow.request.method} {urlsplit(flow.request.path).path}"
        if rule.action == "delay":
            self.log.write("delayed", flow=seq, rule=rule.id, stage=stage, seconds=rule.delay, label=label)
            await asyncio.sleep(rule.delay)
            return
        if rule.action == "fail":
            self._fail(flow, rule.status, rule.reason, rule.message)
            self.log.write("failed", flow=seq, rule=rule.id, stage=stage, status=rule.status, label=label)
            return
        if rule.action == "reset":
            self.log.write("reset", flow=seq, rule=rule.id, stage=stage, label=label)
            flow.kill()
            return
        record = info.get("records", {}).get(rule.id)
        hold = Hold(
            id=f"h{next(self._hold_seq)}", rule_id=rule.id, stage=stage, flow=seq, label=label,
            since=time.time(), max_hold=rule.max_hold,
        )
        self.holds[hold.id] = hold
        extra = {}
        if stage == "response" and flow.response is not None:
            extra = {"status": flow.response.status_code}
            try:
                extra["resource_version"] = (json.loads(flow.response.content or b"{}").get("metadata") or {}).get("resourceVersion")
            except (ValueError, AttributeError):
                pass
        self.log.write("held", flow=seq, hold=hold.id, rule=rule.id, stage=stage, label=label, **extra)
        hold.rule = rule
        if record is not None:
            record.held, record.held_status = True, extra.get("status")
        self._check_triggers()
        rel = rule.release
        limit = min(rule.max_hold, rel.timeout) if rel is not None and rel.timeout else rule.max_hold
        try:
            await asyncio.wait_for(hold.event.wait(), timeout=limit)
        except asyncio.TimeoutError:
            if rel is not None and rel.timeout and rel.timeout <= rule.max_hold:
                # The plan's own timeout: an expected outcome, done as the plan says.
                hold.decision = {"action": rel.on_timeout, "status": rel.status, "reason": rel.reason,
                                 "message": rel.message, "why": f"release.timeout {rel.timeout}s"}
                self.log.write("hold_timeout", flow=seq, hold=hold.id, rule=rule.id, label=label,
                               then=rel.on_timeout)
            else:
                hold.decision = {"action": "release", "why": f"max_hold {rule.max_hold}s expired"}
                self.log.write("hold_expired", flow=seq, hold=hold.id, rule=rule.id, label=label)
        finally:
            self.holds.pop(hold.id, None)
        d = hold.decision
        if d.get("action") == "fail":
            status = int(d.get("status", 500))
            self._fail(flow, status, d.get("reason", "InternalError"), d.get("message", "injected by kueue-harness"))
            self.log.write("failed", flow=seq, hold=hold.id, rule=rule.id, stage=stage, status=status, label=label)
        else:
            self.log.write("released", flow=seq, hold=hold.id, rule=rule.id, stage=stage, label=label,
                           why=d.get("why", "control"))
        if record is not None:
            record.released = True
            self._check_triggers()

    def _record_flow(self, flow: http.HTTPFlow, rule: Rule) -> FlowRecord:
        info = self._info(flow)
        write = info.get("write")
        rec = FlowRecord(info.get("seq"), write.namespace if write else None, write.name if write else None)
        info.setdefault("records", {})[rule.id] = rec
        self.rule_flows.setdefault(rule.id, []).append(rec)
        return rec

    def _check_triggers(self) -> None:
        """Release every hold whose rule's release triggers all hold now (plans: harness/faults.py)."""
        for hold in list(self.holds.values()):
            rule = getattr(hold, "rule", None)
            if rule is None or rule.release is None or not rule.release.after or hold.event.is_set():
                continue
            if all(trigger_satisfied(t, self.rule_flows, self.delivered_rv) for t in rule.release.after):
                why = "triggers: " + ", ".join(
                    f"{t.rule} {t.state}" if t.rule else f"Kueue's watch delivered {t.delivered}'s object"
                    for t in rule.release.after)
                hold.decision = {"action": "release", "why": why}
                hold.event.set()

    @staticmethod
    def _fail(flow: http.HTTPFlow, status: int, reason: str, message: str) -> None:
        body = json.dumps(kubernetes_status(status, reason, message)).encode()
        flow.response = http.Response.make(status, body, {"content-type": "application/json"})

    def _watch_tap(self, flow: http.HTTPFlow):
        """A stream callable for Workload watches: records each event Kueue receives, and drops those a
        drop_watch_events rule matches. With no such rule loaded every chunk goes out as it came in,
        byte for byte; while one is loaded a partial line waits for its newline, so that a whole event
        line can be left out."""
        buf = bytearray()  # bytes not yet parsed into complete lines
        sent = 0  # how many leading bytes of buf Kueue already received
        seq = self._info(flow).get("seq")

        def tap(data: bytes) -> bytes:
            nonlocal sent
            if not data:  # end of stream: flush what was held back
                rest = bytes(buf[sent:])
                buf.clear()
                sent = 0
                return rest
            buf.extend(data)
            dropping = any(st.rule.action == "drop_watch_events" for st in self.rules.rules.values())
            out = bytearray()
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    break
                line = bytes(buf[: nl + 1])
                del buf[: nl + 1]
                already = min(sent, len(line))
                sent -= already
                ev = kueue_api.parse_watch_line(line)
                if ev is not None and ev.name is not None:
                    rec = {
                        "type": ev.type, "namespace": ev.namespace, "name": ev.name,
                        "resource_version": ev.resource_version, "conditions": ev.conditions,
                        "admission": ev.has_admission,
                    }
                    drop = None
                    if dropping and already == 0 and ev.type != "BOOKMARK":
                        drop = self.rules.drop_watch_event(ev.namespace, ev.name)
                    if drop is not None:
                        self.log.write("watch_event_dropped", flow=seq, rule=drop.id, **rec)
                        continue
                    key = f"{ev.namespace}/{ev.name}"
                    self.delivered[key] = rec
                    try:
                        self.delivered_rv[key] = max(self.delivered_rv.get(key, 0), int(ev.resource_version or 0))
                    except ValueError:
                        pass
                    self.log.write("watch_event", flow=seq, **rec)
                out.extend(line[already:])
            if not dropping:
                out.extend(buf[sent:])
                sent = len(buf)
            if self.holds:
                self._check_triggers()
            return bytes(out)

        return tap

    # ---- control channel -------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return {
            "rules": [{"rule": s.rule.to_dict(), "hits": s.hits} for s in self.rules.rules.values()],
            "holds": [h.view() for h in self.holds.values()],
            "events": len(self.log.events),
        }

    def _decide(self, hold_id: str, decision: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        hold = self.holds.get(hold_id)
        if hold is None:
            return 404, {"error": f"no hold {hold_id}; current holds: {sorted(self.holds)}"}
        hold.decision = decision
        hold.event.set()
        return 200, hold.view()

    def _handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        parts = [unquote(p) for p in urlsplit(path).path.split("/") if p]
        query = kueue_api.query_params(path)
        if method == "GET" and parts == ["state"]:
            return 200, self._state()
        if method == "GET" and parts == ["events"]:
            since = int(query.get("since", "0"))
            return 200, {"events": self.log.events[since:], "next": len(self.log.events)}
        if method == "GET" and parts == ["delivered"]:
            pattern = query.get("name", "*")
            return 200, {k: v for k, v in self.delivered.items() if fnmatch.fnmatchcase(k, pattern)}
        if method == "POST" and parts == ["rules"]:
            try:
                rule = Rule.from_dict(body)
                validate_rule_set([rule], set(self.rules.rules))
                self.rules.add(rule)
                self.rule_flows.pop(rule.id, None)  # a reloaded id starts with fresh trigger state
            except (RuleError, TypeError) as e:
                return 400, {"error": str(e)}
            self.log.write("rule_added", rule=rule.to_dict())
            return 201, rule.to_dict()
        if method == "POST" and parts == ["plan"]:
            # All or nothing: a bad plan changes nothing in the running proxy.
            raw = body.get("rules")
            if not isinstance(raw, list) or not raw:
                return 400, {"error": "plan: `rules` must be a non-empty list"}
            try:
                bad = [i for i, r in enumerate(raw) if not isinstance(r, dict)]
                if bad:
                    raise RuleError(f"plan: rules[{bad[0]}] must be an object with id, match, action")
                rules = [Rule.from_dict(r) for r in raw]
                validate_rule_set(rules, set(self.rules.rules))
            except (RuleError, TypeError) as e:
                return 400, {"error": str(e)}
            for r in rules:
                self.rules.add(r)
                self.rule_flows.pop(r.id, None)  # a reloaded id starts with fresh trigger state
                self.log.write("rule_added", rule=r.to_dict(), plan=body.get("name"))
            return 201, {"loaded": [r.id for r in rules], "plan": body.get("name")}
        if method == "DELETE" and len(parts) == 2 and parts[0] == "rules":
            self.rules.remove(parts[1])
            self.rule_flows.pop(parts[1], None)
            self.log.write("rule_removed", rule=parts[1])
            return 200, {"removed": parts[1]}
        if method == "POST" and len(parts) == 3 and parts[0] == "holds" and parts[2] in ("release", "fail"):
            status = body.get("status", 500)
            if parts[2] == "fail" and (isinstance(status, bool) or not isinstance(status, int)
                                       or not 100 <= status <= 599):
                return 400, {"error": f"fail: status {status!r} is not an HTTP status"}
            decision = {"action": parts[2], **body}
            decision.setdefault("why", "control")
            return self._decide(parts[1], decision)
        if method == "POST" and parts == ["release-all"]:
            ids = list(self.holds)
            for hid in ids:
                self._decide(hid, {"action": "release", "why": body.get("why", "release-all")})
            return 200, {"released": ids}
        return 404, {"error": f"no route {method} {path}"}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP/1.1 request per connection: loopback only, `Authorization: Bearer <token>` required."""
        try:
            # Bounded: an idle or slow client must not hold a connection (and a file descriptor) forever.
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _CONTROL_READ_TIMEOUT)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for l in lines[1:]:
                if ":" in l:
                    k, v = l.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            if length > _MAX_CONTROL_BODY:
                code, payload = 413, {"error": "body too large"}
            else:
                raw = await asyncio.wait_for(reader.readexactly(length), _CONTROL_READ_TIMEOUT) if length else b""
                if not self._token or headers.get("authorization") != f"Bearer {self._token}":
                    code, payload = 401, {"error": "missing or wrong bearer token"}
                else:
                    try:
                        body = json.loads(raw) if raw else {}
                    except (ValueError, RecursionError) as e:
                        body, code, payload = None, 400, {"error": f"bad JSON body: {e}"}
                    if body is not None:
                        try:
                            code, payload = self._handle(method, path, body if isinstance(body, dict) else {})
                        except ValueError as e:
                            code, payload = 400, {"error": f"bad request: {e}"}
            out = json.dumps(payload).encode()
            writer.write(
                f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {len(out)}\r\n"
                "Connection: close\r\n\r\n".encode() + out
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError,
                ValueError, RecursionError):
            pass
        finally:
            writer.close()


addons = [KueueFaults()]
