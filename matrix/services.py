"""The bridge's writes: claims, the sync position, threads, approval cards, escalations, follow-ups
and schedules' runs (see matrix/models.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from agent.models import Change
from matrix.models import (
    MatrixApprovalCard,
    MatrixEscalation,
    MatrixEvent,
    MatrixFollowUp,
    MatrixSchedulePost,
    MatrixStranger,
    MatrixSync,
    MatrixThread,
)

# Where the card of an approval goes once it is settled: no further edit is expected.
CARD_FINAL = frozenset({"denied", "completed", "failed"})
CARD_RANK = {"pending": 0, "approved": 1, "denied": 1, "running": 2, "completed": 3, "failed": 3}


@dataclass(frozen=True)
class ThreadRef:
    room_id: str
    root_event_id: str
    session_id: uuid.UUID


def sync_position(*, user_id: str) -> str:
    return MatrixSync.objects.filter(user_id=user_id).values_list("next_batch", flat=True).first() or ""


def sync_position_store(*, user_id: str, next_batch: str) -> None:
    MatrixSync.objects.update_or_create(user_id=user_id, defaults={"next_batch": next_batch})


def event_claim(*, event_id: str, room_id: str, sender: str, kind: str) -> bool:
    """Insert the event's claim; False when it was claimed before (by this bridge or another)."""
    try:
        with transaction.atomic():
            MatrixEvent.objects.create(event_id=event_id, room_id=room_id, sender=sender, kind=kind)
    except IntegrityError:
        return False
    return True


BEFORE_JOIN = "before_join"
# What a room's history could ask of the bridge: questions, stops, decisions.
ACTIONABLE_TYPES = frozenset({"m.room.message", "m.reaction"})


def events_before_join_record(*, room_id: str, events: list[dict[str, Any]], bot_user_id: str) -> int:
    """Claim the messages and reactions written in a room before the bot joined it, as never answered.

    Claimed like any handled event, so no later batch that carries them again (a replay after a
    crash, a gap fetched on a restart) can act on them; returns how many were new.
    """
    rows = [
        MatrixEvent(
            event_id=str(event["event_id"]),
            room_id=room_id,
            sender=str(event.get("sender", "")),
            kind=MatrixEvent.Kind.IGNORED,
            outcome=BEFORE_JOIN,
        )
        for event in events
        if event.get("type") in ACTIONABLE_TYPES and event.get("event_id") and event.get("sender") != bot_user_id
    ]
    if not rows:
        return 0
    known = set(
        MatrixEvent.objects.filter(event_id__in=[row.event_id for row in rows]).values_list("event_id", flat=True)
    )
    MatrixEvent.objects.bulk_create([row for row in rows if row.event_id not in known], ignore_conflicts=True)
    return len(rows) - len(known)


def event_outcome_set(*, event_id: str, outcome: str) -> None:
    MatrixEvent.objects.filter(event_id=event_id).update(outcome=outcome)


def thread_find(*, room_id: str, root_event_id: str) -> ThreadRef | None:
    row = MatrixThread.objects.filter(room_id=room_id, root_event_id=root_event_id).first()
    return ThreadRef(room_id, root_event_id, row.session_id) if row else None


def thread_link(*, room_id: str, root_event_id: str, session_id: uuid.UUID) -> None:
    MatrixThread.objects.get_or_create(
        room_id=room_id, root_event_id=root_event_id, defaults={"session_id": session_id}
    )


def stranger_tell(*, user_id: str) -> bool:
    """True the first time a stranger addresses Hermes (tell them once), False ever after."""
    try:
        with transaction.atomic():
            MatrixStranger.objects.create(user_id=user_id)
    except IntegrityError:
        return False
    return True


def card_record(
    *, thread: ThreadRef, approval_id: str, execution_id: str, event_id: str, request: dict[str, Any]
) -> None:
    row = MatrixThread.objects.get(room_id=thread.room_id, root_event_id=thread.root_event_id)
    MatrixApprovalCard.objects.get_or_create(
        approval_id=approval_id,
        defaults={"thread": row, "execution_id": execution_id, "event_id": event_id, "request": request},
    )


def card_advance(*, approval_id: str, status: str, **fields: Any) -> MatrixApprovalCard | None:
    """Move the card to `status` (only forward) and fill in who decided and where (only once).

    Returns the card when something changed, else None. The decision's answer and Oikos's events
    race (the execution may start before the approve call returns): ranking the states keeps the
    card from stepping back, and the decider is kept even when its answer arrives last.
    """
    rank = CARD_RANK.get(status)
    if rank is None:
        return None
    with transaction.atomic():
        card = (
            MatrixApprovalCard.objects.select_for_update()
            .select_related("thread")
            .filter(approval_id=approval_id)
            .first()
        )
        if card is None:
            return None
        changed = False
        if CARD_RANK.get(card.status, 0) < rank:
            card.status, card.detail = status, str(fields.get("detail", ""))
            changed = True
        for name in ("decided_by", "decided_via"):
            if fields.get(name) and not getattr(card, name):
                setattr(card, name, fields[name])
                changed = True
        if changed:
            card.save()
    return card if changed else None


def escalation_claim(*, investigation_id: int, room_id: str) -> bool:
    """Claim posting this investigation's escalation; False when it was claimed before."""
    try:
        with transaction.atomic():
            MatrixEscalation.objects.create(investigation_id=investigation_id, room_id=room_id)
    except IntegrityError:
        return False
    return True


def escalation_posted(*, investigation_id: int, event_id: str, session_id: uuid.UUID | None) -> None:
    """The escalation is the root of a thread: replies there continue the investigation's session."""
    escalation = MatrixEscalation.objects.get(investigation_id=investigation_id)
    escalation.event_id = event_id
    escalation.save(update_fields=["event_id"])
    if session_id is not None:
        MatrixThread.objects.get_or_create(
            room_id=escalation.room_id, root_event_id=event_id, defaults={"session_id": session_id}
        )


def followup_claim(*, execution_id: str, room_id: str) -> bool:
    """Claim posting this execution's follow-up; False when it was claimed before (by any bridge)."""
    try:
        with transaction.atomic():
            change = Change.objects.get(execution_id=execution_id)
            MatrixFollowUp.objects.create(change=change, room_id=room_id)
    except (IntegrityError, Change.DoesNotExist):
        return False
    return True


def followup_posted(*, execution_id: str, event_id: str) -> None:
    MatrixFollowUp.objects.filter(change__execution_id=execution_id).update(event_id=event_id)


def schedule_post_claim(*, run_id: int, room_id: str) -> bool:
    """Claim posting this schedule run; False when it was claimed before (by this bridge or another)."""
    try:
        with transaction.atomic():
            MatrixSchedulePost.objects.create(run_id=run_id, room_id=room_id)
    except IntegrityError:
        return False
    return True


def schedule_post_posted(*, run_id: int, event_id: str, session_id: uuid.UUID | None) -> None:
    """Posted: replies in a thread on the message continue the run's session, like any thread."""
    post = MatrixSchedulePost.objects.get(run_id=run_id)
    post.state, post.event_id = MatrixSchedulePost.State.POSTED, event_id
    post.save(update_fields=["state", "event_id"])
    if session_id is not None:
        MatrixThread.objects.get_or_create(
            room_id=post.room_id, root_event_id=event_id, defaults={"session_id": session_id}
        )


def schedule_post_failed(*, run_id: int, error: str) -> None:
    """Not posted, and not tried again: the reason is kept for the operator."""
    MatrixSchedulePost.objects.filter(run_id=run_id).update(state=MatrixSchedulePost.State.FAILED, error=error)
