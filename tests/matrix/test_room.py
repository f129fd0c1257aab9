"""Who and where the bridge answers, and what a restart does (real Synapse, real clients)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from agent.models import AgentSession, Turn
from matrix.models import MatrixEvent
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.matrix.conftest import Room, room_create

pytestmark = pytest.mark.django_db(transaction=True)


def _answered(question: str):
    return lambda ms: any(m.thread == question and "formatted_body" in m.content for m in ms)


async def test_a_stranger_is_told_once_and_a_room_not_allowlisted_is_ignored(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = lambda request: Reply.text("The fleet is healthy.")
    other_room = await room_create(room.homeserver, room.alice, [room.bot.user_id])
    running = await bridge_start()
    await running.bridge.client.join(other_room)  # invited and joined, but not in HERMES_MATRIX_ROOMS

    first = await room.mallory.send(room.room_id, f"{room.bot.user_id} restart caddy", mention=room.bot.user_id)
    second = await room.mallory.send(room.room_id, f"{room.bot.user_id} please?", mention=room.bot.user_id)
    elsewhere = await room.alice.send(other_room, f"{room.bot.user_id} how is the fleet?", mention=room.bot.user_id)
    # Then an operator's question, answered: by then everything above was handled.
    question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is the fleet?", mention=room.bot.user_id)
    messages = await room.wait_for(_answered(question), "the operator's answer")
    await room.show("room")

    told = [m for m in messages if m.thread in (first, second)]
    assert len(told) == 1 and "only take questions from the operators" in told[0].body
    assert told[0].thread == first
    assert not any(m.thread == question and "operators" in m.body for m in messages)
    # No turn for the stranger nor for the other room: one session, alice's.
    sessions = await database_sync_to_async(list)(AgentSession.objects.values_list("actor", flat=True))
    assert sessions == ["operator:alice"]
    assert llm.requests and all("restart caddy" not in str(r.body["messages"]) for r in llm.requests)
    other = await room.alice.client.room_messages(other_room, limit=50)
    assert all(
        event.source.get("sender") != room.bot.user_id
        for event in other.chunk
        if event.source.get("type") == "m.room.message"
    )
    ignored = await database_sync_to_async(list)(
        MatrixEvent.objects.filter(kind="ignored").values_list("event_id", "outcome")
    )
    assert sorted(ignored) == sorted([(first, "stranger"), (second, "stranger")])
    assert elsewhere not in await database_sync_to_async(list)(MatrixEvent.objects.values_list("event_id", flat=True))


async def test_a_restarted_bridge_replays_nothing_and_answers_what_came_while_it_was_down(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = lambda request: Reply.text("All good.")
    before = await room.alice.send(room.room_id, f"{room.bot.user_id} sent before the bridge ever ran")
    running = await bridge_start()
    asked = await room.alice.send(room.room_id, f"{room.bot.user_id} how is the fleet?")
    await room.wait_for(_answered(asked), "the first answer")
    await running.stop()

    while_down = await room.alice.send(room.room_id, f"{room.bot.user_id} and now?")
    restarted = await bridge_start()
    await room.wait_for(_answered(while_down), "the answer to the message sent while down")
    # One more sync round trip after that answer: anything replayed would be there by now.
    last = await room.alice.send(room.room_id, f"{room.bot.user_id} last one")
    messages = await room.wait_for(_answered(last), "the last answer")
    await room.show("room")

    answers = [m.thread for m in messages if "formatted_body" in m.content]
    assert answers == [asked, while_down, last]  # each once; the history before the first start never
    assert before not in answers
    turns = await database_sync_to_async(Turn.objects.count)()
    assert turns == 3
    assert restarted.bridge.stats.batches >= 1


async def test_a_question_followed_by_more_than_a_sync_carries_while_down_is_still_answered(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = lambda request: Reply.text("All good.")
    running = await bridge_start()
    await running.stop()

    # Synapse's sync carries the last 10 events of a room by default: with chatter around it, the
    # question is in none of the syncs the restarted bridge gets, only in the gap they leave.
    for number in range(15):
        await room.mallory.send(room.room_id, f"chatter {number}")
    question = await room.alice.send(room.room_id, f"{room.bot.user_id} anything wrong overnight?")
    for number in range(15, 30):
        await room.mallory.send(room.room_id, f"chatter {number}")
    await bridge_start()
    messages = await room.wait_for(_answered(question), "the answer to the question before the chatter")
    assert [m.thread for m in messages if "formatted_body" in m.content] == [question]
