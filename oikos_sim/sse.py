"""``GET /api/v1/events``: the event bus as Server-Sent Events, resumable with ``Last-Event-ID``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from oikos_sim.events import Event, EventBus


def sse_format(event: Event) -> bytes:
    data = json.dumps(event.as_dict(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n".encode()


def _last_event_id(request: Request) -> int | None:
    """The id to resume after: the ``Last-Event-ID`` header, else ``?last_event_id=``; 0 = from the start."""
    raw = request.headers.get("last-event-id") or request.query_params.get("last_event_id") or "0"
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def events_endpoint(bus: EventBus, *, heartbeat_seconds: float) -> Callable[[Request], Awaitable[Response]]:
    async def events(request: Request) -> Response:
        last_id = _last_event_id(request)
        if last_id is None:
            return JSONResponse(
                {"error": "invalid_request", "message": "Last-Event-ID must be a non-negative integer."},
                status_code=400,
            )

        async def stream() -> AsyncIterator[bytes]:
            sent = last_id
            # Subscribe before reading the backlog, so nothing published in between is missed.
            with bus.subscribe() as subscription:
                # A comment, not a retry field: some clients turn a field-only block into an empty event.
                yield f": connected, resuming after id {sent}\n\n".encode()
                while not bus.closed:
                    for event in bus.after(sent):
                        yield sse_format(event)
                        sent = event.id
                    if not await subscription.wait(heartbeat_seconds):
                        yield b": heartbeat\n\n"

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return events
