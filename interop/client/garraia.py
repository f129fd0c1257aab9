"""GarraIA's A2A dialect, client side: `POST /a2a/tasks`, answered synchronously.

Re-posting a task id continues its conversation (even after `completed`); the reply is the last
`messages` entry with role `agent` (or `assistant`, which GarraIA accepts too), as GarraIA's own
client reads it.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx2

from interop.client.guard import GuardedTransport2, PeerPolicy
from interop.client.reply import PeerCallError, RemoteReply
from interop.peers import Peer

STATES = frozenset({"submitted", "working", "completed", "failed", "canceled"})
# GarraIA writes its replies with role `agent`, and accepts `assistant` as the same thing.
AGENT_ROLES = frozenset({"agent", "assistant"})


def garraia_http_client(peer: Peer, policy: PeerPolicy) -> httpx2.AsyncClient:
    headers = {"Authorization": f"Bearer {peer.token}"} if peer.token else {}
    return httpx2.AsyncClient(
        transport=GuardedTransport2(policy),
        headers=headers,
        timeout=httpx2.Timeout(peer.timeout, connect=min(peer.timeout, 10.0)),
        follow_redirects=False,
    )


async def garraia_send(peer: Peer, policy: PeerPolicy, *, message: str, thread_id: str | None) -> RemoteReply:
    task_id = thread_id or uuid.uuid4().hex
    body = {
        "id": task_id,
        "message": {"role": "user", "parts": [{"type": "text", "text": message}]},
        "metadata": {"client": "hermes"},
    }
    async with garraia_http_client(peer, policy) as client:
        try:
            response = await client.post(peer.endpoint("/a2a/tasks"), json=body)
        except httpx2.TimeoutException:
            raise PeerCallError("timeout", f"{peer.name} did not answer within {peer.timeout:g} s") from None
        except httpx2.TransportError as exc:
            raise PeerCallError("connect", f"cannot reach {peer.name} at {peer.url}: {exc}") from None
    if response.status_code != 200:
        raise PeerCallError("http_status", _status_message(peer, response))
    try:
        task = response.json()
    except ValueError:
        raise PeerCallError("protocol", f"{peer.name} answered with something that is not JSON") from None
    return _reply(peer, task, task_id)


def _reply(peer: Peer, task: Any, task_id: str) -> RemoteReply:
    if not isinstance(task, dict) or not isinstance(task.get("messages"), list):
        raise PeerCallError("protocol", f"{peer.name} answered without a task's messages")
    status = task.get("status")
    state = status if status in STATES else "unknown"
    agent = [m for m in task["messages"] if isinstance(m, dict) and m.get("role") in AGENT_ROLES]
    parts = agent[-1].get("parts", []) if agent else []
    text = "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
    remote_id = task["id"] if isinstance(task.get("id"), str) and task["id"] else task_id
    return RemoteReply(text=text, state=state, thread_id=remote_id, task_id=remote_id)


def _status_message(peer: Peer, response: httpx2.Response) -> str:
    if response.status_code == 401:
        return f"{peer.name} refused Hermes's credentials (HTTP 401): check the token in the peers file"
    detail = response.text.strip().replace("\n", " ")[:200]
    return f"{peer.name} answered HTTP {response.status_code}: {detail}"
