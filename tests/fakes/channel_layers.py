"""Channel layers for tests of live turns and sockets.

- `channel_layer` — parametrised: the in-memory layer with every message round-tripped through
  JSON (so it hides no serialisation bug), and the Redis layer (`REDIS_URL`, as CI runs it) with a
  prefix of its own. The running loop's turn registry, Oikos relay and tool hub are closed after.
- `memory_layer`, `redis_layer` — one of the two alone.
- `live_turn()` — a turn as the control room's Ask starts it: started, then followed by the registry.
"""

from __future__ import annotations

import json
import os
import secrets
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from django.db import connections
from pytest_django.fixtures import Settings

from agent.engine.runner import TurnHandle
from agent.live import turn_registry, turn_registry_close
from agent.llm import llm_client_close
from agent.tools import tool_hub_close
from controlroom.investigation_feed import investigation_feed_close
from hermes_site.channel_layers import redis_channel_layer
from oikos.relay import oikos_relay_close


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


@pytest.fixture
async def redis_layer(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[BaseChannelLayer]:
    """The Redis layer only, as configured for production (skipped where Redis is not set up)."""
    async for layer in _layer("redis", settings, request):
        yield layer


async def _layer(kind: str, settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[BaseChannelLayer]:
    if kind == "redis":
        url = os.environ.get("REDIS_URL")
        if not url:
            pytest.skip("REDIS_URL is not set: the Redis layer is tested where Redis runs (CI sets it)")
        # Configured as the settings configure it, with a prefix of its own.
        settings.CHANNEL_LAYERS = {"default": redis_channel_layer(url, prefix=f"hermes-test-{secrets.token_hex(4)}")}
    else:
        settings.CHANNEL_LAYERS = {
            "default": {"BACKEND": "tests.fakes.channel_layers.JSONRoundTripLayer", "CONFIG": {"capacity": 1000}}
        }
    layer = get_channel_layer()
    assert layer is not None
    yield layer
    # What the test's event loop started: its turns, its relay, its MCP connections.
    await turn_registry_close()
    await oikos_relay_close()
    await investigation_feed_close()
    await tool_hub_close()
    await llm_client_close()
    # The async ORM (`aget`, `acount`) leaves its connection open in the sync thread; PostgreSQL
    # would then refuse to drop the test database at the end of the run.
    if request.node.get_closest_marker("django_db"):
        await database_sync_to_async(connections.close_all)()
    if kind == "redis":
        await layer.flush()
        await layer.close_pools()


async def live_turn(text: str, *, session_id: uuid.UUID | None = None) -> TurnHandle:
    return await turn_registry().start(text=text, actor="operator:test", origin="ui", session_id=session_id)
