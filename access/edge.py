"""The ASGI edge: the first code every connection meets, before Django, Channels or a mounted app.

`mesh_only(app)` wraps the whole application in `hermes_site/asgi.py`, so one check covers HTTP,
websockets and the plain ASGI apps mounted in front of Django:

- A peer outside `HERMES_ALLOWED_CIDRS` (plus the trusted proxies) is refused: HTTP gets a 403
  before its body is read; a websocket handshake is closed before it is accepted (the server
  answers 403). A connection whose peer address is unknown is refused too.
- A `Host` that is not in `HERMES_ALLOWED_HOSTS` (`access.hosts`) is refused on every surface —
  Django's views, the A2A routes and agent cards, the websocket, the probes: HTTP gets `400
  host_not_allowed`, a websocket handshake is closed before it is accepted.
- The ASGI `root_path` is cleared. Daphne sets it from a `Daphne-Root-Path` request header, which
  any client can send, and Django and Starlette build every URL on it (and Channels routes on it).
  Hermes learns its prefix from `HERMES_URL_PREFIX` only.
- `X-Forwarded-Proto` is removed unless a trusted proxy sent it, so "the browser used HTTPS" can
  only come from the proxy (Django's SECURE_PROXY_SSL_HEADER and the websocket origin check read it).
- Each refusal is one log line, and a flood of them only so many a minute (`access.refusal_logs`).
- In `local` mode, the first connection that arrived on a non-loopback address logs a loud warning.

The peer is the TCP peer as the server reports it. Daphne must not be started with
`--proxy-headers`: it would replace the peer with whatever `X-Forwarded-For` claims.
"""

from __future__ import annotations

import logging
from typing import Any

from access.exposure import exposure_note_connection
from access.hosts import host_allowed, scope_host
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
            logger.warning("refused %s %r from %s: outside HERMES_ALLOWED_CIDRS", scope["type"], _path(scope), peer)
            return await _refuse(
                scope,
                receive,
                send,
                status=403,
                code="network_not_allowed",
                message="Hermes accepts connections only from its own networks (HERMES_ALLOWED_CIDRS).",
            )
        exposure_note_connection(scope)
        host = scope_host(scope)
        if not host_allowed(host):
            logger.warning(
                "refused %s %r from %s: host %r is not in HERMES_ALLOWED_HOSTS",
                scope["type"],
                _path(scope),
                peer,
                host[:100],
            )
            return await _refuse(
                scope,
                receive,
                send,
                status=400,
                code="host_not_allowed",
                message="Hermes does not answer to this host name (HERMES_ALLOWED_HOSTS).",
            )
        headers = scope.get("headers", [])
        if not address_within(peer, trusted_proxy_networks()):
            headers = [(n, v) for n, v in headers if n.lower() not in _TRUSTED_PROXY_ONLY]
        scope = {**scope, "headers": headers, "root_path": ""}
        return await self.app(scope, receive, send)


def mesh_only(app: ASGIApp) -> ASGIApp:
    """`app` behind the network check (see the module docstring)."""
    return MeshOnly(app)


async def _refuse(scope: Scope, receive: Any, send: Any, *, status: int, code: str, message: str) -> None:
    """An HTTP request gets the reason as JSON; a WebSocket is denied before it is accepted."""
    if scope["type"] == "http":
        await asgi_http_refuse(send, status=status, code=code, message=message)
    else:
        await asgi_websocket_deny(receive, send)


def _path(scope: Scope) -> str:
    """The requested path for a log line: cut short (it is the client's text, shown with repr)."""
    return str(scope.get("path", ""))[:200]
