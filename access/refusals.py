"""How Hermes says no, in the HTTP API's error shape: `{"error": {"code": "...", "message": "..."}}`.

Used by Django middleware (`refusal_response`) and by the ASGI edge, which answers before Django
exists for the connection (`asgi_http_refuse`, `asgi_websocket_deny`).

A request refused inside Django also carries why (`refusal_note`, read with `refusal_noted`): the
identity middleware, the CSRF check (`csrf_refused`, Django's CSRF_FAILURE_VIEW) and views note
their refusals, so that what must audit refused attempts — the control room records every approval
decision attempt — can say why one was refused without knowing who refused it.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure

from access.identity import Refusal

Scope = dict[str, Any]


_NOTE = "hermes_refusal"


def refusal_note(request: HttpRequest, code: str, message: str) -> None:
    """Say on the request why it is being refused (the latest note wins)."""
    setattr(request, _NOTE, Refusal(code, message))


def refusal_noted(request: HttpRequest) -> Refusal | None:
    """Why the request was refused, if whatever refused it said so."""
    noted = getattr(request, _NOTE, None)
    return noted if isinstance(noted, Refusal) else None


def csrf_refused(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: Django's own 403 page, with the reason noted on the request."""
    refusal_note(request, "csrf_failed", f"CSRF check failed: {reason}")
    return csrf_failure(request, reason=reason)


def refusal_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def refusal_response(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def database_refusal_response(exc: OperationalError) -> JsonResponse:
    """503 for a request the database could not serve; scripts retry on 503.

    `database_busy` when every pooled PostgreSQL connection of this process stayed taken for the
    pool's timeout (the request waited, then gave up: try again shortly); `database_unavailable`
    when the database is not reachable, with PostgreSQL's reason.
    """
    # Imported here: only PostgreSQL deployments have a pool, and SQLite ones need not load it.
    from psycopg_pool import PoolTimeout

    from common.database import pool_connect_failure

    if isinstance(exc.__cause__, PoolTimeout):
        failure = pool_connect_failure()
        if failure is not None:
            return refusal_response(503, "database_unavailable", f"The database is not reachable: {failure}")
        response = refusal_response(
            503,
            "database_busy",
            f"All {settings.HERMES_DB_POOL_MAX} database connections of this Hermes process stayed in use for "
            f"{settings.HERMES_DB_POOL_TIMEOUT:g} s; try again in a moment.",
        )
        response["Retry-After"] = "5"
        return response
    return refusal_response(503, "database_unavailable", f"The database is not reachable: {exc}")


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
