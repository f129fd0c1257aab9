"""A server's question with a multi-select field (an array of enum values) is shown in the rail as
one checkbox per choice, and the operator's ticks reach the waiting turn as a list."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from django.test import AsyncClient

from agent.conversation.events import ElicitationEvent, Event
from agent.elicitation import store as elicitations
from agent.elicitation.turn import TurnElicitor
from agent.elicitation.types import ElicitationAnswer, ElicitationAsk, elicit_fields_parse
from agent.models import AgentSession

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
SCHEMA = {
    "type": "object",
    "properties": {
        "hosts": {
            "type": "array",
            "title": "Hosts to restart",
            "minItems": 1,
            "items": {"type": "string", "anyOf": [{"const": "edge", "title": "Edge <b>proxy</b>"}, {"const": "db"}]},
            "default": ["edge"],
        },
        "note": {"type": "string", "title": "Note"},
    },
    "required": ["hosts"],
}


async def _asked(events: list[Event]) -> tuple[asyncio.Future[ElicitationAnswer], uuid.UUID]:
    session = await AgentSession.objects.acreate(actor="operator:ada")
    asked = asyncio.Event()

    def emit(event: Event) -> None:
        events.append(event)
        asked.set()

    elicitor = TurnElicitor(
        correlation_id=uuid.uuid4(),
        session_id=session.pk,
        actor="operator:ada",
        emit=emit,
        answerer=elicitations.elicitation_by_operator,
        time_limit=time.monotonic() + 600,
    )
    ask = ElicitationAsk(
        server="ops",
        tool="restart",
        message="Which hosts?",
        requested_schema=SCHEMA,
        fields=elicit_fields_parse(SCHEMA),
        deadline=time.monotonic() + 60,
        tool_use_id="toolu_1",
    )
    waiting = asyncio.ensure_future(elicitor(ask))
    await asked.wait()
    [pending] = events
    assert isinstance(pending, ElicitationEvent) and pending.status == "pending"
    return waiting, uuid.UUID(pending.id)


async def test_a_multi_select_is_asked_with_checkboxes_and_its_ticks_answer_as_a_list() -> None:
    events: list[Event] = []
    waiting, elicitation_id = await _asked(events)

    [pending] = await database_sync_to_async(elicitations.elicitations_pending)()
    card = render_to_string(
        "controlroom/partials/elicitation_card.html", {"elicitation": pending, "place": "rail", "oob": ""}
    )
    assert card.count('type="checkbox" name="f:hosts"') == 2
    assert 'value="edge" checked' in card and 'value="db">' in card
    assert "Edge &lt;b&gt;proxy&lt;/b&gt;" in card

    form = {"action": "accept", "f:hosts": ["", "edge", "db"], "f:note": "both"}
    response = await AsyncClient().post(f"/ui/elicitations/{elicitation_id}/", form, headers=HTMX)
    assert response.status_code == 200, response.content

    answer = await waiting
    assert answer.action == "accept"
    assert answer.content == {"hosts": ["edge", "db"], "note": "both"}


async def test_nothing_ticked_is_refused_under_the_form_when_a_choice_is_needed() -> None:
    events: list[Event] = []
    waiting, elicitation_id = await _asked(events)

    form = {"action": "accept", "f:hosts": [""]}
    response = await AsyncClient().post(f"/ui/elicitations/{elicitation_id}/", form, headers=HTMX)

    assert "Check the form: hosts needs at least 1 choice" in response.content.decode()
    waiting.cancel()
