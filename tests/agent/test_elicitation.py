"""Elicitation inside Hermes: the restricted schema, and a turn's side of a question (recorded in
the ledger and the live events; declined without an operator; cancelled after the timeout)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings as SettingsWrapper

from agent.conversation.events import ElicitationEvent, Event
from agent.elicitation import store as elicitations
from agent.elicitation.turn import NO_OPERATOR, TurnElicitor
from agent.elicitation.types import (
    ElicitationAsk,
    ElicitContentError,
    ElicitSchemaError,
    elicit_content_validate,
    elicit_fields_parse,
)
from agent.models import Activity, AgentSession, Elicitation
from tests.fakes.mcp_servers import DeployDetails

SCHEMA = DeployDetails.model_json_schema()


class TestRestrictedSchema:
    def test_every_kind_of_field_is_read_with_its_title_default_and_bounds(self) -> None:
        fields = {field.name: field for field in elicit_fields_parse(SCHEMA)}
        assert fields["reason"].kind == "string" and fields["reason"].required and fields["reason"].default is None
        assert fields["environment"].kind == "enum" and fields["environment"].default == "staging"
        assert (fields["replicas"].minimum, fields["replicas"].maximum) == (1, 9)
        assert fields["notify"].default is True

    def test_titled_choices_and_legacy_enum_names(self) -> None:
        schema = {
            "type": "object",
            "properties": {
                "size": {
                    "type": "string",
                    "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
                },
                "tier": {"type": "string", "enum": ["a", "b"], "enumNames": ["Gold", "Silver"]},
            },
        }
        size, tier = elicit_fields_parse(schema)
        assert [(o.value, o.label) for o in size.options] == [("s", "Small"), ("l", "Large")]
        assert [o.label for o in tier.options] == ["Gold", "Silver"]

    def test_a_multi_select_is_a_field_with_its_choices_default_and_bounds(self) -> None:
        schema = {
            "type": "object",
            "properties": {
                "hosts": {"type": "array", "items": {"type": "string", "enum": ["edge", "db"]}, "maxItems": 1},
                "extras": {
                    "type": "array",
                    "items": {"anyOf": [{"const": "logs", "title": "Logs"}, {"const": "metrics", "title": "Metrics"}]},
                    "minItems": 1,
                    "default": ["logs", "metrics"],
                },
            },
        }
        hosts, extras = elicit_fields_parse(schema)
        assert (hosts.kind, [o.value for o in hosts.options], hosts.max_items) == ("multi_enum", ["edge", "db"], 1)
        assert [(o.value, o.label) for o in extras.options] == [("logs", "Logs"), ("metrics", "Metrics")]
        assert (extras.min_items, extras.default) == (1, ["logs", "metrics"])

        fields = (hosts, extras)
        assert elicit_content_validate(fields, {"hosts": ["db"]}) == {"hosts": ["db"], "extras": ["logs", "metrics"]}
        with pytest.raises(ElicitContentError) as problems:
            elicit_content_validate(fields, {"hosts": ["edge", "db"], "extras": ["traces"]})
        assert problems.value.errors == {
            "hosts": "takes at most 1 choice",
            "extras": "holds something that is not one of the choices",
        }

    @pytest.mark.parametrize(
        "properties",
        [
            {"nested": {"type": "object", "properties": {}}},
            {"tags": {"type": "array", "items": {"type": "string"}}},
            {"counts": {"type": "array", "items": {"type": "integer", "enum": [1, 2]}}},
            {"count": {"type": "integer", "enum": [1, 2]}},
        ],
    )
    def test_anything_beyond_the_restricted_schema_is_refused(self, properties: dict[str, Any]) -> None:
        with pytest.raises(ElicitSchemaError):
            elicit_fields_parse({"type": "object", "properties": properties})

    def test_content_takes_defaults_converts_form_text_and_lists_every_problem(self) -> None:
        fields = elicit_fields_parse(SCHEMA)
        assert elicit_content_validate(fields, {"reason": "x", "replicas": "2"}, from_form=True) == {
            "reason": "x",
            "environment": "staging",
            "replicas": 2,
            "notify": False,  # an unticked checkbox is false, not "left out"
        }
        assert elicit_content_validate(fields, {"reason": "x"}) == {
            "reason": "x",
            "environment": "staging",
            "replicas": 1,
            "notify": True,
        }
        with pytest.raises(ElicitContentError) as refused:
            elicit_content_validate(
                fields, {"replicas": 12, "environment": "moon", "notify": "yes", "colour": "red"}, from_form=False
            )
        assert refused.value.errors == {
            "colour": "not a field of this form",
            "reason": "required",
            "environment": "is not one of the choices",
            "replicas": "must be at most 9",
            "notify": "must be true or false",
        }


def _ask(**extra: Any) -> ElicitationAsk:
    return ElicitationAsk(
        server="deployer",
        tool="deploy",
        message="Deploy jellyfin?",
        requested_schema=SCHEMA,
        fields=elicit_fields_parse(SCHEMA),
        deadline=time.monotonic() + 60,
        tool_use_id="toolu_1",
        **extra,
    )


@pytest.fixture
def session_id(db: None) -> uuid.UUID:
    return AgentSession.objects.create(actor="operator:ada").pk


def _elicitor(session_id: uuid.UUID, events: list[Event], answerer: Any) -> TurnElicitor:
    return TurnElicitor(
        correlation_id=uuid.uuid4(),
        session_id=session_id,
        actor="operator:ada",
        emit=events.append,
        answerer=answerer,
        time_limit=time.monotonic() + 600,
    )


@pytest.mark.django_db(transaction=True)
class TestTurnElicitor:
    async def test_without_an_operator_it_declines_and_records_request_and_answer(self, session_id: uuid.UUID) -> None:
        events: list[Event] = []
        elicitor = _elicitor(session_id, events, None)
        answer = await elicitor(_ask())

        assert (answer.action, answer.reason, answer.answered_by) == ("decline", NO_OPERATOR, "hermes")
        pending, answered = events
        assert isinstance(pending, ElicitationEvent) and isinstance(answered, ElicitationEvent)
        assert (pending.status, answered.status, answered.reason) == ("pending", "decline", NO_OPERATOR)
        row = await database_sync_to_async(Activity.objects.get)(tool="elicitation/create")
        assert row.correlation_id == elicitor.correlation_id and row.state == Activity.State.OK
        assert row.arguments["message"] == "Deploy jellyfin?" and row.arguments["during"] == "deploy"
        assert row.result["action"] == "decline"

    async def test_an_operators_answer_wakes_the_waiting_turn(self, session_id: uuid.UUID) -> None:
        events: list[Event] = []
        asked = asyncio.Event()
        elicitor = _elicitor(session_id, events, elicitations.elicitation_by_operator)

        def emit(event: Event) -> None:
            events.append(event)
            asked.set()

        elicitor.emit = emit
        waiting = asyncio.create_task(elicitor(_ask()))
        await asked.wait()
        elicitation_id = uuid.UUID(events[0].id)  # type: ignore[attr-defined]
        row = await database_sync_to_async(elicitations.elicitation_answer)(
            elicitation_id=elicitation_id, action="accept", values={"reason": "now"}, operator="operator:ada"
        )
        await elicitations.elicitation_answered_publish(row)
        answer = await waiting
        assert answer.action == "accept" and answer.answered_by == "operator:ada"
        assert answer.content == {"reason": "now", "environment": "staging", "replicas": 1, "notify": True}
        with pytest.raises(elicitations.ElicitationClosed):
            await database_sync_to_async(elicitations.elicitation_answer)(
                elicitation_id=elicitation_id, action="decline", values={}, operator="operator:bob"
            )

    async def test_nobody_answering_is_cancelled_after_the_timeout_and_says_so(
        self, session_id: uuid.UUID, settings: SettingsWrapper
    ) -> None:
        settings.HERMES_ELICITATION_TIMEOUT = 1.0
        events: list[Event] = []
        answer = await _elicitor(session_id, events, elicitations.elicitation_by_operator)(_ask())
        assert answer.action == "cancel" and answer.reason == "Cancelled by Hermes: no answer within 1 s."
        row = await database_sync_to_async(Elicitation.objects.get)()
        assert (row.status, row.reason) == ("cancel", answer.reason)
        assert await database_sync_to_async(elicitations.elicitations_pending)() == []

    async def test_a_form_hermes_cannot_draw_is_declined_with_the_reason(self, session_id: uuid.UUID) -> None:
        events: list[Event] = []
        answer = await _elicitor(session_id, events, elicitations.elicitation_by_operator)(
            _ask(schema_error="property 'tags' has type 'array'")
        )
        assert answer.action == "decline" and "cannot show this form" in answer.reason
