"""A turn's writes are batched and run off the event loop (`agent.db.db_call`: one SQLite writer
thread, pool-sized threads on PostgreSQL), and the crash-safety order still holds: the question
before the model is asked, the model's message with the `started` rows of its calls before any
call is sent, a round's results with their ledger outcomes. And turns running at once, whose
writes interleave (concurrently on PostgreSQL), each store all of theirs."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels.db import database_sync_to_async

from agent.engine.events import Done, ToolUse
from agent.engine.runner import turn_start
from agent.models import Activity, Message, Turn
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_servers import SLOW_IN_FLIGHT
from tests.fakes.scripted_models import DegradedInvestigator

pytestmark = pytest.mark.django_db(transaction=True)


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
        handle = await turn_start(text="probe", actor="operator:test", origin="test", hub=hub)
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
        assert messages == [
            ("user", ["text"]),
            ("assistant", ["tool_use"]),
            ("user", ["tool_result"]),
            ("assistant", ["text"]),
        ]
        assert rows == [("slow", "ok")]


class TestConcurrentTurns:
    async def test_turns_at_once_each_store_every_message_and_ledger_row(
        self, llm: FakeAnthropic, oikos_hub: ToolHub
    ) -> None:
        llm.responder = DegradedInvestigator()
        handles = await asyncio.gather(
            *(
                turn_start(text=f"what's degraded? ({n})", actor="operator:test", origin="test", hub=oikos_hub)
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
