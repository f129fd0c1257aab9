"""Thinking on the scripted Messages API, driven by the real SDK: streamed and signed like the
API's, and checked like the API checks it when a client sends it back."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.fakes import FakeAnthropic, Reply, redacted_thinking, text, thinking, tool_use

TOOLS: list[Any] = [{"name": "health_summary", "description": "Health.", "input_schema": {"type": "object"}}]
QUESTION: list[Any] = [{"role": "user", "content": "What is degraded?"}]
ADAPTIVE: Any = {"type": "adaptive"}
REASONING = "The operator asks about health; the summary tool answers that in one call."


async def stream(client: anthropic.AsyncAnthropic, **params: Any) -> tuple[list[Any], Any]:
    params = {"model": "claude-sonnet-5", "max_tokens": 4096, "messages": QUESTION, "tools": TOOLS, **params}
    async with client.messages.stream(**params) as running:
        events = [event async for event in running]
        return events, await running.get_final_message()


def error_message(error: anthropic.APIStatusError) -> str:
    assert isinstance(error.body, dict)
    return str(error.body["error"]["message"])


async def tool_turn(client: anthropic.AsyncAnthropic, fake: FakeAnthropic) -> list[Any]:
    """A thinking tool call; returns the conversation up to its tool result, as the SDK gives it."""
    fake.enqueue(Reply.blocks([thinking(REASONING), redacted_thinking(), tool_use("health_summary")], chunk=10))
    _events, final = await stream(client, thinking=ADAPTIVE)
    assistant = [dict(block) for block in final.to_param()["content"]]
    call = next(block for block in assistant if block["type"] == "tool_use")
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": "all healthy"}
    return [*QUESTION, {"role": "assistant", "content": assistant}, {"role": "user", "content": [result]}]


class TestStreaming:
    async def test_thinking_streams_in_deltas_and_ends_with_a_signature(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.blocks([thinking(REASONING), redacted_thinking(), text("All good.")], chunk=10))
        events, final = await stream(client, thinking=ADAPTIVE, output_config={"effort": "low"})

        deltas = [event.thinking for event in events if event.type == "thinking"]
        signatures = [event.signature for event in events if event.type == "signature"]
        assert len(deltas) > 2 and "".join(deltas) == REASONING
        assert [block.type for block in final.content] == ["thinking", "redacted_thinking", "text"]
        assert final.content[0].thinking == REASONING and final.content[0].signature == signatures[0] != ""
        assert final.content[1].data
        assert not fake_llm.rejections

    async def test_a_reply_that_thinks_is_refused_when_the_request_does_not_enable_thinking(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.blocks([thinking(REASONING), text("All good.")]))
        with pytest.raises(anthropic.InternalServerError, match="does not enable thinking"):
            await stream(client)


class TestSendingThinkingBack:
    async def test_thinking_sent_back_unchanged_is_accepted(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        messages = await tool_turn(client, fake_llm)
        fake_llm.enqueue(Reply.text("Nothing is degraded."))
        _events, final = await stream(client, thinking=ADAPTIVE, messages=messages)
        assert final.content[0].text == "Nothing is degraded."
        assert not fake_llm.rejections

    async def test_edited_thinking_fails_its_signature(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        messages = await tool_turn(client, fake_llm)
        messages[1]["content"][0]["thinking"] += " (edited)"
        with pytest.raises(anthropic.BadRequestError) as refused:
            await stream(client, thinking=ADAPTIVE, messages=messages)
        assert error_message(refused.value) == "messages.1.content.0: Invalid `signature` in `thinking` block"

    async def test_tampered_redacted_thinking_is_refused(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        messages = await tool_turn(client, fake_llm)
        messages[1]["content"][1]["data"] = "AAAA" + messages[1]["content"][1]["data"][4:]
        with pytest.raises(anthropic.BadRequestError, match="Invalid `data` in `redacted_thinking` block"):
            await stream(client, thinking=ADAPTIVE, messages=messages)

    async def test_a_tool_use_turn_without_its_thinking_is_refused_while_thinking_is_on(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        messages = await tool_turn(client, fake_llm)
        messages[1]["content"] = [b for b in messages[1]["content"] if b["type"] == "tool_use"]
        with pytest.raises(anthropic.BadRequestError) as refused:
            await stream(client, thinking=ADAPTIVE, messages=messages)
        assert "a final `assistant` message must start with a thinking block" in error_message(refused.value)

        # With thinking off the API does not ask for it.
        fake_llm.enqueue(Reply.text("Nothing is degraded."))
        await stream(client, messages=messages)


class TestSettings:
    @pytest.mark.parametrize(
        ("model", "params", "message"),
        [
            ("claude-haiku-4-5", {"thinking": ADAPTIVE}, "adaptive thinking is not supported"),
            ("claude-haiku-4-5", {"output_config": {"effort": "low"}}, "effort is not supported"),
            ("claude-sonnet-5", {"thinking": {"type": "enabled", "budget_tokens": 2048}}, "Use thinking.type.adaptive"),
            ("claude-haiku-4-5", {"thinking": {"type": "enabled", "budget_tokens": 512}}, "greater than or equal"),
            ("claude-haiku-4-5", {"thinking": {"type": "enabled", "budget_tokens": 4096}}, "must be greater than"),
            ("claude-sonnet-5", {"thinking": ADAPTIVE, "tool_choice": {"type": "any"}}, "forces tool use"),
        ],
    )
    async def test_what_a_model_does_not_accept_is_refused(
        self, client: anthropic.AsyncAnthropic, model: str, params: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(anthropic.BadRequestError, match=message):
            await stream(client, model=model, **params)

    async def test_an_older_model_thinks_with_a_budget(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.blocks([thinking(REASONING), text("All good.")]))
        _events, final = await stream(
            client, model="claude-haiku-4-5", thinking={"type": "enabled", "budget_tokens": 2048}
        )
        assert final.content[0].type == "thinking"
