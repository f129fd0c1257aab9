"""Sending a scripted answer over HTTP, event by event, including the ways a stream breaks.

Each SSE event is its own body chunk, flushed as it is sent, so a reply with `delay` arrives
incrementally. A dropped connection is made by returning from the ASGI call with the body
unfinished: uvicorn then closes the socket, and the client sees an incomplete chunked body
(uvicorn logs "ASGI callable returned without completing response" for it; that line is expected).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tests.fakes.anthropic_script import Fault
from tests.fakes.anthropic_wire import SseEvent, error_event, sse_frame

_STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class ScriptedStream(Response):
    """A `text/event-stream` answer that plays `events`, then applies `fault` if any."""

    def __init__(
        self,
        events: Sequence[SseEvent],
        *,
        fault: Fault | None,
        delay: float,
        request_id: str,
        stopping: asyncio.Event,
    ) -> None:
        # Not Response.__init__: it would declare a Content-Length for the (empty) body.
        self.status_code = 200
        self.background = None
        headers = {
            **_STREAM_HEADERS,
            "content-type": "text/event-stream; charset=utf-8",
            "request-id": request_id,
        }
        self.raw_headers = [(name.encode(), value.encode()) for name, value in headers.items()]
        self.events = list(events)
        self.fault = fault
        self.delay = delay
        self.stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        fault = self.fault
        events = self.events
        if fault is not None and fault.kind == "truncated":
            events = [event for event in events if event[0] not in ("message_delta", "message_stop")]
        elif fault is not None:
            events = events[: fault.after_events]
        for position, event in enumerate(events):
            if position and self.delay and await _stopped_within(self.stopping, self.delay):
                return  # the fake is stopping: close the connection mid-stream
            await send({"type": "http.response.body", "body": sse_frame(event), "more_body": True})
        if fault is not None and fault.kind == "drop":
            return
        if fault is not None and fault.kind == "stall":
            await _hang_until_client_leaves(receive, self.stopping)
            return
        if fault is not None and fault.kind == "pings":
            await _ping_until_client_leaves(send, receive, self.stopping, interval=fault.interval)
            return
        if fault is not None and fault.kind == "stream_error" and fault.error is not None:
            frame = sse_frame(error_event(fault.error.type, fault.error.message))
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class TruncatedBody(Response):
    """A non-streaming answer whose connection drops halfway through or stalls before it."""

    def __init__(self, payload: bytes, *, fault: Fault, request_id: str, stopping: asyncio.Event) -> None:
        super().__init__(payload, media_type="application/json", headers={"request-id": request_id})
        self.fault = fault
        self.stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.fault.kind == "stall":
            await _hang_until_client_leaves(receive, self.stopping)
            return
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2], "more_body": True})


async def _stopped_within(stopping: asyncio.Event, seconds: float) -> bool:
    """Pause `seconds`; True when the fake began stopping meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), timeout=seconds)
    return stopping.is_set()


async def _ping_until_client_leaves(send: Send, receive: Receive, stopping: asyncio.Event, *, interval: float) -> None:
    async def pinging() -> None:
        frame = sse_frame(("ping", {"type": "ping"}))
        while not await _stopped_within(stopping, interval):
            await send({"type": "http.response.body", "body": frame, "more_body": True})

    pinger = asyncio.ensure_future(pinging())
    try:
        await _hang_until_client_leaves(receive, stopping)
    finally:
        pinger.cancel()
        with contextlib.suppress(asyncio.CancelledError, OSError):
            await pinger


async def _hang_until_client_leaves(receive: Receive, stopping: asyncio.Event) -> None:
    async def client_left() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    waiters = [asyncio.ensure_future(client_left()), asyncio.ensure_future(stopping.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
