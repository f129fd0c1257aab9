"""Asking Hermes in a Matrix room, against a real Synapse, oikos_sim and the scripted model."""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator
from tests.matrix.conftest import Room

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_quick_answer_is_one_notifying_message_in_the_thread_leading_with_the_answer(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    model = DegradedInvestigator()
    llm.responder = model
    await bridge_start(quiet_seconds=600)  # every turn here is quick: no progress message

    question = await room.alice.send(
        room.room_id, f"{room.bot.user_id}: what's degraded and what depends on it?", mention=room.bot.user_id
    )
    messages = await room.wait_for(lambda ms: any(m.content.get("formatted_body") for m in ms), "the final answer")
    await room.show("thread")

    (answer,) = messages  # no placeholder before it
    assert answer.thread == question  # the reply is in the question's thread
    assert answer.edits == 0 and answer.content["msgtype"] == "m.text"
    assert answer.content["m.mentions"] == {"user_ids": [room.alice.user.user_id]}
    # The body leads with the answer (what a phone's notification shows); the tool lines come after it.
    body = answer.body
    first_line = model.answers[-1].split("\n")[0]
    assert body.startswith(first_line)
    assert "oikos · get_health_summary · " in body and " · ok" in body
    assert body.index(first_line) < body.index("▸ oikos · get_health_summary")
    assert "oikos · get_blast_radius · " in body
    assert "…" not in body
    # Sanitised HTML rendered from the Markdown, with the tool lines escaped.
    html = answer.content["formatted_body"]
    assert "<strong>" in html and "<code>oikos · get_health_summary" in html
    # Synapse's stock push rules notified alice of the answer itself.
    assert await room.notified(room.alice) == [answer.event_id]

    # The thread is a Hermes session like any other, origin `matrix`, asked by the mapped operator.
    listed = (await AsyncClient().get("/sessions")).json()
    (session,) = [s for s in listed["sessions"] if s.get("origin") == "matrix"]
    assert session["actor"] == "operator:alice"
