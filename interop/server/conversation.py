"""The conversation core both A2A dialects share: a peer's message → one real Hermes turn.

A GarraIA task id or an A2A `contextId` names one conversation, and a conversation is one Hermes
session: every message runs a turn in it (actor `peer:<name>`, origin `a2a`) and waits for `done`.
The turn cannot call the peer back (`origin_peer`), runs under the server's per-turn time limit,
and is refused outright when the conversation is closed, over its turn cap, still answering the
previous message, or the peer is over its rate window.

A refused message writes nothing (no exchange, no conversation, no turn): the text is checked and
the conversation's rules applied before the exchange row exists, and a turn that cannot start takes
its exchange back out. What a peer sends and what it is told come back through `redact()`: a
configured secret pasted into a message is stored, answered and echoed as `[REDACTED]`.

Turns run in this process's turn registry (`agent.live`): the control room shows them live, and
a cancel reaches the turn in whichever process runs it. "Still answering" means the conversation's
Hermes turn is running (its row says so), not that a message arrived recently: a cancelled or
interrupted turn frees its conversation at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings

from agent.conversation.events import Event
from agent.engine.budgets import Budgets
from agent.engine.runner import TurnHandle, TurnRejected
from agent.live import turn_registry
from agent.selectors import turn_status
from common.db import db_through_cancel
from common.redaction import redact
from interop import services
from interop.config import A2AConfig
from interop.peers import peer_allowance, peer_may_propose, peer_rate_limit
from interop.services import ConversationRefused
from interop.turns import turn_answer

logger = logging.getLogger(__name__)

TURN_STATES = {"done": "completed", "cancelled": "canceled"}
# A message whose turn has not started yet (it is being set up) keeps the conversation busy this long
# at most; past that its process died before the turn began.
STARTING_GRACE_SECONDS = 30.0
# How long a cancel waits for the turn to have stopped before it answers anyway.
CANCEL_WAIT_SECONDS = 5.0
# The one reason every surface gives for a turn the peer cancelled (CancelTask, GarraIA's cancel,
# or a GarraIA client hanging up).
PEER_CANCEL_REASON = "Cancelled by the peer."
CANCEL_POLL_SECONDS = 0.1

# Called with the turn's and its session's ids once it runs; answering False cancels it (its task
# was cancelled first).
TurnStarted = Callable[[uuid.UUID, uuid.UUID], Awaitable[bool]]
# Reads the turn's events, from its start to its `done`, while it runs (A2A streaming).
TurnFollower = Callable[[AsyncIterator[Event]], Awaitable[None]]


@dataclass(frozen=True)
class InboundReply:
    conversation_id: uuid.UUID
    session_id: uuid.UUID
    turn_id: uuid.UUID
    text: str
    state: str  # completed, failed, canceled
    error: str
    latency_ms: int
    error_code: str = ""


class InboundRejected(Exception):
    """The turn could not start (`TurnRejected`): the model is not configured, the message is bad."""

    def __init__(self, code: str, message: str, *, retry_after: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # Seconds after which asking again may succeed (`budget_exhausted`, `rate_limited`); 0: unknown.
        self.retry_after = retry_after


def inbound_text(text: str) -> str:
    """A peer's message as Hermes takes it — trimmed, configured secrets redacted — or
    `InboundRejected` (`invalid_message`, `message_too_large`) before anything is written."""
    question = text.strip()
    if not question:
        raise InboundRejected("invalid_message", "the message has no text")
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    if len(question) > limit:
        raise InboundRejected(
            "message_too_large", f"the message has {len(question):,} characters; the limit is {limit:,}"
        )
    return redact(question)


def inbound_budgets() -> Budgets:
    budgets = Budgets.from_settings()
    return dataclasses.replace(budgets, timeout=min(budgets.timeout, A2AConfig.from_settings().server_turn_timeout))


async def inbound_turn(
    *,
    peer: str,
    dialect: str,
    external_id: str,
    text: str,
    on_start: TurnStarted | None = None,
    follow: TurnFollower | None = None,
) -> InboundReply:
    """Run one Hermes turn for a peer's message and return its answer.

    `follow`, when given, reads the turn's events as they happen (from its start, once `on_start`
    agreed), alongside the wait for its answer.
    Raises `ConversationRefused` (closed, turn cap, busy, rate limited) or `InboundRejected`;
    either way nothing ran and nothing was written. If the caller is cancelled, the turn is
    cancelled too. The reply's text and error are redacted.
    """
    started = time.monotonic()
    question = inbound_text(text)
    config = A2AConfig.from_settings()
    # A caller gone while the exchange is written leaves nothing behind: it is taken back out.
    begun = await db_through_cancel(
        database_sync_to_async(services.inbound_exchange_begin)(
            peer=peer,
            dialect=dialect,
            external_id=external_id,
            message=question,
            max_turns=config.server_max_turns,
            rate_limit=peer_rate_limit(peer),
            window=config.rate_window,
            starting_grace=STARTING_GRACE_SECONDS,
            keep=config.peer_keep,
        ),
        undo=lambda begun: database_sync_to_async(services.inbound_exchange_withdraw)(exchange_id=begun.exchange_id),
    )
    assert begun.conversation_id is not None
    handle = await _turn_start(peer, question, begun)
    try:
        # A caller gone from here on (even while the registry took the turn over, `TurnRegistry.start`)
        # cancels the turn, and its exchange still records which turn that was.
        await database_sync_to_async(services.inbound_exchange_started)(
            exchange_id=begun.exchange_id,
            conversation_id=begun.conversation_id,
            session_id=handle.session_id,
            turn_id=handle.turn_id,
        )
        if on_start is not None and not await on_start(handle.turn_id, handle.session_id):
            handle.cancel(PEER_CANCEL_REASON)
        if follow is None:
            answer = await turn_answer(handle)
        else:
            # A follower that fails (its peer's stream went away) loses the live view, not the answer.
            answered, followed = await asyncio.gather(
                turn_answer(handle), follow(handle.events()), return_exceptions=True
            )
            if isinstance(answered, BaseException):
                raise answered
            answer = answered
            if isinstance(followed, Exception):
                logger.warning("Streaming turn %s to its peer failed: %s", handle.turn_id, followed)
    except asyncio.CancelledError:
        handle.cancel(PEER_CANCEL_REASON)
        await handle.wait()
        await database_sync_to_async(services.inbound_exchange_cancelled)(
            exchange_id=begun.exchange_id,
            conversation_id=begun.conversation_id,
            session_id=handle.session_id,
            turn_id=handle.turn_id,
            error=PEER_CANCEL_REASON,
        )
        raise
    state = TURN_STATES.get(answer.status, "failed")
    reply = redact(answer.text)
    error = await database_sync_to_async(services.exchange_finish)(
        exchange_id=begun.exchange_id, reply=reply, state=state, error=redact(answer.error)
    )
    return InboundReply(
        conversation_id=begun.conversation_id,
        session_id=handle.session_id,
        turn_id=handle.turn_id,
        text=reply,
        state=state,
        error=error,
        latency_ms=round((time.monotonic() - started) * 1000),
        error_code=answer.error_code,
    )


async def _turn_start(peer: str, text: str, begun: services.ExchangeBegun) -> TurnHandle:
    """Start the exchange's turn (in a new session when the conversation's was deleted), or take the
    exchange back out when it cannot start. A caller cancelled meanwhile leaves no turn running
    (`turn_start` sees to that) and its exchange ends `canceled`."""
    session_id = begun.session_id
    for _attempt in (1, 2):
        try:
            return await turn_registry().start(
                text=text,
                actor=f"peer:{peer}",
                origin="a2a",
                session_id=session_id,
                budgets=inbound_budgets(),
                origin_peer=peer,
                # Its messages are counted per exchange (the rate window above); its spend at admission.
                peer=peer_allowance(peer, rate_counted_here=False),
                may_propose=peer_may_propose(peer),
            )
        except TurnRejected as rejected:
            if rejected.code == "session_not_found" and session_id is not None:
                session_id = None  # the session was deleted: the conversation starts a new one
                continue
            await database_sync_to_async(services.inbound_exchange_withdraw)(exchange_id=begun.exchange_id)
            raise InboundRejected(rejected.code, rejected.message, retry_after=rejected.retry_after) from None
        except asyncio.CancelledError:
            await database_sync_to_async(services.exchange_finish)(
                exchange_id=begun.exchange_id, state="canceled", error=PEER_CANCEL_REASON
            )
            raise
    raise AssertionError("unreachable")


async def inbound_cancel(turn_id: uuid.UUID) -> bool:
    """Stop the turn answering a conversation, in whichever process runs it, and wait until it has
    stopped (`CANCEL_WAIT_SECONDS` at most), so that the conversation takes its next message as soon
    as the cancel is answered. Returns whether the turn is no longer running. The exchange records
    `PEER_CANCEL_REASON`, which the peer is told on every path.
    """
    await database_sync_to_async(services.exchange_cancel_note)(turn_id=turn_id, reason=PEER_CANCEL_REASON)
    await turn_registry().turn_stop(turn_id=turn_id, reason=PEER_CANCEL_REASON)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CANCEL_WAIT_SECONDS
    while True:
        # The owner marks the turn `cancelled` when its task ends; the row is what every process sees.
        status = await database_sync_to_async(turn_status)(turn_id=turn_id)
        if status is None or status.status != "running":
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(CANCEL_POLL_SECONDS)


__all__ = [
    "PEER_CANCEL_REASON",
    "ConversationRefused",
    "InboundRejected",
    "InboundReply",
    "inbound_cancel",
    "inbound_text",
    "inbound_turn",
]
