"""A turn's events as a Server-Sent Events byte stream.

Each engine event becomes one SSE event: `id:` its number among the turn's engine events, from 1
(its place in `TurnHandle.log`), `event:` its type, `data:` the JSON of `event.to_dict()` on one
line. The same numbers serve `GET /turns/<id>/events` (`Last-Event-ID`), which resumes a dropped
stream (see `agent.api.turn_events`).

The stream only reads the turn (`TurnHandle.events()`); the turn runs in a task of its own. When the
client goes away, the server cancels this generator, and the turn carries on and is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from agent.engine.events import Event
from agent.engine.runner import TurnHandle

# Sent at once, so the client gets the status line and headers (with the session and turn ids)
# before the model's first word, which may take seconds.
STREAM_OPENING = b": turn started\n\n"
KEEPALIVE = b": keep-alive\n\n"


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
    """
    yield STREAM_OPENING
    events = aiter(handle.events())
    pending: asyncio.Future[Event] | None = None
    sequence = 0
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=keepalive)
            if not done:
                yield KEEPALIVE
                continue
            finished, pending = pending, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            sequence += 1
            if sequence > after:
                yield sse_frame(event, sequence)
    finally:
        # The client left (or the stream ended): stop reading. Only the reader stops; the turn
        # runs in its own task and finishes on its own.
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
