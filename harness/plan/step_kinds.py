"""Plan step kinds (docs/fault-plans.md, Steps): create, patch, delete, wait and sleep, each a signal kind of
the registry in harness/plan/actions.py (`register`), fired by its `after` triggers and done by the harness
against kube-apiserver. Registered when harness.plan is imported (its __init__ imports this module), so
`actions.get("create")` finds them whatever module asked first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.plan.actions import Rule, RuleError, _num, _SignalAction, register


# ---- plan steps (signals too: fired by triggers, done by the harness against kube-apiserver) -------


class _StepAction(_SignalAction):
    """A plan step (docs/fault-plans.md, Steps): written under a plan's `steps:` with `after:` triggers,
    loaded as a signal rule (its `release.after`). The proxy signals it when its triggers hold; the
    harness (harness/nemesis/runner.py) does it directly against kube-apiserver with the admin identity, never
    through the proxy, and reports it done (`signal_done` with ok, seconds, and what it did)."""

    is_step = True
    stage_hint = "a step acts on kube-apiserver directly, not on Kueue's requests"

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        rel = rule.release
        if rel is not None and rel.timeout is not None:
            raise RuleError(f"rule {rule.id}: a step runs when its `after` triggers hold, or never; it takes no "
                            "release.timeout (a `wait` step takes `timeout`)", key="release")

    @staticmethod
    def spec(rule: Mapping[str, Any] | Rule, key: str) -> Any:
        return rule.param(key) if hasattr(rule, "param") else rule.get(key)


@register
class Create(_StepAction):
    """Create objects, in order: inline (`{apiVersion, kind, metadata: {name}, …}`) or built by a builder
    of harness/objects/builders.py by name (`{builder: workload, args: {name: w1}, with: [{queue: lq}]}`), or a list
    of those."""

    name = "create"
    params = {"create": None}
    one_line = "plan step: create objects (inline, or by a harness/objects/builders.py builder) in kube-apiserver"

    def normalize(self, d: dict[str, Any]) -> dict[str, Any]:
        from harness.plan import steps

        if d.get("create") is not None:
            try:
                d = {**d, "create": steps.build_objects(d["create"])}
            except steps.StepError as e:
                raise RuleError(f"rule {d.get('id')}: create: {e}", key="create") from None
        return d

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        if not rule.param("create"):
            raise RuleError(f"rule {rule.id}: create: give the object(s) to create", key="create")

    def describe(self, rule: Mapping[str, Any]) -> str:
        from harness.plan import steps

        return "create " + ", ".join(steps.object_label(o) for o in self.spec(rule, "create") or [])

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        return runner.step_create(rule.get("create") or [])


@register
class Patch(_StepAction):
    """Patch one object: `{object: Kind/name, merge: {…}}` (JSON merge patch), `json: [ops]` (JSON patch)
    or `apply: {…}` (server-side apply as `field_manager`, default kueue-harness, forced); `subresource:
    status` for its status."""

    name = "patch"
    params = {"patch": None}
    one_line = "plan step: patch an object (merge, JSON patch or server-side apply), its status too"

    def normalize(self, d: dict[str, Any]) -> dict[str, Any]:
        from harness.plan import steps

        if d.get("patch") is not None:
            try:
                d = {**d, "patch": steps.patch_spec(d["patch"])}
            except steps.StepError as e:
                raise RuleError(f"rule {d.get('id')}: patch: {e}", key="patch") from None
        return d

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        if not rule.param("patch"):
            raise RuleError(f"rule {rule.id}: patch: give {{object: Kind/name, merge: {{…}}}}", key="patch")

    def describe(self, rule: Mapping[str, Any]) -> str:
        from harness.plan import steps

        return steps.describe_patch(self.spec(rule, "patch") or {})

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        return runner.step_patch(rule.get("patch") or {})


@register
class Delete(_StepAction):
    """Delete one object: `Kind/name` or `{object: Kind/name, namespace, propagation}`."""

    name = "delete"
    params = {"delete": None}
    one_line = "plan step: delete an object"

    def normalize(self, d: dict[str, Any]) -> dict[str, Any]:
        from harness.plan import steps

        if d.get("delete") is not None:
            try:
                d = {**d, "delete": steps.delete_spec(d["delete"])}
            except steps.StepError as e:
                raise RuleError(f"rule {d.get('id')}: delete: {e}", key="delete") from None
        return d

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        if not rule.param("delete"):
            raise RuleError(f"rule {rule.id}: delete: give the object (Kind/name)", key="delete")

    def describe(self, rule: Mapping[str, Any]) -> str:
        from harness.plan import steps

        spec = self.spec(rule, "delete") or {}
        how = ([f"propagation {spec['propagation']}"] if spec.get("propagation") else []) + (
            [f"kept Terminating {spec['keep_terminating']:g}s"] if spec.get("keep_terminating") else [])
        return "delete " + steps.ref_label(spec) + (f" ({', '.join(how)})" if how else "")

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        return runner.step_delete(rule.get("delete") or {}, str(rule.get("id")))


@register
class Wait(_StepAction):
    """Wait (at most `timeout` seconds) for a fact — `{log: REGEX}` or `{object: Kind/name, condition: T,
    status: S}` / `{…, deleted: true}` / `{…, field: JSONPATH, equals: V}` — to have happened since the plan
    was loaded, or with `since: STEP` since plan step STEP began (its `signalled`: e.g. the reconcile that
    follows a delete step, not an earlier one); a `since: TRIGGER` (any trigger) is loaded as a `sleep: 0`
    anchor step after that trigger (harness/plan/load.py); a timeout fails the step."""

    name = "wait"
    params = {"wait": None, "timeout": 60.0, "since": None}
    one_line = "plan step: wait for a Kueue log line or an object's condition, deletion or field value"

    def normalize(self, d: dict[str, Any]) -> dict[str, Any]:
        from harness.plan.triggers import Trigger

        w = d.get("wait")
        if w is not None:
            t = Trigger.from_dict(w, f"rule {d.get('id')}: wait")
            if not t.is_fact:
                raise RuleError(f"rule {d.get('id')}: wait: waits for a fact, {{log: REGEX}} or {{object: Kind/name, …}}"
                                "; for another rule or step, give the step `after:` triggers", key="wait")
            d = {**d, "wait": {k: v for k, v in t.__dict__.items() if v is not None and k != "state"}}
        return d

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        if not rule.param("wait"):
            raise RuleError(f"rule {rule.id}: wait: give {{log: REGEX}} or {{object: Kind/name, condition: Type}}",
                            key="wait")
        t = rule.param("timeout")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 or t != t or t == float("inf"):
            raise RuleError(f"rule {rule.id}: timeout must be seconds > 0, got {t!r}", key="timeout")
        since = rule.param("since")
        if since is not None and (not isinstance(since, str) or not since):
            raise RuleError(f"rule {rule.id}: since must name a step of the plan (the wait counts from when that "
                            f"step began), got {since!r}", key="since")
        if since == rule.id:
            raise RuleError(f"rule {rule.id}: since names the wait step itself; name the step before it whose "
                            "start the wait counts from", key="since")

    def describe(self, rule: Mapping[str, Any]) -> str:
        from harness.plan.triggers import Trigger

        w = self.spec(rule, "wait") or {}
        try:
            what = Trigger(**w).describe()
        except TypeError:
            what = str(w)
        t = self.spec(rule, "timeout")
        since = self.spec(rule, "since")
        return (f"wait until {what}" + (f" since step {since} began" if since else "")
                + (f" (at most {_num(t)}s)" if t is not None else ""))

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        return runner.step_wait(rule.get("wait") or {}, float(rule.get("timeout") or 60.0), str(rule.get("id")),
                                since=rule.get("since"))


@register
class Sleep(_StepAction):
    """Let `sleep` seconds of wall time pass (0 ≤ seconds ≤ 600). Only for the rare scenario where time itself
    is the point — Kueue acts on a clock (a backoff, a timeout, a batch period) and the plan must let that
    clock run out; to order things, use triggers (docs/fault-plans.md, Steps). `sleep: 0` is a do-nothing
    step: the loader makes one as the anchor of a wait's `since: TRIGGER`."""

    name = "sleep"
    params = {"sleep": None}
    one_line = "plan step: let wall time pass (only when time itself is the point; order by triggers)"
    MAX = 600.0

    def validate(self, rule: "Rule") -> None:
        super().validate(rule)
        t = rule.param("sleep")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= self.MAX or t != t:
            raise RuleError(f"rule {rule.id}: sleep must be seconds from 0 to {self.MAX:g}, got {t!r}", key="sleep")

    def describe(self, rule: Mapping[str, Any]) -> str:
        return f"let {_num(self.spec(rule, 'sleep'))}s pass"

    def perform(self, runner: Any, rule: Mapping[str, Any]) -> dict[str, Any]:
        return runner.step_sleep(float(rule.get("sleep") or 0.0))
