"""Reads of the interop tables (and the agent tables they point to)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agent.models import AgentSession
from interop.models import PeerConversation, PeerExchange


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
    exchange = PeerExchange.objects.filter(conversation=conversation).order_by("started_at", "id").last()
    if exchange is None:
        return None
    return ExchangeView(
        conversation_id=conversation.pk,
        session_id=conversation.session_id,
        turns=conversation.turns,
        message=exchange.message,
        reply=exchange.reply,
        state=exchange.state,
        error=exchange.error,
        turn_id=exchange.turn_id,
    )


def session_belongs_to(*, session_id: uuid.UUID, actor: str) -> bool:
    """Whether `actor` started the session (a peer may only continue its own sessions)."""
    return AgentSession.objects.filter(pk=session_id, actor=actor).exists()
