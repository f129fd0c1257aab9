"""Reading a finished Hermes turn the way a peer reads it: its final answer, status and usage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent.conversation.events import Done, Error, Event, TextDelta, ToolResult
from agent.engine.runner import TurnHandle


@dataclass(frozen=True)
class TurnAnswer:
    text: str
    status: str  # the turn's status: done, error, cancelled
    error: str = ""
    error_code: str = ""
    usage: dict[str, int] = field(default_factory=dict)


async def turn_answer(handle: TurnHandle, *, observe: Callable[[Event], Awaitable[None]] | None = None) -> TurnAnswer:
    """Wait for the turn's `done` and return what the model said after its last tool result;
    `observe` sees every event on the way (`hermes_ask`'s progress notifications).

    Preambles such as "let me check" belong to the turn, not to the answer another agent reads.
    """
    blocks: dict[int, str] = {}
    error = code = ""
    status = "error"
    usage: dict[str, int] = {}
    async for event in handle.events():
        if observe is not None:
            await observe(event)
        if isinstance(event, ToolResult):
            blocks.clear()
        elif isinstance(event, TextDelta):
            blocks[event.block] = blocks.get(event.block, "") + event.text
        elif isinstance(event, Error):
            error, code = event.message, event.code
        elif isinstance(event, Done):
            status, usage = event.status, dict(event.usage)
    text = "\n\n".join(blocks[index] for index in sorted(blocks)).strip()
    return TurnAnswer(text=text, status=status, error=error, error_code=code, usage=usage)
