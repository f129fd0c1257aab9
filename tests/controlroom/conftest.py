"""Fixtures of the control room's tests (the channel layers come from `tests.fakes.channel_layers`).

- `socket(path)` — a connected `WebsocketCommunicator` on the real ASGI application (closed after).
- `Frames` — what a socket received, with helpers to wait for a frame.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from channels.layers import BaseChannelLayer
from channels.testing import WebsocketCommunicator

from hermes_site.asgi import application

ORIGIN = (b"origin", b"http://localhost")


def browser_socket(path: str, *, origin: bytes = b"http://localhost") -> WebsocketCommunicator:
    """A websocket to the whole application as a browser on this machine opens it: from loopback,
    to the host `localhost`, from a page of that origin."""
    communicator = WebsocketCommunicator(application, path, headers=[(b"host", b"localhost"), (b"origin", origin)])
    communicator.scope["client"] = ("127.0.0.1", 50000)
    return communicator


class Frames:
    """The frames one socket received, in order."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.received: list[str] = []

    async def next(self, seconds: float = 10.0) -> str:
        frame = await self.communicator.receive_from(timeout=seconds)
        self.received.append(frame)
        return frame

    async def until(self, predicate: Callable[[str], object], seconds: float = 15.0) -> str:
        """Receive until a frame matches; returns it (every frame is kept in `received`)."""
        async with asyncio.timeout(seconds):
            while True:
                frame = await self.next(seconds)
                if predicate(frame):
                    return frame

    def text(self) -> str:
        return "".join(self.received)


Connect = Callable[[str], Awaitable[Frames]]


@pytest.fixture
async def socket(channel_layer: BaseChannelLayer) -> AsyncIterator[Connect]:
    opened: list[WebsocketCommunicator] = []

    async def connect(path: str) -> Frames:
        communicator = browser_socket(path)
        connected, _ = await communicator.connect(timeout=10)
        assert connected, f"the control room refused the socket {path}"
        opened.append(communicator)
        return Frames(communicator)

    yield connect
    for communicator in opened:
        await communicator.disconnect(timeout=5)
