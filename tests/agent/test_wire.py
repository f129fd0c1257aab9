"""The pump's coalescing, without a layer: what a turn's engine events become on the wire."""

from __future__ import annotations

from agent.conversation.events import (
    Done,
    TextDelta,
    TextEnd,
    ThinkingDelta,
    ThinkingEnd,
    ToolResult,
    ToolUse,
    event_from_dict,
)
from agent.wire import Coalescer, Published

DONE = Done(session_id="s", turn_id="t", stop_reason="end_turn", iterations=1)
TOOL = ToolUse(id="tu1", name="health", server="oikos", tool="health_summary", input={})


def test_deltas_wait_for_a_flush_and_go_out_merged_under_the_number_of_the_last() -> None:
    coalescer = Coalescer()
    assert coalescer.add(TextDelta(text="Hel")) == []
    assert coalescer.add(TextDelta(text="lo")) == []
    assert coalescer.holding

    assert coalescer.flush() == [Published(first=1, through=2, events=(TextDelta(text="Hello"),))]
    assert not coalescer.holding and coalescer.flush() == []


def test_a_block_s_full_text_rides_on_the_next_message_so_the_numbering_has_no_holes() -> None:
    coalescer = Coalescer()
    coalescer.add(TextDelta(text="Checking"))
    assert coalescer.flush() == [Published(first=1, through=1, events=(TextDelta(text="Checking"),))]
    coalescer.add(TextDelta(text="."))

    published = coalescer.add(TOOL)

    assert published == [
        Published(first=2, through=2, events=(TextDelta(text="."),)),
        Published(first=3, through=3, events=(TextEnd(text="Checking."), TOOL)),
    ]


def test_a_new_block_ends_the_last_and_thinking_keeps_its_redaction() -> None:
    coalescer = Coalescer()
    coalescer.add(ThinkingDelta(text="", block=0, redacted=True))
    assert coalescer.add(TextDelta(text="Fine.", block=0)) == []

    published = [*coalescer.flush(), *coalescer.add(DONE)]

    assert published == [
        Published(
            first=1, through=2, events=(ThinkingEnd(text="", block=0, redacted=True), TextDelta(text="Fine.", block=0))
        ),
        Published(first=3, through=3, events=(TextEnd(text="Fine.", block=0), DONE)),
    ]


def test_other_events_go_out_at_once_each_with_its_own_number() -> None:
    coalescer = Coalescer()
    result = ToolResult(tool_use_id="tu1", name="health", is_error=False, content="ok", duration_ms=3)

    assert coalescer.add(TOOL) == [Published(first=1, through=1, events=(TOOL,))]
    assert coalescer.add(result) == [Published(first=2, through=2, events=(result,))]


def test_every_event_comes_back_typed_from_its_dict() -> None:
    for event in (TOOL, DONE, TextEnd(text="a", block=2), ThinkingEnd(text="b", redacted=True)):
        assert event_from_dict(event.to_dict()) == event
