"""Who is calling the A2A routes: a paired peer's bearer token, checked before any route runs.

Every route but the two agent cards requires `Authorization: Bearer <pairing token>` (issued by
`manage.py a2a_pair`, compared in constant time); anything else is a 401 with `WWW-Authenticate`.
Stock GarraIA sends no token, so `HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN` may let the GarraIA-dialect
routes (`/a2a/tasks*`) accept token-less calls — only from a loopback client address, as the peer
`HERMES_A2A_GARRAIA_LOOPBACK_PEER`. (Behind a reverse proxy on the same host every client looks
like loopback: do not enable it there.) A browser on the same machine is loopback too, so a web page
must not be able to use the exemption: a token-less call must carry no `Origin` header and address
Hermes by a loopback `Host` (which a DNS-rebinding page cannot). Request bodies above
`HERMES_A2A_MAX_BODY_BYTES` get 413.

The authenticated peer's name is put in the ASGI scope as `hermes.peer`.
"""

from __future__ import annotations

import ipaddress
import json

from channels.db import database_sync_to_async
from django.conf import settings
from starlette.types import ASGIApp, Receive, Scope, Send

from interop.server.bodies import body_read, body_replay
from interop.services import pairing_token_verify

PUBLIC_PATHS = frozenset({"/.well-known/agent-card.json", "/.well-known/agent.json"})
GARRAIA_PREFIX = "/a2a/tasks"
PEER_SCOPE_KEY = "hermes.peer"
REALM = 'Bearer realm="hermes-a2a"'


class PeerAuthMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        authorization = headers.get("authorization", "")
        peer, problem = await _authenticate(scope, headers)
        if peer is None:
            challenge = REALM + (', error="invalid_token"' if authorization else "")
            await _reply(send, 401, problem, extra=[(b"www-authenticate", challenge.encode())])
            return
        limit = settings.HERMES_A2A_MAX_BODY_BYTES
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _reply(send, 413, f"request body over {limit:,} bytes")
            return
        body = await body_read(receive, limit=limit)
        if body is None:
            await _reply(send, 413, f"request body over {limit:,} bytes")
            return
        await self.app({**scope, PEER_SCOPE_KEY: peer}, body_replay(body, receive), send)


async def _authenticate(scope: Scope, headers: dict[str, str]) -> tuple[str | None, str]:
    authorization = headers.get("authorization", "")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None, "use Authorization: Bearer <pairing token>"
        peer = await database_sync_to_async(pairing_token_verify)(token=token.strip())
        return (peer, "") if peer else (None, "the pairing token is unknown or revoked")
    if settings.HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN and _loopback_exempt(scope, headers):
        return settings.HERMES_A2A_GARRAIA_LOOPBACK_PEER, ""
    return None, "a pairing token is required (Authorization: Bearer <token>; see manage.py a2a_pair)"


def _loopback_exempt(scope: Scope, headers: dict[str, str]) -> bool:
    """A token-less GarraIA-dialect call from a local process (not from a web page)."""
    if not scope["path"].startswith(GARRAIA_PREFIX) or "origin" in headers:
        return False
    client = scope.get("client")
    if not client:
        return False
    host = _host_name(headers.get("host", ""))
    return _is_loopback(str(client[0])) and (host == "localhost" or _is_loopback(host))


def _host_name(host_header: str) -> str:
    """The host of a `Host` header, without its port or IPv6 brackets."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0].lower()


def _is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


async def _reply(send: Send, status: int, error: str, *, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
