"""Fixtures of the control room's tests.

- `channel_layer` — parametrised: the in-memory layer with every message round-tripped through
  JSON (so it hides no serialisation bug), and the Redis layer (`REDIS_URL`, as CI runs it) with a
  prefix of its own. The running loop's turn registry, Oikos relay and tool hub are closed after.
- `socket(path)` — a connected `WebsocketCommunicator` on the real ASGI application (closed after).
- `Frames` — what a socket received, with helpers to wait for a frame.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from channels.testing import WebsocketCommunicator
from django.db import connections
from pytest_django.fixtures import Settings

from agent.tools import tool_hub_close
from controlroom.registry import turn_registry_close
from controlroom.relay import oikos_relay_close
from hermes_site.asgi import application

ORIGIN = (b"origin", b"http://localhost")


def browser_socket(path: str, *, origin: bytes = b"http://localhost") -> WebsocketCommunicator:
    """A websocket to the whole application as a browser on this machine opens it: from loopback,
    to the host `localhost`, from a page of that origin."""
    communicator = WebsocketCommunicator(application, path, headers=[(b"host", b"localhost"), (b"origin", origin)])
    communicator.scope["client"] = ("127.0.0.1", 50000)
    return communicator


class JSONRoundTripLayer(InMemoryChannelLayer):
    """The in-memory layer, but every message goes through JSON as it would through a network."""

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await super().send(channel, json.loads(json.dumps(message)))


@pytest.fixture(params=["memory", "redis"])
async def channel_layer(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[BaseChannelLayer]:
    async for layer in _layer(request.param, settings, request):
        yield layer


@pytest.fixture
async def memory_layer(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[BaseChannelLayer]:
    """The in-memory layer only (JSON round trip), for tests about views rather than transport."""
    async for layer in _layer("memory", settings, request):
        yield layer


async def _layer(kind: str, settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[BaseChannelLayer]:
    if kind == "redis":
        url = os.environ.get("REDIS_URL")
        if not url:
            pytest.skip("REDIS_URL is not set: the Redis layer is tested where Redis runs (CI sets it)")
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {"hosts": [url], "prefix": f"hermes-test-{secrets.token_hex(4)}", "capacity": 1000},
            }
        }
    else:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "tests.controlroom.conftest.JSONRoundTripLayer", "CONFIG": {"capacity": 1000}}
        }
    layer = get_channel_layer()
    assert layer is not None
    yield layer
    # What the test's event loop started: its turns, its relay, its MCP connections.
    await turn_registry_close()
    await oikos_relay_close()
    await tool_hub_close()
    # The async ORM (`aget`, `acount`) leaves its connection open in the sync thread; PostgreSQL
    # would then refuse to drop the test database at the end of the run.
    if request.node.get_closest_marker("django_db"):
        await database_sync_to_async(connections.close_all)()
    if kind == "redis":
        await layer.flush()
        await layer.close_pools()  # type: ignore[attr-defined]


class Frames:
    """The frames one socket received, in order."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.received: list[str] = []

    async def next(self, seconds: float = 10.0) -> str:
        frame = await self.communicator.receive_from(timeout=seconds)
        self.received.append(frame)
        return frame

    async def until(self, predicate: Callable[[str], bool], seconds: float = 15.0) -> str:
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
