"""A2A 1.0, client side, through the official `a2a-sdk` client (which runs on classic httpx).

A thread is an A2A `contextId`: each message opens a new task in it, except when the last task waits
for input (`input-required`), which is continued by its own id.
"""

from __future__ import annotations

import uuid

import httpx
from a2a.client import A2AClientError, A2AClientTimeoutError, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskState
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError

from interop.client.guard import GuardedTransport, PeerPolicy
from interop.client.reply import PeerCallError, RemoteReply
from interop.peers import Peer


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
    """Send `message` in the thread `thread_id` (a new thread when None)."""
    request = SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            parts=[Part(text=message)],
            context_id=thread_id or "",
            task_id=waiting_task_id or "",
        )
    )
    async with a2a_http_client(peer, policy) as http:
        config = ClientConfig(
            httpx_client=http,
            streaming=False,
            supported_protocol_bindings=[TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON],
        )
        try:
            client = await ClientFactory(config).create_from_url(peer.url)
            last: StreamResponse | None = None
            async for response in client.send_message(request):
                last = response
        except A2AClientTimeoutError:
            raise PeerCallError("timeout", f"{peer.name} did not answer within {peer.timeout:g} s") from None
        except (A2AClientError, A2AError) as exc:
            raise PeerCallError("protocol", f"{peer.name}: {_a2a_error(exc)}") from None
        except ValueError as exc:  # the card offers no transport this client speaks
            raise PeerCallError("protocol", f"{peer.name}: {exc}") from None
    if last is None:
        raise PeerCallError("protocol", f"{peer.name} answered nothing")
    return _reply(last, thread_id)


def _reply(response: StreamResponse, thread_id: str | None) -> RemoteReply:
    if response.HasField("message"):
        text = _parts_text(response.message.parts)
        context = response.message.context_id or thread_id or ""
        return RemoteReply(text=text, state="completed", thread_id=context, task_id=response.message.task_id)
    task: Task = response.task
    texts = [_parts_text(artifact.parts) for artifact in task.artifacts]
    text = "\n".join(t for t in texts if t) or _parts_text(task.status.message.parts)
    return RemoteReply(text=text, state=task_state_name(task.status.state), thread_id=task.context_id, task_id=task.id)


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
