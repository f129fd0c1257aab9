"""Small peer agents on loopback for the A2A client's tests.

- `FakeGarraPeer`: GarraIA's dialect (card + `POST /a2a/tasks`), answering from a script of
  `(text, status)` and recording every request (headers and body).
- `Served(app, name)`: any ASGI app on loopback, as a context manager.
- `redirector(target)`: answers every request with a redirect to `target`.
- `a2a_card_app(card)`: serves only an A2A agent card (to point a client somewhere else).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.fakes.loopback import LoopbackServer


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Served:
    """Any ASGI app on loopback, as a context manager."""

    def __init__(self, app: Starlette, name: str) -> None:
        self._server = LoopbackServer(app, name=name)
        self.url = ""

    def __enter__(self) -> Self:
        self.url = self._server.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.stop()


class FakeGarraPeer(Served):
    def __init__(self) -> None:
        self.replies: deque[tuple[str, str]] = deque()
        self.seen: list[Seen] = []
        super().__init__(
            Starlette(
                routes=[
                    Route("/.well-known/agent.json", self._card, methods=["GET"]),
                    Route("/a2a/tasks", self._task, methods=["POST"]),
                ]
            ),
            "fake-garraia",
        )

    def script(self, *replies: str | tuple[str, str]) -> None:
        for reply in replies:
            self.replies.append(reply if isinstance(reply, tuple) else (reply, "completed"))

    async def _card(self, request: Request) -> Response:
        self.seen.append(Seen("GET", request.url.path, dict(request.headers), None))
        return JSONResponse({"name": "garraia", "url": self.url, "version": "0.3.3", "capabilities": {}, "skills": []})

    async def _task(self, request: Request) -> Response:
        body = await request.json()
        self.seen.append(Seen("POST", request.url.path, dict(request.headers), body))
        text, status = self.replies.popleft() if self.replies else ("(script ran out)", "failed")
        user = body["message"]
        return JSONResponse(
            {
                "id": body.get("id") or "generated",
                "status": status,
                "messages": [user, {"role": "agent", "parts": [{"type": "text", "text": text}]}],
                "artifacts": [{"name": "response", "parts": [{"type": "text", "text": text}], "index": 0}],
                "metadata": {},
            }
        )


def redirector(target: str) -> Starlette:
    async def redirect(request: Request) -> Response:
        return RedirectResponse(target + request.url.path, status_code=307)

    return Starlette(routes=[Route("/{path:path}", redirect, methods=["GET", "POST"])])


def a2a_card_app(card: dict[str, Any]) -> Starlette:
    async def serve(request: Request) -> Response:
        return JSONResponse(card)

    return Starlette(routes=[Route("/.well-known/agent-card.json", serve, methods=["GET"])])
