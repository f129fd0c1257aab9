"""JSON request bodies as the edge takes them: UTF-8, bounded nesting, finite numbers, storable text.

Shared by the HTTP API (`api/bodies.py`) and the A2A routes (`interop/server/bodies.py`)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Deeper JSON is refused (400) before it is parsed: nothing Hermes accepts nests this deep.
JSON_DEPTH_MAX = 32

# A JSON string literal, escapes included; possessive so a long string cannot backtrack.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)


_JSON_BRACKET = re.compile(r"[\[\]{}]")


class JsonRefused(ValueError):
    """A JSON document Hermes will not take; `code` and `message` say why, as a 400 would."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def json_document_parse(raw: bytes) -> Any:
    """Parse a JSON request body, refusing (`JsonRefused`) what must not reach a parser or a table.

    In order: text that is not UTF-8; nesting deeper than JSON_DEPTH_MAX (before parsing,
    which would exhaust its recursion); invalid JSON, non-finite numbers and integers too long to
    convert; then strings that parse but cannot be stored (a NUL, an unpaired surrogate). Used by
    the HTTP API and the A2A routes alike.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonRefused("invalid_json", "The body is not UTF-8 text.") from None
    depth_limit = JSON_DEPTH_MAX
    if json_nesting_exceeds(text, depth_limit):
        raise JsonRefused("json_too_deep", f"The JSON nests deeper than {depth_limit} levels.")
    try:
        value = json.loads(text, parse_constant=_non_finite_refuse, parse_float=_finite_float)
    except ValueError as exc:  # JSONDecodeError, non-finite numbers, integers too long to convert
        raise JsonRefused("invalid_json", f"The body is not valid JSON: {exc}") from None
    problem = text_problem(value)
    if problem:
        raise JsonRefused("invalid_text", f"The body {problem}.")
    return value


def json_nesting_exceeds(text: str, limit: int) -> bool:
    """Whether JSON text nests arrays/objects deeper than `limit`, found without parsing it."""
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if bracket.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def text_problem(value: Any) -> str | None:
    """What makes a parsed JSON value unstorable (a NUL, an unpaired surrogate), or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character (\\u0000), which cannot be stored"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "contains an unpaired UTF-16 surrogate, which is not valid text"
        return None
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list):
        for item in value:
            problem = text_problem(item)
            if problem:
                return problem
    return None


def _non_finite_refuse(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"the number {literal[:40]} is out of range")
    return number
