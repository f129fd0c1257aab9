"""Talking to the real ASGI application (`hermes_site.asgi.application`) from a chosen peer address.

Django's test client skips the ASGI edge, where the network check lives, and cannot say where a
connection comes from; these helpers build the scope the server would, `client` included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any

from asgiref.testing import ApplicationCommunicator
from channels.testing import WebsocketCommunicator

from hermes_site.asgi import application

TRUSTED_PROXY = "10.9.0.5"
# The first request builds Django's middleware chain; later ones take milliseconds.
TIMEOUT = 15
MESH_PEER = "100.64.3.7"
FOREIGN_PEER = "203.0.113.9"

Headers = Iterable[tuple[str, str | bytes]]


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # the last value of each header
    body: bytes
    set_cookies: dict[str, str]

    def cookie_header(self) -> tuple[str, str]:
        """A `Cookie` request header carrying every cookie this response set."""
        return ("cookie", "; ".join(f"{name}={value}" for name, value in self.set_cookies.items()))

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _header_pairs(host: str, headers: Headers) -> list[tuple[bytes, bytes]]:
    pairs = [(b"host", host.encode())]
    for name, value in headers:
        pairs.append((name.lower().encode(), value if isinstance(value, bytes) else value.encode("latin-1")))
    return pairs


async def http(
    path: str,
    *,
    method: str = "GET",
    peer: str | None = "127.0.0.1",
    headers: Headers = (),
    body: bytes = b"",
    host: str = "localhost",
    chunks: list[bytes] | None = None,
    app: Any = None,
    server: tuple[str, int] = ("127.0.0.1", 8000),
) -> Response:
    """One HTTP request through the whole application, as Daphne would hand it over."""
    path_only, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path_only,
        "raw_path": path_only.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": _header_pairs(host, headers),
        "client": (peer, 50123) if peer else None,
        "server": server,
    }
    communicator = ApplicationCommunicator(app or application, scope)
    parts = chunks if chunks is not None else [body]
    for index, part in enumerate(parts):
        await communicator.send_input({"type": "http.request", "body": part, "more_body": index < len(parts) - 1})
    start = await communicator.receive_output(TIMEOUT)
    assert start["type"] == "http.response.start", start
    received = b""
    while True:
        message = await communicator.receive_output(TIMEOUT)
        received += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(TIMEOUT)
    pairs = [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in start.get("headers", [])]
    cookies = SimpleCookie()
    for name, value in pairs:
        if name == "set-cookie":
            cookies.load(value)
    return Response(
        status=start["status"],
        headers=dict(pairs),
        body=received,
        set_cookies={name: morsel.value for name, morsel in cookies.items()},
    )


def websocket(
    path: str,
    *,
    peer: str | None = "127.0.0.1",
    origin: str | None = "http://localhost",
    host: str = "localhost",
    headers: Headers = (),
    scheme: str = "ws",
) -> WebsocketCommunicator:
    """A websocket handshake to the whole application; `await .connect()` says whether it was accepted."""
    extra = [*([("origin", origin)] if origin else []), *headers]
    communicator = WebsocketCommunicator(application, path, headers=_header_pairs(host, extra))
    communicator.scope.update(client=(peer, 50124) if peer else None, server=("127.0.0.1", 8000), scheme=scheme)
    return communicator


def proxy_headers(username: str | bytes, *, email: str = "", groups: str = "") -> list[tuple[str, str | bytes]]:
    headers: list[tuple[str, str | bytes]] = [("X-Authentik-Username", username)]
    if email:
        headers.append(("X-Authentik-Email", email))
    if groups:
        headers.append(("X-Authentik-Groups", groups))
    return headers
