"""A Hermes turn streamed into an A2A task as it is written: what `SendStreamingMessage` and
`SubscribeToTask` peers (and `message/stream`, `tasks/resubscribe` in 0.3) see before the answer.

`TaskStreamer.follow` reads the turn's own events (`TurnHandle.events()`, the same stream the
control room's pump reads — no polling of the database) and turns them into task events:
- text: `TaskArtifactUpdateEvent`s on one artifact (`response`), each appending the text written
  since the previous one (`append=true`), at most one per `CHUNK_SECONDS` — a token per event
  would mean a task write per token, as the SDK stores every event;
- each tool call: a `working` status update whose message names the tool (never its arguments);
- the text written before a tool call is a preamble ("let me check"), not the answer: the first
  chunk after a tool result replaces the artifact (`append=false`) instead of appending to it.

`finish` then replaces the artifact with the turn's answer, as non-streaming peers get it
(`last_chunk=true`): whatever was streamed, the stored task ends with one text part, the answer.

Streamed text is redacted like the answer: configured secrets become `[REDACTED]`. A secret can
arrive split across chunks, so the last `len(longest secret) - 1` characters are held back until
more text (or the end) shows they are not the start of one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState

from agent.conversation.events import Done, Event, TextDelta, ToolResult, ToolUse
from common.redaction import redact, secret_values

# At most this many artifact updates per second and task (each one is a task write).
CHUNK_SECONDS = 0.1
ARTIFACT_NAME = "response"
# What separates two text blocks of one answer (as `interop.turns.turn_answer` joins them).
BLOCK_SEPARATOR = "\n\n"


class TaskStreamer:
    """Streams one turn into one task (see the module docstring)."""

    def __init__(self, updater: TaskUpdater, *, interval: float = CHUNK_SECONDS) -> None:
        self.updater = updater
        self.interval = interval
        self.artifact_id = uuid.uuid4().hex
        longest = max((len(value) for value in secret_values()), default=0)
        self._hold = max(longest - 1, 0)
        # The text since the last tool result, as written (`_raw`) and as sent (redacted).
        self._raw = self._sent = ""
        self._block: int | None = None
        # The next chunk replaces the artifact: nothing of the current text was sent yet.
        self._fresh = True

    async def follow(self, events: AsyncIterator[Event]) -> None:
        """Stream the turn's events until its `done`; the answer itself comes with `finish`."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event] = asyncio.Queue()
        reader = asyncio.create_task(_read(events, queue))
        sent_at = -self.interval
        flush_at: float | None = None
        try:
            while True:
                timeout = None if flush_at is None else max(flush_at - loop.time(), 0.0)
                try:
                    event = await asyncio.wait_for(queue.get(), timeout)
                except TimeoutError:
                    await self._flush()
                    sent_at, flush_at = loop.time(), None
                    continue
                if isinstance(event, TextDelta):
                    self._text_add(event)
                    if flush_at is None:
                        flush_at = max(loop.time(), sent_at + self.interval)
                elif isinstance(event, ToolUse):
                    await self._flush()
                    flush_at = None
                    await self._tool_status(event)
                elif isinstance(event, ToolResult):
                    self._raw = self._sent = ""
                    self._block, self._fresh = None, True
                elif isinstance(event, Done):
                    return
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def finish(self, answer: str, *, metadata: dict[str, Any]) -> None:
        """The final chunk: the artifact becomes the answer, whole (`append=false`, `last_chunk=true`)."""
        await self.updater.add_artifact(
            [Part(text=answer)],
            artifact_id=self.artifact_id,
            name=ARTIFACT_NAME,
            metadata=metadata,
            append=False,
            last_chunk=True,
        )

    def _text_add(self, event: TextDelta) -> None:
        if self._block is not None and event.block != self._block and self._raw:
            self._raw += BLOCK_SEPARATOR
        self._block = event.block
        self._raw += event.text

    async def _flush(self) -> None:
        """Send the text written since the last chunk, but for a tail that may be a secret's start."""
        shown = redact(self._raw)
        safe = shown[: max(len(shown) - self._hold, 0)]
        if not safe.startswith(self._sent):
            # A redaction reached back into text already sent: resend the whole text instead.
            self._sent, self._fresh = "", True
        chunk = safe[len(self._sent) :]
        if not chunk.strip() and self._fresh:
            return  # nothing worth opening (or replacing) the artifact for
        if not chunk:
            return
        await self.updater.add_artifact(
            [Part(text=chunk)], artifact_id=self.artifact_id, name=ARTIFACT_NAME, append=not self._fresh
        )
        self._sent, self._fresh = safe, False

    async def _tool_status(self, event: ToolUse) -> None:
        where = f" ({event.server})" if event.server and event.server != event.tool else ""
        message = self.updater.new_agent_message([Part(text=f"Calling the tool {event.tool}{where}.")])
        await self.updater.update_status(
            TaskState.TASK_STATE_WORKING, message=message, metadata={"hermes_tool": event.tool}
        )


async def _read(events: AsyncIterator[Event], queue: asyncio.Queue[Event]) -> None:
    async for event in events:
        queue.put_nowait(event)
