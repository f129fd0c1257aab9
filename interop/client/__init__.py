"""Hermes's A2A client: one message to one configured peer, in its dialect, behind the guardrails.

`peer_send` is the single way out: the dialect is the peer's (read from its agent cards when the
peers file says `auto`), and every request goes through a `PeerPolicy` (see `guard`).
"""

from __future__ import annotations

from interop.client.dialect import dialect_detect
from interop.client.garraia import garraia_send
from interop.client.guard import PeerPolicy, PeerRefused, Resolver
from interop.client.reply import TERMINAL_STATES, PeerCallError, RemoteReply
from interop.peers import Peer

__all__ = [
    "TERMINAL_STATES",
    "PeerCallError",
    "PeerRefused",
    "RemoteReply",
    "Resolver",
    "peer_send",
]


async def peer_send(
    peer: Peer,
    *,
    message: str,
    thread_id: str | None,
    waiting_task_id: str | None = None,
    resolver: Resolver | None = None,
) -> tuple[str, RemoteReply]:
    """Send `message` to `peer` and return (the dialect used, its reply).

    Raises `PeerRefused` (a guardrail stopped the request) or `PeerCallError` (no usable answer).
    """
    policy = PeerPolicy(origin=peer.origin, resolver=resolver)
    dialect = peer.dialect if peer.dialect != "auto" else await dialect_detect(peer, policy)
    if dialect == "garraia":
        return dialect, await garraia_send(peer, policy, message=message, thread_id=thread_id)
    # Imported here: the SDK's client costs half a second to import, and most processes never use it.
    from interop.client.a2a import a2a_send

    reply = await a2a_send(peer, policy, message=message, thread_id=thread_id, waiting_task_id=waiting_task_id)
    return dialect, reply
