"""The ASGI edge: the first code every connection meets, before Django, Channels or a mounted app.

`mesh_only(app)` wraps the whole application in `hermes_site/asgi.py`, so one check covers HTTP,
websockets and the plain ASGI apps mounted in front of Django:

- A peer outside `HERMES_ALLOWED_CIDRS` (plus the trusted proxies) is refused: HTTP gets a 403
  before its body is read; a websocket handshake is closed before it is accepted (the server
  answers 403). A connection whose peer address is unknown is refused too.
- `X-Forwarded-Proto` is removed unless a trusted proxy sent it, so "the browser used HTTPS" can
  only come from the proxy (Django's SECURE_PROXY_SSL_HEADER and the websocket origin check read it).
- In `local` mode, the first connection that arrived on a non-loopback address logs a loud warning.

The peer is the TCP peer as the server reports it. Daphne must not be started with
`--proxy-headers`: it would replace the peer with whatever `X-Forwarded-For` claims.
"""

from __future__ import annotations

import logging
from typing import Any

from access.exposure import exposure_note_connection
from access.networks import address_within, allowed_networks, trusted_proxy_networks
from access.refusals import asgi_http_refuse, asgi_websocket_deny

logger = logging.getLogger("access")

ASGIApp = Any
Scope = dict[str, Any]

_TRUSTED_PROXY_ONLY = (b"x-forwarded-proto",)


class MeshOnly:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        peer = (scope.get("client") or (None, None))[0]
        if not address_within(peer, allowed_networks()):
            logger.warning(
                "refused %s %s from %s: outside HERMES_ALLOWED_CIDRS", scope["type"], scope.get("path"), peer
            )
            if scope["type"] == "http":
                return await asgi_http_refuse(
                    send,
                    status=403,
                    code="network_not_allowed",
                    message="Hermes accepts connections only from its own networks (HERMES_ALLOWED_CIDRS).",
                )
            return await asgi_websocket_deny(receive, send)
        exposure_note_connection(scope)
        if not address_within(peer, trusted_proxy_networks()):
            scope = {
                **scope,
                "headers": [(n, v) for n, v in scope.get("headers", []) if n.lower() not in _TRUSTED_PROXY_ONLY],
            }
        return await self.app(scope, receive, send)


def mesh_only(app: ASGIApp) -> ASGIApp:
    """`app` behind the network check (see the module docstring)."""
    return MeshOnly(app)
