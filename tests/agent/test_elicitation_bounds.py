"""A server's elicitation request past any size bound is declined whole: the server hears `decline`,
the operator reads a short note naming the server, and nothing of the request is stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import ElicitationEvent
from agent.elicitation.bounds import (
    MAX_DEPTH,
    MAX_ENUM_ENTRIES,
    MAX_LABEL_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_SCHEMA_CHARS,
    elicitation_oversize,
)
from agent.elicitation.types import ElicitationAnswer, ElicitationRecord
from agent.engine.runner import turn_start
from agent.models import Activity, Elicitation
from agent.tools import ToolHub
from tests.agent.conftest import turn_collect
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_fixtures import WriteMCPConfig, http_server_entry
from tests.fakes.mcp_hostile import HOSTILE_FORM_CHARS, build_hostile_asking_server
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.scripted_models import last_tool_results

# Far below every bound: what a real deploy form looks like.
FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "description": "Why now?", "default": "release"},
        "environment": {"type": "string", "enum": ["staging", "production"], "title": "Environment"},
    },
    "required": ["reason"],
}


def form_with(**reason: Any) -> dict[str, Any]:
    return {**FORM, "properties": {**FORM["properties"], "reason": {"type": "string", **reason}}}


class TestBounds:
    def test_an_ordinary_form_is_within_every_bound(self) -> None:
        assert elicitation_oversize("Deploy jellyfin?", FORM) == ""

    @pytest.mark.parametrize(
        ("message", "schema", "says"),
        [
            ("x" * (MAX_MESSAGE_CHARS + 1), FORM, "its message is 10,001 characters"),
            ("ok", form_with(title="T" * (MAX_LABEL_CHARS + 1)), "a title is 501 characters"),
            ("ok", form_with(description="d" * 2_001), "a description is 2,001 characters"),
            ("ok", form_with(default="v" * 4_001), "a default is 4,001 characters"),
            ("ok", form_with(enum=[f"c{n}" for n in range(MAX_ENUM_ENTRIES + 1)]), "a field has 201 choices"),
            ("ok", form_with(enum=["e" * (MAX_LABEL_CHARS + 1)]), "a choice is 501 characters"),
            ("ok", form_with(oneOf=[{"const": "a", "title": "t" * (MAX_LABEL_CHARS + 1)}]), "a title is 501"),
            ("ok", {"type": "object", "properties": {f"f{n}": {"type": "string"} for n in range(51)}}, "51 fields"),
            ("ok", {"type": "object", "properties": {"n" * 501: {"type": "string"}}}, "a field name is 501"),
        ],
    )
    def test_each_bound_names_what_is_too_large(self, message: str, schema: dict[str, Any], says: str) -> None:
        assert says in elicitation_oversize(message, schema)

    def test_nesting_and_whole_size(self) -> None:
        nested: dict[str, Any] = {"type": "string"}
        for _ in range(MAX_DEPTH):
            nested = {"items": nested}
        assert "nests deeper than 8" in elicitation_oversize("ok", form_with(items=nested))
        padding = {f"k{n}": "v" * 1_000 for n in range(MAX_SCHEMA_CHARS // 1_000)}
        assert "its schema is" in elicitation_oversize("ok", {**FORM, "x-padding": padding})

    def test_a_field_named_like_a_keyword_is_a_field(self) -> None:
        schema = {"type": "object", "properties": {"title": {"type": "string"}, "default": {"type": "string"}}}
        assert elicitation_oversize("ok", schema) == ""


@pytest.fixture(scope="module")
def flooder() -> Iterator[MCPTestServer]:
    with MCPTestServer(build=build_hostile_asking_server) as server:
        yield server


@pytest.fixture
async def flooder_hub(flooder: MCPTestServer, mcp_config_file: WriteMCPConfig) -> AsyncIterator[ToolHub]:
    mcp_config_file({"flooder": http_server_entry(flooder, timeout=60)})
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


@pytest.mark.django_db(transaction=True)
async def test_a_six_megabyte_form_is_declined_with_a_short_note(llm: FakeAnthropic, flooder_hub: ToolHub) -> None:
    asked: list[ElicitationRecord] = []

    async def operator(record: ElicitationRecord) -> ElicitationAnswer:
        asked.append(record)
        return ElicitationAnswer(action="accept", content={}, answered_by="operator:ada")

    assert HOSTILE_FORM_CHARS > 6_000_000
    llm.enqueue(Reply.tool_use("mcp__flooder__deploy", {"service": "gitea"}), Reply.text("The form was declined."))
    handle = await turn_start(
        text="deploy gitea", actor="operator:ada", origin="ui", hub=flooder_hub, answerer=operator
    )
    events = await turn_collect(handle)

    # Nobody is asked to fill it in; the server hears `decline`.
    assert asked == []
    assert last_tool_results(llm.requests[-1].body)[0]["content"][0]["text"] == "deploy gitea: decline"
    shown, answered = [event for event in events if isinstance(event, ElicitationEvent)]
    assert shown.server == "flooder" and "flooder sent a form too large to show" in shown.message
    assert shown.fields == []
    assert (
        answered.status == "decline" and "the form is too large: its message is 4,000,000 characters" in answered.reason
    )
    row = await database_sync_to_async(Elicitation.objects.get)(correlation_id=handle.turn_id)
    ledger = await database_sync_to_async(Activity.objects.get)(pk=row.activity_id)
    stored = len(row.message) + len(json.dumps(row.requested_schema)) + len(json.dumps(ledger.arguments))
    assert row.status == "decline" and stored < 1_000
