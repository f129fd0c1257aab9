"""Asking Hermes in a Matrix room, against a real Synapse, oikos_sim and the scripted model."""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator
from tests.matrix.conftest import Room

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_question_is_answered_in_a_thread_edited_to_the_final_answer(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    model = DegradedInvestigator()
    llm.responder = model
    await bridge_start()

    question = await room.alice.send(
        room.room_id, f"{room.bot.user_id}: what's degraded and what depends on it?", mention=room.bot.user_id
    )
    messages = await room.wait_for(lambda ms: any(m.content.get("formatted_body") for m in ms), "the final answer")
    await room.show("thread")

    (answer,) = messages
    assert answer.thread == question  # the reply is in the question's thread
    assert answer.edits >= 1  # posted first, then edited to the answer
    body = answer.body
    assert "oikos · get_health_summary · " in body and " · ok" in body
    assert "oikos · get_blast_radius · " in body
    assert model.answers[-1].split("\n")[0].replace("**", "") in body.replace("**", "")
    assert "…" not in body
    # The final edit is sanitised HTML rendered from the Markdown, with the tool lines escaped.
    html = answer.content["formatted_body"]
    assert "<strong>" in html and "<code>oikos · get_health_summary" in html

    # The thread is a Hermes session like any other, origin `matrix`, asked by the mapped operator.
    listed = (await AsyncClient().get("/sessions")).json()
    (session,) = [s for s in listed["sessions"] if s.get("origin") == "matrix"]
    assert session["actor"] == "operator:alice"
