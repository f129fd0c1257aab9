"""A turn's events as a Server-Sent Events byte stream.

Each engine event becomes one SSE event: `id:` its number among the turn's engine events, from 1
(its place in `TurnHandle.log`), `event:` its type, `data:` the JSON of `event.to_dict()` on one
line. The same numbers serve `GET /turns/<id>/events` (`Last-Event-ID`), which resumes a dropped
stream (see `api.turn_events`).

The stream only reads the turn (`TurnHandle.events()`); the turn runs in a task of its own. When the
client goes away, the server cancels this generator, and the turn carries on and is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from agent.conversation.events import Done, Event, TextDelta, ThinkingDelta
from agent.engine.runner import TurnHandle

# Sent at once, so the client gets the status line and headers (with the session and turn ids)
# before the model's first word, which may take seconds.
STREAM_OPENING = b": turn started\n\n"
KEEPALIVE = b": keep-alive\n\n"
# Deltas arriving this soon after the last write wait to share the next one (at most this long).
COALESCE_SECONDS = 0.02


def sse_frame(event: Event, sequence: int) -> bytes:
    return sse_frame_data(event.to_dict(), sequence)


def sse_frame_data(data: dict[str, Any], sequence: int | None) -> bytes:
    """One SSE event of `data` (its `type` names the event); without `id:` when `sequence` is None."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # JSON escapes newlines inside strings, so `payload` is one line; "replace" keeps an odd lone
    # surrogate from a model or tool from breaking the stream.
    identifier = "" if sequence is None else f"id: {sequence}\n"
    return f"{identifier}event: {data['type']}\ndata: {payload}\n\n".encode("utf-8", "replace")


async def turn_event_stream(handle: TurnHandle, *, keepalive: float, after: int = 0) -> AsyncIterator[bytes]:
    """The turn's events after the `after`-th (from its start by default), as SSE, ending after `done`.

    While the turn is silent (a slow tool) a comment goes out every `keepalive` seconds, so proxies
    that close idle connections keep the stream open.

    Writes are coalesced, not events: every event keeps its own frame and id, but text and thinking
    deltas that come within `COALESCE_SECONDS` of the last write wait (that long at most) to go out
    with the next ones. A model streaming a token every few milliseconds costs the server one socket
    write per `COALESCE_SECONDS`, not one per token; any other event (a tool call, `done`) goes out
    at once, with what waited before it.
    """
    yield STREAM_OPENING
    loop = asyncio.get_running_loop()
    batches = aiter(handle.event_batches())
    pending: asyncio.Future[list[Event]] | None = None
    sequence = 0
    held: list[bytes] = []
    written = -COALESCE_SECONDS
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(batches))
            wait = max(written + COALESCE_SECONDS - loop.time(), 0.0) if held else keepalive
            done, _ = await asyncio.wait({pending}, timeout=wait)
            if not done:
                if held:
                    yield b"".join(held)
                    held, written = [], loop.time()
                else:
                    yield KEEPALIVE
                continue
            finished, pending = pending, None
            try:
                batch = finished.result()
            except StopAsyncIteration:
                return
            for event in batch:
                sequence += 1
                if sequence > after:
                    held.append(sse_frame(event, sequence))
            urgent = not all(isinstance(event, TextDelta | ThinkingDelta) for event in batch)
            if held and (urgent or loop.time() - written >= COALESCE_SECONDS):
                yield b"".join(held)
                held, written = [], loop.time()
            if isinstance(batch[-1], Done):
                return
    finally:
        # The client left (or the stream ended): stop reading. Only the reader stops; the turn
        # runs in its own task and finishes on its own.
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
