"""Reading a JSON request body safely: size, media type, nesting depth and text checked before use.

Everything here runs before any write, so a refused request leaves nothing behind. The order
matters: the declared size is checked before the body is read, the depth before it is parsed (a
deeply nested document would exhaust the parser's recursion), and the text after parsing (a NUL
or an unpaired surrogate parses fine but cannot be stored in PostgreSQL or encoded as UTF-8).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from agent.api.errors import ApiError

JSON_MEDIA_TYPE = "application/json"

# A JSON string literal, escapes included; possessive so a long string cannot backtrack.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

_JSON_TYPE_NAMES: dict[type, str] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def json_object_read(request: HttpRequest, *, empty_ok: bool = False) -> dict[str, Any]:
    """The request's body as a JSON object, or `ApiError` (400/413/415) saying what is wrong.

    With `empty_ok`, an empty body (still sent as JSON) reads as `{}`.
    """
    media_type = request.content_type or ""
    if media_type.lower() != JSON_MEDIA_TYPE:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"Send the body as JSON with the header Content-Type: {JSON_MEDIA_TYPE} (got {media_type or 'none'!r}).",
        )
    raw = _body_read(request, limit=settings.HERMES_MAX_REQUEST_BYTES)
    if not raw.strip() and empty_ok:
        return {}
    if not raw.strip():
        raise ApiError(400, "invalid_json", "The body is empty; send a JSON object.")
    try:
        value = json_document_parse(raw)
    except JsonRefused as refused:
        raise ApiError(400, refused.code, refused.message) from None
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_json", f"The body must be a JSON object, not {_json_type(value)}.")
    return value


class JsonRefused(ValueError):
    """A JSON document Hermes will not take; `code` and `message` say why, as a 400 would."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def json_document_parse(raw: bytes) -> Any:
    """Parse a JSON request body, refusing (`JsonRefused`) what must not reach a parser or a table.

    In order: text that is not UTF-8; nesting deeper than HERMES_MAX_JSON_DEPTH (before parsing,
    which would exhaust its recursion); invalid JSON, non-finite numbers and integers too long to
    convert; then strings that parse but cannot be stored (a NUL, an unpaired surrogate). Used by
    the HTTP API and the A2A routes alike.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise JsonRefused("invalid_json", "The body is not UTF-8 text.") from None
    depth_limit = settings.HERMES_MAX_JSON_DEPTH
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


def fields_check(body: dict[str, Any], *, allowed: Iterable[str]) -> None:
    """Refuse unknown fields: a misspelt `sesion_id` must not silently start a new session."""
    known = set(allowed)
    unknown = sorted(set(body) - known)
    if unknown:
        raise ApiError(
            400,
            "unknown_field",
            f"Unknown field(s): {', '.join(unknown)}. Allowed: {', '.join(sorted(known))}.",
        )


MODEL_NAME_MAX = 100


def model_parse(raw: object) -> str | None:
    """A `model` from a body: absent (None) keeps the session's; otherwise a model name, which
    the engine then checks against the allowlist (`model_not_allowed`)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MODEL_NAME_MAX:
        shown = repr(raw) if isinstance(raw, str) and len(raw) <= 80 else _json_type(raw)
        raise ApiError(
            400, "invalid_model", f"model must be a model name (a string of at most {MODEL_NAME_MAX}), not {shown}."
        )
    return raw.strip()


def session_id_parse(raw: object) -> uuid.UUID:
    """A `session_id` from a body or a path: a UUID in its usual 8-4-4-4-12 form."""
    return _id_parse(raw, field="session_id", what="a session id")


def turn_id_parse(raw: object) -> uuid.UUID:
    """A turn id (the correlation id) from a path."""
    return _id_parse(raw, field="turn_id", what="a turn id")


def elicitation_id_parse(raw: object) -> uuid.UUID:
    """An elicitation's id (an MCP server's question, `GET /elicitations`) from a path."""
    return _id_parse(raw, field="elicitation_id", what="an elicitation id")


def _id_parse(raw: object, *, field: str, what: str) -> uuid.UUID:
    if isinstance(raw, str) and _UUID.fullmatch(raw):
        return uuid.UUID(raw)
    shown = repr(raw) if isinstance(raw, str) and len(raw) <= 80 else _json_type(raw)
    raise ApiError(400, f"invalid_{field}", f"{field} must be {what} (a UUID), not {shown}.")


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


def _body_read(request: HttpRequest, *, limit: int) -> bytes:
    too_large = ApiError(413, "request_too_large", f"The body is larger than the limit of {limit:,} bytes.")
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise too_large
    try:
        raw = request.body
    except RequestDataTooBig:
        raise too_large from None
    # A chunked body declares no length: measure what arrived.
    if len(raw) > limit:
        raise too_large
    return raw


def _non_finite_refuse(constant: str) -> float:
    raise ValueError(f"{constant} is not a JSON number")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise ValueError(f"the number {literal[:40]} is out of range")
    return number


def _json_type(value: object) -> str:
    return "null" if value is None else _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
