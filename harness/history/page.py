"""How the history schema (harness/history/schema.py) is written and rendered: `Text` (prose), `Table` and
`Row` (an event's required fields and its words), `render` (markdown: docs/history.md) and `required_fields`
((source, event) -> required fields). Pure data and strings.

May import: nothing of harness.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Text:
    """Prose of the page between tables (markdown, verbatim)."""

    text: str


@dataclass(frozen=True)
class Row:
    """One row of a table: `head` names the event(s) (markdown: "`held` / `released`", "`x_started` /
    `_cleared`"), `fields` and `meaning` are its cells. `required`: the fields every such event carries
    besides ts/source/event (a tuple for every event the row names, or {event: tuple} when they differ);
    optional fields are said in `fields` only."""

    head: str
    fields: str
    meaning: str
    required: tuple[str, ...] | dict[str, tuple[str, ...]] = ()

    def events(self) -> list[str]:
        """The event names `head` gives, a leading "_" continuing the name before it."""
        out: list[str] = []
        for token in re.findall(r"`([^`]+)`", self.head):
            out.append(out[-1].rsplit("_", 1)[0] + token if token.startswith("_") and out else token)
        return out

    def required_of(self, event: str) -> tuple[str, ...]:
        return self.required.get(event, ()) if isinstance(self.required, dict) else self.required


@dataclass(frozen=True)
class Table:
    """A table of the page: its header line and rows; `source` for an event table (None: the shared fields)."""

    header: str
    rows: list[Row]
    source: str | None = None


def required_fields(page: Sequence[Text | Table]) -> dict[tuple[str, str], tuple[str, ...]]:
    """(source, event) -> the fields every such event carries. Raises ValueError when two rows name one event."""
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for part in page:
        if isinstance(part, Table) and part.source:
            for row in part.rows:
                for ev in row.events():
                    if (part.source, ev) in out:
                        raise ValueError(f"history schema: {part.source}/{ev} has two rows")
                    out[(part.source, ev)] = row.required_of(ev)
    return out


def render(page: Sequence[Text | Table]) -> str:
    """The page as markdown (ends with a newline): prose verbatim, a table's rows one line each."""
    lines: list[str] = []
    for part in page:
        if isinstance(part, Text):
            lines += part.text.split("\n")
        else:
            lines += [part.header, "|---" * part.header.count("|", 1) + "|"]
            lines += [f"| {r.head} | {r.fields} | {r.meaning} |" for r in part.rows]
    return "\n".join(lines).rstrip("\n") + "\n"


def problems(history: Sequence[Mapping[str, Any]], fields: Mapping[tuple[str, str], tuple[str, ...]],
             nested: Mapping[tuple[str, str], tuple[str, tuple[str, ...]]] = {}) -> list[str]:
    """Where `history` departs from `fields` ((source, event) -> required fields): events out of time order,
    unknown (source, event) pairs, missing fields; `nested`: (source, event) -> (a field holding an object, the
    fields that object carries when it is one). Returns one line per problem (at most one per kind of event),
    [] if none."""
    found: dict[str, str] = {}
    last = float("-inf")
    for i, e in enumerate(history, 1):
        if not isinstance(e.get("ts"), (int, float)):
            found.setdefault("ts", f"event {i}: `ts` is not a number")
            continue
        if e["ts"] < last:
            found.setdefault("order", f"event {i} ({e.get('event')}): earlier than the event before it")
        last = max(last, e["ts"])
        key = (str(e.get("source")), str(e.get("event")))
        if key not in fields:
            found.setdefault(repr(key), f"event {i}: unknown source/event {key[0]}/{key[1]}")
            continue
        missing = [f for f in fields[key] if f not in e]
        if key in nested and isinstance(e.get(nested[key][0]), Mapping):
            outer, inner = nested[key]
            missing += [f"{outer}.{f}" for f in inner if f not in e[outer]]
        if missing:
            found.setdefault(repr(key), f"event {i} ({key[0]}/{key[1]}): missing {', '.join(missing)}")
    return list(found.values())
