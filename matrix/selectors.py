"""The bridge's reads."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from django.db.models import Count, Q

from agent import presence
from agent.models import Change, Instance, Message, Proposal, Turn
from matrix.models import MatrixApprovalCard, MatrixEvent, MatrixSync
from matrix.services import CARD_FINAL
from watch.models import Investigation, Schedule, ScheduleRun


def card_by_event(*, event_id: str) -> MatrixApprovalCard | None:
    return MatrixApprovalCard.objects.select_related("thread").filter(event_id=event_id).first()


def card_pending_in_thread(*, room_id: str, root_event_id: str) -> MatrixApprovalCard | None:
    """The newest card of the thread still waiting for a decision (what a bare "approve" means)."""
    return (
        MatrixApprovalCard.objects.select_related("thread")
        .filter(thread__room_id=room_id, thread__root_event_id=root_event_id, status="pending")
        .order_by("-created_at", "-id")
        .first()
    )


def cards_open() -> list[MatrixApprovalCard]:
    """Cards whose execution may still move (refreshed from Oikos when the bridge reconnects)."""
    return list(MatrixApprovalCard.objects.select_related("thread").exclude(status__in=CARD_FINAL))


def matrix_counts() -> dict[tuple[str, str], int]:
    """Claimed Matrix events by (kind, outcome), for `/metrics`."""
    rows = MatrixEvent.objects.values("kind", "outcome").annotate(count=Count("id"))
    return {(row["kind"], row["outcome"]): row["count"] for row in rows}


def escalations_unposted(*, user_id: str) -> list[Investigation]:
    """Investigations with an escalation that no bridge has posted, opened since this bridge first ran."""
    first_start = MatrixSync.objects.filter(user_id=user_id).values_list("created_at", flat=True).first()
    if first_start is None:
        return []
    return list(
        Investigation.objects.filter(opened_at__gte=first_start, matrix_escalation__isnull=True)
        .exclude(escalation={})
        .order_by("opened_at", "id")
    )


def bridges_running() -> int:
    """`manage.py matrix_bridge` processes alive now (their presence rows, less those whose process is gone)."""
    running = set(Instance.objects.filter(role="matrix", stopped_at__isnull=True).values_list("id", flat=True))
    gone, _ = presence.owners_gone(running)
    return len(running - gone)


@dataclass(frozen=True)
class FollowUpPost:
    """What the bridge posts of one execution's follow-up (plain data, read in the bridge's thread)."""

    execution_id: str
    room_id: str
    root_event_id: str
    # The thread's message it answers: the execution's approval card, else the thread's root.
    reply_to: str
    action: str
    target: str
    verdict: str
    verdict_detail: str
    error: str
    # `operator:<name>` who asked for it, and the operator who approved it ("" when unknown).
    asked_by: str
    decided_by: str
    # The follow-up turn's final answer ("" when there was no turn, or it wrote nothing).
    answer: str
    # The rollback offered (`rollback service:x`) while its proposal waits for an operator; else "".
    undo: str


def followups_unposted(*, user_id: str) -> list[FollowUpPost]:
    """Follow-ups with a verdict, of executions asked in a Matrix thread, that no bridge has posted
    (since this bridge first ran), once their turn is over."""
    first_start = MatrixSync.objects.filter(user_id=user_id).values_list("created_at", flat=True).first()
    if first_start is None:
        return []
    rows = (
        Change.objects.select_related("session__matrix_thread")
        .filter(verdict_at__gte=first_start, session__matrix_thread__isnull=False, matrix_followup__isnull=True)
        .exclude(verdict="")
        .filter(Q(followup_turn__isnull=True) | ~Q(followup_turn__status=Turn.Status.RUNNING))
        .order_by("verdict_at", "id")
    )
    return [_followup_post(change) for change in rows]


def _followup_post(change: Change) -> FollowUpPost:
    thread = change.session.matrix_thread  # type: ignore[union-attr]
    card = (
        MatrixApprovalCard.objects.filter(thread=thread, execution_id=change.execution_id)
        .values_list("event_id", flat=True)
        .first()
    )
    return FollowUpPost(
        execution_id=change.execution_id,
        room_id=thread.room_id,
        root_event_id=thread.root_event_id,
        reply_to=card or thread.root_event_id,
        action=change.action,
        target=change.target,
        verdict=change.verdict,
        verdict_detail=change.verdict_detail,
        error=change.error,
        asked_by=change.asked_by,
        decided_by=change.decided_by,
        answer=_turn_answer(change.followup_turn_id),
        undo=_undo_waiting(change),
    )


def _turn_answer(turn_id: uuid.UUID | None) -> str:
    """The text of the turn's last assistant message that has any (its final answer)."""
    if turn_id is None:
        return ""
    messages = Message.objects.filter(turn_id=turn_id, role=Message.Role.ASSISTANT).order_by("-id")
    for content in messages.values_list("content", flat=True):
        blocks = content if isinstance(content, list) else []
        texts = [str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        text = "\n\n".join(t.strip() for t in texts if t.strip())
        if text:
            return text
    return ""


def _undo_waiting(change: Change) -> str:
    """The way back the follow-up offered (`rollback service:x`), while its proposal waits for an operator."""
    if change.undo_proposal_id is None:
        return ""
    proposal = Proposal.objects.filter(pk=change.undo_proposal_id, status=Proposal.Status.PENDING).first()
    return f"{proposal.action} {proposal.target}".strip() if proposal is not None else ""


# A run skipped for this reason is said in its room (the operator waits for it); a slot skipped
# because the watchers were down is not: the catch-up run that replaced it is posted instead.
SKIPPED_SAID = frozenset({"budget"})


@dataclass(frozen=True)
class SchedulePost:
    """What the bridge posts of one schedule's run (plain data, read in the bridge's thread)."""

    run_id: int
    room_id: str
    name: str
    # `done`, `failed`, or `skipped` (with `skipped_reason`).
    state: str
    skipped_reason: str
    slot: datetime.datetime
    timezone: str
    verdict: str
    # The run's final answer ("" when it has none).
    answer: str
    session_id: uuid.UUID | None


def schedule_posts_unposted(*, user_id: str) -> list[SchedulePost]:
    """Runs of schedules with a Matrix room, ended since this bridge first ran, that no bridge has
    claimed: those that ran, failed, or were skipped for the budget."""
    first_start = MatrixSync.objects.filter(user_id=user_id).values_list("created_at", flat=True).first()
    if first_start is None:
        return []
    ended = Q(state__in=[ScheduleRun.State.DONE, ScheduleRun.State.FAILED]) | Q(
        state=ScheduleRun.State.SKIPPED, skipped_reason__in=SKIPPED_SAID
    )
    since = Q(finished_at__gte=first_start) | Q(finished_at__isnull=True, claimed_at__gte=first_start)
    rows = (
        ScheduleRun.objects.select_related("schedule")
        .filter(ended, since, matrix_post__isnull=True)
        .exclude(schedule__matrix_room="")
        .order_by("slot", "id")
    )
    return [_schedule_post(run) for run in rows]


def _schedule_post(run: ScheduleRun) -> SchedulePost:
    schedule: Schedule = run.schedule
    return SchedulePost(
        run_id=run.pk,
        room_id=schedule.matrix_room,
        name=schedule.name,
        state=run.state,
        skipped_reason=run.skipped_reason,
        slot=run.slot,
        timezone=schedule.timezone,
        verdict=run.verdict,
        answer=_turn_answer(run.turn_id) if run.state == ScheduleRun.State.DONE else "",
        session_id=run.session_id,
    )
