"""The fake refuses what the real Messages API refuses, and accounts prompt caching honestly."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes import FakeAnthropic, Reply

MODEL = "claude-sonnet-5"
EPHEMERAL = {"type": "ephemeral"}
SCHEMA = {"type": "object", "properties": {}}
UNANSWERED = "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a."
SYSTEM_PROMPT = "You are Hermes, the resident operator of the Oikos homelab. " * 20


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "input_schema": SCHEMA, **extra}


def tool_turn(tool_use_id: str) -> list[dict[str, Any]]:
    """A user question and an assistant message that calls one tool."""
    return [
        {"role": "user", "content": "What is degraded?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": tool_use_id, "name": "health_summary", "input": {}},
            ],
        },
    ]


def result(tool_use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": "nas-01 degraded"}


async def send(client: anthropic.AsyncAnthropic, **params: Any) -> anthropic.types.Message:
    params.setdefault("model", MODEL)
    params.setdefault("max_tokens", 256)
    params.setdefault("messages", [{"role": "user", "content": "What is degraded?"}])
    async with client.messages.stream(**params) as stream:
        return await stream.get_final_message()


async def rejection_message(client: anthropic.AsyncAnthropic, **params: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as raised:
        await send(client, **params)
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


def tokens(message: anthropic.types.Message) -> tuple[int, int, int]:
    """(input, cache_creation, cache_read) tokens of an answer; the fake always reports all three."""
    usage = message.usage
    assert usage.cache_creation_input_tokens is not None
    assert usage.cache_read_input_tokens is not None
    return usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens


class TestConversationChecks:
    async def test_results_in_the_next_message_are_accepted(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("nas-01 is degraded."))
        messages = [
            *tool_turn("toolu_a"),
            {"role": "user", "content": [result("toolu_a"), {"type": "text", "text": "Go on."}]},
        ]

        await send(client, messages=messages, tools=[tool("health_summary")])

        assert not fake_llm.rejections

    async def test_a_history_with_tool_blocks_needs_tools_defined(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("nas-01 is degraded."))
        messages = [*tool_turn("toolu_a"), {"role": "user", "content": [result("toolu_a")]}]

        message = await rejection_message(client, messages=messages)
        # Any tool will do: the API does not match the history's calls against the list.
        await send(client, messages=messages, tools=[tool("another_tool")])

        assert message == "Requests which include `tool_use` or `tool_result` blocks must define tools."
        assert len(fake_llm.rejections) == 1
        assert fake_llm.pending == 0

    @pytest.mark.parametrize(
        ("following", "expected"),
        [
            pytest.param(
                [{"role": "user", "content": "Just answer."}],
                UNANSWERED,
                id="user text instead of results",
            ),
            pytest.param(
                [],
                UNANSWERED,
                id="history ends on the tool call",
            ),
            pytest.param(
                [{"role": "user", "content": [{"type": "text", "text": "Here:"}, result("toolu_a")]}],
                UNANSWERED,
                id="text before the result",
            ),
            pytest.param(
                [{"role": "user", "content": [result("toolu_a"), result("toolu_other")]}],
                "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_other.",
                id="result for an unknown call",
            ),
            pytest.param(
                [{"role": "user", "content": [result("toolu_a"), result("toolu_a")]}],
                "messages.2.content.1: each `tool_use` must have a single result.",
                id="two results for one call",
            ),
        ],
    )
    async def test_broken_tool_pairing_is_rejected(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic, following: list[Any], expected: str
    ) -> None:
        fake_llm.enqueue(Reply.text("unused"))
        message = await rejection_message(
            client, messages=[*tool_turn("toolu_a"), *following], tools=[tool("health_summary")]
        )

        assert message.startswith(expected)
        assert len(fake_llm.rejections) == 1
        assert fake_llm.rejections[0].body["messages"][1]["content"][1]["id"] == "toolu_a"
        assert fake_llm.pending == 1

    @pytest.mark.parametrize(
        ("body_change", "expected"),
        [
            pytest.param({"model": None}, "model: Field required", id="no model"),
            pytest.param({"max_tokens": None}, "max_tokens: Field required", id="no max_tokens"),
            pytest.param({"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1", id="0 tokens"),
            pytest.param({"messages": []}, "messages: at least one message is required", id="no messages"),
            pytest.param(
                {"messages": [{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Hi"}]},
                'messages: first message must use the "user" role',
                id="assistant first",
            ),
            pytest.param(
                {"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
                "messages: text content blocks must be non-empty",
                id="empty text block",
            ),
            pytest.param(
                {
                    "messages": [
                        {"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": []},
                        {"role": "user", "content": "Hi"},
                    ]
                },
                "messages.1: all messages must have non-empty content except for the optional final assistant message",
                id="empty assistant message mid-history",
            ),
        ],
    )
    async def test_malformed_bodies_are_rejected_with_the_api_wording(
        self, fake_llm: FakeAnthropic, body_change: dict[str, Any], expected: str
    ) -> None:
        body = {
            "model": MODEL,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "Hi"}],
            "stream": True,
        }
        body.update(body_change)
        body = {key: value for key, value in body.items() if value is not None}
        async with httpx2.AsyncClient(base_url=fake_llm.url) as http:
            response = await http.post("/v1/messages", json=body, headers={"x-api-key": fake_llm.api_key})

        assert response.status_code == 400
        assert response.json()["type"] == "error"
        assert response.json()["error"] == {"type": "invalid_request_error", "message": expected}
        assert response.json()["request_id"].startswith("req_")
        assert fake_llm.rejections[0].body == body


class TestToolChecks:
    @pytest.mark.parametrize(
        "name",
        ["mcp__oikos.health", "has space", "x" * 65, "", "ünïcode"],
        ids=["dot", "space", "65", "empty", "nonascii"],
    )
    async def test_a_tool_name_outside_the_pattern_is_rejected(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic, name: str
    ) -> None:
        message = await rejection_message(client, tools=[tool("health_summary"), tool(name)])

        assert message == "tools.1.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'"

    async def test_a_64_character_name_is_accepted(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("ok"))
        await send(client, tools=[tool("mcp__oikos__" + "x" * 52)])

        assert not fake_llm.rejections

    async def test_duplicate_tool_names_are_rejected(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        message = await rejection_message(client, tools=[tool("health_summary"), tool("health_summary")])

        assert message == "tools: Tool names must be unique."


class TestCacheBreakpoints:
    async def test_five_cache_control_blocks_are_rejected(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        marked_user = {"type": "text", "text": "What is degraded?", "cache_control": EPHEMERAL}
        message = await rejection_message(
            client,
            tools=[tool("a", cache_control=EPHEMERAL), tool("b", cache_control=EPHEMERAL)],
            system=[{"type": "text", "text": SYSTEM_PROMPT, "cache_control": EPHEMERAL}],
            messages=[{"role": "user", "content": [marked_user]}],
            cache_control=EPHEMERAL,  # the top-level marker takes a slot too
        )

        assert message == "A maximum of 4 blocks with cache_control may be provided. Found 5."

    async def test_four_are_accepted(self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic) -> None:
        fake_llm.enqueue(Reply.text("ok"))
        await send(
            client,
            tools=[tool("a", cache_control=EPHEMERAL), tool("b", cache_control=EPHEMERAL)],
            system=[{"type": "text", "text": SYSTEM_PROMPT, "cache_control": EPHEMERAL}],
            cache_control=EPHEMERAL,
        )

        assert not fake_llm.rejections


class TestPromptCaching:
    async def test_a_growing_conversation_reads_the_prefix_the_previous_request_wrote(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.tool_use("health_summary", id="toolu_a"), Reply.text("nas-01 is degraded."))
        tools = [tool("health_summary", cache_control=EPHEMERAL)]
        system = [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": EPHEMERAL}]
        question = {
            "role": "user",
            "content": [{"type": "text", "text": "What is degraded?", "cache_control": EPHEMERAL}],
        }
        first = await send(client, tools=tools, system=system, messages=[question])
        # Second iteration: the marker moves to the newest message, as the turn engine does.
        unmarked_question = {"role": "user", "content": [{"type": "text", "text": "What is degraded?"}]}
        results = {"role": "user", "content": [{**result("toolu_a"), "cache_control": EPHEMERAL}]}
        second = await send(client, tools=tools, system=system, messages=[unmarked_question, first.to_param(), results])

        first_input, first_written, first_read = tokens(first)
        _, second_written, second_read = tokens(second)
        assert first_read == 0
        assert first_written > 0
        assert second_read == first_written + first_input
        assert second_written > 0  # the new assistant message and the results
        assert not fake_llm.rejections

    async def test_only_an_identical_prefix_is_read(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(*(Reply.text("ok") for _ in range(3)))
        system = [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": EPHEMERAL}]
        changed = [{"type": "text", "text": SYSTEM_PROMPT + " Today is Monday.", "cache_control": EPHEMERAL}]
        cold = await send(client, system=system)
        warm = await send(client, system=system)
        other = await send(client, system=changed)

        cold_input, cold_written, cold_read = tokens(cold)
        warm_input, warm_written, warm_read = tokens(warm)
        assert cold_read == 0
        assert cold_written > 250
        assert (warm_input, warm_written, warm_read) == (cold_input, 0, cold_written)
        assert cold_input > 0  # the unmarked question
        assert tokens(other)[2] == 0

    async def test_without_markers_nothing_is_cached(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("ok"), Reply.text("ok"))
        first = await send(client, system=SYSTEM_PROMPT)
        second = await send(client, system=SYSTEM_PROMPT)

        assert tokens(first) == tokens(second)
        assert tokens(first)[1:] == (0, 0)
        assert tokens(first)[0] > 250

    async def test_the_top_level_marker_caches_the_whole_prompt(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("ok"), Reply.text("ok"))
        first = await send(client, system=SYSTEM_PROMPT, cache_control=EPHEMERAL)
        second = await send(client, system=SYSTEM_PROMPT, cache_control=EPHEMERAL)

        first_input, first_written, _ = tokens(first)
        assert (first_input, first_written) == (0, tokens(second)[2])
        assert tokens(second)[:2] == (0, 0)
        assert first_written > 250
