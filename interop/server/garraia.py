"""GarraIA's A2A dialect, server side, exactly as GarraIA's client expects it.

- `GET /.well-known/agent.json` → `{name, url, version, description, capabilities{streaming,
  pushNotifications}, skills[{id, name, description, tags}]}`;
- `POST /a2a/tasks {id?, message{role, parts[{"type":"text","text"}]}, metadata?}` → answered
  synchronously with `{id, status, messages[user, agent], artifacts[{name:"response", parts,
  index:0}], metadata}`; posting the same `id` again continues the conversation, even after
  `completed`. A turn that fails is HTTP 502 (504 when it ran out of time) and one cancelled is
  409, each `{error, ...the task}`: GarraIA's client takes any 200's last agent message as the
  answer, and would hand "Hermes could not answer" to its model as one;
- `GET /a2a/tasks/<id>` (404 unknown) and `POST /a2a/tasks/<id>/cancel` (404 unknown, 409 finished).

`status` is only ever `submitted`, `working`, `completed`, `failed` or `canceled`.

GarraIA's client waits for the answer on the `POST` itself, so that connection is the caller: when
it goes away (the client gave up, was killed, timed out) the turn is cancelled, as a cancel would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interop.selectors import ExchangeView, inbound_last_exchange
from interop.server.auth import PEER_SCOPE_KEY
from interop.server.card import card_base_url, card_response, garraia_card
from interop.server.conversation import (
    PEER_CANCEL_REASON,
    ConversationRefused,
    InboundRejected,
    inbound_cancel,
    inbound_turn,
)

DIALECT = "garraia"
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
STATUS_OF = {"working": "working", "completed": "completed", "canceled": "canceled"}
REFUSAL_STATUS = {"closed": 409, "turn_cap": 409, "busy": 409, "rate_limited": 429}
REJECTION_STATUS = {"invalid_message": 400, "message_too_large": 413, "budget_exhausted": 429, "rate_limited": 429}

T = TypeVar("T")


def _error(status: int, message: str, *, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _text_parts(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def task_json(task_id: str, view: ExchangeView) -> dict[str, Any]:
    """A task as GarraIA's client reads it: the reply is the last `messages` entry with role agent."""
    status = STATUS_OF.get(view.state, "failed")
    messages: list[dict[str, Any]] = [{"role": "user", "parts": _text_parts(view.message)}]
    artifacts: list[dict[str, Any]] = []
    if status == "completed":
        messages.append({"role": "agent", "parts": _text_parts(view.reply)})
        artifacts.append({"name": "response", "parts": _text_parts(view.reply), "index": 0})
    elif status in ("failed", "canceled"):
        why = view.error or ("cancelled" if status == "canceled" else "no answer")
        messages.append({"role": "agent", "parts": _text_parts(f"Hermes could not answer: {why}")})
    metadata = {"hermes_session_id": str(view.session_id) if view.session_id else None, "turns": view.turns}
    return {"id": task_id, "status": status, "messages": messages, "artifacts": artifacts, "metadata": metadata}


async def agent_card(request: Request) -> Response:
    base_url = card_base_url(request)
    if base_url is None:
        return _error(400, "this host name is not one Hermes answers to")
    return card_response(request, garraia_card(base_url))


async def task_create(request: Request) -> JSONResponse:
    peer: str = request.scope[PEER_SCOPE_KEY]
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "the body is not JSON")
    parsed = _task_request(body)
    if isinstance(parsed, str):
        return _error(400, parsed)
    task_id, text = parsed
    try:
        reply = await _unless_disconnected(
            request, inbound_turn(peer=peer, dialect=DIALECT, external_id=task_id, text=text)
        )
    except CallerGone:
        # Nobody reads this answer; the status is for the access log.
        return _error(499, "the client disconnected; the turn was cancelled")
    except ConversationRefused as refused:
        headers = {"Retry-After": str(refused.retry_after)} if refused.retry_after else None
        return _error(REFUSAL_STATUS.get(refused.code, 409), refused.message, headers=headers)
    except InboundRejected as rejected:
        headers = {"Retry-After": str(rejected.retry_after)} if rejected.retry_after else None
        return _error(REJECTION_STATUS.get(rejected.code, 503), rejected.message, headers=headers)
    view = await _task_view(request, task_id)
    assert view is not None
    task = task_json(task_id, view)
    if reply.state == "completed":
        return JSONResponse(task)
    # GarraIA's client reads the last agent message of any 2xx answer as the answer: a turn that
    # failed or was cancelled is an error status, with GarraIA's error shape beside the task.
    status = 409 if reply.state == "canceled" else 504 if reply.error_code == "timeout" else 502
    return JSONResponse({"error": task["messages"][-1]["parts"][0]["text"], **task}, status_code=status)


class CallerGone(Exception):
    """The client closed the connection its answer was to go back on."""


async def _unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it if the client disconnects first (then raise `CallerGone`).

    Starlette does not watch the connection of a plain endpoint, and the ASGI server only reports
    the disconnect as an `http.disconnect` message: this listens for it while the turn runs.
    """
    running = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({running, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not running.done():
            # Cancelling `inbound_turn` cancels the turn and waits for it to stop.
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
    if running.cancelled():
        raise CallerGone
    return running.result()


async def _disconnect(request: Request) -> None:
    # The body was read already, so the next message is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _task_view(request: Request, task_id: str) -> ExchangeView | None:
    """The calling peer's task (its last exchange): a peer never sees another peer's tasks."""
    if not TASK_ID.match(task_id):
        # No task was ever stored under such an id (and PostgreSQL refuses a NUL in a query).
        return None
    return await database_sync_to_async(inbound_last_exchange)(
        peer=request.scope[PEER_SCOPE_KEY], dialect=DIALECT, external_id=task_id
    )


def _task_request(body: Any) -> tuple[str, str] | str:
    """(task id, message text) from a `POST /a2a/tasks` body, or what is wrong with it."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    task_id = body.get("id") or uuid.uuid4().hex
    if not isinstance(task_id, str) or not TASK_ID.match(task_id):
        return '"id" must be 1-200 letters, digits, ".", "_", ":" or "-"'
    message = body.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return '"message" must be an object with "role" and "parts"'
    if message.get("role", "user") != "user":
        return 'the message "role" must be "user"'
    texts = [
        part["text"]
        for part in message["parts"]
        if isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str)
    ]
    text = "\n".join(texts).strip()
    if not text:
        return "the message has no text part"
    if len(text) > settings.HERMES_MAX_MESSAGE_CHARS:
        return f"the message has {len(text):,} characters; the limit is {settings.HERMES_MAX_MESSAGE_CHARS:,}"
    return task_id, text


async def task_get(request: Request) -> JSONResponse:
    task_id = request.path_params["task_id"]
    view = await _task_view(request, task_id)
    if view is None:
        return _error(404, f"no task {task_id}")
    return JSONResponse(task_json(task_id, view))


async def task_cancel(request: Request) -> JSONResponse:
    task_id = request.path_params["task_id"]
    view = await _task_view(request, task_id)
    if view is None:
        return _error(404, f"no task {task_id}")
    if view.finished:
        return _error(409, f"task {task_id} already finished ({STATUS_OF.get(view.state, 'failed')})")
    if view.turn_id is None:
        return _error(409, f"task {task_id} is only starting; cancel it again in a moment")
    # Answered once the turn has stopped, so the same id takes its next message at once.
    await inbound_cancel(view.turn_id)
    cancelled = dataclasses.replace(view, state="canceled", error=PEER_CANCEL_REASON)
    return JSONResponse(task_json(task_id, cancelled))


routes = [
    Route("/.well-known/agent.json", agent_card, methods=["GET"]),
    Route("/a2a/tasks", task_create, methods=["POST"]),
    Route("/a2a/tasks/{task_id}", task_get, methods=["GET"]),
    Route("/a2a/tasks/{task_id}/cancel", task_cancel, methods=["POST"]),
]
