"""How Hermes says no, in the HTTP API's error shape: `{"error": {"code": "...", "message": "..."}}`.

Used by Django middleware (`refusal_response`) and by the ASGI edge, which answers before Django
exists for the connection (`asgi_http_refuse`, `asgi_websocket_deny`).
"""

from __future__ import annotations

import json
from typing import Any

from django.http import JsonResponse

Scope = dict[str, Any]


def refusal_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def refusal_response(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


async def asgi_http_refuse(send: Any, *, status: int, code: str, message: str) -> None:
    """Answer an HTTP request with a JSON error, without reading its body."""
    body = refusal_body(code, message)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def asgi_websocket_deny(receive: Any, send: Any) -> None:
    """Refuse a websocket handshake: closing before accepting makes the server answer 403."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1008})
