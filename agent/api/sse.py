"""A turn's events as a Server-Sent Events byte stream.

Each engine event becomes one SSE event: `id:` its sequence number in the turn (a gap means
something was lost), `event:` its type, `data:` the JSON of `event.to_dict()` on one line.

The stream only reads the turn (`TurnHandle.events()`); the turn runs in a task of its own. When the
client goes away, the server cancels this generator, and the turn carries on and is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from agent.engine.events import Event
from agent.engine.runner import TurnHandle

# Sent at once, so the client gets the status line and headers (with the session and turn ids)
# before the model's first word, which may take seconds.
STREAM_OPENING = b": turn started\n\n"
KEEPALIVE = b": keep-alive\n\n"


def sse_frame(event: Event, sequence: int) -> bytes:
    data = json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":"))
    # JSON escapes newlines inside strings, so `data` is one line; "replace" keeps an odd lone
    # surrogate from a model or tool from breaking the stream.
    return f"id: {sequence}\nevent: {event.type}\ndata: {data}\n\n".encode("utf-8", "replace")


async def turn_event_stream(handle: TurnHandle, *, keepalive: float) -> AsyncIterator[bytes]:
    """The turn's events from its start, as SSE, ending after `done`.

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
            yield sse_frame(event, sequence)
    finally:
        # The client left (or the stream ended): stop reading. Only the reader stops; the turn
        # runs in its own task and finishes on its own.
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await pending
