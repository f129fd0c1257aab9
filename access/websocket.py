"""Websocket access: the page's origin must be our own, and the operator is decided as for HTTP.

`websocket_guard(inner)` is what `hermes_site/asgi.py` routes websockets through:

    SameOriginValidator(AuthMiddlewareStack(OperatorWebsocketMiddleware(inner)))

- `SameOriginValidator` is the websocket's CSRF protection: browsers let any page open a websocket
  to any host, with the victim's cookies, and only the `Origin` header tells who did. Channels'
  `AllowedHostsOriginValidator` accepts any origin whose *host name* is allowed, whatever its port or
  scheme (`http://localhost:6666` passes for a Hermes on `localhost:8000`). Here the origin must be
  exactly the one the browser connected to — scheme, host and port, the scheme taken from the
  trusted proxy's `X-Forwarded-Proto` behind a TLS-terminating proxy — or be listed in
  `CSRF_TRUSTED_ORIGINS`, as for Django's CSRF check; and `Host` must be in `ALLOWED_HOSTS`.
- `OperatorWebsocketMiddleware` asks `identity_decide` and puts `operator` (an `Identity`) and `user`
  in the scope, or refuses the handshake. No websocket is served without an identity.

`websocket_path_unknown` ends `hermes_site/asgi.py`'s websocket routes: a handshake on any other path
is refused (403) with one log line, where Channels' router would raise and Daphne answer 500.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.conf import settings

from access.hosts import host_allowed, scope_scheme
from access.identity import (
    FROM_SESSION,
    Identity,
    Refusal,
    identity_decide,
    identity_from_user,
    proxy_headers_from_pairs,
)
from access.refusals import asgi_websocket_deny
from access.users import operator_user_sync

logger = logging.getLogger("access")

ASGIApp = Any
Scope = dict[str, Any]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def websocket_guard(inner: ASGIApp) -> ASGIApp:
    """Origin check, then Django's session (for `django` mode), then the operator, then `inner`."""
    return SameOriginValidator(AuthMiddlewareStack(OperatorWebsocketMiddleware(inner)))


class SameOriginValidator:
    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        problem = websocket_origin_problem(scope)
        if problem:
            logger.warning("websocket refused: %s", problem)
            return await asgi_websocket_deny(receive, send)
        return await self.inner(scope, receive, send)


def websocket_origin_problem(scope: Scope) -> str | None:
    """Why the handshake's `Origin`/`Host` may not open a websocket here, or None when they may."""
    headers = _headers(scope)
    host = headers.get("host", "")
    if not host_allowed(host):
        return f"host {host!r} is not in ALLOWED_HOSTS"
    origin = headers.get("origin", "")
    if not origin:
        return "no Origin header"
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return None
    presented = _origin_key(origin)
    if presented is None or presented != _origin_key(f"{scope_scheme(scope)}://{host}"):
        return f"origin {origin!r} is not this site's"
    return None


class OperatorWebsocketMiddleware:
    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> Any:
        client = scope.get("client") or (None, None)
        decision = identity_decide(peer=client[0], headers=proxy_headers_from_pairs(scope.get("headers", [])))
        identity: Identity | None
        if isinstance(decision, Refusal):
            logger.warning("websocket refused: %s (%s)", decision.code, client[0])
            return await asgi_websocket_deny(receive, send)
        if decision is FROM_SESSION:
            user = scope.get("user")
            identity = identity_from_user(user)
        else:
            assert isinstance(decision, Identity)
            identity = decision
            user = await database_sync_to_async(operator_user_sync)(decision)
            if not user.is_active:
                identity = None
        if identity is None:
            logger.warning("websocket refused: no operator identity (%s)", client[0])
            return await asgi_websocket_deny(receive, send)
        return await self.inner({**scope, "operator": identity, "user": user}, receive, send)


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


def _origin_key(origin: str) -> tuple[str, str, int | None] | None:
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


async def websocket_path_unknown(scope: Scope, receive: Any, send: Any) -> None:
    """The websocket route of every path Hermes does not serve: the handshake is refused."""
    logger.warning("websocket refused: no websocket at %r", str(scope.get("path", ""))[:200])
    await asgi_websocket_deny(receive, send)
