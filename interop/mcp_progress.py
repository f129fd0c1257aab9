"""`hermes_ask`'s progress notifications: what the turn is doing, for a caller that asked.

An MCP caller that sends a `progressToken` with its `tools/call` is told each step of the turn as it
happens (MCP `notifications/progress`): each tool Hermes calls, an operator's answer to a server's
question it waits for, and when it starts writing its answer. Only the step is said, never its
text: tool arguments, results and the answer's words reach the caller once, in the answer.
The count only grows (MCP requires it) and no total is given, since a turn's length is unknown.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio

from agent.conversation.events import ElicitationEvent, Event, TextDelta, ToolResult, ToolUse

# The SDK's `report_progress(progress, total, message)`: a no-op when the caller sent no token.
ProgressReport = Callable[[float, float | None, str | None], Awaitable[None]]


class TurnProgress:
    """Called with each event of a turn; reports the steps a caller would want to see."""

    def __init__(self, report: ProgressReport) -> None:
        self._report = report
        self._count = 0
        self._writing = False

    async def __call__(self, event: Event) -> None:
        step = self._step(event)
        if step is None:
            return
        self._count += 1
        # A caller that went away cannot be told; its turn goes on to its answer (or its cancel).
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._report(self._count, None, step)

    def _step(self, event: Event) -> str | None:
        if isinstance(event, ToolUse):
            self._writing = False
            return f"Hermes is calling {event.name}"
        if isinstance(event, ToolResult):
            self._writing = False
        elif isinstance(event, ElicitationEvent) and event.status == "pending":
            return f"Hermes is waiting for its operator to answer a question from {event.server}"
        elif isinstance(event, TextDelta) and not self._writing:
            self._writing = True
            return "Hermes is writing its answer"
        return None
