"""A2A 1.0, server side, through the official `a2a-sdk`: the card, JSON-RPC (with 0.3 method names
on the same endpoint) and the HTTP+JSON binding under its own prefix.

The SDK owns the protocol — task ids, terminal tasks staying immutable, streaming — and this module
only plugs Hermes in: `HermesExecutor` runs each message as a turn of the conversation its
`contextId` names (`interop.server.conversation`), and the caller is the peer whose pairing token
`PeerAuthMiddleware` accepted, which also scopes the task store to that peer.

Several Hermes processes serve one set of tasks (the SDK's cluster mode, `interop.server.task_store`):
CancelTask on a process that does not run the task records CANCELED in the shared store, and
`HermesRequestHandler` then stops the Hermes turn behind it through the channel layer, in whichever
process runs it, and answers once it has stopped; SubscribeToTask there follows the stored task to
its end.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from typing import Any

from a2a.auth.user import User
from a2a.helpers.proto_helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import TaskUpdater
from a2a.types import CancelTaskRequest, Message, Part, Role, SendMessageRequest, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError
from channels.db import database_sync_to_async
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from common.redaction import redact
from interop.config import A2AConfig
from interop.server.auth import PEER_SCOPE_KEY
from interop.server.card import JSONRPC_PATH, REST_PREFIX, a2a_card, card_base_url, card_response
from interop.server.conversation import (
    PEER_CANCEL_REASON,
    ConversationRefused,
    InboundRejected,
    inbound_cancel,
    inbound_text,
    inbound_turn,
)
from interop.server.stream import TaskStreamer
from interop.server.task_store import (
    TASK_TURN_KEY,
    DatabaseTaskEventStream,
    DatabaseTaskStore,
    task_turn_attach,
    task_turn_id,
)

DIALECT = "a2a"


class PeerUser(User):
    """The paired peer making the request, as the SDK sees a user."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


class PeerContextBuilder(DefaultServerCallContextBuilder):
    def build_user(self, request: Request) -> User:
        return PeerUser(request.scope[PEER_SCOPE_KEY])


class HermesExecutor(AgentExecutor):
    """Each message: one Hermes turn in the conversation of its `contextId`, answered as an artifact
    streamed as it is written (`interop.server.stream`).

    The task is created only once the turn has started: a message the conversation refuses (closed,
    over its turn cap, busy, rate limited) or whose turn cannot start is answered with a plain agent
    `Message` saying why, and nothing is stored — no task, no exchange. The new task names its turn
    in its metadata, so its first write already records the turn and a cancel from any process finds
    it.
    """

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        streamer = TaskStreamer(updater)
        peer = context.call_context.user.user_name

        async def started(turn_id: uuid.UUID, session_id: uuid.UUID) -> bool:
            if context.current_task is None:
                submitted = Task(
                    id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
                )
                submitted.metadata.update({TASK_TURN_KEY: str(turn_id), "hermes_session_id": str(session_id)})
                if context.message is not None:
                    submitted.history.append(context.message)
                await event_queue.enqueue_event(submitted)
                await updater.start_work()
                return True
            # A stored task continued: from here on a cancel from any process finds the turn, and
            # one that came before is obeyed now.
            await updater.start_work()
            state = await database_sync_to_async(task_turn_attach)(task_id=task_id, turn_id=turn_id)
            return state != TaskState.Name(TaskState.TASK_STATE_CANCELED)

        try:
            reply = await inbound_turn(
                peer=peer,
                dialect=DIALECT,
                external_id=context_id,
                text=context.get_user_input(),
                on_start=started,
                follow=streamer.follow,
            )
        except (ConversationRefused, InboundRejected) as refused:
            if context.current_task is not None:
                await updater.reject(message=updater.new_agent_message([Part(text=refused.message)]))
                return
            refusal = Message(
                role=Role.ROLE_AGENT,
                message_id=uuid.uuid4().hex,
                context_id=context_id,
                parts=[Part(text=refused.message)],
            )
            refusal.metadata.update({"hermes_refused": refused.code})
            if refused.retry_after:
                # What HTTP's Retry-After says elsewhere: the SDK answers every message 200.
                refusal.metadata.update({"hermes_retry_after": refused.retry_after})
            await event_queue.enqueue_event(refusal)
            return
        metadata: dict[str, Any] = {"hermes_session_id": str(reply.session_id), "hermes_turn_id": str(reply.turn_id)}
        if reply.state == "completed":
            await streamer.finish(reply.text, metadata=metadata)
            await updater.complete(message=updater.new_agent_message([Part(text=reply.text)], metadata=metadata))
        elif reply.state == "canceled":
            why = reply.error or PEER_CANCEL_REASON
            await updater.cancel(message=updater.new_agent_message([Part(text=why)], metadata=metadata))
        else:
            text = f"Hermes could not answer: {reply.error or 'the turn failed'}"
            await updater.failed(message=updater.new_agent_message([Part(text=text)], metadata=metadata))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The SDK cancels `execute` right after this; its cancellation stops the Hermes turn.
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel(message=updater.new_agent_message([Part(text=PEER_CANCEL_REASON)]))


def message_admit(message: Message) -> None:
    """Check a peer's message before the SDK sees it, and make it what Hermes keeps.

    An empty or oversized message is `InvalidParamsError` (JSON-RPC -32602, HTTP 400) before any
    task exists. Hermes reads text parts only, so only they are kept — redacted — in the task's
    history and its echo to the peer; other parts and the message's metadata are dropped rather than
    stored (each could fill the request body limit).
    """
    try:
        inbound_text(get_message_text(message))
    except InboundRejected as rejected:
        raise InvalidParamsError(message=rejected.message) from None
    texts = [redact(part.text) for part in message.parts if part.HasField("text")]
    del message.parts[:]
    message.parts.extend(Part(text=text) for text in texts)
    message.ClearField("metadata")


class HermesRequestHandler(DefaultRequestHandler):
    """The SDK's handler, with messages checked first and a CancelTask that stops the Hermes turn
    wherever it runs.

    Every message goes through `message_admit` before the SDK stores anything. For a task this
    process runs, the SDK's cancel cancels `HermesExecutor.execute` and the turn with it. For one
    running in another process it only records CANCELED in the shared store (the owner would notice
    at its next write, when the turn is over): so the turn is stopped here through the channel
    layer, and the answer waits until it has stopped, so the context takes its next message at once.
    """

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        message_admit(params.message)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        message_admit(params.message)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        task = await super().on_cancel_task(params, context)
        turn_id = await database_sync_to_async(task_turn_id)(task_id=params.id)
        if turn_id is not None:
            await inbound_cancel(turn_id)
        return task


async def agent_card(request: Request) -> Response:
    base_url = card_base_url(request)
    if base_url is None:
        return JSONResponse({"error": "this host name is not one Hermes answers to"}, status_code=400)
    return card_response(request, agent_card_to_dict(a2a_card(base_url)))


def a2a_routes() -> list[BaseRoute]:
    """The card, JSON-RPC and HTTP+JSON routes, over one request handler and the database task store."""
    # The handler reads capabilities (streaming) from this card; the URLs in it do not matter.
    card = a2a_card(A2AConfig.from_settings().public_url or "http://localhost")
    handler = HermesRequestHandler(
        agent_executor=HermesExecutor(),
        task_store=DatabaseTaskStore(),
        agent_card=card,
        event_stream=DatabaseTaskEventStream(),
    )
    context_builder = PeerContextBuilder()
    return [
        Route("/.well-known/agent-card.json", agent_card, methods=["GET"]),
        *create_jsonrpc_routes(handler, JSONRPC_PATH, context_builder=context_builder, enable_v0_3_compat=True),
        *create_rest_routes(handler, context_builder=context_builder, enable_v0_3_compat=True, path_prefix=REST_PREFIX),
    ]


__all__ = ["HermesExecutor", "HermesRequestHandler", "a2a_routes", "message_admit"]
