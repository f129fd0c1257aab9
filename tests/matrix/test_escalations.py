"""The watcher's investigations posted as Matrix threads, continued by replying (real Synapse)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.models import Turn
from agent.tools import ToolHub
from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.scripted_models import DegradedInvestigator
from tests.matrix.conftest import Room
from watch.models import Investigation
from watch.policy import TriggerPolicy
from watch.watcher import Watcher

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_investigation_becomes_a_thread_and_a_reply_continues_its_session(
    llm: FakeAnthropic, oikos_settings: RunningSim, oikos_hub: ToolHub, room: Room, bridge_start, settings: Settings
) -> None:
    settings.HERMES_MATRIX_ESCALATION_ROOM = room.room_id
    llm.responder = DegradedInvestigator()
    await bridge_start(poll_seconds=0.2)
    watcher = Watcher(hub=oikos_hub, policy=TriggerPolicy.from_settings(), storm_gather=0)
    watching = asyncio.get_running_loop().create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.connected.wait(), 10)
        state = oikos_settings.state
        signal_fire(state.world, state.events, "service:postgres", "wal_archive_failing", "critical", "archive failing")
        messages = await room.wait_for(lambda ms: any("Hermes investigated" in m.body for m in ms), "the escalation")
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        while watcher.investigations:
            await asyncio.gather(*watcher.investigations)

    (root,) = [m for m in messages if "Hermes investigated" in m.body]
    assert root.thread is None  # a new thread of its own
    assert "wal_archive_failing" in root.body and "Summary:" in root.body
    assert "service:authentik" in root.body  # the impact: what depends on postgres
    assert "Reply in this thread" in root.body

    llm.responder = lambda request: Reply.text("Check the archive volume first: it is full.")
    await room.alice.send(room.room_id, "what should I check first?", thread=root.event_id)
    await room.wait_for(
        lambda ms: any(m.thread == root.event_id and "archive volume" in m.body for m in ms), "the answer in the thread"
    )
    await room.show("escalation thread")

    (investigation,) = await database_sync_to_async(list)(Investigation.objects.all())
    turns = await database_sync_to_async(list)(
        Turn.objects.filter(session_id=investigation.session_id).order_by("started_at").values_list("actor", flat=True)
    )
    assert turns == ["agent:hermes", "operator:alice"]  # the reply continued the investigation's session
