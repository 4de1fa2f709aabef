"""The YAML a plan may be: refused from the event stream before anything is built (issue 24 item 5).

`guard` reads only YAML's events (no node built, no recursion), so a hostile or broken plan — a
`!!python/object` tag, anchors and aliases, a 3,000-deep list — is a `file:line:` error in bounded time,
linear in the text; harness/plan/load.py turns `Refused` into a PlanError.
"""

from __future__ import annotations

import yaml


class Refused(ValueError):
    """A plan's YAML that is refused: the message is "file:line: what and what to do"."""


#: LibYAML's safe loader where PyYAML was built with it (about 10x faster on a large plan), else PyYAML's own;
#: both build only the core schema's types.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: How deep a plan's mappings and lists may nest: the shipped plans need 7 (a step's object's spec); the
#: limit keeps every recursive pass over the plan (composing, templating, copying) far from Python's stack.
MAX_DEPTH = 40
#: The YAML tags a plan may carry, spelt out or implied: the core schema's (yaml.SafeLoader resolves no
#: others). `!!python/object…` and every custom tag are refused before anything is constructed.
TOO_DEEP = (f"nested more than {MAX_DEPTH} levels deep; a plan needs a few (its rules, their match and triggers, "
             "a step's object): flatten it")
PLAIN_TAGS = {None, "!", *(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map"))}


def guard(text: str, source: str) -> None:
    """Refuse, from YAML's event stream alone (no node built, no recursion), what a plan never needs and
    what would make the loader slow or unsafe: anchors and aliases (exponential expansion, "billion
    laughs"), tags outside the core schema (`!!python/object/apply:…` would run code under an unsafe
    loader; here it is refused with its line), and nesting deeper than MAX_DEPTH (a 3,000-deep list would
    exhaust Python's stack in the composer). Raises Refused "file:line: …"; yaml.MarkedYAMLError for
    text that is not YAML (the caller turns it into file:line)."""
    depth = 0
    for ev in yaml.parse(text, Loader=LOADER):
        line = ev.start_mark.line + 1
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            raise Refused(f"{source}:{line}: YAML anchors and aliases are not allowed in a plan; write each "
                            "value out")
        tag = getattr(ev, "tag", None)
        if tag not in PLAIN_TAGS:
            shown = tag.replace("tag:yaml.org,2002:", "!!") if isinstance(tag, str) else tag
            raise Refused(f"{source}:{line}: YAML tag {shown} is not allowed in a plan: plans are plain YAML "
                            "(strings, numbers, booleans, lists, mappings); remove the tag")
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise Refused(f"{source}:{line}: {TOO_DEEP}")
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1
