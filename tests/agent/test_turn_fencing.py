"""A turn another process declared interrupted (it took this one for gone) stores nothing more: its
late tool result and answer never land after the next turn's messages, and its followers hear that
it was interrupted. Runs on SQLite and PostgreSQL alike; tests/faults/test_storage.py does the same
across processes with PostgreSQL cut under the turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent import presence
from agent.conversation.events import Done, Error, Event
from agent.engine.runner import turn_start
from agent.models import Message, Turn
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.gated_mcp import Gate, build_gated_oikos
from tests.fakes.mcp_servers import MCPTestServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gated_oikos(settings: Settings) -> Iterator[MCPTestServer]:
    gate = Gate.fresh()
    server = MCPTestServer(build=build_gated_oikos)
    server.start()
    settings.HERMES_MCP_CONFIG = None
    settings.OIKOS_MCP_URL = server.url
    settings.OIKOS_MCP_TOKEN = server.token
    yield server
    gate.release.set()
    server.stop()


@pytest.fixture
async def gated_hub(gated_oikos: MCPTestServer) -> AsyncIterator[ToolHub]:
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


async def _events_to_done(events: AsyncIterator[Event]) -> list[Event]:
    seen = []
    async for event in events:
        seen.append(event)
        if isinstance(event, Done):
            break
    return seen


async def test_a_turn_interrupted_by_another_process_writes_nothing_after_the_next_turn(
    llm: FakeAnthropic, gated_hub: ToolHub
) -> None:
    llm.enqueue(Reply.tool_use("mcp__oikos__held", {"label": "first"}))
    first = await turn_start(text="check the fleet slowly", actor="operator:test", origin="test", hub=gated_hub)
    following = asyncio.ensure_future(_events_to_done(first.events()))
    assert await asyncio.to_thread(Gate.current.entered.wait, 60), "the tool call never started"

    # Another process took this one for gone (a database blip hid its presence) and interrupted the
    # turn; the session then took a second question, answered in full.
    await database_sync_to_async(presence.turns_interrupt)(turn_ids=[first.turn_id])
    llm.enqueue(Reply.text("Second turn: the fleet is fine."))
    second = await turn_start(
        text="is the fleet fine?", actor="operator:test", origin="test", session_id=first.session_id, hub=gated_hub
    )
    assert (await _events_to_done(second.events()))[-1].status == "done"  # type: ignore[attr-defined]

    # The first turn's call now answers, and the model is asked about it once more.
    llm.enqueue(Reply.text("First turn, late: the fleet was slow."))
    Gate.current.release.set()
    seen = await following

    assert isinstance(seen[-2], Error) and seen[-2].code == "interrupted"
    assert isinstance(seen[-1], Done) and seen[-1].status == "interrupted"

    def stored() -> list[tuple[str, str, list[str]]]:
        rows = Message.objects.filter(session_id=first.session_id).order_by("id")
        return [(str(row.turn_id), row.role, [block["type"] for block in row.content]) for row in rows]

    history = await database_sync_to_async(stored)()
    turns = [turn for turn, _role, _types in history]
    assert str(first.turn_id) not in turns[turns.index(str(second.turn_id)) :], history
    # Turn 1's call answered "outcome unknown" by the repair, right after its tool_use; nothing late.
    assert [types for _turn, _role, types in history] == [
        ["text"],
        ["tool_use"],
        ["tool_result"],
        ["text"],
        ["text"],
    ]
    assert (await Turn.objects.aget(pk=first.turn_id)).status == "interrupted"
