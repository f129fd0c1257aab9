"""The turn engine against the scripted model and the mini Oikos, both real servers on loopback."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import Done, Error, Event, TextDelta, ToolResult, ToolUse
from agent.engine.budgets import Budgets
from agent.engine.runner import TurnRejected, turn_start
from agent.models import Activity, AgentSession, Message, Turn
from agent.tools import ToolHub
from tests.agent.conftest import ask, turn_collect
from tests.fakes import FakeAnthropic, Reply, text, tool_use
from tests.fakes.mcp_servers import SLOW_IN_FLIGHT, MCPTestServer
from tests.fakes.scripted_models import DegradedInvestigator, last_tool_results, offered_tool, tool_result_text

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "what's degraded and what depends on it?"


def _done(events: list[Event]) -> Done:
    """The turn's last event, which is always its `done`."""
    last = events[-1]
    assert isinstance(last, Done), last
    return last


def _of(events: list, kind: type) -> list:
    return [event for event in events if isinstance(event, kind)]


@database_sync_to_async
def _ledger(turn_id: uuid.UUID) -> list[Activity]:
    return list(Activity.objects.filter(correlation_id=turn_id).order_by("started_at", "id"))


@database_sync_to_async
def _messages(session_id: uuid.UUID) -> list[Message]:
    return list(Message.objects.filter(session_id=session_id).order_by("id"))


@database_sync_to_async
def _turn(turn_id: uuid.UUID) -> Turn:
    return Turn.objects.get(pk=turn_id)


class TestDegradedQuestion:
    async def test_chains_health_summary_then_blast_radius_and_streams_the_answer(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        model = DegradedInvestigator(chunk=6)
        llm.responder = model

        handle, events = await ask(QUESTION, hub)

        calls = _of(events, ToolUse)
        assert [(c.server, c.tool) for c in calls] == [("oikos", "get_health_summary"), ("oikos", "get_blast_radius")]
        assert calls[1].input == {"slug": "service:postgres"}
        deltas = _of(events, TextDelta)
        assert len(deltas) > 3, "the answer should stream in several deltas"
        assert "".join(d.text for d in deltas) == model.answers[-1]
        assert "service:authentik" in model.answers[-1] and "depth 2" in model.answers[-1]
        # The final text comes after both tool calls, and `done` closes the stream.
        assert events.index(deltas[0]) > events.index(calls[1])
        done = events[-1]
        assert isinstance(done, Done)
        assert (done.stop_reason, done.iterations, done.status) == ("end_turn", 3, "done")
        assert done.turn_id == str(handle.turn_id) and done.session_id == str(handle.session_id)

        ledger = await _ledger(handle.turn_id)
        assert [(row.server, row.tool, row.is_error) for row in ledger] == [
            ("oikos", "get_health_summary", False),
            ("oikos", "get_blast_radius", False),
        ]
        assert ledger[1].arguments == {"slug": "service:postgres"}
        assert all(row.session_id == handle.session_id and row.actor == "operator:test" for row in ledger)
        assert not llm.rejections

        turn = await _turn(handle.turn_id)
        assert turn.status == "done" and turn.iterations == 3
        assert turn.usage["output_tokens"] > 0

    async def test_the_question_is_stored_before_the_model_answers(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.http_error(400, "invalid_request_error", "scripted refusal"))

        handle, events = await ask("is caddy up?", hub)

        assert isinstance(events[-2], Error) and events[-2].code == "llm_error"
        assert "scripted refusal" in events[-2].message
        messages = await _messages(handle.session_id)
        assert [m.role for m in messages] == ["user"]
        assert messages[0].content == [{"type": "text", "text": "is caddy up?"}]
        assert (await _turn(handle.turn_id)).status == "error"


class TestSessions:
    async def test_a_second_turn_sees_the_first(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.text("Caddy is healthy."), Reply.text("It fronts jellyfin."))
        first, _ = await ask("is caddy healthy?", hub)
        second, _ = await ask("what does it front?", hub, session_id=first.session_id)

        assert second.session_id == first.session_id and not second.session_created
        history = llm.requests[-1].body["messages"]
        assert [m["role"] for m in history] == ["user", "assistant", "user"]
        assert history[0]["content"][0]["text"] == "is caddy healthy?"
        assert history[1]["content"][0]["text"] == "Caddy is healthy."
        session = await database_sync_to_async(AgentSession.objects.get)(pk=first.session_id)
        assert session.title == "is caddy healthy?"

    async def test_unknown_session_is_rejected_and_nothing_is_stored(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        with pytest.raises(TurnRejected) as rejected:
            await turn_start(text="hi", actor="operator:test", origin="cli", hub=hub, session_id=uuid.uuid4())
        assert rejected.value.code == "session_not_found"
        assert await database_sync_to_async(Message.objects.count)() == 0
        assert not llm.requests

    async def test_unanswered_tool_use_is_repaired_when_the_session_loads(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        @database_sync_to_async
        def crashed_session() -> uuid.UUID:
            session = AgentSession.objects.create(actor="operator:test", title="crashed")
            turn = Turn.objects.create(session=session, actor="operator:test", status="interrupted")
            Message.objects.create(session=session, turn=turn, role="user", content=[{"type": "text", "text": "go"}])
            Message.objects.create(
                session=session,
                turn=turn,
                role="assistant",
                content=[
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_lost", "name": "mcp__oikos__get_health_summary", "input": {}},
                ],
            )
            return session.pk

        session_id = await crashed_session()
        llm.enqueue(Reply.text("Picking up where we were."))

        _, events = await ask("and now?", hub, session_id=session_id)

        assert isinstance(events[-1], Done) and _done(events).status == "done"
        assert not llm.rejections
        sent = llm.requests[-1].body["messages"]
        repaired = sent[2]["content"][0]
        assert repaired["type"] == "tool_result" and repaired["tool_use_id"] == "toolu_lost"
        assert repaired["is_error"] is True
        stored = await _messages(session_id)
        assert stored[2].content[0]["tool_use_id"] == "toolu_lost"

    async def test_a_turn_left_running_by_a_dead_process_is_marked_interrupted(
        self, llm: FakeAnthropic, hub: ToolHub, settings
    ) -> None:
        settings.HERMES_TURN_STALE_SECONDS = 1

        @database_sync_to_async
        def orphan() -> tuple[uuid.UUID, uuid.UUID]:
            session = AgentSession.objects.create(actor="operator:test")
            turn = Turn.objects.create(session=session, actor="operator:test")
            Turn.objects.filter(pk=turn.pk).update(heartbeat_at="2020-01-01T00:00:00Z")
            return session.pk, turn.pk

        session_id, turn_id = await orphan()
        llm.enqueue(Reply.text("ok"))
        await ask("hello again", hub, session_id=session_id)
        assert (await _turn(turn_id)).status == "interrupted"


class TestBudgets:
    async def test_a_model_that_always_calls_tools_stops_at_the_cap_with_an_answer(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        def tool_addict(request: dict) -> Reply:
            if request.get("tool_choice", {}).get("type") == "none":
                return Reply.text("Here is what I found before the limit.")
            return Reply.tool_use(offered_tool(request, "get_health_summary"), {})

        llm.responder = tool_addict

        _, events = await ask(QUESTION, hub, budgets=Budgets(max_iterations=3))

        assert len(_of(events, ToolUse)) == 3
        done = events[-1]
        assert isinstance(done, Done)
        assert (done.stop_reason, done.iterations, done.status) == ("max_iterations", 4, "done")
        assert "".join(d.text for d in _of(events, TextDelta)) == "Here is what I found before the limit."
        final_request = llm.requests[-1].body
        assert final_request["tool_choice"] == {"type": "none"}
        assert "limit of 3 tool rounds" in json.dumps(final_request["messages"][-1])
        assert not llm.rejections

    async def test_token_budget_forces_the_final_answer(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(
            Reply.tool_use("mcp__oikos__get_health_summary", {}, usage={"input_tokens": 900, "output_tokens": 200}),
            Reply.text("Stopping here."),
        )
        _, events = await ask(QUESTION, hub, budgets=Budgets(turn_tokens=1000))
        assert _done(events).stop_reason == "token_budget"
        assert llm.requests[-1].body["tool_choice"] == {"type": "none"}

    async def test_wall_clock_limit_cuts_slow_tools_and_still_answers(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 5}), Reply.text("The probe was too slow."))
        started = time.monotonic()
        _, events = await ask("probe", hub, budgets=Budgets(timeout=2.5))
        assert time.monotonic() - started < 4.5
        assert _done(events).stop_reason == "timeout"
        result = last_tool_results(llm.requests[-1].body)[0]
        assert result["is_error"] is True and "time limit" in tool_result_text(result)


class TestTools:
    async def test_tool_calls_of_one_response_run_concurrently_and_return_in_order(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(
            Reply.blocks(
                [
                    text("Probing both."),
                    tool_use("mcp__oikos__slow", {"seconds": 0.6, "label": "first"}),
                    tool_use("mcp__oikos__slow", {"seconds": 0.1, "label": "second"}),
                ]
            ),
            Reply.text("Both answered."),
        )
        _, events = await ask("probe twice", hub)

        results = last_tool_results(llm.requests[1].body)
        spans = [json.loads(tool_result_text(r)) for r in results]
        assert [s["label"] for s in spans] == ["first", "second"]
        assert spans[1]["started_at"] < spans[0]["finished_at"], "the calls did not overlap"
        # The short call reports first, yet the model gets results in the order it asked.
        assert [r.name for r in _of(events, ToolResult)] == ["mcp__oikos__slow", "mcp__oikos__slow"]
        uses = [u.id for u in _of(events, ToolUse)]
        assert [r["tool_use_id"] for r in results] == uses
        assert [r.tool_use_id for r in _of(events, ToolResult)] == uses[::-1]

    async def test_a_huge_result_reaches_the_model_truncated_and_the_ledger_whole(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        size = 1_000_000
        llm.enqueue(Reply.tool_use("mcp__oikos__big", {"size_bytes": size}), Reply.text("That is a lot of output."))
        handle, events = await ask("dump it", hub, budgets=Budgets(tool_result_chars=20_000))

        sent = tool_result_text(last_tool_results(llm.requests[1].body)[0])
        assert len(sent) < 21_000
        assert f"{size - 20_000:,} of {size:,} characters cut" in sent
        assert _of(events, ToolResult)[0].truncated
        (row,) = await _ledger(handle.turn_id)
        assert len(row.result["content"][0]["text"]) == size

    async def test_cache_control_marks_tools_and_system_and_later_calls_read_the_cache(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.responder = DegradedInvestigator()
        _, events = await ask(QUESTION, hub)

        first = llm.requests[0].body
        assert "cache_control" in first["tools"][-1]
        assert all("cache_control" in block for block in first["system"])
        for request in llm.requests:
            marks = json.dumps(request.body).count('"cache_control"')
            assert 2 < marks <= 4
        assert _done(events).usage["cache_read_input_tokens"] > 0
        assert _done(events).usage["cache_creation_input_tokens"] > 0

    async def test_a_server_that_goes_away_gives_an_error_result_and_reconnects(
        self, llm: FakeAnthropic, hub: ToolHub, mcp_oikos_settings: MCPTestServer
    ) -> None:
        def careful(request: dict) -> Reply:
            results = last_tool_results(request)
            if not results:
                return Reply.tool_use(offered_tool(request, "get_health_summary"), {})
            if results[0].get("is_error"):
                return Reply.text("Oikos is unreachable right now; I could not check the fleet.")
            return Reply.text("The fleet answered: " + tool_result_text(results[0])[:40])

        llm.responder = careful
        await ask("how is the fleet?", hub)
        mcp_oikos_settings.stop()
        _, events = await ask("and now?", hub)

        (result,) = _of(events, ToolResult)
        assert result.is_error
        assert "unreachable" in "".join(d.text for d in _of(events, TextDelta))
        assert _done(events).status == "done"

        mcp_oikos_settings.start()
        _, events = await ask("and now?", hub)
        (result,) = _of(events, ToolResult)
        assert not result.is_error
        assert "The fleet answered" in "".join(d.text for d in _of(events, TextDelta))


class TestFailures:
    async def test_no_model_configured_is_rejected_with_what_to_set(self, settings, hub: ToolHub) -> None:
        settings.ANTHROPIC_API_KEY = ""
        settings.ANTHROPIC_BASE_URL = ""
        with pytest.raises(TurnRejected) as rejected:
            await turn_start(text="hi", actor="operator:test", origin="cli", hub=hub)
        assert rejected.value.code == "llm_not_configured"
        assert "ANTHROPIC_API_KEY" in rejected.value.message and "ANTHROPIC_BASE_URL" in rejected.value.message
        assert await database_sync_to_async(AgentSession.objects.count)() == 0

    @pytest.mark.parametrize(
        ("reply", "expected"),
        [
            (Reply.drop(after_events=6), "Could not talk to the model API"),
            (Reply.stream_error(after_events=6), "Overloaded"),
            (Reply.truncated(), "ended before the message was complete"),
        ],
    )
    async def test_a_broken_stream_ends_the_turn_with_an_error_and_keeps_the_partial_text(
        self, llm: FakeAnthropic, hub: ToolHub, reply: Reply, expected: str
    ) -> None:
        llm.enqueue(reply)
        handle, events = await ask("tell me", hub)
        error = _of(events, Error)[0]
        assert error.code == "llm_error" and expected in error.message
        assert isinstance(events[-1], Done) and _done(events).status == "error"
        streamed = "".join(d.text for d in _of(events, TextDelta))
        messages = await _messages(handle.session_id)
        if streamed:
            assert messages[-1].role == "assistant" and messages[-1].content[0]["text"] == streamed

    async def test_cancel_keeps_the_partial_text_and_the_next_question_works(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.enqueue(Reply.text("A long, slow answer " * 20, chunk=5, delay=0.05), Reply.text("Fresh answer."))
        handle = await turn_start(text="go slowly", actor="operator:test", origin="cli", hub=hub)
        seen = []
        async for event in handle.events():
            seen.append(event)
            if len(_of(seen, TextDelta)) == 3:
                handle.cancel()
        assert _of(seen, Error)[0].code == "cancelled"
        assert _done(seen).status == "cancelled"
        kept = (await _messages(handle.session_id))[-1]
        assert kept.role == "assistant" and kept.content[0]["text"].startswith("A long, slow")

        _, events = await ask("next?", hub, session_id=handle.session_id)
        assert _done(events).status == "done" and not llm.rejections

    async def test_cancel_during_a_tool_call_answers_it_and_logs_it(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 10, "label": "cancel"}), Reply.text("Next answer."))
        handle = await turn_start(text="slow probe", actor="operator:test", origin="cli", hub=hub)
        async for event in handle.events():
            if isinstance(event, ToolUse):
                await asyncio.to_thread(SLOW_IN_FLIGHT.wait, "cancel")
                handle.cancel()
        messages = await _messages(handle.session_id)
        assert messages[-1].content[0]["type"] == "tool_result" and messages[-1].content[0]["is_error"]
        (row,) = await _ledger(handle.turn_id)
        assert (row.state, row.is_error, row.result["error"]["kind"]) == ("unknown", True, "cancelled")
        _, events = await ask("next?", hub, session_id=handle.session_id)
        assert _done(events).status == "done" and not llm.rejections

    async def test_a_turn_stopped_before_it_begins_ends_cancelled_with_done(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        """A Stop (or a closing server) before the turn's task has taken a step: ended, not lost."""
        llm.enqueue(Reply.text("Next answer."))
        handle = await turn_start(text="stop at once", actor="operator:test", origin="cli", hub=hub)
        handle.cancel()

        events = await asyncio.wait_for(turn_collect(handle), timeout=10)

        assert _done(events).status == "cancelled" and _of(events, Error)[0].code == "cancelled"
        assert (await Turn.objects.aget(pk=handle.turn_id)).status == "cancelled"
        assert not llm.requests, "a stopped turn asks the model nothing"
        _, events = await ask("next?", hub, session_id=handle.session_id)
        assert _done(events).status == "done"

    async def test_stops_that_land_while_a_turn_ends_still_end_it_with_done(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        """A second Stop, a shutdown or a closing registry during the turn's last writes: the turn
        is stored as ended and its followers hear `done`."""
        llm.enqueue(Reply.text("A long, slow answer " * 20, chunk=5, delay=0.05), Reply.text("Fresh answer."))
        handle = await turn_start(text="go slowly", actor="operator:test", origin="cli", hub=hub)

        async def follow() -> list[Event]:
            seen: list[Event] = []
            async for event in handle.events():
                seen.append(event)
                if len(_of(seen, TextDelta)) == 3 and not handle.task.cancelling():  # type: ignore[union-attr]
                    handle.cancel()
                    for _ in range(40):  # again and again, while the turn stores how it ended
                        await asyncio.sleep(0.002)
                        handle.cancel()
            return seen

        seen = await asyncio.wait_for(follow(), timeout=10)

        assert _done(seen).status == "cancelled"
        assert (await Turn.objects.aget(pk=handle.turn_id)).status == "cancelled"
        _, events = await ask("next?", hub, session_id=handle.session_id)
        assert _done(events).status == "done" and not llm.rejections

    async def test_late_subscriber_replays_the_whole_turn(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.responder = DegradedInvestigator()
        handle, live = await ask(QUESTION, hub)
        replay = await turn_collect(handle)
        assert [e.to_dict() for e in replay] == [e.to_dict() for e in live]


class TestPromptAndModel:
    async def test_the_persona_file_and_model_setting_shape_the_request(
        self, llm: FakeAnthropic, hub: ToolHub, settings, tmp_path
    ) -> None:
        soul = tmp_path / "SOUL.md"
        soul.write_text("You are Hermes of the Lab of Testing. Speak tersely.")
        settings.HERMES_SOUL_PATH = str(soul)
        settings.HERMES_MODEL = "claude-opus-5"
        llm.enqueue(Reply.text("ok"))

        await ask("hi", hub)

        request = llm.requests[-1].body
        assert request["model"] == "claude-opus-5"
        system = request["system"][0]["text"]
        assert system.startswith("You are Hermes of the Lab of Testing.")
        assert "request_execution" in system  # the operating brief follows the persona
        assert "operator:test" in system
        # Whatever the persona says, the model is told to give the approving operator a reason.
        assert "Always pass `reason`" in system

    async def test_the_default_model_and_bundled_persona(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.text("ok"))
        await ask("hi", hub)
        request = llm.requests[-1].body
        assert request["model"] == "claude-sonnet-5"
        assert request["system"][0]["text"].startswith("# Hermes")

    async def test_a_missing_persona_file_is_refused_before_anything_is_stored(
        self, llm: FakeAnthropic, hub: ToolHub, settings, tmp_path
    ) -> None:
        settings.HERMES_SOUL_PATH = str(tmp_path / "nowhere.md")
        with pytest.raises(TurnRejected) as rejected:
            await turn_start(text="hi", actor="operator:test", origin="cli", hub=hub)
        assert rejected.value.code == "persona_missing"
        assert "HERMES_SOUL_PATH" in rejected.value.message
        assert await database_sync_to_async(AgentSession.objects.count)() == 0
