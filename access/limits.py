"""Size limits at the ASGI edge: no request body or websocket message larger than Hermes takes anywhere.

The limits are HERMES_MAX_REQUEST_BYTES (websocket messages, and HTTP bodies; HERMES_A2A_MAX_BODY_BYTES
for bodies when that is larger, the A2A routes applying it themselves).

Django's ASGI handler spools a whole request body before any view can look at it, and a websocket
consumer receives whatever frame arrives; mounted apps have their own habits. Checking here, once,
means no part of Hermes ever handles an oversized input, and each gets the same clear answer:

- HTTP: `413` with a JSON error, before the app runs when `Content-Length` says so, otherwise as
  soon as the body outgrows the limit (the app is told the client left, and anything it still sends
  is dropped);
- websocket: the connection is closed with 4009 and the consumer sees a disconnect, never the
  message. (The protocol's own "message too big", 1009, is reserved for the server's websocket
  layer: Daphne lets an application close only with 1000 or 3000-4999, and raised on 1009. 4009 is
  in the range left to applications, and names the same thing.)

Daphne reads a whole HTTP body before any ASGI application runs, so under Daphne the same limit is
also applied inside it, as the body arrives (`hermes_site.request_bodies`); this edge still holds
for any other ASGI server and for bodies that stay under the declared length.

Daphne already refuses websocket frames and messages over 1 MiB (`--websocket-max-frame-size`,
`--websocket-max-message-size`), before they reach any application.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from access.refusals import asgi_http_refuse

logger = logging.getLogger("access")

ASGIApp = Any
Scope = dict[str, Any]

# Private-use close code (RFC 6455 §7.4.2), echoing 1009 "message too big"; docs/security.md documents it.
MESSAGE_TOO_BIG = 4009


class SizeLimits:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        if scope["type"] == "http":
            return await self._http(scope, receive, send, request_body_limit())
        if scope["type"] == "websocket":
            return await self._websocket(scope, receive, send, settings.HERMES_MAX_REQUEST_BYTES)
        return await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Any, send: Any, limit: int) -> Any:
        if _declared_length(scope) > limit:
            return await _too_large(send, limit, scope)
        received = 0
        refused = False
        started = False

        async def receive_counted() -> dict[str, Any]:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit and not refused:
                    refused = True
                    if not started:
                        await _too_large(send, limit, scope)
                    return {"type": "http.disconnect"}
            return message

        async def send_unless_refused(message: dict[str, Any]) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        return await self.app(scope, receive_counted, send_unless_refused)

    async def _websocket(self, scope: Scope, receive: Any, send: Any, limit: int) -> Any:
        closed = False

        async def receive_bounded() -> dict[str, Any]:
            nonlocal closed
            message = await receive()
            if message["type"] == "websocket.receive" and _frame_size(message) > limit:
                closed = True
                logger.warning(
                    "websocket %s closed: a %d-byte message, over %d", scope.get("path"), _frame_size(message), limit
                )
                await send({"type": "websocket.close", "code": MESSAGE_TOO_BIG})
                return {"type": "websocket.disconnect", "code": MESSAGE_TOO_BIG}
            return message

        async def send_unless_closed(message: dict[str, Any]) -> None:
            if not closed:
                await send(message)

        return await self.app(scope, receive_bounded, send_unless_closed)


def request_body_limit() -> int:
    """The largest body any route takes; each route then holds to its own limit."""
    return max(settings.HERMES_MAX_REQUEST_BYTES, settings.HERMES_A2A_MAX_BODY_BYTES)


def request_too_large_message(limit: int) -> str:
    return f"The body is larger than the limit of {limit:,} bytes."


def size_limits(app: ASGIApp) -> ASGIApp:
    """`app` behind the size limits (see the module docstring)."""
    return SizeLimits(app)


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _frame_size(message: dict[str, Any]) -> int:
    text = message.get("text")
    if text is not None:
        return len(text.encode("utf-8", errors="surrogatepass"))
    return len(message.get("bytes") or b"")


async def _too_large(send: Any, limit: int, scope: Scope) -> None:
    logger.warning("refused %s %s: body over %d bytes", scope.get("method"), scope.get("path"), limit)
    await asgi_http_refuse(send, status=413, code="request_too_large", message=request_too_large_message(limit))
