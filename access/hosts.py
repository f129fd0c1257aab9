"""The host a connection addressed, and whether Hermes answers to it (`HERMES_ALLOWED_HOSTS`).

Django checks `Host` only when something asks for it (`request.get_host()`), and only for Django's
own views; the A2A app mounted in front of Django never asked, so its agent cards advertised
whatever host a client named. The edge (`access.edge`) now checks every HTTP request and websocket
handshake here, with Django's own rules, before any app runs; whatever runs after it may build
URLs from `scope_host`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host

Scope = Mapping[str, Any]


def scope_host(scope: Scope) -> str:
    """The `Host` the client sent, as Django reads it: repeated headers joined by commas (which no
    allowed host matches), the server's own address when there is none (HTTP/1.0)."""
    values = [value.decode("latin-1") for name, value in scope.get("headers", []) if name.lower() == b"host"]
    if values:
        return ",".join(values)
    server = scope.get("server")
    if not server:
        return ""
    host, port = server[0], server[1] if len(server) > 1 else None
    if ":" in str(host):
        host = f"[{host}]"
    return f"{host}:{port}" if port else str(host)


def scope_scheme(scope: Scope) -> str:
    """`https` when the client used TLS — to us, or to the trusted proxy in front (its
    `X-Forwarded-Proto`; the edge strips that header from everyone else) — else `http`."""
    if scope.get("scheme") in ("https", "wss"):
        return "https"
    if settings.SECURE_PROXY_SSL_HEADER:
        for name, value in scope.get("headers", []):
            if name.lower() == b"x-forwarded-proto" and value.decode("latin-1").strip().lower() == "https":
                return "https"
    return "http"


def allowed_hosts() -> list[str]:
    """`ALLOWED_HOSTS`, with Django's development fallback when it is empty under DEBUG."""
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def host_allowed(host: str) -> bool:
    """Whether Hermes answers to `host` (a `Host` header value, port included or not)."""
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts())
