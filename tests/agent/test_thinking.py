"""Adaptive thinking and the session's model, against the scripted model (which signs thinking and
checks it comes back unchanged, as the API does) and the mini Oikos."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.conversation.events import Done, Event, TextDelta, ThinkingDelta
from agent.engine.runner import TurnRejected, turn_start
from agent.engine.thinking import ThinkingSettings, model_family, thinking_params, thinking_settled_strip
from agent.models import AgentSession, Message, Turn
from agent.tools import ToolHub
from interop.turns import turn_answer
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply, redacted_thinking, text, thinking, tool_use
from tests.fakes.scripted_models import last_tool_results, offered_tool

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = "The operator wants the degraded services. The health summary names them; one call is enough."
SECRET_REASONING = "Private chain of thought: postgres looks degraded, authentik depends on it."
ANSWER = "**postgres** is degraded."


class ThinkingInvestigator:
    """Thinks, calls the health summary, thinks again and answers; records what it was sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.requests.append(request)
        if not last_tool_results(request):
            health = offered_tool(request, "get_health_summary")
            return Reply.blocks([thinking(PLAN), redacted_thinking(), tool_use(health, {})], chunk=9)
        return Reply.blocks([thinking(SECRET_REASONING), text(ANSWER)], chunk=9)


def _of(events: list[Event], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


@database_sync_to_async
def _stored(session_id: uuid.UUID) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(m.role, m.content) for m in Message.objects.filter(session_id=session_id).order_by("id")]


def _block_types(messages: list[dict[str, Any]]) -> list[list[str]]:
    return [[block["type"] for block in message["content"]] for message in messages]


class TestThinkingTurn:
    async def test_a_tool_using_turn_sends_its_thinking_back_unchanged(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        model = ThinkingInvestigator()
        llm.responder = model

        handle, events = await ask("what's degraded?", hub)

        assert not llm.rejections, [r.rejection for r in llm.rejections]
        first, second = (request.body for request in llm.requests)
        assert first["thinking"] == {"type": "adaptive"} and first["output_config"] == {"effort": "high"}
        # The tool-use message goes back with its thinking first, exactly as served (signatures too).
        served = [block.to_json() for block in llm.requests[0].reply.content[:2]]  # type: ignore[union-attr]
        assistant = second["messages"][1]
        assert [{k: v for k, v in b.items() if k != "cache_control"} for b in assistant["content"][:2]] == served
        assert _block_types(second["messages"]) == [
            ["text"],
            ["thinking", "redacted_thinking", "tool_use"],
            ["tool_result"],
        ]

        # Thinking streamed live, in pieces, as its own events; the answer is only the text.
        thoughts = _of(events, ThinkingDelta)
        assert len([t for t in thoughts if t.block == 0]) > 2
        assert "".join(t.text for t in thoughts if t.block == 0) == PLAN
        assert [t.block for t in thoughts if t.redacted] == [1]
        assert "".join(t.text for t in thoughts if t.block == 2) == SECRET_REASONING
        assert "".join(d.text for d in _of(events, TextDelta)) == ANSWER
        assert isinstance(events[-1], Done) and events[-1].model == "claude-sonnet-5"

        # Stored with the signatures, so the history stays valid.
        stored = await _stored(handle.session_id)
        assert stored[1][1][0]["type"] == "thinking" and stored[1][1][0]["signature"]
        assert stored[1][1][1]["type"] == "redacted_thinking" and stored[1][1][1]["data"]

    async def test_a_settled_turns_thinking_is_left_out_of_later_requests_but_kept_in_the_database(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.responder = ThinkingInvestigator()
        first, _ = await ask("what's degraded?", hub)
        llm.responder = None
        llm.enqueue(Reply.blocks([thinking("Short follow-up."), text("Authentik depends on it.")]))

        _handle, _events = await ask("and what depends on it?", hub, session_id=first.session_id)

        assert not llm.rejections, [r.rejection for r in llm.rejections]
        sent = llm.requests[-1].body["messages"]
        assert not any(block["type"].endswith("thinking") for message in sent for block in message["content"])
        assert _block_types(sent)[1] == ["tool_use"]
        stored = await _stored(first.session_id)
        kinds = [block["type"] for _role, content in stored for block in content]
        assert kinds.count("thinking") == 3 and kinds.count("redacted_thinking") == 1

    async def test_peers_and_logs_never_see_the_thinking(
        self, llm: FakeAnthropic, hub: ToolHub, caplog: pytest.LogCaptureFixture
    ) -> None:
        llm.responder = ThinkingInvestigator()
        # Even at DEBUG: the SDK's debug lines would dump whole request bodies, thinking included.
        caplog.set_level(logging.DEBUG)

        handle = await turn_start(text="what's degraded?", actor="peer:garraia", origin="a2a", hub=hub)
        answer = await turn_answer(handle)

        assert answer.text == ANSWER
        logged = "\n".join(record.getMessage() + repr(record.__dict__) for record in caplog.records)
        assert "turn.finished" in logged
        assert SECRET_REASONING not in logged and PLAN not in logged


class TestThinkingSettings:
    async def test_an_older_model_thinks_with_a_budget_and_no_effort(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        settings.HERMES_MODELS = ("claude-sonnet-5", "claude-haiku-4-5")
        llm.responder = ThinkingInvestigator()

        _handle, events = await ask("what's degraded?", hub, model="claude-haiku-4-5")

        assert not llm.rejections, [r.rejection for r in llm.rejections]
        body = llm.requests[0].body
        assert body["model"] == "claude-haiku-4-5"
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 12_000} and "output_config" not in body
        assert "".join(d.text for d in _of(events, TextDelta)) == ANSWER

    async def test_thinking_off_sends_no_thinking_setting(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        settings.HERMES_THINKING = "off"
        llm.enqueue(Reply.text("Nothing is degraded."))

        await ask("what's degraded?", hub)

        assert not llm.rejections
        assert "thinking" not in llm.requests[0].body and "output_config" not in llm.requests[0].body

    @pytest.mark.parametrize(
        ("model", "family"),
        [
            ("claude-sonnet-5", "adaptive"),
            ("claude-opus-4-6", "adaptive"),
            ("anthropic.claude-sonnet-4-6", "adaptive"),
            ("claude-mythos-preview", "adaptive"),
            ("claude-haiku-5-5", "adaptive"),
            ("claude-opus-4-5-20251101", "budget"),
            ("claude-haiku-4-5", "budget"),
            ("claude-sonnet-4-20250514", "budget"),
            ("claude-3-7-sonnet-20250219", "budget"),
            ("claude-3-5-haiku-latest", "none"),
            ("qwen3:32b", "none"),
        ],
    )
    def test_model_families(self, model: str, family: str) -> None:
        assert model_family(model) == family

    def test_a_budget_leaves_room_for_the_answer_and_is_skipped_when_there_is_none(self) -> None:
        low = ThinkingSettings(mode="adaptive", effort="low")
        assert thinking_params("claude-haiku-4-5", low, max_tokens=16_000)["thinking"]["budget_tokens"] == 2_048
        high = ThinkingSettings(mode="adaptive", effort="high")
        assert thinking_params("claude-haiku-4-5", high, max_tokens=4_096)["thinking"]["budget_tokens"] == 3_072
        assert thinking_params("claude-haiku-4-5", high, max_tokens=1_000) == {}
        assert thinking_params("qwen3:32b", high, max_tokens=16_000) == {}

    def test_an_assistant_message_left_empty_is_dropped_and_its_neighbours_joined(self) -> None:
        messages = [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
        ]
        assert thinking_settled_strip(messages) == [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        ]


@database_sync_to_async
def _models(session_id: uuid.UUID) -> tuple[str, list[str]]:
    session = AgentSession.objects.get(pk=session_id)
    return session.model, list(
        Turn.objects.filter(session=session).order_by("started_at").values_list("model", flat=True)
    )


class TestModelPerSession:
    async def test_a_session_switched_to_another_model_uses_it_from_its_next_turn(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        settings.HERMES_MODELS = ("claude-sonnet-5", "claude-opus-5")
        llm.enqueue(Reply.text("One."), Reply.text("Two."), Reply.text("Three."))

        first, _ = await ask("first", hub)
        _second, events = await ask("second", hub, session_id=first.session_id, model="claude-opus-5")
        await ask("third", hub, session_id=first.session_id)

        assert [request.body["model"] for request in llm.requests] == [
            "claude-sonnet-5",
            "claude-opus-5",
            "claude-opus-5",
        ]
        assert isinstance(events[-1], Done) and events[-1].model == "claude-opus-5"
        assert await _models(first.session_id) == (
            "claude-opus-5",
            ["claude-sonnet-5", "claude-opus-5", "claude-opus-5"],
        )

    async def test_a_model_not_in_the_allowlist_is_refused_before_anything_is_stored(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        with pytest.raises(TurnRejected) as refused:
            await ask("what's degraded?", hub, model="claude-opus-5")

        assert refused.value.code == "model_not_allowed"
        assert "claude-opus-5" in refused.value.message and "claude-sonnet-5" in refused.value.message
        assert not llm.requests
        assert await database_sync_to_async(AgentSession.objects.count)() == 0

    async def test_a_model_dropped_from_the_allowlist_gives_way_to_the_default(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        settings.HERMES_MODELS = ("claude-sonnet-5", "claude-opus-5")
        llm.enqueue(Reply.text("One."), Reply.text("Two."))
        first, _ = await ask("first", hub, model="claude-opus-5")
        settings.HERMES_MODELS = ("claude-sonnet-5",)

        await ask("second", hub, session_id=first.session_id)

        assert [request.body["model"] for request in llm.requests] == ["claude-opus-5", "claude-sonnet-5"]
