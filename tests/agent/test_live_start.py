"""`TurnRegistry.start`: the one call a transport makes to start a turn, follow it and announce
the orphaned turns it found."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer, InMemoryChannelLayer
from pytest_django.fixtures import Settings

from agent.broadcast import ORPHAN_END, session_group
from agent.engine.runner import TurnHandle, running
from agent.live import TurnRegistry, turn_registry
from agent.models import AgentSession, Turn
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)


class HeldLayer(InMemoryChannelLayer):
    """A layer whose group joins wait until the test lets them go (a Redis round trip, frozen)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.joining = asyncio.Event()
        self.release = asyncio.Event()

    async def group_add(self, group: str, channel: str) -> None:
        self.joining.set()
        await self.release.wait()
        await super().group_add(group, channel)


async def _receive_until(layer: BaseChannelLayer, channel: str, through: int) -> dict[str, Any]:
    while True:
        message = await layer.receive(channel)
        if message.get("through") == through:
            return message


async def test_a_started_turn_is_followed_and_counted_as_running_here(
    llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    layer = InMemoryChannelLayer()
    registry = TurnRegistry(layer=layer)
    llm.enqueue(Reply.text("Caddy is up.", delay=0.2))

    handle = await registry.start(text="is caddy up?", actor="operator:test", origin="ui")

    assert str(handle.turn_id) in registry.turns and handle.turn_id in running
    await handle.wait()
    await registry.aclose()
    assert handle.turn_id not in running


async def test_a_caller_cancelled_while_its_turn_is_taken_over_still_gets_the_handle(
    llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """The A2A server cancels the turn of a peer that hung up: it needs the handle to do so."""
    layer = HeldLayer()
    registry = TurnRegistry(layer=layer)
    llm.enqueue(Reply.text("Caddy is up."))
    handles: list[TurnHandle] = []

    async def asker() -> None:
        handles.append(await registry.start(text="is caddy up?", actor="operator:test", origin="ui"))
        await asyncio.sleep(10)  # the held-back cancellation lands here

    asking = asyncio.create_task(asker())
    await layer.joining.wait()
    asking.cancel()
    layer.release.set()
    await asyncio.gather(asking, return_exceptions=True)

    assert asking.cancelled() and len(handles) == 1
    assert str(handles[0].turn_id) in registry.turns
    await handles[0].wait()
    await registry.aclose()


async def test_the_turns_found_orphaned_are_announced_as_ended(
    llm: FakeAnthropic, oikos_settings: RunningSim, memory_layer: BaseChannelLayer, settings: Settings
) -> None:
    """A page still showing a turn whose process died hears that it ended when the session is asked again."""
    settings.HERMES_TURN_STALE_SECONDS = 1

    @database_sync_to_async
    def orphan() -> tuple[uuid.UUID, uuid.UUID]:
        session = AgentSession.objects.create(actor="operator:test")
        turn = Turn.objects.create(session=session, actor="operator:test")
        Turn.objects.filter(pk=turn.pk).update(heartbeat_at="2020-01-01T00:00:00Z")
        return session.pk, turn.pk

    session_id, orphan_id = await orphan()
    channel = await memory_layer.new_channel()
    await memory_layer.group_add(session_group(session_id), channel)
    llm.enqueue(Reply.text("ok"))

    handle = await turn_registry().start(text="hello again", actor="operator:test", origin="ui", session_id=session_id)

    announced = await asyncio.wait_for(_receive_until(memory_layer, channel, ORPHAN_END), timeout=10)
    assert handle.interrupted == [orphan_id]
    assert announced["turn_id"] == str(orphan_id) and announced["events"][0]["status"] == "interrupted"
    await handle.wait()
