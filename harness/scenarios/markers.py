"""What a case declares, read from its markers: `kueue_bug` (the known bug, and whether it should reproduce on
the Kueue that runs: a strict expected failure), `checkers` (the Selection that decides its verdict),
`kueue_log` (more of Kueue's log lines in the history), `kueue_config` and `pods`; and the pytest stash keys the
plugin keeps its state in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.checkers import Selection, selection_with_defaults
from harness.kueue import bugs, versions
from harness.scenarios.case import InvariantViolation

_VERDICTS_KEY = pytest.StashKey[dict]()


_SPEC_KEY = pytest.StashKey[Any]()


#: Per case: (status, reason) of its kueue_bug on the Kueue that actually runs (bugs.Expectation).
_EXPECT_KEY = pytest.StashKey[Any]()


def _bug_key(item: pytest.Item) -> str | None:
    """The key a case's @pytest.mark.kueue_bug names ("kubernetes-sigs/kueue#14863"; a bug.yaml `key`), or None."""
    m = item.get_closest_marker("kueue_bug")
    return str(m.args[0]) if m is not None and m.args else None


def _bug(item: pytest.Item) -> "bugs.KnownBug | None":
    m = item.get_closest_marker("kueue_bug")
    if m is None:
        return None
    from harness.kueue import bugs

    key = m.args[0] if m.args else ""
    found = bugs.KNOWN_BUGS.get(key) or bugs.load([Path(str(item.path)).parent]).get(key)
    if found is None:
        raise pytest.UsageError(f"{item.nodeid}: kueue_bug({key!r}) names no bug of a bug.yaml next to the case "
                                f"or under cases/ (known: {', '.join(bugs.KNOWN_BUGS)})")
    return found


def _declared_kueue_config(item: pytest.Item):
    """The case's `@pytest.mark.kueue_config(feature_gates={...}, fair_sharing=..., wait_for_pods_ready=...,
    integrations=[...], overrides={...})` as a harness.kueue.config.KueueConfig (DEFAULT without the marker).
    Raises pytest.UsageError naming every problem."""
    from harness.kueue import config as kueue_config

    m = item.get_closest_marker("kueue_config")
    if m is None:
        return kueue_config.DEFAULT
    where = f"{item.nodeid}: @pytest.mark.kueue_config"
    if m.args:
        raise pytest.UsageError(f"{where}: takes keywords only (feature_gates=, fair_sharing=, wait_for_pods_ready=, "
                                "integrations=, overrides=)")
    try:
        return kueue_config.parse(dict(m.kwargs), where)
    except kueue_config.KueueConfigError as e:
        raise pytest.UsageError(str(e)) from None


def _pods_nodes(item: pytest.Item) -> list[Any] | None:
    """The Nodes of the case's `@pytest.mark.pods(nodes=[harness.objects.node(...), ...])` (one default Node,
    "node-1", for a bare `@pytest.mark.pods`), or None without the marker. Raises pytest.UsageError for
    anything but a list of Node builders."""
    from harness import objects as o

    m = item.get_closest_marker("pods")
    if m is None:
        return None
    where = f"{item.nodeid}: @pytest.mark.pods"
    if m.args or set(m.kwargs) - {"nodes"}:
        raise pytest.UsageError(f"{where}: takes one keyword, nodes=[harness.objects.node(name, ...), ...]")
    nodes = m.kwargs.get("nodes", [o.node("node-1")])
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, o.NodeBuilder) for n in nodes):
        raise pytest.UsageError(f"{where}: nodes= is a list of harness.objects.node(...) builders, got {nodes!r}")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise pytest.UsageError(f"{where}: two Nodes named alike in {names}")
    return list(nodes)


def _expect_on(item: pytest.Item, env: Any) -> None:
    """Decide, on the Kueue that actually runs, whether the case's known bug should reproduce; where it
    should, the case becomes a strict expected failure (it must reproduce). Kept in the item's stash."""
    bug = _bug(item)
    if bug is None:
        return
    ident = env.kueue_identity() if hasattr(env, "kueue_identity") else versions.BuildIdentity(env.kueue_version)
    exp = bug.expectation(ident)
    item.stash[_EXPECT_KEY] = exp
    if exp.status == "affected":
        item.add_marker(pytest.mark.xfail(
            strict=True, raises=InvariantViolation,
            reason=f"{bug.issue} affects Kueue {ident.version} ({bug.summary}; {exp.reason}): the case must reproduce it",
        ))


def _selection(item: pytest.Item) -> Selection:
    """The case's checkers: `@pytest.mark.checkers("quota", liveness={"jobs": ["job2"]})` plus the default
    assumptions (and `no_data_race` when the build under test is a race build, `--kueue-race`). Every `checkers` mark of the case counts — a module's `pytestmark` and the function's own —
    the closer one's parameters winning for a checker both name. Raises pytest.UsageError for an unknown
    checker name."""
    declared: dict[str, Any] = {}
    for m in reversed(list(item.iter_markers("checkers"))):  # farthest (module) first, the function's last
        declared.update({name: {} for name in m.args if name not in declared})
        declared.update(m.kwargs)
    if getattr(getattr(getattr(item, "config", None), "stash", {}).get(_SPEC_KEY, None), "race", False):  # a race build: every case is judged on Go's race detector too
        declared.setdefault("no_data_race", {})
    sel = Selection(selection_with_defaults(declared))
    try:
        sel.build()
    except (KeyError, TypeError) as e:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.checkers: {e}") from None
    return sel


def _expected(item: pytest.Item) -> tuple[str, str]:
    """(expected verdict, why): "reproduced" where the case's kueue_bug affects the Kueue that runs,
    "passed" where it is fixed or the case has no bug, "unknown" where that cannot be told."""
    exp = item.stash.get(_EXPECT_KEY, None)
    if exp is None:
        return ("passed", "") if _bug(item) is None else ("unknown", "the environment did not start")
    return {"affected": "reproduced", "fixed": "passed"}.get(exp.status, "unknown"), exp.reason
