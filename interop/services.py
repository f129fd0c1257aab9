"""Writes to the interop tables. Synchronous and transactional, like `agent.store`; async code
calls them through `database_sync_to_async`.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agent.models import Turn
from interop.models import PairingToken, PeerConversation, PeerExchange
from interop.peers import PEER_NAME
from interop.selectors import EXCHANGE_END_BY_TURN

TOKEN_PREFIX = "hat"
Direction = PeerConversation.Direction


# --- pairing tokens --------------------------------------------------------------------------------


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# Compared against when a key id is unknown, so a miss costs what a hit costs.
_DUMMY_DIGEST = _digest("no such token")


def pairing_token_issue(*, peer: str) -> str:
    """Create a token for `peer` and return it. Only its digest is stored: this is the one time the
    token can be seen."""
    if not PEER_NAME.match(peer):
        raise ValueError("a peer name is 1-64 letters, digits, '.', '_' or '-'")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    PairingToken.objects.create(peer=peer, key_id=key_id, digest=_digest(secret))
    return f"{TOKEN_PREFIX}_{key_id}_{secret}"


def pairing_token_verify(*, token: str) -> str | None:
    """The peer a bearer token belongs to, or None (unknown, malformed or revoked).

    The secret is compared in constant time; the key id only finds the row.
    """
    prefix, _, rest = token.partition("_")
    key_id, _, secret = rest.partition("_")
    row = PairingToken.objects.filter(key_id=key_id).first() if prefix == TOKEN_PREFIX and secret else None
    matches = hmac.compare_digest(_digest(secret), row.digest if row else _DUMMY_DIGEST)
    if row is None or not matches or row.revoked:
        return None
    PairingToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.peer


def pairing_tokens_revoke(*, peer: str | None = None, token_ids: Iterable[int] | None = None) -> int:
    """Revoke every live token of `peer`, or the tokens `token_ids`; returns how many were live."""
    tokens = PairingToken.objects.filter(revoked_at__isnull=True)
    if peer is not None:
        tokens = tokens.filter(peer=peer)
    if token_ids is not None:
        tokens = tokens.filter(pk__in=list(token_ids))
    return tokens.update(revoked_at=timezone.now())


# --- conversations ---------------------------------------------------------------------------------


class ConversationRefused(Exception):
    """A message was refused before anything ran. `code`: `closed`, `turn_cap`, `wall_clock`, `busy`,
    `rate_limited`.

    `retry_after` (seconds) is set for `rate_limited`.
    """

    def __init__(self, code: str, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class ExchangeBegun:
    exchange_id: int
    conversation_id: uuid.UUID | None
    session_id: uuid.UUID | None
    turns: int  # the conversation's turns before this one
    previous_reply: str
    remote_task_id: str
    remote_state: str


def _rate_check(*, peer: str, direction: str, limit: int, window: float) -> None:
    now = timezone.now()
    recent = PeerExchange.objects.filter(
        peer=peer, direction=direction, started_at__gte=now - datetime.timedelta(seconds=window)
    )
    if recent.count() >= limit:
        oldest = recent.order_by("started_at").values_list("started_at", flat=True).first() or now
        retry_after = max(1, round((oldest + datetime.timedelta(seconds=window) - now).total_seconds()))
        what = "turns from" if direction == Direction.INBOUND else "messages to"
        raise ConversationRefused(
            "rate_limited",
            f"rate limit: at most {limit} {what} {peer} per {window:g} s; retry in {retry_after} s",
            retry_after=retry_after,
        )


def _stop(conversation: PeerConversation, reason: str) -> None:
    conversation.status = PeerConversation.Status.STOPPED
    conversation.stop_reason = reason
    conversation.save(update_fields=["status", "stop_reason", "updated_at"])


def conversation_stop(*, conversation_id: uuid.UUID, reason: str) -> None:
    """Close a conversation: no message is sent or accepted in it any more."""
    conversations_stop(conversation_ids=[conversation_id], reason=reason)


def conversations_stop(*, conversation_ids: Iterable[uuid.UUID], reason: str) -> int:
    """Close the open ones among `conversation_ids`; returns how many."""
    return PeerConversation.objects.filter(pk__in=list(conversation_ids), status=PeerConversation.Status.OPEN).update(
        status=PeerConversation.Status.STOPPED, stop_reason=reason, updated_at=timezone.now()
    )


# The turn ended and its process died before recording the answer.
_EXCHANGE_END_BY_TURN = {**EXCHANGE_END_BY_TURN, Turn.Status.DONE: ("failed", "the answer was not recorded")}


def _exchanges_settle(conversation: PeerConversation, *, starting_grace: float) -> bool:
    """Close the conversation's open exchanges whose turn has ended; whether one is still answering."""
    busy = False
    now = timezone.now()
    for exchange in conversation.exchanges.filter(finished_at__isnull=True).select_related("turn"):
        if exchange.turn is None:
            if exchange.started_at >= now - datetime.timedelta(seconds=starting_grace):
                busy = True
            else:
                exchange_finish(exchange_id=exchange.pk, state="error", error="the turn never started")
        elif exchange.turn.status == Turn.Status.RUNNING:
            busy = True
        else:
            state, error = _EXCHANGE_END_BY_TURN[Turn.Status(exchange.turn.status)]
            exchange_finish(exchange_id=exchange.pk, state=state, error=exchange.turn.error or error)
    return busy


@transaction.atomic
def inbound_exchange_begin(
    *,
    peer: str,
    dialect: str,
    external_id: str,
    message: str,
    max_turns: int,
    rate_limit: int,
    window: float,
    starting_grace: float,
    keep: int,
) -> ExchangeBegun:
    """Accept one message of a peer's conversation, or raise `ConversationRefused`.

    A refused message writes nothing: every check runs in this transaction, before the exchange
    row, and a refusal rolls the transaction back (the conversation row it may have created too).
    Once accepted, the peer's oldest finished exchanges beyond `keep` are deleted (`_exchanges_bound`).

    The conversation is busy while the Hermes turn answering its previous message runs, or — for at
    most `starting_grace` seconds — while that turn is being started. A previous message whose turn
    stopped without closing it (a cancel from another process, a crash) is closed here from its
    turn's status, so a cancelled or interrupted conversation takes the next message at once.
    """
    conversation, _ = PeerConversation.objects.select_for_update().get_or_create(
        direction=Direction.INBOUND, peer=peer, dialect=dialect, external_id=external_id
    )
    if conversation.status == PeerConversation.Status.STOPPED:
        raise ConversationRefused("closed", f"this conversation is closed ({conversation.stop_reason})")
    if conversation.turns >= max_turns:
        _stop(conversation, "turn_cap")
        raise ConversationRefused("turn_cap", f"this conversation reached its cap of {max_turns} turns")
    if _exchanges_settle(conversation, starting_grace=starting_grace):
        raise ConversationRefused("busy", "the previous message of this conversation is still being answered")
    _rate_check(peer=peer, direction=Direction.INBOUND, limit=rate_limit, window=window)
    exchange = PeerExchange.objects.create(
        conversation=conversation, peer=peer, direction=Direction.INBOUND, message=message
    )
    _exchanges_bound(peer=peer, direction=Direction.INBOUND, keep=max(keep, rate_limit))
    turns = conversation.turns
    conversation.turns += 1
    conversation.save(update_fields=["turns", "updated_at"])
    return ExchangeBegun(
        exchange_id=exchange.pk,
        conversation_id=conversation.pk,
        session_id=conversation.session_id,
        turns=turns,
        previous_reply="",
        remote_task_id="",
        remote_state="",
    )


@transaction.atomic
def inbound_exchange_withdraw(*, exchange_id: int) -> None:
    """Undo `inbound_exchange_begin` for a message whose turn could not start (the model is not
    configured, Hermes is shutting down, ...): a refused message leaves nothing behind, and it does
    not count against the conversation's turn cap or the peer's rate window."""
    exchange = PeerExchange.objects.select_for_update().filter(pk=exchange_id).first()
    if exchange is None:
        return
    conversation_id = exchange.conversation_id
    exchange.delete()
    if conversation_id is None:
        return
    conversation = PeerConversation.objects.select_for_update().get(pk=conversation_id)
    if conversation.session_id is None and not conversation.exchanges.exists():
        conversation.delete()  # it was opened by this message
    elif conversation.turns > 0:
        PeerConversation.objects.filter(pk=conversation_id).update(turns=F("turns") - 1)


def _exchanges_bound(*, peer: str, direction: str, keep: int) -> None:
    """Delete `peer`'s finished exchanges (one direction) older than its newest `keep`, and the
    conversations that leaves empty.

    What a peer makes Hermes store is bounded by this, not only by its rate window: within the
    window it could still fill the database over days. `keep` is at least the rate limit, so the
    window never loses a row it counts. The Hermes session of a conversation keeps the transcript.
    """
    exchanges = PeerExchange.objects.filter(peer=peer, direction=direction)
    beyond = list(exchanges.order_by("-started_at", "-id").values_list("pk", "finished_at")[keep:])
    stale = [pk for pk, finished_at in beyond if finished_at is not None]
    if not stale:
        return
    PeerExchange.objects.filter(pk__in=stale).delete()
    PeerConversation.objects.filter(peer=peer, direction=direction, exchanges__isnull=True).delete()


def inbound_exchange_started(
    *, exchange_id: int, conversation_id: uuid.UUID, session_id: uuid.UUID, turn_id: uuid.UUID
) -> None:
    """Tie the exchange to the Hermes turn answering it, and the conversation to its session."""
    PeerExchange.objects.filter(pk=exchange_id).update(turn_id=turn_id)
    PeerConversation.objects.filter(pk=conversation_id, session__isnull=True).update(session_id=session_id)


@transaction.atomic
def inbound_exchange_cancelled(
    *, exchange_id: int, conversation_id: uuid.UUID, session_id: uuid.UUID, turn_id: uuid.UUID, error: str
) -> None:
    """The exchange's caller went away and its turn was cancelled: tie them (the caller may have gone
    before `inbound_exchange_started` ran) and record the end, in one transaction."""
    inbound_exchange_started(
        exchange_id=exchange_id, conversation_id=conversation_id, session_id=session_id, turn_id=turn_id
    )
    exchange_finish(exchange_id=exchange_id, state="canceled", error=error)


@transaction.atomic
def outbound_exchange_begin(
    *,
    peer: str,
    thread_id: str | None,
    message: str,
    max_turns: int,
    rate_limit: int,
    window: float,
    budget: float,
    keep: int,
) -> ExchangeBegun:
    """Check the stop rule and the rate window for one message Hermes is about to send; the peer's
    oldest finished exchanges beyond `keep` are deleted once it is recorded."""
    conversation = None
    if thread_id:
        conversation = (
            PeerConversation.objects.select_for_update()
            .filter(direction=Direction.OUTBOUND, peer=peer, external_id=thread_id)
            .first()
        )
    if conversation is not None:
        if conversation.status == PeerConversation.Status.STOPPED:
            raise ConversationRefused(
                "closed", f"the conversation {thread_id} with {peer} is closed ({conversation.stop_reason})"
            )
        if conversation.turns >= max_turns:
            _stop(conversation, "turn_cap")
            raise ConversationRefused("turn_cap", f"the conversation {thread_id} reached its cap of {max_turns} turns")
        if timezone.now() - conversation.started_at > datetime.timedelta(seconds=budget):
            _stop(conversation, "wall_clock")
            raise ConversationRefused(
                "wall_clock", f"the conversation {thread_id} used up its time budget of {budget:g} s"
            )
    _rate_check(peer=peer, direction=Direction.OUTBOUND, limit=rate_limit, window=window)
    exchange = PeerExchange.objects.create(
        conversation=conversation, peer=peer, direction=Direction.OUTBOUND, message=message
    )
    _exchanges_bound(peer=peer, direction=Direction.OUTBOUND, keep=max(keep, rate_limit))
    previous = conversation.exchanges.exclude(pk=exchange.pk).exclude(state="error").last() if conversation else None
    return ExchangeBegun(
        exchange_id=exchange.pk,
        conversation_id=conversation.pk if conversation else None,
        session_id=conversation.session_id if conversation else None,
        turns=conversation.turns if conversation else 0,
        previous_reply=previous.reply if previous else "",
        remote_task_id=conversation.remote_task_id if conversation else "",
        remote_state=conversation.remote_state if conversation else "",
    )


@transaction.atomic
def outbound_exchange_record(
    *,
    exchange_id: int,
    peer: str,
    dialect: str,
    thread_id: str,
    session_id: uuid.UUID | None,
    reply: str,
    state: str,
    remote_task_id: str,
    stop_reason: str,
) -> tuple[uuid.UUID, int]:
    """Store a reply: the conversation gains a turn (and closes when `stop_reason` is set).

    Returns (the conversation id, its turn count).
    """
    conversation, _ = PeerConversation.objects.select_for_update().get_or_create(
        direction=Direction.OUTBOUND,
        peer=peer,
        dialect=dialect,
        external_id=thread_id,
        defaults={"session_id": session_id},
    )
    conversation.turns += 1
    conversation.remote_task_id = remote_task_id
    conversation.remote_state = state
    if conversation.session_id is None and session_id is not None:
        conversation.session_id = session_id
    if stop_reason:
        conversation.status = PeerConversation.Status.STOPPED
        conversation.stop_reason = stop_reason
    conversation.save()
    exchange_finish(exchange_id=exchange_id, reply=reply, state=state)
    PeerExchange.objects.filter(pk=exchange_id).update(conversation=conversation)
    return conversation.pk, conversation.turns


def exchange_finish(*, exchange_id: int, reply: str = "", state: str, error: str = "") -> str:
    """Record how an exchange ended; returns the reason stored (for a cancel, the one noted by
    `exchange_cancel_note` wins: one cancel, one reason, whichever path reports it)."""
    exchange = PeerExchange.objects.filter(pk=exchange_id).first()
    if exchange is None:
        return error
    if state == "canceled" and exchange.error and exchange.finished_at is None:
        error = exchange.error
    now = timezone.now()
    exchange.reply = reply
    exchange.state = state
    exchange.error = error
    exchange.finished_at = now
    exchange.duration_ms = max(0, round((now - exchange.started_at).total_seconds() * 1000))
    exchange.save(update_fields=["reply", "state", "error", "finished_at", "duration_ms"])
    return error


def exchange_cancel_note(*, turn_id: uuid.UUID, reason: str) -> None:
    """Note why the running exchange answered by `turn_id` is being cancelled, before the turn stops:
    `exchange_finish` keeps this reason when the turn ends cancelled."""
    PeerExchange.objects.filter(turn_id=turn_id, finished_at__isnull=True).update(error=reason)


def exchange_turn_attach(*, exchange_id: int, turn_id: uuid.UUID) -> None:
    """Record which Hermes turn read an outbound exchange's reply (`a2a_talk`)."""
    PeerExchange.objects.filter(pk=exchange_id).update(turn_id=turn_id)


def conversation_session_attach(*, conversation_id: uuid.UUID, session_id: uuid.UUID) -> None:
    PeerConversation.objects.filter(pk=conversation_id, session__isnull=True).update(session_id=session_id)
