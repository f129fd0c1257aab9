"""Model faults and deadlines: the turn engine against a scripted model API that misbehaves.

Every fault is a real server behaviour (`tests/fakes/anthropic_*`): a stream that stalls, one that
pings forever, a dropped connection, an `overloaded_error` event, a 200 that is not an event
stream. What the operator must see each time: the turn ends when its limits say, retried when
nothing was said yet, with one clear message in the transcript and one `llm.call` error line
under the turn's own correlation id.

Timing bounds are loose on purpose (a shared, noisy machine); each test prints what it measured.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agent import llm as llm_module
from agent.conversation.events import Done, Error, Event, TextDelta
from agent.engine.budgets import Budgets
from agent.models import Message, Turn
from agent.tools import ToolHub
from common.logs import TurnContextFilter
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)

# Slack for a busy machine on top of a limit the issue sets ("within ~3 s" → under 3 s + SLACK).
SLACK = 2.0
ANSWER = "Caddy is healthy and fronts jellyfin and gitea."


@pytest.fixture
def llm_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Records of the engine, tagged by the production filter with the ids of the turn logging them."""
    context = TurnContextFilter()
    caplog.handler.addFilter(context)
    caplog.set_level(logging.INFO)
    yield caplog
    caplog.handler.removeFilter(context)


def llm_calls(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if getattr(record, "event", None) == "llm.call"]


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return dict(getattr(record, "fields", {}))


def error_of(events: list[Event]) -> Error:
    [error] = [event for event in events if isinstance(event, Error)]
    return error


def done_of(events: list[Event]) -> Done:
    assert isinstance(events[-1], Done), events[-1]
    return events[-1]


def streamed(events: list[Event]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


@database_sync_to_async
def stored(turn_id: uuid.UUID) -> tuple[Turn, list[Message]]:
    turn = Turn.objects.get(pk=turn_id)
    return turn, list(Message.objects.filter(turn_id=turn_id).order_by("id"))


async def timed_ask(question: str, hub: ToolHub, *, within: float, **kwargs: Any) -> tuple[Any, list[Event], float]:
    """Run a turn; fail (instead of hanging) if it outlives `within` seconds."""
    started = time.monotonic()
    async with asyncio.timeout(within):
        handle, events = await ask(question, hub, **kwargs)
    return handle, events, time.monotonic() - started


class TestDeadlines:
    @pytest.mark.parametrize(
        ("fault", "after_events"),
        [("stall", 1), ("stall", 4), ("pings", 4)],
        ids=["stall-before-output", "stall-after-output", "pings-after-output"],
    )
    async def test_a_silent_model_ends_the_turn_after_hermes_llm_timeout(
        self,
        llm: FakeAnthropic,
        hub: ToolHub,
        settings: Any,
        llm_log: pytest.LogCaptureFixture,
        fault: str,
        after_events: int,
    ) -> None:
        # Pings keep a connection alive but say nothing: they are silence too.
        settings.HERMES_LLM_TIMEOUT = 3
        reply = Reply.text(ANSWER, chunk=10)
        if fault == "stall":
            llm.enqueue(Reply.stall(after_events=after_events, reply=reply))
        else:
            llm.enqueue(Reply.pings(after_events=after_events, every=0.2, reply=reply))

        handle, events, took = await timed_ask("is caddy healthy?", hub, within=30)

        print(f"{fault} with HERMES_LLM_TIMEOUT=3 ({after_events} events first): turn ended after {took:.2f} s")
        assert 3 <= took < 3 + SLACK
        error = error_of(events)
        assert error.code == "llm_error" and "sent nothing for 3 s (HERMES_LLM_TIMEOUT)" in error.message
        assert done_of(events).status == "error"
        assert len(llm.requests) == 1  # a silent model is not asked again: the operator already waited
        turn, messages = await stored(handle.turn_id)
        assert turn.error == error.message
        if streamed(events):
            assert messages[-1].content == [{"type": "text", "text": streamed(events)}]
        [line] = [r for r in llm_calls(llm_log) if fields(r)["outcome"] == "error"]
        assert line.correlation_id == str(handle.turn_id)  # type: ignore[attr-defined]

    @pytest.mark.parametrize("after_events", [1, 4], ids=["before-output", "after-output"])
    async def test_a_stream_that_pings_forever_ends_at_the_turn_s_time_limit(
        self, llm: FakeAnthropic, hub: ToolHub, after_events: int
    ) -> None:
        # Pings every 0.2 s: a per-read HTTP timeout (the old bound) never fires on this stream.
        llm.enqueue(Reply.pings(after_events=after_events, every=0.2, reply=Reply.text(ANSWER, chunk=10)))

        handle, events, took = await timed_ask("is caddy healthy?", hub, within=30, budgets=Budgets(timeout=4))

        print(f"pings forever, turn limit 4 s ({after_events} events first): turn ended after {took:.2f} s")
        assert 4 <= took < 4 + 1 + SLACK
        error = error_of(events)
        assert error.code == "timeout" and "time limit (4 s) ran out" in error.message
        done = done_of(events)
        assert (done.status, done.stop_reason) == ("error", "timeout")
        _, messages = await stored(handle.turn_id)
        if streamed(events):
            assert "what it said so far is kept" in error.message
            assert messages[-1].content == [{"type": "text", "text": streamed(events)}]
        else:
            assert "before the model answered" in error.message

    async def test_the_forced_final_answer_fits_inside_the_time_limit(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        # Tools are cut where the reserve for the final answer begins (here 1 s before the 5 s
        # limit); the final answer then pings forever and is cut at the limit, not a minute later.
        llm.enqueue(
            Reply.tool_use("mcp__oikos__slow", {"seconds": 30}),
            Reply.pings(after_events=4, every=0.2, reply=Reply.text("The probe was too slow to finish.", chunk=8)),
        )

        handle, events, took = await timed_ask("probe caddy", hub, within=60, budgets=Budgets(timeout=5))

        print(f"slow tool, then a final answer that pings forever, turn limit 5 s: ended after {took:.2f} s")
        assert 5 <= took < 5 + 1 + SLACK
        assert llm.requests[-1].body["tool_choice"] == {"type": "none"}  # the final answer was asked for
        assert error_of(events).code == "timeout"
        _, messages = await stored(handle.turn_id)
        assert messages[-1].role == "assistant" and messages[-1].content[0]["text"] == streamed(events)

    async def test_a_wait_the_api_asks_for_beyond_the_turn_s_time_is_not_taken(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(Reply.http_error(529, "overloaded_error", "Overloaded", retry_after=3))

        _, events, took = await timed_ask("is caddy healthy?", hub, within=30, budgets=Budgets(timeout=2))

        print(f"529 with retry-after 3 s, turn limit 2 s: turn ended after {took:.2f} s")
        assert took < 1 + SLACK
        assert "The model API is overloaded: Overloaded" in error_of(events).message
        assert len(llm.requests) == 1


class TestRetries:
    @pytest.mark.parametrize(
        "failure",
        [
            Reply.drop(after_events=0),
            Reply.drop(after_events=2),  # message_start and an empty text block: still nothing said
            Reply.stream_error(after_events=1),
            Reply.http_error(529, "overloaded_error", "Overloaded"),
            Reply.http_error(500, "api_error", "Internal server error"),
            Reply.http_error(429, "rate_limit_error", "Slow down", retry_after=0.2),
        ],
        ids=["drop-at-once", "drop-after-start", "overloaded-event", "529", "500", "429-retry-after"],
    )
    async def test_a_failure_before_any_output_is_retried_and_the_turn_succeeds(
        self, llm: FakeAnthropic, hub: ToolHub, llm_log: pytest.LogCaptureFixture, failure: Reply
    ) -> None:
        llm.enqueue(failure, Reply.text(ANSWER))

        handle, events, took = await timed_ask("is caddy healthy?", hub, within=30)

        print(f"one failure before output, then an answer: turn took {took:.2f} s")
        assert done_of(events).status == "done" and not any(isinstance(e, Error) for e in events)
        assert streamed(events) == ANSWER
        first, second = llm.requests
        assert first.body == second.body  # the same question asked again
        assert not llm.rejections
        _, messages = await stored(handle.turn_id)
        assert [m.role for m in messages] == ["user", "assistant"]
        assert [b["text"] for b in messages[-1].content] == [ANSWER]
        lines = [fields(r) for r in llm_calls(llm_log)]
        assert [(line["outcome"], line.get("attempt")) for line in lines] == [("retry", 1), ("ok", 2)]
        assert lines[0]["retry_in_ms"] >= 0
        turn_id = str(handle.turn_id)
        assert {r.correlation_id for r in llm_calls(llm_log)} == {turn_id}  # type: ignore[attr-defined]

    async def test_an_overload_that_persists_ends_the_turn_saying_so_after_the_retries(
        self, llm: FakeAnthropic, hub: ToolHub, llm_log: pytest.LogCaptureFixture
    ) -> None:
        llm.enqueue(*[Reply.stream_error(after_events=1, message="Overloaded")] * 3)

        handle, events, took = await timed_ask("is caddy healthy?", hub, within=30)

        print(f"overloaded three times: turn ended after {took:.2f} s")
        error = error_of(events)
        assert error.message.startswith("The model API is overloaded: Overloaded")
        assert "answered 200" not in error.message
        assert len(llm.requests) == 3  # the first attempt and HERMES_LLM_RETRIES=2 more
        outcomes = [fields(r)["outcome"] for r in llm_calls(llm_log)]
        assert outcomes == ["retry", "retry", "error"]
        turn, _ = await stored(handle.turn_id)
        assert turn.status == "error" and turn.error == error.message

    async def test_a_drop_after_output_began_is_not_retried_and_keeps_what_was_said(
        self, llm: FakeAnthropic, hub: ToolHub, llm_log: pytest.LogCaptureFixture
    ) -> None:
        llm.enqueue(Reply.drop(after_events=6, reply=Reply.text(ANSWER, chunk=8)), Reply.text("A second answer."))

        handle, events, _ = await timed_ask("is caddy healthy?", hub, within=30)

        said = streamed(events)
        assert said and ANSWER.startswith(said) and said != ANSWER
        error = error_of(events)
        assert error.code == "llm_error" and "Could not talk to the model API" in error.message
        assert "cut off after it began; what arrived is kept" in error.message
        assert len(llm.requests) == 1 and llm.pending == 1
        turn, messages = await stored(handle.turn_id)
        assert turn.status == "error" and turn.error == error.message
        assert messages[-1].content == [{"type": "text", "text": said}]
        [line] = llm_calls(llm_log)
        assert fields(line)["outcome"] == "error" and line.correlation_id == str(handle.turn_id)  # type: ignore[attr-defined]
        llm.enqueue(Reply.text("Next answer."))
        _, events = await ask("and now?", hub, session_id=handle.session_id)
        assert done_of(events).status == "done" and not llm.rejections

    async def test_a_refusal_is_not_retried(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.http_error(400, "invalid_request_error", "messages: bad"), Reply.text(ANSWER))

        _, events = await ask("is caddy healthy?", hub)

        assert error_of(events).message == "The model API answered 400: messages: bad"
        assert len(llm.requests) == 1


class TestIdleConnections:
    async def test_a_connection_idle_nearly_as_long_as_the_server_keeps_it_is_not_reused(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        # The fake, like uvicorn, Node and most local compatible servers, closes a connection idle
        # for 5 s. One reused just as it does fails the call ("Connection error"): under load, a
        # few calls in every 200 turns at once did, before Hermes gave its connections up sooner.
        llm.enqueue(Reply.text(ANSWER), Reply.text(ANSWER), Reply.text(ANSWER))

        for question in ("is caddy healthy?", "and now?"):
            await timed_ask(question, hub, within=30)
        assert llm_module.KEEPALIVE_SECONDS + 0.5 < 5
        await asyncio.sleep(llm_module.KEEPALIVE_SECONDS + 0.5)  # still open at the server
        await timed_ask("and after a while?", hub, within=30)

        first, soon_after, after_a_while = (request.client_port for request in llm.requests)
        assert first is not None
        assert soon_after == first  # kept for the next call
        assert after_a_while != first  # given up before the server would close it


class TestNotAnEventStream:
    @pytest.mark.parametrize(
        ("content_type", "body", "shown"),
        [
            ("application/json", None, "application/json"),
            ("text/html; charset=utf-8", "<html><h1>502 Bad Gateway</h1></html>", "text/html"),
        ],
    )
    async def test_a_200_that_is_not_sse_ends_the_turn_with_one_clear_message_under_its_own_id(
        self,
        llm: FakeAnthropic,
        hub: ToolHub,
        llm_log: pytest.LogCaptureFixture,
        content_type: str,
        body: str | None,
        shown: str,
    ) -> None:
        llm.enqueue(Reply.not_event_stream(content_type, body), Reply.text(ANSWER))

        handle, events = await ask("is caddy healthy?", hub)
        # The next turn, and a collection, are where the old failure surfaced under the wrong id.
        _, after = await ask("and now?", hub, session_id=handle.session_id)
        gc.collect()
        await asyncio.sleep(0)

        error = error_of(events)
        assert error.code == "llm_error"
        assert error.message.startswith(f"The model API answered 200 with {shown} instead of an event stream")
        assert "AssertionError" not in error.message
        assert done_of(after).status == "done" and streamed(after) == ANSWER
        assert len(llm.requests) == 2  # not retried: the same server would answer the same way
        errors = [r for r in llm_calls(llm_log) if fields(r)["outcome"] == "error"]
        assert [(r.correlation_id, fields(r)["error"]) for r in errors] == [  # type: ignore[attr-defined]
            (str(handle.turn_id), error.message)
        ]
        assert not [r for r in llm_log.records if "AssertionError" in r.getMessage() or r.exc_info]
