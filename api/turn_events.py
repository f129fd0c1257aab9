"""`GET /turns/<id>/events`: pick a turn's event stream up again after a dropped `/chat`.

An event's SSE `id` is its number among the turn's engine events, from 1, on both routes. This one
sends those after `Last-Event-ID` (or `?after=N`), then follows the rest live until `done`: from the
turn's handle in this process, through the channel layer from another, or the stored outcome once it
ended (docs/architecture.md, "The live protocol", "Resuming a stream").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse

from agent import presence, selectors
from agent.broadcast import session_group, turns_interrupted_publish
from agent.conversation.events import WIRE_ONLY, Done, Event, event_from_dict
from agent.engine import runner
from agent.live import turn_registry
from agent.models import Turn
from api.bodies import turn_id_parse
from api.errors import ApiError, api_view
from api.operator import request_actor
from api.sse import KEEPALIVE, STREAM_OPENING, sse_frame, sse_frame_data, turn_event_stream
from common.layers import task_cancel

logger = logging.getLogger(__name__)

# How many live messages a follower holds while it waits for the owner's replay.
HELD_LIMIT = 10_000


@api_view("GET")
async def turn_events(request: HttpRequest, turn_id: str) -> StreamingHttpResponse:
    """The turn's events after the client's last one, then live until `done` (see the module docstring)."""
    request_actor(request)
    parsed = turn_id_parse(turn_id)
    after = _after(request)
    # A turn whose process is gone would never finish: it is ended as interrupted instead.
    await turns_interrupted_publish(
        await database_sync_to_async(presence.turns_interrupt_orphaned)(running=runner.running)
    )
    turn = await database_sync_to_async(selectors.turn_status)(turn_id=parsed)
    if turn is None:
        raise ApiError(404, "turn_not_found", f"There is no turn with id {parsed}.")
    keepalive = settings.HERMES_SSE_KEEPALIVE
    live = turn_registry().turns.get(str(parsed))
    stream: AsyncIterator[bytes]
    if live is not None:
        stream = turn_event_stream(live.handle, keepalive=keepalive, after=after)
    elif turn.status == Turn.Status.RUNNING:
        stream = _followed_elsewhere(turn_id=parsed, session_id=turn.session_id, after=after, keepalive=keepalive)
    else:
        stream = _finished(turn_id=parsed)
    response = StreamingHttpResponse(stream, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Hermes-Session"] = str(turn.session_id)
    response["X-Hermes-Turn"] = str(parsed)
    return response


def _after(request: HttpRequest) -> int:
    """The number of the last event the client has: `Last-Event-ID`, else `?after`, else 0."""
    header = request.headers.get("Last-Event-ID")
    if header is not None and header.strip():
        return _event_number(header.strip(), code="invalid_last_event_id", name="Last-Event-ID")
    query = request.GET.get("after")
    if query is not None:
        return _event_number(query, code="invalid_after", name="after")
    return 0


def _event_number(raw: str, *, code: str, name: str) -> int:
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise ApiError(400, code, f"{name} must be an event id from the turn's stream (0 or more), not {shown!r}.")
    return int(raw)


async def _finished(*, turn_id: uuid.UUID) -> AsyncIterator[bytes]:
    """The stored outcome of an ended turn: `answer`, `error` unless it ended `done`, and `done`."""
    yield STREAM_OPENING
    outcome = await database_sync_to_async(selectors.turn_outcome)(turn_id=turn_id)
    assert outcome is not None  # turns are never deleted on their own, only with their session
    for frame in _outcome_frames(turn_id, outcome):
        yield frame


def _outcome_frames(turn_id: uuid.UUID, outcome: selectors.TurnOutcome) -> list[bytes]:
    frames = [
        sse_frame_data(
            {"type": "answer", "text": "\n\n".join(outcome.answer_blocks), "blocks": outcome.answer_blocks}, None
        )
    ]
    if outcome.status != Turn.Status.DONE:
        code = outcome.stop_reason or outcome.status
        frames.append(sse_frame_data({"type": "error", "code": code, "message": outcome.error}, None))
    done = {
        "type": "done",
        "session_id": str(outcome.session_id),
        "turn_id": str(turn_id),
        "stop_reason": outcome.stop_reason,
        "iterations": outcome.iterations,
        "usage": outcome.usage,
        "cost_usd": outcome.cost_usd,
        "status": outcome.status,
    }
    frames.append(sse_frame_data(done, None))
    return frames


async def _followed_elsewhere(
    *, turn_id: uuid.UUID, session_id: uuid.UUID, after: int, keepalive: float
) -> AsyncIterator[bytes]:
    """Follow a turn another process runs, through the channel layer (see the module docstring).

    While nothing arrives for `keepalive` seconds, a comment keeps the stream open and the database
    is asked whether the turn ended; then the stored outcome closes the stream (the owner died, or
    is a process that does not publish its turns, such as `manage.py ask`). Until the owner's replay
    arrives, the request is repeated at each such pause.
    """
    layer = get_channel_layer()
    group = session_group(session_id)
    try:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
    except Exception:
        logger.exception("The channel layer failed; turn %s is followed in the database only", turn_id)
        async for frame in _awaited_in_database(turn_id=turn_id, keepalive=keepalive):
            yield frame
        return
    registry = turn_registry()
    receiving: asyncio.Task[dict[str, Any]] | None = None
    sent = after  # the number of the last engine event the client has
    replayed = False
    held: list[dict[str, Any]] = []
    try:
        yield STREAM_OPENING
        await registry.turn_replay_request(turn_id=turn_id, reply_to=channel, after=after)
        while True:
            if receiving is None:
                receiving = asyncio.create_task(layer.receive(channel))
            done, _ = await asyncio.wait({receiving}, timeout=keepalive)
            if not done:
                yield KEEPALIVE
                outcome = await database_sync_to_async(_ended)(turn_id)
                if outcome is not None:
                    for frame in _outcome_frames(turn_id, outcome):
                        yield frame
                    return
                if not replayed:
                    await registry.turn_replay_request(turn_id=turn_id, reply_to=channel, after=after)
                continue
            failure = receiving.exception()
            if failure is not None:
                # A layer hiccup (Redis restarting): wait a beat, say so to nobody but the log, go on.
                logger.warning("Following turn %s through the channel layer failed: %s", turn_id, failure)
                receiving = None
                await asyncio.sleep(keepalive)
                continue
            message, receiving = receiving.result(), None
            if message.get("turn_id") != str(turn_id):
                continue  # another turn of the session
            if message.get("type") == "turn.event" and not replayed:
                if len(held) < HELD_LIMIT:
                    held.append(message)
                continue
            if message.get("type") == "turn.replay" and not replayed:
                replayed = True
                for data in message["events"]:
                    sent += 1
                    yield sse_frame_data(data, sent)
                    if data.get("type") == "done":
                        return
                sent = max(sent, int(message["through"]))
                live = sorted(held, key=lambda held_message: int(held_message["through"]))
                held = []
            elif message.get("type") == "turn.event":
                live = [message]
            else:
                continue
            for event_message in live:
                through = int(event_message["through"])
                if through <= sent:
                    continue
                if int(event_message["first"]) > sent + 1 and _ends(event_message):
                    # An end announced without its owner (gone): what it ran is in the database only.
                    outcome = await database_sync_to_async(_ended)(turn_id)
                    if outcome is not None:
                        for frame in _outcome_frames(turn_id, outcome):
                            yield frame
                        return
                sent = through
                for event in _engine_events(event_message):
                    yield sse_frame(event, through)
                    if isinstance(event, Done):
                        return
    finally:
        if receiving is not None:
            # Not a bare cancel: redis-py can swallow the first cancellation of a blocked receive.
            await task_cancel(receiving)
        with contextlib.suppress(Exception):
            await layer.group_discard(group, channel)


async def _awaited_in_database(*, turn_id: uuid.UUID, keepalive: float) -> AsyncIterator[bytes]:
    """Keep-alives until the database says the turn ended, then its outcome (no layer to follow)."""
    yield STREAM_OPENING
    while True:
        outcome = await database_sync_to_async(_ended)(turn_id)
        if outcome is not None:
            for frame in _outcome_frames(turn_id, outcome):
                yield frame
            return
        yield KEEPALIVE
        await asyncio.sleep(keepalive)


def _engine_events(message: dict[str, Any]) -> list[Event]:
    """The engine's events a `turn.event` carries (one at most), without the registry's own."""
    events = (event_from_dict(data) for data in message["events"])
    return [event for event in events if not isinstance(event, WIRE_ONLY)]


def _ends(message: dict[str, Any]) -> bool:
    return any(data.get("type") == "done" for data in message["events"])


def _ended(turn_id: uuid.UUID) -> selectors.TurnOutcome | None:
    """The stored outcome once the turn is no longer running (interrupting it if its process died)."""
    presence.turns_interrupt_orphaned(running=runner.running)
    outcome = selectors.turn_outcome(turn_id=turn_id)
    return None if outcome is None or outcome.status == Turn.Status.RUNNING else outcome
