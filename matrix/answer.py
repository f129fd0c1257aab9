"""One turn's answer in one Matrix message, edited while the turn runs.

The message is posted in the thread as soon as the turn starts ("…"), then edited (`m.replace`)
with the tool lines and the text so far — at most once per `HERMES_MATRIX_EDIT_SECONDS`, and
never while the homeserver says to wait (`RoomSender`). Edits carry the newest state, so a slow
or rate-limited homeserver sees fewer edits, never a lost piece: the last edit, sent when the
turn is done, is the whole answer rendered as sanitised HTML with a plain-text body.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from agent.conversation.events import Approval, Done, Error, Event, TextDelta, ToolResult, ToolUse
from agent.engine.runner import TurnHandle
from matrix.render import ToolLine, answer_content, edit_content, in_thread
from matrix.sender import RoomSender
from matrix.services import ThreadRef

OnApproval = Callable[[Approval, dict[str, Any]], Awaitable[None]]


class AnswerStream:
    def __init__(
        self, *, sender: RoomSender, thread: ThreadRef, reply_to: str, edit_seconds: float, on_approval: OnApproval
    ) -> None:
        self.sender = sender
        self.thread = thread
        self.reply_to = reply_to
        self.edit_seconds = edit_seconds
        self.on_approval = on_approval
        self.event_id = ""
        self.blocks: dict[int, str] = {}
        self.tools: dict[str, ToolLine] = {}
        self.calls: dict[str, ToolUse] = {}
        self.note = ""
        self._changed = asyncio.Event()
        self._finished = asyncio.Event()

    def content(self, *, final: bool) -> dict[str, Any]:
        text = "\n\n".join(self.blocks[index] for index in sorted(self.blocks))
        return answer_content(text=text, tools=list(self.tools.values()), note=self.note, final=final)

    async def follow(self, handle: TurnHandle) -> None:
        """Post the answer message, edit it as events come, and end with the complete answer."""
        room = self.thread.room_id
        self.event_id = await self.sender.send(
            room,
            lambda: in_thread(
                self.content(final=False), root_event_id=self.thread.root_event_id, reply_to=self.reply_to
            ),
        )
        writer = asyncio.ensure_future(self._edits())
        try:
            async for event in handle.events():
                await self._apply(event)
                self._changed.set()
        finally:
            self._finished.set()
            self._changed.set()
            # The writer ends after the edit it is sending (one cut mid-request could land after the final one).
            await asyncio.shield(writer)
            await asyncio.shield(self.sender.send(room, lambda: edit_content(self.event_id, self.content(final=True))))

    async def _edits(self) -> None:
        while True:
            await self._changed.wait()
            if self._finished.is_set():
                return
            self._changed.clear()
            await self.sender.send(self.thread.room_id, lambda: edit_content(self.event_id, self.content(final=False)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finished.wait(), self.edit_seconds)

    async def _apply(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.blocks[event.block] = self.blocks.get(event.block, "") + event.text
        elif isinstance(event, ToolUse):
            self.calls[event.id] = event
            self.tools[event.id] = ToolLine(server=event.server, tool=event.tool or event.name)
        elif isinstance(event, ToolResult):
            line = self.tools.setdefault(event.tool_use_id, ToolLine(server="", tool=event.name))
            line.duration_ms = event.duration_ms
            line.state = "unknown" if event.state == "unknown" else ("failed" if event.is_error else "ok")
        elif isinstance(event, Approval):
            call = self.calls.get(event.tool_use_id)
            await self.on_approval(event, call.input if call else {})
        elif isinstance(event, Error):
            self.note = "⏹ Stopped." if event.code == "cancelled" else f"⚠️ {event.message}"
        elif isinstance(event, Done) and event.status == "cancelled" and not self.note:
            self.note = "⏹ Stopped."
