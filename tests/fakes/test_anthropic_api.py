"""The scripted Messages API, driven by the real anthropic SDK and by raw HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes import ApiError, FakeAnthropic, Reply, text, tool_use

MODEL = "claude-sonnet-5"
QUESTION: list[Any] = [{"role": "user", "content": "What is degraded and what depends on it?"}]
TOOLS: list[Any] = [
    {"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}
    for name in ("health_summary", "list_incidents", "blast_radius", "mcp__oikos__blast_radius")
]
ANSWER = "Nothing is degraded: all 14 entities report healthy, and no incidents are open."


async def stream_final(client: anthropic.AsyncAnthropic, **params: Any) -> Any:
    params.setdefault("model", MODEL)
    params.setdefault("max_tokens", 1024)
    params.setdefault("messages", QUESTION)
    params.setdefault("tools", TOOLS)
    async with client.messages.stream(**params) as stream:
        return await stream.get_final_message()


async def collect_text(client: anthropic.AsyncAnthropic, received: list[str]) -> None:
    """Stream an answer, keeping each text delta as it arrives (also when the stream then fails)."""
    async with client.messages.stream(model=MODEL, max_tokens=1024, messages=QUESTION) as stream:
        async for event in stream:
            if event.type == "text":
                received.append(event.text)


def api_error(error: anthropic.APIStatusError) -> dict[str, Any]:
    """The `error` object of the API's error body."""
    assert isinstance(error.body, dict)
    return dict(error.body["error"])


class TestStreaming:
    async def test_text_arrives_in_several_deltas_that_add_up_to_the_final_message(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text(ANSWER, chunk=12))
        async with client.messages.stream(model=MODEL, max_tokens=1024, messages=QUESTION) as stream:
            deltas = [event.text async for event in stream if event.type == "text"]
            final = await stream.get_final_message()

        assert len(deltas) == -(-len(ANSWER) // 12)
        assert "".join(deltas) == ANSWER
        assert final.content[0].type == "text"
        assert final.content[0].text == ANSWER
        assert final.stop_reason == "end_turn"
        assert final.model == MODEL
        assert final.id.startswith("msg_")

    async def test_delay_spreads_the_events_over_time(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text(ANSWER, chunk=20, delay=0.03))
        arrivals = []
        async with client.messages.stream(model=MODEL, max_tokens=1024, messages=QUESTION) as stream:
            async for event in stream:
                if event.type == "text":
                    arrivals.append(time.monotonic())

        assert len(arrivals) == 4
        assert arrivals[-1] - arrivals[0] >= 3 * 0.03

    async def test_wire_format_names_every_event_and_pings(self, fake_llm: FakeAnthropic) -> None:
        fake_llm.enqueue(Reply.blocks([text("Checking."), tool_use("health_summary", {"scope": "all"})]))
        body = {"model": MODEL, "max_tokens": 64, "messages": QUESTION, "tools": TOOLS, "stream": True}
        async with httpx2.AsyncClient(base_url=fake_llm.url) as http:
            response = await http.post("/v1/messages", json=body, headers={"x-api-key": fake_llm.api_key})
        frames = [frame.split("\n") for frame in response.text.strip().split("\n\n")]

        assert response.headers["content-type"].startswith("text/event-stream")
        assert all(len(lines) == 2 and lines[0].startswith("event: ") for lines in frames)
        assert all(lines[1].startswith("data: ") for lines in frames)
        names = [lines[0].removeprefix("event: ") for lines in frames]
        payloads = [json.loads(lines[1].removeprefix("data: ")) for lines in frames]
        assert [p["type"] for p in payloads] == names
        assert names[0] == "message_start"
        assert names[-2:] == ["message_delta", "message_stop"]
        assert "ping" in names
        start_usage = payloads[0]["message"]["usage"]
        assert {
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        } <= start_usage.keys()
        assert payloads[-2]["delta"]["stop_reason"] == "tool_use"
        assert payloads[-2]["usage"]["output_tokens"] > 1
        json_fragments = [p["delta"]["partial_json"] for p in payloads if p.get("delta", {}).get("partial_json")]
        assert json.loads("".join(json_fragments)) == {"scope": "all"}

    async def test_a_request_without_stream_gets_the_whole_message(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.tool_use("blast_radius", {"entity": "nas-01"}, id="toolu_fixed"))
        message = await client.messages.create(model=MODEL, max_tokens=1024, messages=QUESTION, tools=TOOLS)

        assert message.stop_reason == "tool_use"
        assert message.content[0].type == "tool_use"
        assert (message.content[0].id, message.content[0].input) == ("toolu_fixed", {"entity": "nas-01"})


class TestToolUse:
    async def test_tool_input_survives_being_streamed_in_fragments(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        arguments = {
            "entity": "nas-01",
            "note": 'quoted "text" & ünïcode ✓',
            "depth": 3,
            "kinds": ["vm", None],
        }
        fake_llm.enqueue(Reply.tool_use("mcp__oikos__blast_radius", arguments, chunk=7))
        async with client.messages.stream(model=MODEL, max_tokens=1024, messages=QUESTION, tools=TOOLS) as stream:
            fragments = [event.partial_json async for event in stream if event.type == "input_json"]
            final = await stream.get_final_message()

        assert len([fragment for fragment in fragments if fragment]) >= 5
        block = final.content[0]
        assert block.type == "tool_use"
        assert block.name == "mcp__oikos__blast_radius"
        assert block.input == arguments
        assert block.id.startswith("toolu_")
        assert final.stop_reason == "tool_use"

    async def test_the_final_message_goes_back_with_its_results_and_is_accepted(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(
            Reply.blocks(
                [text("Let me look."), tool_use("health_summary"), tool_use("list_incidents", {"open": True})]
            ),
            Reply.text(ANSWER),
        )
        first = await stream_final(client)
        calls = [block for block in first.content if block.type == "tool_use"]
        results = [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"} for call in calls]
        history = [*QUESTION, first.to_param(), {"role": "user", "content": results}]
        second = await stream_final(client, messages=history)

        assert len(calls) == 2
        assert calls[0].id != calls[1].id
        assert second.content[0].text == ANSWER
        assert not fake_llm.rejections
        sent = fake_llm.requests[1].body["messages"]
        assert [block["type"] for block in sent[1]["content"]] == ["text", "tool_use", "tool_use"]
        assert [block["tool_use_id"] for block in sent[2]["content"]] == [call.id for call in calls]

    async def test_an_unanswered_tool_use_is_rejected_and_consumes_no_reply(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.tool_use("health_summary", id="toolu_01open"), Reply.text(ANSWER))
        first = await stream_final(client)
        history = [*QUESTION, first.to_param(), {"role": "user", "content": "Never mind, just answer."}]

        with pytest.raises(anthropic.BadRequestError) as raised:
            await stream_final(client, messages=history)

        assert raised.value.status_code == 400
        assert api_error(raised.value)["type"] == "invalid_request_error"
        assert api_error(raised.value)["message"].startswith(
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01open."
        )
        assert [request.rejection for request in fake_llm.rejections] == [
            ApiError(400, "invalid_request_error", api_error(raised.value)["message"])
        ]
        assert fake_llm.pending == 1


class TestScripting:
    async def test_queue_first_then_responder_then_a_clear_failure(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("queued"))
        fake_llm.responder = lambda body: Reply.text(f"responder saw {len(body['messages'])} message(s)")
        assert (await stream_final(client)).content[0].text == "queued"
        assert (await stream_final(client)).content[0].text == "responder saw 1 message(s)"

        fake_llm.responder = None
        async with anthropic.AsyncAnthropic(api_key=fake_llm.api_key, base_url=fake_llm.url, max_retries=2) as sdk:
            with pytest.raises(anthropic.InternalServerError, match="script ran out"):
                await stream_final(sdk)
        assert len(fake_llm.rejections) == 1  # refused once: the SDK is told not to retry

    async def test_a_responder_can_always_call_tools_with_fresh_ids(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        always = Reply.tool_use("health_summary")
        fake_llm.responder = lambda body: always
        ids = {(await stream_final(client)).content[0].id for _ in range(3)}

        assert len(ids) == 3

    async def test_a_tool_call_the_request_does_not_allow_is_refused_as_a_script_error(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.responder = lambda body: Reply.tool_use("health_summary")
        with pytest.raises(anthropic.InternalServerError, match="lets the model call no tool"):
            await stream_final(client, tool_choice={"type": "none"})
        with pytest.raises(anthropic.InternalServerError, match="calls health_summary, which the request does not"):
            await stream_final(client, tools=TOOLS[1:])

        assert len(fake_llm.rejections) == 2

    async def test_requests_record_headers_and_bodies_in_order_under_concurrency(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(*(Reply.text(f"answer {n}", delay=0.01) for n in range(5)))
        questions = [[{"role": "user", "content": f"question {n}"}] for n in range(5)]
        finals = await asyncio.gather(*(stream_final(client, messages=q) for q in questions))

        served = sorted(final.content[0].text for final in finals)
        assert served == [f"answer {n}" for n in range(5)]
        recorded = fake_llm.requests
        assert sorted(r.body["messages"][0]["content"] for r in recorded) == [f"question {n}" for n in range(5)]
        assert all(r.headers["authorization"] == f"Bearer {fake_llm.api_key}" for r in recorded)
        assert all(r.streamed for r in recorded)

    async def test_usage_counts_output_and_accepts_overrides(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("short"), Reply.text("x" * 400), Reply.text("any", usage={"output_tokens": 77}))
        short, long, overridden = [await stream_final(client) for _ in range(3)]

        assert 0 < short.usage.output_tokens < long.usage.output_tokens == 100
        assert overridden.usage.output_tokens == 77
        assert short.usage.input_tokens > 0

    async def test_an_explicit_stop_reason_is_sent(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("The list goes on and", stop_reason="max_tokens"))

        assert (await stream_final(client)).stop_reason == "max_tokens"


class TestFailures:
    async def test_an_overloaded_answer_is_retried_by_the_sdk_and_the_next_reply_served(
        self, fake_llm: FakeAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.http_error(529, "overloaded_error", "Overloaded", retry_after=0.01), Reply.text(ANSWER))
        async with anthropic.AsyncAnthropic(api_key=fake_llm.api_key, base_url=fake_llm.url, max_retries=2) as sdk:
            final = await stream_final(sdk)

        assert final.content[0].text == ANSWER
        assert [r.headers["x-stainless-retry-count"] for r in fake_llm.requests] == ["0", "1"]
        assert not fake_llm.rejections

    async def test_an_http_error_without_retries_left_raises_with_the_api_body(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.http_error(529, "overloaded_error", "Overloaded"))
        with pytest.raises(anthropic.APIStatusError) as raised:
            await stream_final(client)

        assert raised.value.status_code == 529
        assert api_error(raised.value) == {"type": "overloaded_error", "message": "Overloaded"}
        assert str(raised.value.request_id).startswith("req_")

    async def test_an_error_event_inside_the_stream_raises_api_status_error(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.stream_error(after_events=4, reply=Reply.text(ANSWER, chunk=10)))
        received: list[str] = []
        with pytest.raises(anthropic.APIStatusError) as raised:
            await collect_text(client, received)

        assert raised.value.status_code == 200
        assert api_error(raised.value)["type"] == "overloaded_error"
        assert received == [ANSWER[:10]]  # message_start, block start, ping, one delta, then the error
        assert len(fake_llm.requests) == 1  # not retried

    async def test_a_dropped_connection_raises_remote_protocol_error_after_partial_text(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.drop(after_events=5, reply=Reply.text(ANSWER, chunk=10)))
        received: list[str] = []
        with pytest.raises(httpx2.RemoteProtocolError):
            await collect_text(client, received)

        assert received == [ANSWER[:10], ANSWER[10:20]]  # message_start, block start, ping, two deltas
        assert len(fake_llm.requests) == 1

    async def test_a_stalled_stream_times_out_on_the_client(self, fake_llm: FakeAnthropic) -> None:
        fake_llm.enqueue(Reply.stall(after_events=4, reply=Reply.text(ANSWER, chunk=10)))
        received: list[str] = []
        started = time.monotonic()
        async with anthropic.AsyncAnthropic(api_key=fake_llm.api_key, base_url=fake_llm.url, timeout=0.3) as sdk:
            with pytest.raises(httpx2.ReadTimeout):
                await collect_text(sdk, received)

        assert received == [ANSWER[:10]]  # delivered before the stall
        assert time.monotonic() - started < 5

    async def test_a_pinging_stream_never_trips_a_per_read_timeout(self, fake_llm: FakeAnthropic) -> None:
        fake_llm.enqueue(Reply.pings(after_events=1, every=0.05))
        events: list[str] = []

        async def read() -> None:
            async with sdk.messages.stream(model=MODEL, max_tokens=64, messages=QUESTION) as stream:
                async for event in stream:
                    events.append(event.type)

        async with anthropic.AsyncAnthropic(api_key=fake_llm.api_key, base_url=fake_llm.url, timeout=0.3) as sdk:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1.5):  # five read timeouts' worth of pings
                    await read()

        assert events == ["message_start"]  # the pings themselves are never seen

    @pytest.mark.parametrize(
        ("content_type", "body"),
        [("application/json", None), ("text/html; charset=utf-8", "<html><h1>502 Bad Gateway</h1></html>")],
    )
    async def test_a_body_that_is_not_an_event_stream_yields_no_event_and_no_message(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic, content_type: str, body: str | None
    ) -> None:
        fake_llm.enqueue(Reply.not_event_stream(content_type, body))
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=QUESTION) as stream:
            assert stream.response.status_code == 200
            assert stream.response.headers["content-type"].startswith(content_type.split(";")[0])
            assert [event async for event in stream] == []
            with pytest.raises(AssertionError):
                await stream.get_final_message()

    async def test_a_truncated_stream_ends_without_error_and_without_stop_reason(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.truncated(reply=Reply.text(ANSWER)))
        final = await stream_final(client)

        assert final.content[0].text == ANSWER
        assert final.stop_reason is None
        assert final.usage.output_tokens == 1

    async def test_a_wrong_api_key_gets_401_in_the_api_shape(self, fake_llm: FakeAnthropic) -> None:
        fake_llm.enqueue(Reply.text(ANSWER))
        async with anthropic.AsyncAnthropic(api_key="sk-ant-wrong", base_url=fake_llm.url, max_retries=0) as sdk:
            with pytest.raises(anthropic.AuthenticationError) as raised:
                await stream_final(sdk)

        assert api_error(raised.value) == {"type": "authentication_error", "message": "invalid x-api-key"}
        assert fake_llm.rejections[0].rejection is not None
        assert fake_llm.pending == 1


class TestModels:
    async def test_models_are_listed_and_unknown_ones_are_not_found(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        listed = [model.id async for model in client.models.list()]
        known = await client.models.retrieve(MODEL)
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("claude-unknown-9")

        assert MODEL in listed
        assert known.display_name == "Claude Sonnet 5"
        assert fake_llm.requests == []  # the log holds /v1/messages calls only

    async def test_a_message_for_an_unknown_model_is_not_found(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text(ANSWER))
        with pytest.raises(anthropic.NotFoundError, match="claude-unknown-9"):
            await stream_final(client, model="claude-unknown-9")


class TestContextWindow:
    async def test_a_prompt_over_the_window_is_refused_in_the_api_shape_and_consumes_no_reply(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text(ANSWER))
        counted = await client.messages.count_tokens(model=MODEL, messages=QUESTION, tools=TOOLS)
        fake_llm.context_window = counted.input_tokens - 1
        with pytest.raises(anthropic.BadRequestError) as refused:
            await stream_final(client)

        assert refused.value.status_code == 400
        assert api_error(refused.value) == {
            "type": "invalid_request_error",
            "message": f"prompt is too long: {counted.input_tokens} tokens > {counted.input_tokens - 1} maximum",
        }
        assert refused.value.response.headers["x-should-retry"] == "false"
        assert fake_llm.pending == 1 and fake_llm.rejections == fake_llm.requests

        fake_llm.context_window = counted.input_tokens
        final = await stream_final(client)
        assert final.content[0].text == ANSWER

    async def test_count_tokens_agrees_with_the_usage_of_the_answer(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text(ANSWER))
        system = "You are Hermes, the resident operator agent."
        counted = await client.messages.count_tokens(model=MODEL, system=system, messages=QUESTION, tools=TOOLS)
        final = await stream_final(client, system=system)

        usage = final.usage
        assert counted.input_tokens > 0 and fake_llm.token_counts == [counted.input_tokens]
        prompt = usage.input_tokens + (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
        assert prompt == counted.input_tokens
        assert len(fake_llm.requests) == 1  # counting is not a message request

    async def test_count_tokens_checks_the_request_like_a_message_request(
        self, fake_llm: FakeAnthropic, client: anthropic.AsyncAnthropic
    ) -> None:
        unanswered: list[Any] = [*QUESTION, {"role": "assistant", "content": [tool_use_json("toolu_1")]}]
        with pytest.raises(anthropic.BadRequestError, match="tool_use"):
            await client.messages.count_tokens(model=MODEL, messages=unanswered, tools=TOOLS)
        with pytest.raises(anthropic.NotFoundError):
            await client.messages.count_tokens(model="claude-unknown-9", messages=QUESTION)
        assert fake_llm.token_counts == []


def tool_use_json(tool_use_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_use_id, "name": "health_summary", "input": {}}


class TestLifecycle:
    async def test_stop_ends_a_stalled_stream_and_frees_the_port(self) -> None:
        fake = FakeAnthropic().start()
        fake.enqueue(Reply.stall(after_events=2))
        async with anthropic.AsyncAnthropic(api_key=fake.api_key, base_url=fake.url, max_retries=0) as sdk:
            reading = asyncio.ensure_future(stream_final(sdk))
            await asyncio.to_thread(fake.wait_for_requests, 1)
            started = time.monotonic()
            await asyncio.to_thread(fake.stop)
            stop_took = time.monotonic() - started
            with pytest.raises(httpx2.RemoteProtocolError):
                await reading

        assert stop_took < 3
        with pytest.raises(RuntimeError, match="not running"):
            _ = fake.url

    def test_a_subprocess_reaches_it_through_the_environment(self, fake_llm: FakeAnthropic) -> None:
        fake_llm.enqueue(Reply.text(ANSWER))
        program = (
            "import anthropic\n"
            "client = anthropic.Anthropic()\n"  # key and base URL from the environment only
            "with client.messages.stream(model='claude-sonnet-5', max_tokens=64,"
            " messages=[{'role': 'user', 'content': 'hi'}]) as stream:\n"
            "    print(stream.get_final_text())\n"
        )
        env = {**os.environ, **fake_llm.env()}
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)

        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == ANSWER
        assert fake_llm.requests[0].headers["authorization"] == f"Bearer {fake_llm.api_key}"

    def test_each_fake_gets_its_own_port_and_env(self) -> None:
        with FakeAnthropic() as first, FakeAnthropic(api_key="sk-ant-other") as second:
            assert first.url != second.url
            assert first.url.startswith("http://127.0.0.1:")
            assert second.env() == {"ANTHROPIC_BASE_URL": second.url, "ANTHROPIC_API_KEY": "sk-ant-other"}
