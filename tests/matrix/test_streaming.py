"""Streaming into one Matrix message: rate limits, a busy session, Stop (real Synapse)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.models import Turn
from matrix.render import ANSWERED_BELOW
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.matrix.conftest import Room

pytestmark = pytest.mark.django_db(transaction=True)

LONG_ANSWER = "\n\n".join(
    f"{n}. **service:{name}** is healthy; its last restart was routine and its logs are quiet."
    for n, name in enumerate(["caddy", "postgres", "authentik", "gitea", "jellyfin", "sonarr", "radarr", "grafana"], 1)
)


def _final(question: str):
    return lambda ms: any(m.thread == question and "formatted_body" in m.content for m in ms)


async def test_a_long_turn_streams_into_a_silent_progress_message_and_the_answer_notifies_as_a_new_message(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = lambda request: Reply.text(LONG_ANSWER, chunk=24, delay=0.05)
    await bridge_start(quiet_seconds=0)  # every turn here is long enough for a progress message

    question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is every service?")
    await room.wait_for(lambda ms: any(m.thread == question and "1. " in m.body for m in ms), "the answer streaming")
    messages = await room.wait_for(
        lambda ms: _final(question)(ms) and any(m.body == ANSWERED_BELOW for m in ms), "the answer and the pointer"
    )
    await room.show("long thread")

    progress, answer = messages
    assert progress.thread == answer.thread == question
    # The progress message was a notice, edited as the answer streamed, and now points below.
    assert progress.content["msgtype"] == "m.notice" and progress.edits >= 2
    assert any(body.startswith("1. ") and body.endswith(" …") for body in await room.edits(progress.event_id))
    # The answer is a new m.text whose body is the answer.
    assert answer.content["msgtype"] == "m.text" and answer.edits == 0
    assert answer.body == LONG_ANSWER
    # What rang alice's phone (Synapse's stock push rules): the answer, not the progress nor its edits.
    assert await room.notified(room.alice) == [answer.event_id]


async def test_a_rate_limit_mid_answer_delays_the_edits_and_loses_nothing(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start, settings: Settings
) -> None:
    # The bot may send one event a second (a burst of two): the answer streams for longer than
    # that, and the bridge is told to edit far more often than the homeserver allows.
    await database_sync_to_async(room.homeserver.ratelimit_override)(room.bot.user_id, per_second=1, burst=2)
    settings.HERMES_MATRIX_EDIT_SECONDS = 0.05
    llm.responder = lambda request: Reply.text(LONG_ANSWER, chunk=24, delay=0.05)
    running = await bridge_start(quiet_seconds=0)

    question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is every service?")
    messages = await room.wait_for(_final(question), "the final answer")
    await room.show("rate-limited thread")

    progress, answer = messages[0], messages[-1]
    assert running.bridge.sender.stats.rate_limited >= 1  # Synapse said M_LIMIT_EXCEEDED, and it was waited out
    assert answer.body == LONG_ANSWER  # nothing lost: the answer is whole
    chunks = len(LONG_ANSWER) // 24
    assert 1 <= progress.edits < chunks  # fewer edits than pieces streamed: they were coalesced
    assert answer.content["formatted_body"].count("<strong>service:") == 8


async def test_a_second_question_to_a_busy_thread_waits_and_stop_stops_the_turn(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = lambda request: Reply.text(LONG_ANSWER * 4, chunk=4, delay=0.05)
    await bridge_start(quiet_seconds=0)
    question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is every service?")
    await room.wait_for(lambda ms: any(m.thread == question and "1. " in m.body for m in ms), "the answer streaming")

    await room.alice.send(room.room_id, "and the backups?", thread=question)
    await room.wait_for(lambda ms: any("Still working on the last one" in m.body for m in ms), "the busy notice")
    await room.alice.send(room.room_id, "stop", thread=question)
    messages = await room.wait_for(
        lambda ms: any("⏹ Stopped." in m.body and "formatted_body" in m.content for m in ms), "the stopped answer"
    )
    await room.show("stopped thread")

    (turn,) = await database_sync_to_async(list)(Turn.objects.all())
    assert turn.status == "cancelled"
    answer = next(m for m in messages if "⏹ Stopped." in m.body)
    assert answer.body.startswith("1. ") and LONG_ANSWER * 4 not in answer.body  # partial text kept
    assert len(llm.requests) == 1  # the busy question never reached the model
