"""A turn's writes are batched and run off the event loop (`common.db.db_call`: one SQLite writer
thread, pool-sized threads on PostgreSQL), and the crash-safety order still holds: the question
before the model is asked, the model's message with the `started` rows of its calls before any
call is sent, a round's results with their ledger outcomes, stored while the model is asked about
them, and before anything else of the turn. And turns running at once, whose writes interleave
(concurrently on PostgreSQL), each store all of theirs."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.db import DatabaseError

from agent.conversation.events import Done, ToolUse
from agent.engine.runner import turn_start
from agent.models import Activity, Message, Turn
from agent.store import turns as turn_store
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_servers import SLOW_IN_FLIGHT
from tests.fakes.scripted_models import DegradedInvestigator, last_tool_results

pytestmark = pytest.mark.django_db(transaction=True)

# What a turn of one tool call stores: its messages (role, block types) and ledger rows, in order.
ONE_CALL_TURN = (
    [("user", ["text"]), ("assistant", ["tool_use"]), ("user", ["tool_result"]), ("assistant", ["text"])],
    [("slow", "ok")],
)


@database_sync_to_async
def _stored(turn_id: uuid.UUID) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    """The turn's messages as (role, block types) and its ledger rows as (tool, state), in order."""
    messages = [
        (message.role, [block["type"] for block in message.content])
        for message in Message.objects.filter(turn_id=turn_id).order_by("id")
    ]
    rows = [(row.tool, row.state) for row in Activity.objects.filter(correlation_id=turn_id).order_by("id")]
    return messages, rows


class TestCrashSafeOrder:
    async def test_the_tool_call_message_and_its_started_row_are_stored_before_the_call_runs(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 1.0, "label": "order"}), Reply.text("Done."))
        handle = await turn_start(text="probe", actor="operator:test", origin="cli", hub=hub)
        async for event in handle.events():
            if isinstance(event, ToolUse):
                # The server runs the call now: a crash here must leave the question, the model's
                # request for the call and the row that says it went out.
                await asyncio.to_thread(SLOW_IN_FLIGHT.wait, "order")
                messages, rows = await _stored(handle.turn_id)
                assert messages == [("user", ["text"]), ("assistant", ["tool_use"])]
                assert rows == [("slow", "started")]
            if isinstance(event, Done):
                assert event.status == "done"

        messages, rows = await _stored(handle.turn_id)
        assert (messages, rows) == ONE_CALL_TURN


class TestResultsStoredBehind:
    """A round's tool results are stored while the model is asked about them (`TurnJournal.append_behind`)."""

    async def test_the_model_is_asked_while_the_results_are_stored_and_the_order_holds(
        self, llm: FakeAnthropic, hub: ToolHub, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        storing, release = threading.Event(), threading.Event()
        store = turn_store.message_append

        def held(**message: Any) -> None:
            if any(block["type"] == "tool_result" for block in message["content"]):
                storing.set()
                release.wait(10)
            store(**message)

        monkeypatch.setattr(turn_store, "message_append", held)
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 0, "label": "behind"}), Reply.text("Done."))
        handle = await turn_start(text="probe", actor="operator:test", origin="cli", hub=hub)
        try:
            assert await asyncio.to_thread(storing.wait, 10), "the results were never stored"
            # The results are still on their way to the database, and the model already has them.
            asked = (await asyncio.to_thread(llm.wait_for_requests, 2, timeout=5))[1].body
            (result,) = last_tool_results(asked)
            assert result["tool_use_id"] == asked["messages"][1]["content"][0]["id"]
            messages, rows = await _stored(handle.turn_id)
            assert messages == [("user", ["text"]), ("assistant", ["tool_use"])]
            assert rows == [("slow", "started")]
        finally:
            release.set()

        assert (await _done(handle.events())).status == "done"
        messages, rows = await _stored(handle.turn_id)
        assert (messages, rows) == ONE_CALL_TURN

    async def test_results_that_could_not_be_stored_end_the_turn_before_another_call_is_sent(
        self, llm: FakeAnthropic, hub: ToolHub, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = turn_store.message_append

        def failing(**message: Any) -> None:
            if any(block["type"] == "tool_result" for block in message["content"]):
                raise DatabaseError("disk I/O error")
            store(**message)

        monkeypatch.setattr(turn_store, "message_append", failing)
        llm.enqueue(
            Reply.tool_use("mcp__oikos__slow", {"seconds": 0, "label": "first"}),
            Reply.tool_use("mcp__oikos__slow", {"seconds": 0, "label": "second"}),
            Reply.text("Never asked."),
        )
        handle = await turn_start(text="probe", actor="operator:test", origin="cli", hub=hub)

        done = await _done(handle.events())
        assert done.status == "error"
        turn = await Turn.objects.aget(pk=handle.turn_id)
        assert "disk I/O error" in turn.error
        # The model's second call was asked for, and never sent: the turn stopped at its write.
        assert len(llm.requests) == 2
        messages, rows = await _stored(handle.turn_id)
        assert messages == [("user", ["text"]), ("assistant", ["tool_use"])]
        # The call that ran keeps its outcome in the ledger (written when the turn ended).
        assert rows == [("slow", "ok")]


class TestConcurrentTurns:
    async def test_turns_at_once_each_store_every_message_and_ledger_row(
        self, llm: FakeAnthropic, oikos_hub: ToolHub
    ) -> None:
        llm.responder = DegradedInvestigator()
        handles = await asyncio.gather(
            *(
                turn_start(text=f"what's degraded? ({n})", actor="operator:test", origin="cli", hub=oikos_hub)
                for n in range(12)
            )
        )
        ends = await asyncio.gather(*(_done(handle.events()) for handle in handles))

        assert [end.status for end in ends] == ["done"] * 12
        for handle in handles:
            messages, rows = await _stored(handle.turn_id)
            assert [role for role, _types in messages] == [
                "user",
                "assistant",
                "user",
                "assistant",
                "user",
                "assistant",
            ]
            assert rows == [("get_health_summary", "ok"), ("get_blast_radius", "ok")]
            turn = await Turn.objects.aget(pk=handle.turn_id)
            assert (turn.status, turn.iterations) == ("done", 3)


async def _done(events: object) -> Done:
    async for event in events:  # type: ignore[attr-defined]
        if isinstance(event, Done):
            return event
    raise AssertionError("the turn ended without `done`")
