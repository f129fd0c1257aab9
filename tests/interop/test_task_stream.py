"""`TaskStreamer`: a turn's events into A2A task events, on the SDK's own `TaskUpdater` and event queue."""

from __future__ import annotations

from collections.abc import AsyncIterator

from a2a.server.events import EventQueueLegacy
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent
from pytest_django.fixtures import Settings

from agent.conversation.events import Done, Event, TextDelta, ToolResult, ToolUse
from common.redaction import REDACTED
from interop.server.stream import TaskStreamer

SECRET = "oikos-token-0123456789abcdef"


async def turn(*events: Event) -> AsyncIterator[Event]:
    for event in events:
        yield event


def done() -> Done:
    return Done(session_id="s", turn_id="t", stop_reason="end_turn", iterations=1)


async def streamed(*events: Event) -> list[TaskArtifactUpdateEvent | TaskStatusUpdateEvent]:
    """What the streamer enqueues for `events`, every delta flushed on its own (interval 0)."""
    queue = EventQueueLegacy()
    streamer = TaskStreamer(TaskUpdater(queue, "task-1", "context-1"), interval=0)
    await streamer.follow(turn(*events))
    await streamer.finish("the answer", metadata={})
    sent = []
    while not queue.queue.empty():
        sent.append(await queue.dequeue_event())
    return sent


async def test_a_secret_split_across_deltas_never_leaves_in_pieces(settings: Settings) -> None:
    settings.OIKOS_MCP_TOKEN = SECRET
    tail = " and all is well: every host answered, every service is up, nothing waits for approval."
    pieces = ["Status: the token is ", SECRET[:9], SECRET[9:20], SECRET[20:]]
    pieces += [tail[i : i + 10] for i in range(0, len(tail), 10)]
    events = await streamed(*(TextDelta(text=piece) for piece in pieces), done())

    chunks = [e for e in events if isinstance(e, TaskArtifactUpdateEvent) and not e.last_chunk]
    text = "".join(chunk.artifact.parts[0].text for chunk in chunks)
    assert not any(SECRET[:9] in chunk.artifact.parts[0].text for chunk in chunks)
    whole = f"Status: the token is {REDACTED}{tail}"
    # What was streamed is the redacted text so far (the tail may still be held back), never more.
    assert text and whole.startswith(text) and REDACTED in text
    assert [c.append for c in chunks] == [False] + [True] * (len(chunks) - 1)


async def test_a_tool_call_is_a_working_status_and_the_preamble_is_replaced() -> None:
    events = await streamed(
        TextDelta(text="Let me check the fleet before answering; it takes a moment. " * 4),
        ToolUse(
            id="toolu_1", name="mcp__oikos__get_health_summary", server="oikos", tool="get_health_summary", input={}
        ),
        ToolResult(
            tool_use_id="toolu_1", name="mcp__oikos__get_health_summary", is_error=False, content="{}", duration_ms=5
        ),
        TextDelta(text="Everything is healthy. " * 10, block=1),
        done(),
    )

    kinds = [type(e).__name__ for e in events]
    # The preamble went out as it was written (the secrets' hold-back aside)...
    assert isinstance(events[0], TaskArtifactUpdateEvent) and events[0].artifact.parts[0].text.startswith("Let me")
    status = next(e for e in events if isinstance(e, TaskStatusUpdateEvent))
    assert status.status.state == TaskState.TASK_STATE_WORKING
    assert status.status.message.parts[0].text == "Calling the tool get_health_summary (oikos)."
    after_tool = [
        e for e in events[kinds.index("TaskStatusUpdateEvent") + 1 :] if isinstance(e, TaskArtifactUpdateEvent)
    ]
    # The answer's first chunk replaces the preamble; the last chunk is the whole answer.
    assert after_tool[0].append is False and after_tool[0].artifact.parts[0].text.startswith("Everything is")
    assert after_tool[-1].last_chunk and after_tool[-1].artifact.parts[0].text == "the answer"
    assert len({e.artifact.artifact_id for e in events if isinstance(e, TaskArtifactUpdateEvent)}) == 1
