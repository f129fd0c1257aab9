"""A2A 1.0, client side, through the official `a2a-sdk` client (which runs on classic httpx).

A thread is an A2A `contextId`: each message opens a new task in it, except when the last task waits
for input (`input-required`), which is continued by its own id.

A peer may answer before its task is done (a task still `working`): the task is then followed to a
state where the peer has said its piece — terminal, or waiting for input or authentication — within
the peer's `timeout`: streamed when its card says `streaming` (the message is sent with
`SendStreamingMessage`, and a stream that ends early is resumed with `SubscribeToTask`), else
polled with `GetTask`, backing off from `POLL_FIRST_SECONDS` to `POLL_MAX_SECONDS`. When the time
runs out the error names the task, which may still be running on the peer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
from a2a.client import A2AClientError, A2AClientTimeoutError, Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError

from interop.client.guard import GuardedTransport, PeerPolicy
from interop.client.reply import PeerCallError, RemoteReply
from interop.peers import Peer

POLL_FIRST_SECONDS = 0.5
POLL_MAX_SECONDS = 5.0
# States in which the peer has said what it will say for this message.
SETTLED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)
# States whose text is the status message (the question, or why it ended), not the artifacts.
SAID_IN_STATUS = frozenset(
    {
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def a2a_http_client(peer: Peer, policy: PeerPolicy) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {peer.token}"} if peer.token else {}
    return httpx.AsyncClient(
        transport=GuardedTransport(policy),
        headers=headers,
        timeout=httpx.Timeout(peer.timeout, connect=min(peer.timeout, 10.0)),
        follow_redirects=False,
    )


async def a2a_send(
    peer: Peer, policy: PeerPolicy, *, message: str, thread_id: str | None, waiting_task_id: str | None
) -> RemoteReply:
    """Send `message` in the thread `thread_id` (a new thread when None) and follow its task."""
    request = SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=message)],
            context_id=thread_id or "",
            task_id=waiting_task_id or "",
        )
    )
    follower = TaskFollower()
    async with a2a_http_client(peer, policy) as http:
        try:
            async with asyncio.timeout(peer.timeout):
                card = await A2ACardResolver(http, peer.url).get_agent_card()
                streaming = card.capabilities.streaming
                client = _client(http, card, streaming=streaming)
                await follower.read(client.send_message(request))
                if not follower.settled and follower.task_id and streaming:
                    await _resubscribe(client, follower)
                delay = POLL_FIRST_SECONDS
                while not follower.settled and follower.task_id:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, POLL_MAX_SECONDS)
                    follower.task_take(await client.get_task(GetTaskRequest(id=follower.task_id)))
        except (TimeoutError, A2AClientTimeoutError):
            raise PeerCallError("timeout", _timeout_message(peer, follower.task_id)) from None
        except (A2AClientError, A2AError) as exc:
            raise PeerCallError("protocol", f"{peer.name}: {_a2a_error(exc)}") from None
        except ValueError as exc:  # the card offers no transport this client speaks
            raise PeerCallError("protocol", f"{peer.name}: {exc}") from None
    reply = follower.reply(thread_id)
    if reply is None:
        raise PeerCallError("protocol", f"{peer.name} answered nothing")
    return reply


async def _resubscribe(client: Client, follower: TaskFollower) -> None:
    """Follow a stream that ended before its task settled; a peer that will not (or a task that
    ended meanwhile, which cannot be subscribed to) leaves it to polling."""
    try:
        await follower.read(client.subscribe(SubscribeToTaskRequest(id=follower.task_id)))
    except A2AClientTimeoutError:
        raise
    except (A2AClientError, A2AError):
        return


def _client(http: httpx.AsyncClient, card: AgentCard, *, streaming: bool) -> Client:
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        supported_protocol_bindings=[TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON],
    )
    return ClientFactory(config).create(card)


def _timeout_message(peer: Peer, task_id: str) -> str:
    if task_id:
        return (
            f"{peer.name} did not finish within {peer.timeout:g} s; its task {task_id} may still be running on "
            f"{peer.name}"
        )
    return f"{peer.name} did not answer within {peer.timeout:g} s"


class TaskFollower:
    """What the peer said so far about one message: its task as streamed, polled or answered, or a
    plain message (which settles it at once)."""

    def __init__(self) -> None:
        self.task: Task | None = None
        self.message: Message | None = None

    @property
    def task_id(self) -> str:
        return self.task.id if self.task is not None else ""

    @property
    def settled(self) -> bool:
        return self.message is not None or (self.task is not None and self.task.status.state in SETTLED)

    async def read(self, responses: AsyncIterator[StreamResponse]) -> None:
        """Take responses until the task settles (or the stream ends)."""
        async for response in responses:
            self.take(response)
            if self.settled:
                return

    def take(self, response: StreamResponse) -> None:
        if response.HasField("message"):
            self.message = response.message
        elif response.HasField("task"):
            self.task_take(response.task)
        elif response.HasField("status_update"):
            status = response.status_update
            self._task_for(status.task_id, status.context_id).status.CopyFrom(status.status)
        elif response.HasField("artifact_update"):
            artifact = response.artifact_update
            _artifact_apply(self._task_for(artifact.task_id, artifact.context_id), response)

    def _task_for(self, task_id: str, context_id: str) -> Task:
        """The task an update is about. The `a2a-sdk` server streams a continued task (an answer to
        `input-required`) from its next update, without the Task first: the task is built from the
        updates then, or the peer's answer would be lost."""
        if self.task is None:
            self.task = Task(id=task_id, context_id=context_id)
        return self.task

    def task_take(self, task: Task) -> None:
        self.task = Task()
        self.task.CopyFrom(task)

    def reply(self, thread_id: str | None) -> RemoteReply | None:
        if self.message is not None:
            text = _parts_text(self.message.parts)
            context = self.message.context_id or thread_id or ""
            return RemoteReply(text=text, state="completed", thread_id=context, task_id=self.message.task_id)
        if self.task is None:
            return None
        task = self.task
        status_text = _parts_text(task.status.message.parts)
        artifacts_text = "\n".join(t for t in (_parts_text(a.parts) for a in task.artifacts) if t)
        said = (status_text, artifacts_text) if task.status.state in SAID_IN_STATUS else (artifacts_text, status_text)
        text = said[0] or said[1]
        return RemoteReply(
            text=text, state=task_state_name(task.status.state), thread_id=task.context_id, task_id=task.id
        )


def _artifact_apply(task: Task, response: StreamResponse) -> None:
    """An artifact chunk: a new artifact, a replacement, or text appended to the artifact's last part
    (a streamed answer is one text, not one part per chunk)."""
    update = response.artifact_update
    existing = next((a for a in task.artifacts if a.artifact_id == update.artifact.artifact_id), None)
    if existing is None:
        task.artifacts.append(update.artifact)
    elif not update.append:
        existing.CopyFrom(update.artifact)
    else:
        for part in update.artifact.parts:
            last = existing.parts[-1] if existing.parts else None
            if last is not None and last.HasField("text") and part.HasField("text"):
                last.text += part.text
            else:
                existing.parts.append(part)


def task_state_name(state: int) -> str:
    """`TASK_STATE_INPUT_REQUIRED` → `input_required`."""
    return TaskState.Name(state).removeprefix("TASK_STATE_").lower()


def _parts_text(parts: object) -> str:
    return "\n".join(part.text for part in parts if part.text)  # type: ignore[attr-defined]


def _a2a_error(exc: Exception) -> str:
    cause = exc.__cause__
    if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code == 401:
        return "refused Hermes's credentials (HTTP 401): check the token in the peers file"
    return str(exc) or type(exc).__name__
