"""How large an elicitation request Hermes will show: checked before anything is stored or drawn.

A server's `elicitation/create` is untrusted input that reaches a database row, the ledger, the
turn's live events and every control room's rail. Without bounds one request of a few megabytes
(a long message, long titles, thousands of choices) is stored whole and drawn in every page, and
the rail that carries it no longer fits a websocket message. A real form needs none of that, so a
request past any bound is declined as a whole — the server hears `decline`, the operator sees a
short note naming the server — rather than cut down to something the server did not ask.

The walk is over the raw schema, so it holds for any shape a parser later accepts (nested `items`,
`anyOf`), and it runs before redaction, which would otherwise scan the whole oversized text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agent.elicitation.types import MAX_FIELDS, MAX_OPTIONS

MAX_MESSAGE_CHARS = 10_000
# Titles, property names, choice values and their labels: one line each in a form.
MAX_LABEL_CHARS = 500
MAX_DESCRIPTION_CHARS = 2_000
MAX_DEFAULT_CHARS = 4_000
# Choices of one field: the parser's own bound, so both say the same.
MAX_ENUM_ENTRIES = MAX_OPTIONS
MAX_DEPTH = 8
# The whole requested schema, serialized as JSON.
MAX_SCHEMA_CHARS = 100_000

LABEL_KEYS = frozenset({"title"})
CHOICE_KEYS = frozenset({"enum", "enumNames", "oneOf", "anyOf"})


def elicitation_oversize(message: str, schema: Any) -> str:
    """Why a request is too large to show ("" when it is not), in words for the operator."""
    if len(message) > MAX_MESSAGE_CHARS:
        return f"its message is {len(message):,} characters, over the {MAX_MESSAGE_CHARS:,} allowed"
    if _depth(schema) > MAX_DEPTH:
        return f"its schema nests deeper than {MAX_DEPTH} levels"
    size = len(json.dumps(schema, ensure_ascii=False, default=str))
    if size > MAX_SCHEMA_CHARS:
        return f"its schema is {size:,} characters, over the {MAX_SCHEMA_CHARS:,} allowed"
    return _walk(schema)


def elicitation_oversize_note(server: str) -> str:
    """What the operator reads in place of a request too large to show."""
    return f"{server} sent a form too large to show; Hermes declined it without drawing it."


def _depth(value: Any, level: int = 0) -> int:
    # Stops one level past the bound, so a hostile nesting is never walked to its end.
    if level > MAX_DEPTH:
        return level
    if isinstance(value, Mapping):
        return max((_depth(item, level + 1) for item in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(item, level + 1) for item in value), default=level)
    return level


def _walk(value: Any) -> str:
    if isinstance(value, list):
        return next((problem for item in value if (problem := _walk(item))), "")
    if not isinstance(value, Mapping):
        return ""
    for key, item in value.items():
        problem = _entry(str(key), item)
        if problem:
            return problem
    return ""


def _entry(key: str, item: Any) -> str:
    if key == "properties" and isinstance(item, Mapping):
        if len(item) > MAX_FIELDS:
            return f"its form has {len(item):,} fields, over the {MAX_FIELDS} allowed"
        problem = _texts(list(item), MAX_LABEL_CHARS, "a field name")
        # The values are schemas; the names are not keywords (a field may be called `title`).
        return problem or _walk(list(item.values()))
    if key in CHOICE_KEYS and isinstance(item, list):
        if len(item) > MAX_ENUM_ENTRIES:
            return f"a field has {len(item):,} choices, over the {MAX_ENUM_ENTRIES} allowed"
        if key in ("enum", "enumNames"):
            return _texts(item, MAX_LABEL_CHARS, "a choice")
    if key in LABEL_KEYS:
        return _texts([item], MAX_LABEL_CHARS, "a title")
    if key == "description":
        return _texts([item], MAX_DESCRIPTION_CHARS, "a description")
    if key == "default":
        return _texts([item], MAX_DEFAULT_CHARS, "a default")
    return _walk(item)


def _texts(items: list[Any], limit: int, what: str) -> str:
    for text in items:
        if isinstance(text, str) and len(text) > limit:
            return f"{what} is {len(text):,} characters, over the {limit:,} allowed"
    return ""
