"""What a plan's YAML may hold, checked on YAML's event stream before any node is built (harness/plan/load.py
parse_plan calls `guard` first): no anchors or aliases, no tags outside the core schema, bounded nesting.
"""

from __future__ import annotations

import yaml


class GuardError(ValueError):
    """A plan's YAML holds what a plan never needs; `str()` is one "file:line: …" line."""


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
_PLAIN_TAGS = {None, "!", *(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map"))}


def guard(text: str, source: str) -> None:
    """Refuse, from YAML's event stream alone (no node built, no recursion), what a plan never needs and
    what would make the loader slow or unsafe: anchors and aliases (exponential expansion, "billion
    laughs"), tags outside the core schema (`!!python/object/apply:…` would run code under an unsafe
    loader; here it is refused with its line), and nesting deeper than MAX_DEPTH (a 3,000-deep list would
    exhaust Python's stack in the composer). Raises GuardError "file:line: …"; yaml.MarkedYAMLError for
    text that is not YAML (the caller turns it into file:line)."""
    depth = 0
    for ev in yaml.parse(text, Loader=LOADER):
        line = ev.start_mark.line + 1
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            raise GuardError(f"{source}:{line}: YAML anchors and aliases are not allowed in a plan; write each "
                             "value out")
        tag = getattr(ev, "tag", None)
        if tag not in _PLAIN_TAGS:
            shown = tag.replace("tag:yaml.org,2002:", "!!") if isinstance(tag, str) else tag
            raise GuardError(f"{source}:{line}: YAML tag {shown} is not allowed in a plan: plans are plain YAML "
                             "(strings, numbers, booleans, lists, mappings); remove the tag")
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise GuardError(f"{source}:{line}: {TOO_DEEP}")
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1
