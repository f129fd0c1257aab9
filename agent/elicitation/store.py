"""Elicitations as stored: open one, answer it (an operator), settle it (the engine), wait for it.

Who waits and who answers may be different processes: the turn's engine waits in the process that
owns the turn, while the operator answers from whichever process served the page or the API call.
So the answer goes to the database first (one conditional update: exactly one answer wins, a
second gets `ElicitationClosed`), then a wake-up goes through the channel layer to the turn's
owner (`elicitation.answered` to `turn_group`, see `agent.broadcast`) and to every page showing the
rail (`elicitations.changed` to `ELICITATIONS_GROUP`). A lost wake-up costs a few seconds, never
the answer: the waiter also looks at the row every `RECHECK_SECONDS`.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from agent.broadcast import ELICITATIONS_GROUP, turn_group
from agent.elicitation.types import (
    ACTIONS,
    ElicitationAnswer,
    ElicitationAsk,
    ElicitationRecord,
    ElicitField,
    ElicitOption,
    elicit_content_validate,
)
from agent.models import Activity, Elicitation

logger = logging.getLogger(__name__)

# How often a waiter looks at the row in case a wake-up was lost (a channel layer hiccup).
RECHECK_SECONDS = 2.0

LEDGER_TOOL = "elicitation/create"


class ElicitationNotFound(Exception):
    pass


class ElicitationClosed(Exception):
    """The elicitation was answered already (or timed out); `elicitation` says how."""

    def __init__(self, elicitation: Elicitation) -> None:
        how = elicitation.get_status_display()
        by = f" by {elicitation.answered_by}" if elicitation.answered_by else ""
        super().__init__(f"This request was already answered: {how}{by}.")
        self.elicitation = elicitation


@dataclass(frozen=True)
class PendingElicitation:
    """Plain data for a card (templates rendered from async code get no querysets)."""

    id: str
    correlation_id: str
    session_id: str
    server: str
    tool: str
    message: str
    fields: list[dict[str, Any]]
    status: str
    reason: str
    answered_by: str
    expires_at: datetime.datetime
    purpose: str = "form"


# --- services ------------------------------------------------------------------------------------


def elicitation_open(
    *,
    correlation_id: uuid.UUID,
    session_id: uuid.UUID | None,
    actor: str,
    ask: ElicitationAsk,
    timeout: float,
) -> ElicitationRecord:
    """Store a request the turn is about to put to someone, and its ledger row (`started`)."""
    now = timezone.now()
    with transaction.atomic():
        activity = Activity.objects.create(
            correlation_id=correlation_id,
            session_id=session_id,
            actor=actor,
            server=ask.server,
            tool=LEDGER_TOOL,
            arguments={
                "during": ask.tool,
                "tool_use_id": ask.tool_use_id,
                "message": ask.message,
                "requested_schema": ask.requested_schema,
            },
            state=Activity.State.STARTED,
            started_at=now,
        )
        row = Elicitation.objects.create(
            correlation_id=correlation_id,
            session_id=session_id,
            actor=actor,
            activity=activity,
            tool_use_id=ask.tool_use_id,
            server=ask.server,
            tool=ask.tool,
            message=ask.message,
            requested_schema=ask.requested_schema,
            fields=[field.to_dict() for field in ask.fields],
            purpose=ask.purpose,
            created_at=now,
            expires_at=now + datetime.timedelta(seconds=timeout),
        )
    return ElicitationRecord(id=str(row.pk), ask=ask, timeout=timeout, expires_at=row.expires_at.isoformat())


def elicitation_answer(
    *, elicitation_id: uuid.UUID, action: str, values: dict[str, Any], operator: str, from_form: bool = False
) -> Elicitation:
    """An operator's answer: `accept` with `values` checked against the schema, or `decline`/`cancel`.

    Raises `ElicitationNotFound`, `ElicitationClosed` (someone answered first, or it timed out),
    `ElicitContentError` (what to fix), `ValueError` (an unknown action). Only the first answer is
    stored; the caller then wakes the turn (`elicitation_answered_publish`).
    """
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}")
    row = Elicitation.objects.filter(pk=elicitation_id).first()
    if row is None:
        raise ElicitationNotFound(str(elicitation_id))
    if row.status != Elicitation.Status.PENDING:
        raise ElicitationClosed(row)
    content = None
    if action == "accept":
        content = elicit_content_validate(elicitation_fields(row), values, from_form=from_form)
    updated = Elicitation.objects.filter(pk=row.pk, status=Elicitation.Status.PENDING).update(
        status=action, content=content, answered_by=operator, answered_at=timezone.now()
    )
    row.refresh_from_db()
    if not updated:
        raise ElicitationClosed(row)
    return row


def elicitation_settle(*, elicitation_id: str, answer: ElicitationAnswer) -> ElicitationAnswer:
    """The engine's last word: store `answer` unless someone answered first; complete the ledger row.

    Returns the answer that stands (the operator's, when it won the race against a timeout).
    """
    now = timezone.now()
    with transaction.atomic():
        Elicitation.objects.filter(pk=elicitation_id, status=Elicitation.Status.PENDING).update(
            status=answer.action,
            content=answer.content,
            reason=answer.reason,
            answered_by=answer.answered_by,
            answered_at=now,
        )
        row = Elicitation.objects.get(pk=elicitation_id)
        final = _answer_of(row)
        if row.activity_id is not None:
            started = row.created_at
            Activity.objects.filter(pk=row.activity_id).update(
                state=Activity.State.OK,
                result={
                    "action": final.action,
                    "content": final.content,
                    "answered_by": final.answered_by,
                    "reason": final.reason,
                },
                duration_ms=max(round((now - started).total_seconds() * 1000), 0),
            )
    return final


# --- selectors -----------------------------------------------------------------------------------


def elicitations_pending() -> list[PendingElicitation]:
    """Every request still waiting for an operator, oldest first (the rail)."""
    rows = Elicitation.objects.filter(status=Elicitation.Status.PENDING).order_by("created_at")
    return [_pending(row) for row in rows[:50]]


def elicitation_get(*, elicitation_id: uuid.UUID) -> PendingElicitation | None:
    row = Elicitation.objects.filter(pk=elicitation_id).first()
    return None if row is None else _pending(row)


def elicitation_fields(row: Elicitation) -> tuple[ElicitField, ...]:
    """The stored fields back as `ElicitField`s (parsed once, when the request came in)."""
    return tuple(
        ElicitField(
            name=str(raw["name"]),
            kind=raw["kind"],
            title=str(raw.get("title") or ""),
            description=str(raw.get("description") or ""),
            required=bool(raw.get("required")),
            default=raw.get("default"),
            options=tuple(ElicitOption(value=str(o["value"]), label=str(o["label"])) for o in raw.get("options", [])),
            string_format=str(raw.get("format") or ""),
            min_length=raw.get("min_length"),
            max_length=raw.get("max_length"),
            minimum=raw.get("minimum"),
            maximum=raw.get("maximum"),
            min_items=raw.get("min_items"),
            max_items=raw.get("max_items"),
        )
        for raw in row.fields
    )


def _pending(row: Elicitation) -> PendingElicitation:
    return PendingElicitation(
        id=str(row.pk),
        correlation_id=str(row.correlation_id),
        session_id=str(row.session_id or ""),
        server=row.server,
        tool=row.tool,
        message=row.message,
        fields=list(row.fields),
        status=row.status,
        reason=row.reason,
        answered_by=row.answered_by,
        expires_at=row.expires_at,
        purpose=row.purpose,
    )


def _answer_of(row: Elicitation) -> ElicitationAnswer:
    return ElicitationAnswer(
        action=row.status,  # type: ignore[arg-type]  # settled rows hold one of ACTIONS
        content=row.content if row.status == Elicitation.Status.ACCEPTED else None,
        reason=row.reason,
        answered_by=row.answered_by,
    )


# --- waiting and waking --------------------------------------------------------------------------

# The engine waits here for answers to the requests of the turns this process owns.
_waiters: dict[str, asyncio.Event] = {}


async def elicitation_by_operator(record: ElicitationRecord) -> ElicitationAnswer:
    """The answerer of turns an operator can see (control room, `/chat`): wait for an answer given
    in the control room or through `POST /elicitations/<id>`. The engine bounds the wait."""
    woken = _waiters.setdefault(record.id, asyncio.Event())
    try:
        while True:
            row = await database_sync_to_async(Elicitation.objects.get)(pk=record.id)
            if row.status != Elicitation.Status.PENDING:
                return _answer_of(row)
            try:
                await asyncio.wait_for(woken.wait(), timeout=RECHECK_SECONDS)
            except TimeoutError:
                continue
            woken.clear()
    finally:
        _waiters.pop(record.id, None)


def elicitation_wake(elicitation_id: str) -> None:
    """An answer was stored: wake the engine waiting for it here, if any."""
    woken = _waiters.get(elicitation_id)
    if woken is not None:
        woken.set()


async def elicitation_answered_publish(row: Elicitation) -> None:
    """Tell the turn's owner (wherever it runs) and every rail that `row` was answered."""
    elicitation_wake(str(row.pk))
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "elicitation.answered", "turn_id": str(row.correlation_id), "elicitation_id": str(row.pk)}
    await layer.group_send(turn_group(row.correlation_id), message)
    await elicitations_changed_publish()


async def elicitations_changed_publish() -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(ELICITATIONS_GROUP, {"type": "elicitations.changed"})


async def elicitations_changed_publish_quietly() -> None:
    """For the engine: a channel layer that is down costs the rail's live update, never the turn."""
    try:
        await elicitations_changed_publish()
    except Exception:
        logger.exception("Could not tell the control rooms about an elicitation")
