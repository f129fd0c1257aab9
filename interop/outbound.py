"""Hermes talking to a peer: one message out, one reply back, under the stop rule.

Both `a2a_send` (the model decides) and `a2a_talk` (the operator supervises) go through
`conversation_send`. Before anything is sent: the target must be a configured peer (the allowlist;
nothing else is even connected to), must not be the peer that started this turn (the depth guard),
the message must fit the peer's character cap, the conversation must still be open, under its turn
cap and wall-clock budget, and the peer under its rate window. The reply is capped too, and the
conversation closes when the reply carries the agreed stop marker, repeats the previous reply (no
progress), leaves the remote task in a terminal state, or uses the last allowed turn. An operator
closes a conversation from the admin (or with Ctrl-C in `a2a_talk`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from channels.db import database_sync_to_async

from interop import services
from interop.client import TERMINAL_STATES, PeerCallError, PeerRefused, Resolver, peer_send
from interop.config import A2AConfig
from interop.peers import Peer, PeerBook

# Grace on top of the per-turn timeout for the transport's own connect/read limits to fire first.
_TIMEOUT_GRACE = 5.0
# Wall-clock budget of one outbound conversation, however many turns it has left.
CONVERSATION_SECONDS = 1800.0


class SendRefusal(Exception):
    """Nothing usable came back. `kind` is stable (`not_allowed`, `depth_guard`, `invalid_message`,
    `too_long`, `closed`, `turn_cap`, `wall_clock`, `rate_limited`, `forbidden_address`, `redirect`,
    `timeout`, `connect`, `http_status`, `protocol`); `message` says what to do about it."""

    def __init__(self, kind: str, message: str, *, peer: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.peer = peer


@dataclass(frozen=True)
class SendResult:
    peer: str
    dialect: str
    thread_id: str  # what continues the conversation (`task_id` for the model)
    conversation_id: uuid.UUID
    exchange_id: int
    message: str  # what was sent
    reply: str  # capped at the peer's max_chars
    truncated: bool
    state: str  # the remote state
    turn: int
    max_turns: int
    stop_reason: str  # set when this reply closed the conversation
    duration_ms: int


def stop_marker_in(text: str, peer: Peer) -> bool:
    return peer.stop_marker in text


def replies_same(a: str, b: str) -> bool:
    """Whether two messages say the same thing (whitespace and case aside): no progress."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def reply_cap(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n[Hermes: reply cut at {limit:,} of {len(text):,} characters]", True


async def conversation_send(
    *,
    peers: PeerBook,
    target: str,
    message: str,
    thread_id: str | None = None,
    session_id: uuid.UUID | None = None,
    origin_peer: str | None = None,
    resolver: Resolver | None = None,
) -> SendResult:
    """Send `message` to the peer `target` names (a name or a URL on its origin); raises `SendRefusal`."""
    peer = _peer_pick(peers, target, origin_peer)
    text = message.strip() if isinstance(message, str) else ""
    if not text:
        raise SendRefusal("invalid_message", "the message is empty", peer=peer.name)
    if len(text) > peer.max_chars:
        raise SendRefusal(
            "too_long",
            f"the message has {len(text):,} characters; {peer.name} takes at most {peer.max_chars:,}",
            peer=peer.name,
        )
    config = A2AConfig.from_settings()
    try:
        begun = await database_sync_to_async(services.outbound_exchange_begin)(
            peer=peer.name,
            thread_id=thread_id or None,
            message=text,
            max_turns=peer.max_turns,
            rate_limit=config.send_rate_limit,
            window=config.rate_window,
            budget=CONVERSATION_SECONDS,
            keep=config.peer_keep,
        )
    except services.ConversationRefused as refused:
        raise SendRefusal(refused.code, refused.message, peer=peer.name) from None
    started = time.monotonic()
    waiting = begun.remote_task_id if begun.remote_state == "input_required" else None
    try:
        async with asyncio.timeout(peer.timeout + _TIMEOUT_GRACE):
            dialect, reply = await peer_send(
                peer, message=text, thread_id=thread_id or None, waiting_task_id=waiting, resolver=resolver
            )
    except (PeerRefused, PeerCallError, TimeoutError) as exc:
        kind, detail = _failure(peer, exc)
        await database_sync_to_async(services.exchange_finish)(
            exchange_id=begun.exchange_id, state="error", error=detail
        )
        raise SendRefusal(kind, detail, peer=peer.name) from None
    except asyncio.CancelledError:
        await database_sync_to_async(services.exchange_finish)(
            exchange_id=begun.exchange_id, state="canceled", error="cancelled before the peer answered"
        )
        raise
    capped, truncated = reply_cap(reply.text or "", peer.max_chars)
    stop_reason = _stop_reason(reply.text, reply.state, begun.previous_reply, begun.turns + 1, peer)
    thread = reply.thread_id or thread_id or uuid.uuid4().hex
    conversation_id, turn = await database_sync_to_async(services.outbound_exchange_record)(
        exchange_id=begun.exchange_id,
        peer=peer.name,
        dialect=dialect,
        thread_id=thread,
        session_id=session_id,
        reply=capped,
        state=reply.state,
        remote_task_id=reply.task_id,
        stop_reason=stop_reason,
    )
    return SendResult(
        peer=peer.name,
        dialect=dialect,
        thread_id=thread,
        conversation_id=conversation_id,
        exchange_id=begun.exchange_id,
        message=text,
        reply=capped,
        truncated=truncated,
        state=reply.state,
        turn=turn,
        max_turns=peer.max_turns,
        stop_reason=stop_reason,
        duration_ms=round((time.monotonic() - started) * 1000),
    )


def _peer_pick(peers: PeerBook, target: str, origin_peer: str | None) -> Peer:
    peer = peers.find(target) if isinstance(target, str) else None
    if peer is None:
        allowed = ", ".join(f"{p.name} ({p.origin})" for p in peers.peers) or "none"
        raise SendRefusal(
            "not_allowed", f"{target!r} is not a configured peer; Hermes only talks to: {allowed}. Nothing was sent."
        )
    if origin_peer is not None and peer.name == origin_peer:
        raise SendRefusal(
            "depth_guard",
            f"this turn was started by {peer.name}; Hermes never messages the peer whose message it is answering "
            "(answer in your reply instead)",
            peer=peer.name,
        )
    return peer


def _stop_reason(text: str, state: str, previous: str, turn: int, peer: Peer) -> str:
    if state in TERMINAL_STATES:
        return "remote_state"
    if stop_marker_in(text, peer):
        return "stop_marker"
    if previous and replies_same(text, previous):
        return "no_progress"
    if turn >= peer.max_turns:
        return "turn_cap"
    return ""


def _failure(peer: Peer, exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, PeerRefused | PeerCallError):
        return exc.kind, exc.message
    return "timeout", f"{peer.name} did not answer within {peer.timeout:g} s"
