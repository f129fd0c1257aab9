"""Request bodies of the A2A routes, checked before either dialect's code parses them.

The SDK's JSON-RPC and HTTP+JSON handlers, and Starlette's `request.json()` under the GarraIA
routes, parse whatever arrives: JSON nested a few thousand levels deep exhausted the parser's
recursion (a 500 on `/a2a/tasks`, an "internal error" from JSON-RPC), a body that is not UTF-8 made
the HTTP+JSON binding answer 500, and each left a traceback in the log. Here every non-empty body
passes the same checks as the HTTP API's (`api.bodies.json_document_parse`: UTF-8, depth,
valid and finite JSON, storable text) and a declared media type other than JSON gets 415 — all
before the request reaches either dialect, and answered in the error shape of the route asked:

- JSON-RPC (`/a2a/jsonrpc`): `{"jsonrpc": "2.0", "id": null, "error": {"code": -32700 | -32600, ...}}`;
- HTTP+JSON (`/a2a/rest/...`): `{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message"}}`;
- GarraIA (`/a2a/tasks...`): `{"error": "..."}`.

Both 400 and 415 are refusals: nothing has been stored, nothing has run.
"""

from __future__ import annotations

import json
import logging
from typing import Any, overload

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from access.documents import JsonRefused, json_document_parse
from interop.server.card import JSONRPC_PATH, REST_PREFIX

# Refusals of input are logged as the edge's are: one line each, only so many a minute (access.refusal_logs).
logger = logging.getLogger("access")

JSON_RPC_PARSE_ERROR = -32700
JSON_RPC_INVALID_REQUEST = -32600


class BodyCheckMiddleware:
    """Refuses (400/415) a request whose body the A2A routes must not parse; see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # `PeerAuthMiddleware` has read the body already (and held it to the size limit): one message.
        body = await body_read(receive)
        refusal = body_refusal(scope, body)
        if refusal is not None:
            status, code, message = refusal
            logger.warning("refused %s %r: %s", scope.get("method"), str(scope.get("path", ""))[:200], message)
            await _reply(send, scope["path"], status, code, message)
            return
        await self.app(scope, body_replay(body, receive), send)


def body_refusal(scope: Scope, body: bytes) -> tuple[int, str, str] | None:
    """(status, code, message) when the A2A routes must not take this body, None when they may."""
    if not body.strip():
        return None  # e.g. GarraIA's cancel; the routes that need a body say so themselves
    media_type = _media_type(scope)
    if media_type and not (media_type == "application/json" or media_type.endswith("+json")):
        message = f"Send the body as JSON (Content-Type: application/json), not {media_type!r}."
        return 415, "unsupported_media_type", message
    try:
        json_document_parse(body)
    except JsonRefused as refused:
        return 400, refused.code, refused.message
    return None


def _media_type(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()[:100]
    return ""


@overload
async def body_read(receive: Receive) -> bytes: ...
@overload
async def body_read(receive: Receive, *, limit: int) -> bytes | None: ...


async def body_read(receive: Receive, *, limit: int | None = None) -> bytes | None:
    """The whole request body, or None as soon as it passes `limit` bytes (when there is one)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if limit is not None and size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def body_replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body read already, then passes on to the server's."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # later calls wait for the disconnect, as the server's would

    return replay


def _error_body(path: str, status: int, code: str, message: str) -> dict[str, Any]:
    if path == JSONRPC_PATH or path.startswith(JSONRPC_PATH + "/"):
        rpc_code = JSON_RPC_PARSE_ERROR if code in ("invalid_json", "json_too_deep") else JSON_RPC_INVALID_REQUEST
        return {"jsonrpc": "2.0", "id": None, "error": {"code": rpc_code, "message": message, "data": {"reason": code}}}
    if path.startswith(REST_PREFIX + "/") or path == REST_PREFIX:
        return {"error": {"code": status, "status": "INVALID_ARGUMENT", "message": message}}
    return {"error": message}


async def _reply(send: Send, path: str, status: int, code: str, message: str) -> None:
    body = json.dumps(_error_body(path, status, code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
