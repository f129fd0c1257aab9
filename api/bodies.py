"""Reading a JSON request body safely: size, media type, nesting depth and text checked before use.

Everything here runs before any write, so a refused request leaves nothing behind. The order
matters: the declared size is checked before the body is read, the depth before it is parsed (a
deeply nested document would exhaust the parser's recursion), and the text after parsing (a NUL
or an unpaired surrogate parses fine but cannot be stored in PostgreSQL or encoded as UTF-8).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from access.documents import JsonRefused, json_document_parse
from api.errors import ApiError

JSON_MEDIA_TYPE = "application/json"

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


def _json_type(value: object) -> str:
    return "null" if value is None else _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
