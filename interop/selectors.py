"""Reads of the interop tables (and the agent tables they point to)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agent.models import AgentSession, Turn
from interop.models import PeerConversation, PeerExchange

# An exchange still open although its turn ended (cancelled from another process, a crash):
# (state, error) it reads as, from the turn's status.
EXCHANGE_END_BY_TURN = {
    Turn.Status.CANCELLED: ("canceled", "cancelled"),
    Turn.Status.INTERRUPTED: ("failed", "the Hermes process answering it stopped before it finished"),
    Turn.Status.ERROR: ("failed", "the turn failed"),
}


@dataclass(frozen=True)
class ExchangeView:
    conversation_id: uuid.UUID
    session_id: uuid.UUID | None
    turns: int
    message: str
    reply: str
    state: str  # working, completed, failed, canceled, rejected
    error: str
    # The Hermes turn answering it, once started.
    turn_id: uuid.UUID | None = None

    @property
    def finished(self) -> bool:
        return self.state != "working"


def inbound_last_exchange(*, peer: str, dialect: str, external_id: str) -> ExchangeView | None:
    """The latest message of a peer's conversation and how it was answered; None for a conversation
    this peer never started."""
    conversation = PeerConversation.objects.filter(
        direction=PeerConversation.Direction.INBOUND, peer=peer, dialect=dialect, external_id=external_id
    ).first()
    if conversation is None:
        return None
    exchanges = PeerExchange.objects.filter(conversation=conversation).select_related("turn")
    exchange = exchanges.order_by("started_at", "id").last()
    if exchange is None:
        return None
    state, error = exchange.state, exchange.error
    if exchange.finished_at is None and exchange.turn is not None and exchange.turn.status in EXCHANGE_END_BY_TURN:
        state, fallback = EXCHANGE_END_BY_TURN[Turn.Status(exchange.turn.status)]
        error = exchange.turn.error or fallback
    return ExchangeView(
        conversation_id=conversation.pk,
        session_id=conversation.session_id,
        turns=conversation.turns,
        message=exchange.message,
        reply=exchange.reply,
        state=state,
        error=error,
        turn_id=exchange.turn_id,
    )


def session_belongs_to(*, session_id: uuid.UUID, actor: str) -> bool:
    """Whether `actor` started the session (a peer may only continue its own sessions)."""
    return AgentSession.objects.filter(pk=session_id, actor=actor).exists()
