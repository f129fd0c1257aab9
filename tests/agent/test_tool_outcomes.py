"""Honest tool outcomes: the ledger row exists before a call is sent, and a call cut off in flight —
by Stop, the turn's time limit, an MCP timeout or a crash — is "outcome unknown, it may have run",
to the model and in the ledger. Against the scripted model, the mini Oikos and `oikos_sim`."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import Done, Event, ToolResult, ToolUse
from agent.engine.budgets import Budgets
from agent.engine.runner import turn_start
from agent.models import Activity, AgentSession, Message, Turn
from agent.tools import ToolHub
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask, turn_collect
from tests.fakes import FakeAnthropic, Reply, text, tool_use
from tests.fakes.mcp_servers import SLOW_IN_FLIGHT
from tests.fakes.scripted_models import last_tool_results, tool_result_text

pytestmark = pytest.mark.django_db(transaction=True)

MAY_HAVE_RUN = "It may have run; check before retrying."
LOOK_IT_UP = (
    "It may have run: look the execution up with Oikos's tools (get_execution, get_agent_activity, "
    "list_approvals) before requesting it again."
)


@database_sync_to_async
def _ledger(turn_id: uuid.UUID) -> list[Activity]:
    return list(Activity.objects.filter(correlation_id=turn_id).order_by("started_at", "id"))


def _results(events: list[Event]) -> list[ToolResult]:
    return [event for event in events if isinstance(event, ToolResult)]


class TestTheLedgerRowComesFirst:
    async def test_a_call_in_flight_already_has_its_started_row_then_it_is_completed(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 1.0, "label": "in-flight"}), Reply.text("Done."))
        handle = await turn_start(text="probe", actor="operator:test", origin="cli", hub=hub)
        events: list[Event] = []
        async for event in handle.events():
            events.append(event)
            if isinstance(event, ToolUse):
                # The server is running the call now: its ledger row must already say so.
                await asyncio.to_thread(SLOW_IN_FLIGHT.wait, "in-flight")
                (row,) = await _ledger(handle.turn_id)
                assert (row.state, row.is_error, row.result, row.tool) == ("started", False, {}, "slow")
                assert row.tool_use_id == event.id and row.arguments == {"seconds": 1.0, "label": "in-flight"}

        (row,) = await _ledger(handle.turn_id)
        assert (row.state, row.is_error) == ("ok", False)
        assert json.loads(row.result["content"][0]["text"])["label"] == "in-flight"
        assert row.duration_ms >= 1000
        assert _results(events)[0].state == "ok"


class TestCutOffInFlight:
    async def test_stop_tells_the_model_the_call_may_have_run_and_keeps_finished_results(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(
            Reply.blocks(
                [
                    text("Probing both."),
                    tool_use("mcp__oikos__slow", {"seconds": 0.05, "label": "quick"}),
                    tool_use("mcp__oikos__slow", {"seconds": 30, "label": "stuck"}),
                ]
            ),
            Reply.text("Understood."),
        )
        handle = await turn_start(text="probe twice", actor="operator:test", origin="cli", hub=hub)
        events: list[Event] = []
        async for event in handle.events():
            events.append(event)
            if isinstance(event, ToolResult) and len(_results(events)) == 1:
                # The quick call answered; the stuck one is running.
                await asyncio.to_thread(SLOW_IN_FLIGHT.wait, "stuck")
                handle.cancel()

        assert isinstance(events[-1], Done) and events[-1].status == "cancelled"
        quick, stuck = _results(events)
        assert (quick.state, stuck.state, stuck.is_error) == ("ok", "unknown", True)
        assert (
            stuck.content == f"Outcome unknown: cancelled by the operator while the call was in flight. {MAY_HAVE_RUN}"
        )
        rows = await _ledger(handle.turn_id)
        assert [(row.state, row.is_error) for row in rows] == [("ok", False), ("unknown", True)]
        assert rows[1].result["error"] == {"kind": "cancelled", "message": stuck.content}

        _, after = await ask("what happened?", hub, session_id=handle.session_id)
        assert isinstance(after[-1], Done) and after[-1].status == "done"
        sent = llm.requests[-1].body["messages"]
        quick_result, stuck_result = [block for block in sent[2]["content"] if block["type"] == "tool_result"]
        assert json.loads(tool_result_text(quick_result))["label"] == "quick", "a finished call keeps its result"
        assert stuck_result["is_error"] is True
        assert tool_result_text(stuck_result) == stuck.content
        assert "Not run" not in json.dumps(sent)
        assert not llm.rejections

    async def test_a_cancel_with_a_reason_records_it_and_tells_the_model_in_its_words(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        """A peer that went away is not an operator's Stop: the turn's record and the cut-off call
        say who stopped it (the next question's model call hears the same)."""
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 30, "label": "stuck"}))
        handle = await turn_start(text="probe", actor="peer:lab", origin="a2a", hub=hub)
        events: list[Event] = []
        async for event in handle.events():
            events.append(event)
            if isinstance(event, ToolUse):
                await asyncio.to_thread(SLOW_IN_FLIGHT.wait, "stuck")
                handle.cancel("Cancelled by the peer.")
                handle.cancel()  # a second cancel (an operator's Stop too) does not change the reason

        assert isinstance(events[-1], Done) and events[-1].status == "cancelled"
        [stuck] = _results(events)
        assert stuck.content == f"Outcome unknown: cancelled by the peer while the call was in flight. {MAY_HAVE_RUN}"
        turn = await Turn.objects.aget(pk=handle.turn_id)
        assert (turn.status, turn.error) == ("cancelled", "Cancelled by the peer.")

    async def test_the_turns_time_limit_cuts_a_call_off_as_outcome_unknown(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 5}), Reply.text("The probe was too slow."))

        handle, events = await ask("probe", hub, budgets=Budgets(timeout=2.5))

        result = last_tool_results(llm.requests[-1].body)[0]
        expected = f"Outcome unknown: the turn's time limit was reached while the call was in flight. {MAY_HAVE_RUN}"
        assert result["is_error"] is True and tool_result_text(result) == expected
        assert _results(events)[0].state == "unknown"
        (row,) = await _ledger(handle.turn_id)
        assert (row.state, row.result["error"]["kind"]) == ("unknown", "time_limit")

    async def test_an_mcp_timeout_is_outcome_unknown_not_a_plain_failure(
        self, llm: FakeAnthropic, hub: ToolHub, settings
    ) -> None:
        settings.HERMES_MCP_TIMEOUT = 1.0
        slow_hub = ToolHub.from_settings()
        try:
            llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 5}), Reply.text("Oikos was slow."))
            handle, events = await ask("probe", slow_hub)
        finally:
            await slow_hub.aclose()

        (result,) = _results(events)
        assert (result.state, result.is_error) == ("unknown", True)
        assert "timed out calling slow" in result.content and result.content.endswith(
            f"Outcome unknown. {MAY_HAVE_RUN}"
        )
        (row,) = await _ledger(handle.turn_id)
        assert (row.state, row.is_error, row.result["error"]["kind"]) == ("unknown", True, "timeout")


class TestRequestExecution:
    async def test_a_cut_off_request_execution_says_how_to_look_it_up_and_oikos_has_it_under_the_turn_id(
        self, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        # Executions run 30 s here: request_execution waits (5 s) for the restart it started.
        oikos_settings.state.desk.execution_seconds = 30.0
        llm.enqueue(
            Reply.tool_use("mcp__oikos__request_execution", {"target": "service:caddy", "action": "restart"}),
            Reply.text("I cannot tell yet whether caddy restarted."),
        )

        handle, _ = await ask("restart caddy", oikos_hub, budgets=Budgets(timeout=2.5))

        result = last_tool_results(llm.requests[-1].body)[0]
        assert tool_result_text(result) == (
            f"Outcome unknown: the turn's time limit was reached while the call was in flight. {LOOK_IT_UP}"
        )
        (row,) = await _ledger(handle.turn_id)
        assert (row.tool, row.state) == ("request_execution", "unknown")
        # Oikos did start the restart, and its own ledger names Hermes's turn: the operator can match them.
        executions = list(oikos_settings.state.desk.executions.values())
        assert [(x.target, x.action) for x in executions] == [("service:caddy", "restart")]
        listed = await oikos_hub.call(
            "mcp__oikos__get_agent_activity", {"correlation_id": str(handle.turn_id), "tool": "request_execution"}
        )
        (entry,) = json.loads(listed.content[0]["text"])["activity"]
        assert entry["correlation_id"] == str(handle.turn_id) and entry["actor"] == "agent:hermes"


class TestCrashRepair:
    async def test_a_started_row_left_by_a_crash_is_settled_and_the_model_told_it_may_have_run(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        @database_sync_to_async
        def crashed_session() -> tuple[uuid.UUID, uuid.UUID]:
            session = AgentSession.objects.create(actor="operator:test", title="crashed")
            turn = Turn.objects.create(session=session, actor="operator:test", status="interrupted")
            Message.objects.create(session=session, turn=turn, role="user", content=[{"type": "text", "text": "go"}])
            call = {"target": "service:caddy", "action": "restart"}
            Message.objects.create(
                session=session,
                turn=turn,
                role="assistant",
                content=[
                    {"type": "tool_use", "id": "toolu_lost", "name": "mcp__oikos__request_execution", "input": call}
                ],
            )
            Activity.objects.create(
                correlation_id=turn.pk,
                session=session,
                actor="operator:test",
                tool_use_id="toolu_lost",
                server="oikos",
                tool="request_execution",
                arguments=call,
                state="started",
                started_at=turn.started_at,
            )
            return session.pk, turn.pk

        session_id, turn_id = await crashed_session()
        llm.enqueue(Reply.text("Let me check the execution first."))

        await ask("did caddy restart?", hub, session_id=session_id)

        repaired = llm.requests[-1].body["messages"][2]["content"][0]
        assert repaired["tool_use_id"] == "toolu_lost" and repaired["is_error"] is True
        assert tool_result_text(repaired) == (
            f"Outcome unknown: Hermes stopped (a restart or a crash) while the call was in flight. {LOOK_IT_UP}"
        )
        (row,) = await _ledger(turn_id)
        assert (row.state, row.is_error, row.result["error"]["kind"]) == ("unknown", True, "interrupted")
        assert not llm.rejections


async def test_replayed_events_carry_the_state(llm: FakeAnthropic, hub: ToolHub) -> None:
    llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 5}), Reply.text("Too slow."))
    handle, live = await ask("probe", hub, budgets=Budgets(timeout=2.5))
    replay = await turn_collect(handle)
    assert [e.to_dict() for e in _results(replay)] == [e.to_dict() for e in _results(live)]
    assert _results(replay)[0].to_dict()["state"] == "unknown"
