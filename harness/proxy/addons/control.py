"""The control channel: a loopback HTTP/1.1 server (one request per connection, `Authorization: Bearer
<token>` required) through which the harness (harness/proxy/client.py) loads rules and plans, releases or fails
holds, reads events and deliveries, and reports process faults done.

Routes: GET /state, GET /events?since=N, GET /delivered?name=GLOB, POST /rules, POST /plan,
GET /rules/ID/reached?state=S[&status=N], DELETE /rules/ID, POST /holds/ID/release, POST /holds/ID/fail
(410 for a hold that has ended, saying how and when), POST /release-all, POST /signals/ID/done,
POST /facts ({"fact": key, "detail": {…}}: the harness saw a log line or object state that a loaded rule's
trigger or wait step names; 404 when none does).
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
from typing import Any
from urllib.parse import unquote, urlsplit

from mitmproxy import ctx

from harness.kueue import api as kueue_api
from harness.plan.rules import Rule, RuleError, rule_set_errors
from harness.proxy.addons.state import Decision, ProxyState

MAX_CONTROL_BODY = 1 << 20
#: What the harness may report about a finished signal (process fault, step): `signal_done`'s extra fields.
SIGNAL_DETAIL = ("error", "kill", "seconds", "objects", "matched")
CONTROL_READ_TIMEOUT = 10.0  # seconds a control client may take to send its request


class Control:
    """Options `kh_control_port` (0: off) and `kh_token_file`; serves once mitmproxy runs."""

    name = "kh_control"

    def __init__(self, state: ProxyState) -> None:
        self.state = state
        self.token = ""
        self._server: asyncio.AbstractServer | None = None

    def load(self, loader) -> None:
        loader.add_option("kh_control_port", int, 0, "Loopback port of the control channel (0: off).")
        loader.add_option("kh_token_file", str, "", "File holding the control channel's bearer token.")

    def configure(self, updated) -> None:
        if "kh_token_file" in updated and ctx.options.kh_token_file:
            with open(ctx.options.kh_token_file) as fh:
                self.token = fh.read().strip()

    async def running(self) -> None:
        port = ctx.options.kh_control_port
        if port and self._server is None:
            self._server = await asyncio.start_server(self.serve, "127.0.0.1", port)
            self.state.log.write("proxy_ready", control_port=port)

    def done(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    # ---- routes ----------------------------------------------------------------------------------
    def _decide(self, hold_id: str, decision: Decision) -> tuple[int, dict[str, Any]]:
        hold = self.state.holds.get(hold_id)
        if hold is None:
            held = f"current holds: {', '.join(sorted(self.state.holds)) or 'none'}"
            ended = self.state.ended.get(hold_id)
            if ended is not None:  # 410 Gone: it existed; say what became of it (an expiry above all)
                return 410, {"error": f"{ended.sentence()}; {held}", "ended": ended.view()}
            return 404, {"error": f"no hold {hold_id}; {held}"}
        hold.decide(decision)
        return 200, hold.view()

    def handle(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """Answer one control request: (HTTP status, JSON payload). Raises ValueError on a bad query."""
        state = self.state
        parts = [unquote(p) for p in urlsplit(path).path.split("/") if p]
        query = kueue_api.query_params(path)
        if method == "GET" and parts == ["state"]:
            return 200, state.view()
        if method == "GET" and parts == ["events"]:
            since = int(query.get("since", "0"))
            return 200, {"events": state.log.events[since:], "next": len(state.log.events)}
        if method == "GET" and parts == ["delivered"]:
            pattern = query.get("name", "*")
            return 200, {k: v for k, v in state.delivered.items() if fnmatch.fnmatchcase(k, pattern)}
        if method == "POST" and parts == ["rules"]:
            try:
                rule = Rule.from_dict(body)
                state.add_rules([rule], single=True)
            except (RuleError, TypeError) as e:
                return 400, {"error": str(e)}
            return 201, rule.to_dict()
        if method == "POST" and parts == ["plan"]:
            # All or nothing: a bad plan changes nothing in the running proxy.
            raw = body.get("rules")
            if not isinstance(raw, list) or not raw:
                return 400, {"error": "plan: `rules` must be a non-empty list"}
            # Every problem at once (one per line), as the plan loader reports a file's.
            problems: list[str] = []
            rules = []
            for i, r in enumerate(raw):
                if not isinstance(r, dict):
                    problems.append(f"plan: rules[{i}] must be an object with id, match, action")
                    continue
                try:
                    rules.append(Rule.from_dict(r))
                except (RuleError, TypeError) as e:
                    problems.append(str(e))
            if not problems:
                problems = [str(e) for e in rule_set_errors(rules, set(state.rules.rules))]
            if problems:
                return 400, {"error": "\n".join(problems), "errors": problems}
            src = body.get("source")  # where the plan came from (harness.plan.load.Plan.to_wire): recorded as given
            src = {k: v for k, v in src.items() if k in ("file", "namespace", "by") and isinstance(v, str)} \
                if isinstance(src, dict) else None
            try:
                state.add_rules(rules, plan=body.get("name"), source=src or None)
            except (RuleError, TypeError) as e:
                return 400, {"error": str(e)}
            return 201, {"loaded": [r.id for r in rules], "plan": body.get("name")}
        if method == "GET" and len(parts) == 3 and parts[0] == "rules" and parts[2] == "reached":
            status = query.get("status")
            try:
                return 200, state.reached(parts[1], query.get("state", "answered"),
                                          int(status) if status is not None else None)
            except KeyError:
                return 404, {"error": f"no rule {parts[1]} is loaded; loaded: "
                                      f"{', '.join(state.rules.rules) or 'none'}"}
            except RuleError as e:
                return 400, {"error": str(e)}
        if method == "DELETE" and len(parts) == 2 and parts[0] == "rules":
            state.remove_rule(parts[1])
            return 200, {"removed": parts[1]}
        if method == "POST" and len(parts) == 3 and parts[0] == "holds" and parts[2] in ("release", "fail"):
            status = body.get("status", 500)
            if parts[2] == "fail" and (isinstance(status, bool) or not isinstance(status, int)
                                       or not 100 <= status <= 599):
                return 400, {"error": f"fail: status {status!r} is not an HTTP status"}
            return self._decide(parts[1], Decision.from_body(parts[2], body))
        if method == "POST" and parts == ["release-all"]:
            ids = list(state.holds)
            for hid in ids:
                self._decide(hid, Decision("release", why=body.get("why", "release-all")))
            return 200, {"released": ids}
        if method == "POST" and parts == ["facts"]:
            key, detail, problem = body.get("fact"), body.get("detail") or {}, body.get("problem")
            if not isinstance(key, str) or not isinstance(detail, dict) or not isinstance(problem, (str, type(None))):
                return 400, {"error": "facts: expected {\"fact\": key, \"detail\": {…}} or {\"fact\": key, "
                                      "\"problem\": why it can never hold}"}
            try:
                return 200, (state.fact_problem(key, problem) if problem else state.add_fact(key, detail))
            except KeyError:
                return 404, {"error": f"no loaded rule waits for fact {key}"}
        if method == "POST" and len(parts) == 3 and parts[0] == "signals" and parts[2] == "done":
            detail = {k: v for k, v in body.items() if k in SIGNAL_DETAIL}
            try:
                ev = state.signal_done(parts[1], bool(body.get("ok", True)), detail)
            except KeyError:
                return 404, {"error": f"no process fault {parts[1]}; loaded: {sorted(state.signals)}"}
            except RuleError as e:
                return 409, {"error": str(e)}
            return 200, ev
        return 404, {"error": f"no route {method} {path}"}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One HTTP/1.1 request per connection: loopback only, `Authorization: Bearer <token>` required."""
        try:
            # Bounded: an idle or slow client must not hold a connection (and a file descriptor) forever.
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONTROL_READ_TIMEOUT)
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            length = int(headers.get("content-length", "0"))
            if length > MAX_CONTROL_BODY:
                code, payload = 413, {"error": "body too large"}
            else:
                raw = await asyncio.wait_for(reader.readexactly(length), CONTROL_READ_TIMEOUT) if length else b""
                if not self.token or headers.get("authorization") != f"Bearer {self.token}":
                    code, payload = 401, {"error": "missing or wrong bearer token"}
                else:
                    try:
                        body = json.loads(raw) if raw else {}
                    except (ValueError, RecursionError) as e:
                        body, code, payload = None, 400, {"error": f"bad JSON body: {e}"}
                    if body is not None:
                        try:
                            code, payload = self.handle(method, path, body if isinstance(body, dict) else {})
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
