"""A turn as the transcript shows it: folded from live events, or read back from the database."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer
from django.utils import timezone

from agent.conversation.events import (
    Done,
    Error,
    TextDelta,
    TextEnd,
    ThinkingDelta,
    ThinkingEnd,
    ToolResult,
    ToolUse,
    TurnStart,
)
from agent.models import Activity, AgentSession, Message, Turn
from controlroom import fragments
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.channel_layers import live_turn
from tests.fakes.scripted_models import ExecutionRequester
from transcript import selectors as transcript_selectors
from transcript.view import ApprovalItem, NoticeItem, TextItem, ToolItem, TurnView, turn_view_replay

START = TurnStart(
    turn_id="0" * 8 + "-0000-0000-0000-" + "0" * 12,
    session_id="1" * 8 + "-1111-1111-1111-" + "1" * 12,
    question="q",
    actor="",
    model="",
    started_at="",
)


def test_events_fold_into_items_in_display_order() -> None:
    view = turn_view_replay(
        START,
        [
            TextDelta(block=0, text="Check"),
            TextDelta(block=0, text="ing."),
            TextEnd(block=0, text="Checking."),
            ToolUse(id="t1", name="mcp__oikos__get_entity", server="oikos", tool="get_entity", input={"slug": "a"}),
            ToolResult(tool_use_id="t1", name="x", is_error=True, content="nope", duration_ms=7),
            Done(
                session_id="s",
                turn_id="t",
                stop_reason="end_turn",
                iterations=2,
                usage={"input_tokens": 5},
                status="done",
            ),
        ],
    )
    assert [type(item) for item in view.items] == [TextItem, ToolItem]
    assert view.items[0] == TextItem(block=0, text="Checking.", done=True)
    tool = view.items[1]
    assert isinstance(tool, ToolItem) and (tool.done, tool.is_error, tool.result, tool.duration_ms) == (
        True,
        True,
        "nope",
        7,
    )
    assert (view.status, view.iterations, view.usage) == ("done", 2, {"input_tokens": 5})


def test_the_full_text_of_a_finished_block_repairs_a_lost_delta() -> None:
    view = TurnView(turn_id="t", session_id="s", question="q")
    view.apply(TextDelta(block=0, text="Hel"))
    # "lo, " was lost on the way.
    view.apply(TextDelta(block=0, text="world"))
    changes = view.apply(TextEnd(block=0, text="Hello, world"))
    assert view.items == [TextItem(block=0, text="Hello, world", done=True)]
    assert [change.kind for change in changes] == ["item_update"]


def test_a_cancelled_turn_keeps_its_text_rendered_and_says_so() -> None:
    view = TurnView(turn_id="t", session_id="s", question="q")
    view.apply(TextDelta(block=0, text="Half an ans"))
    view.apply(Error(code="cancelled", message="Cancelled by the operator."))
    changes = view.apply(Done(session_id="s", turn_id="t", iterations=0, status="cancelled", stop_reason="cancelled"))
    assert view.items[0] == TextItem(block=0, text="Half an ans", done=True)
    assert isinstance(view.items[1], NoticeItem) and view.items[1].code == "cancelled"
    assert [change.kind for change in changes] == ["item_update", "finished"]
    assert not view.running


@pytest.mark.django_db(transaction=True)
async def test_a_stored_turn_reads_back_with_its_chips_and_the_parked_approval(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    handle = await live_turn("deploy jellyfin")
    await handle.wait()

    [view] = await _views(handle.session_id)

    assert (view.question, view.status, view.asked_by) == ("deploy jellyfin", "done", "operator:test")
    tool, approval, answer = view.items
    assert isinstance(tool, ToolItem) and (tool.server, tool.tool, tool.done) == ("oikos", "request_execution", True)
    assert tool.input["target"] == "service:jellyfin" and '"needs_approval": true' in tool.result.replace(
        ":true", ": true"
    )
    assert isinstance(approval, ApprovalItem) and approval.pending and approval.action == "deploy"
    assert isinstance(answer, TextItem) and "waiting for an operator" in answer.text
    assert view.usage["output_tokens"] > 0


@pytest.mark.django_db(transaction=True)
async def test_a_running_turn_whose_process_died_reads_as_interrupted(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    llm.enqueue(Reply.text("ok"))
    handle = await live_turn("hello")
    await handle.wait()
    stale = timezone.now() - datetime.timedelta(hours=1)
    await Turn.objects.filter(pk=handle.turn_id).aupdate(status="running", heartbeat_at=stale, finished_at=None)

    [view] = await _views(handle.session_id)

    assert view.status == "interrupted"
    assert isinstance(view.items[-1], NoticeItem) and view.items[-1].code == "interrupted"


async def _views(session_id: object) -> list[TurnView]:
    return await database_sync_to_async(transcript_selectors.session_turn_views)(session_id=session_id)


@pytest.mark.parametrize(
    ("actor", "shown"),
    [("operator:alice", "alice"), ("peer:garra", "garra (peer agent)"), ("", "You")],
)
def test_each_question_names_who_asked_it(actor: str, shown: str) -> None:
    view = turn_view_replay(dataclasses.replace(START, actor=actor), [])
    assert view.asked_by == actor
    assert f'<span class="speaker">{shown}</span>' in fragments.turn_html(view, {})


def test_a_call_cut_off_in_flight_shows_outcome_unknown_not_failed() -> None:
    view = turn_view_replay(
        START,
        [
            ToolUse(
                id="t1",
                name="mcp__oikos__request_execution",
                server="oikos",
                tool="request_execution",
                input={"target": "service:caddy", "action": "restart"},
            ),
            ToolResult(
                tool_use_id="t1",
                name="",
                is_error=True,
                state="unknown",
                duration_ms=900,
                content="Outcome unknown: cancelled by the operator while the call was in flight. It may have run.",
            ),
        ],
    )

    html = fragments.turn_html(view, {})

    assert 'class="chip chip-unknown"' in html and "chip-error" not in html
    assert "outcome unknown · may have run" in html
    assert "it may have run. Check before retrying it." in html


def test_a_plain_error_still_shows_as_an_error() -> None:
    view = turn_view_replay(
        START,
        [
            ToolUse(id="t1", name="mcp__oikos__fail", server="oikos", tool="fail", input={}),
            ToolResult(tool_use_id="t1", name="", is_error=True, state="error", content="no", duration_ms=0),
        ],
    )
    html = fragments.turn_html(view, {})
    assert 'class="chip chip-error"' in html and "outcome unknown" not in html


@pytest.mark.django_db(transaction=True)
async def test_a_started_row_of_a_turn_that_ended_reads_as_outcome_unknown() -> None:
    @database_sync_to_async
    def crashed() -> object:
        session = AgentSession.objects.create(actor="operator:test")
        turn = Turn.objects.create(session=session, actor="operator:test", status="interrupted")
        Message.objects.create(session=session, turn=turn, role="user", content=[{"type": "text", "text": "go"}])
        block = {"type": "tool_use", "id": "toolu_1", "name": "mcp__oikos__request_execution", "input": {}}
        Message.objects.create(session=session, turn=turn, role="assistant", content=[block])
        Activity.objects.create(
            correlation_id=turn.pk,
            session=session,
            actor="operator:test",
            tool_use_id="toolu_1",
            server="oikos",
            tool="request_execution",
            state="started",
            started_at=timezone.now(),
        )
        return session.pk

    [view] = await _views(await crashed())

    tool = view.items[0]
    assert isinstance(tool, ToolItem) and tool.state == "unknown"
    assert 'class="chip chip-unknown"' in fragments.turn_html(view, {})


class TestThinking:
    def test_thinking_streams_into_a_collapsed_element_before_the_answer(self) -> None:
        view = turn_view_replay(dataclasses.replace(START, model="claude-opus-5"), [])
        first = view.apply(ThinkingDelta(block=0, text="Health <first>", redacted=False))
        more = view.apply(ThinkingDelta(block=0, text=", then deps.", redacted=False))
        # The full text matches what streamed: nothing is redrawn (an element opened stays open).
        assert view.apply(ThinkingEnd(block=0, text="Health <first>, then deps.")) == []
        view.apply(ThinkingEnd(block=1, text="", redacted=True))
        view.apply(TextDelta(block=0, text="All good."))

        assert [item.kind for item in view.items] == ["thinking", "thinking", "text"]
        html = fragments.turn_changes(view, first, {})
        assert "<details" in html and " open" not in html and "Health &lt;first&gt;" in html
        assert "&lt;first&gt;" not in fragments.turn_changes(view, more, {})
        assert fragments.turn_changes(view, more, {}).count(", then deps.") == 1
        redacted = fragments.item_html(view, view.items[1], {})
        assert "redacted" in redacted
        assert "claude-opus-5" in fragments.turn_html(view, {})

    @pytest.mark.django_db
    def test_stored_thinking_is_shown_from_the_database(self) -> None:
        session = AgentSession.objects.create(actor="operator:alice")
        turn = Turn.objects.create(session=session, actor="operator:alice", status="done", model="claude-haiku-4-5")
        Message.objects.create(session=session, turn=turn, role="user", content=[{"type": "text", "text": "q"}])
        Message.objects.create(
            session=session,
            turn=turn,
            role="assistant",
            content=[
                {"type": "thinking", "thinking": "Short plan.", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "ZGF0YQ=="},
                {"type": "text", "text": "Done."},
            ],
        )

        view = transcript_selectors.turn_view(turn_id=turn.id)

        assert view is not None and view.model == "claude-haiku-4-5"
        assert [(item.kind, getattr(item, "text", "")) for item in view.items] == [
            ("thinking", "Short plan."),
            ("thinking", ""),
            ("text", "Done."),
        ]
        html = fragments.turn_html(view, {})
        assert "Short plan." in html and "c2ln" not in html and "ZGF0YQ" not in html
