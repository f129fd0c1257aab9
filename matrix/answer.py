"""One turn's answer in a Matrix thread: live progress while it runs, then the answer as a new message.

Phones notify for new messages, never for edits (stock push rules, `.m.rule.suppress_edits`): an
answer edited into a placeholder would notify with the placeholder. So:

- a turn that ends within `quiet_seconds` gets one message, the final answer (nothing to watch);
- a longer turn gets a progress message after `quiet_seconds`: an `m.notice` (which stock push rules
  never notify), edited (`m.replace`) with the text so far and the tool lines — at most once per
  `HERMES_MATRIX_EDIT_SECONDS`, and never while the homeserver says to wait (`RoomSender`). Edits
  carry the newest state, so a slow or rate-limited homeserver sees fewer edits, never a lost piece.

Either way the turn ends with the final answer posted as a new `m.text` in the thread, mentioning
the operator who asked: the event that notifies, its body starting with the answer. The progress
message is then edited to point at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agent.conversation.events import Approval, Done, Error, Event, TextDelta, ToolResult, ToolUse
from agent.engine.runner import TurnHandle
from matrix.render import ToolLine, answer_content, answered_below_content, edit_content, in_thread
from matrix.sender import MatrixSendError, RoomSender
from matrix.services import ThreadRef

logger = logging.getLogger(__name__)

OnApproval = Callable[[Approval, dict[str, Any]], Awaitable[None]]
# A turn that ends within this gets no progress message, only its answer.
QUIET_SECONDS = 3.0


class AnswerStream:
    def __init__(
        self,
        *,
        sender: RoomSender,
        thread: ThreadRef,
        reply_to: str,
        asker: str,
        edit_seconds: float,
        on_approval: OnApproval,
        quiet_seconds: float = QUIET_SECONDS,
    ) -> None:
        self.sender = sender
        self.thread = thread
        self.reply_to = reply_to
        # The Matrix user who asked: the final answer mentions them.
        self.asker = asker
        self.edit_seconds = edit_seconds
        self.quiet_seconds = quiet_seconds
        self.on_approval = on_approval
        # The progress message ("" while there is none).
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
        """Follow the turn (with a progress message if it runs long), then post the complete answer."""
        room = self.thread.room_id
        progress = asyncio.ensure_future(self._progress())
        try:
            async for event in handle.events():
                await self._apply(event)
                self._changed.set()
        finally:
            self._finished.set()
            self._changed.set()
            # The progress writer ends after the send it is making (one cut mid-request could land after the answer).
            await asyncio.shield(progress)
            await asyncio.shield(
                self.sender.send(
                    room,
                    lambda: in_thread(
                        self.content(final=True),
                        root_event_id=self.thread.root_event_id,
                        reply_to=self.reply_to,
                        mention=self.asker,
                    ),
                )
            )
            if self.event_id:
                pointer = edit_content(self.event_id, answered_below_content())
                await asyncio.shield(self.sender.send(room, functools.partial(dict, pointer)))

    async def _progress(self) -> None:
        """After `quiet_seconds` of a turn still running: post the progress message and keep it edited."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._finished.wait(), self.quiet_seconds)
        if self._finished.is_set():
            return
        self._changed.clear()
        try:
            self.event_id = await self.sender.send(
                self.thread.room_id,
                lambda: in_thread(
                    self.content(final=False), root_event_id=self.thread.root_event_id, reply_to=self.reply_to
                ),
            )
            await self._edits()
        except MatrixSendError as exc:
            # The answer is still posted at the end; only the live view is lost.
            logger.warning("The progress message in %s could not be sent: %s", self.thread.room_id, exc)

    async def _edits(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finished.wait(), self.edit_seconds)
            await self._changed.wait()
            if self._finished.is_set():
                return
            self._changed.clear()
            await self.sender.send(self.thread.room_id, lambda: edit_content(self.event_id, self.content(final=False)))

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
