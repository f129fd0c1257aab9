"""Sending HTTP requests for a few paths to ASGI apps other than Django."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.types import Receive, Scope, Send

# Loose on purpose: Django's handler and Starlette apps spell the ASGI signature differently.
App = Callable[[Any, Any, Any], Awaitable[None]]


class PathRouter:
    """Routes HTTP requests by path: an entry ending in "/" is a prefix, any other an exact path.

    The first matching entry's app gets the request unchanged; anything unmatched (and every other
    scope type) goes to `default`.
    """

    def __init__(self, routes: Sequence[tuple[str, App]], *, default: App) -> None:
        self.routes = list(routes)
        self.default = default

    def app_for(self, path: str) -> App:
        for route, app in self.routes:
            if path == route or (route.endswith("/") and path.startswith(route)):
                return app
        return self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self.app_for(scope["path"]) if scope["type"] == "http" else self.default
        await app(scope, receive, send)
