"""A session as stored: a turn's beginning (the question, the session's history read once, a crash's
repair, the budget's admission) and the record of a compaction. Synchronous and transactional; the
runner calls them on a database thread (`common.db.db_call`)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Container
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from agent import presence
from agent.budget import Admission
from agent.conversation.context import SUMMARY_HEADER, SessionContext, StoredMessage
from agent.conversation.history import synthetic_tool_results, tool_uses_unanswered
from agent.models import AgentSession, Message, Turn
from agent.presence import activity_settle_interrupted, turns_interrupt_orphaned
from agent.selectors import session_context_recent
from agent.store.turns import TURN_HEARTBEAT, fenced_run, message_store
from common.redaction import redact
from common.statements import Insert

TITLE_MAX = 80


# The turn's hot writes (`common.statements`): columns not named take their fields' defaults.
_SESSION_NEW = Insert(AgentSession, ["actor", "origin", "title", "model", "created_at", "last_active_at"])


_TURN_NEW = Insert(
    Turn, ["id", "session_id", "actor", "model", "owner", "started_at", "heartbeat_at", "tokens_reserved"]
)


class SessionNotFound(Exception):
    def __init__(self, session_id: object) -> None:
        super().__init__(f"no session with id {session_id}")
        self.session_id = session_id


class SessionBusy(Exception):
    """A turn of the session is still running: a second one would interleave their messages."""

    def __init__(self, session_id: object) -> None:
        super().__init__(f"a turn of session {session_id} is still running")
        self.session_id = session_id


@dataclass(frozen=True)
class TurnBegun:
    session_id: uuid.UUID
    turn_id: uuid.UUID
    session_created: bool
    # The stored conversation as (role, blocks), the new question last.
    history: list[tuple[str, list[dict[str, Any]]]]
    # Turns (of any session) found orphaned and interrupted on the way.
    interrupted: list[uuid.UUID]
    # The model this turn uses (recorded on the turn).
    model: str = ""
    # The tokens the turn was admitted with (agent/budget.py `turn_admit`); 0: no budget applies.
    hold: int = 0


def session_title_from(text: str) -> str:
    """A title from the first question: its first line, cut at a word boundary.

    Redacted before it is cut: a cut through a secret would leave its start, which the stored
    column's redaction no longer recognises.
    """
    line = " ".join(redact(text).strip().split())
    if len(line) <= TITLE_MAX:
        return line
    cut = line[: TITLE_MAX - 1].rsplit(" ", 1)[0] or line[: TITLE_MAX - 1]
    return cut + "…"


def _session_repair(session: AgentSession, context: SessionContext) -> StoredMessage | None:
    """Repair what a crash left of the session's last turn, before its next turn begins; the
    message it added, if any.

    Any tool_use left unanswered is answered "outcome unknown — it may have run" (the API rejects
    a history with a gap, and "not run" would be a lie: Oikos may have carried the call out), and
    the ledger rows still `started` become `unknown`. Runs under the session's row lock, with no
    turn of the session running, on the messages the turn reads anyway (`context`).
    """
    rows = context.kept()
    added: StoredMessage | None = None
    unanswered = tool_uses_unanswered([(row.role, row.content) for row in rows])
    if unanswered:
        turn_id = rows[-1].turn_id if rows else None
        content = synthetic_tool_results(unanswered)
        message = Message.objects.create(session=session, turn_id=turn_id, role=Message.Role.USER, content=content)
        added = StoredMessage(message.pk, turn_id, Message.Role.USER, content)
    activity_settle_interrupted(session_id=session.pk)
    return added


def turn_begin(
    *,
    running: Container[uuid.UUID],
    turn_id: uuid.UUID | None = None,
    session_id: uuid.UUID | None,
    actor: str,
    origin: str,
    text: str,
    model: str,
    model_choice: str | None = None,
    models_allowed: Collection[str] = (),
    stale_after: float | None = None,
    admission: Admission | None = None,
) -> TurnBegun:
    """Open (or resume) a session and store the user's question before any model call.

    The turn uses the session's model: `model_choice` when given (the operator picks one; the
    session remembers it from now on), else the one picked earlier, else `model` (the default). A
    model picked earlier that `models_allowed` no longer lists gives way to the default.

    The question is committed first so that nothing the operator typed is lost if the model, a
    tool or the process fails afterwards.

    With `admission`, the turn is admitted against the budgets in the same transaction, and stored
    with its hold (agent/budget.py `turn_admit`, which may raise `BudgetRefused`).

    Raises `SessionNotFound`, or `SessionBusy` while another turn of the session runs. A turn whose
    process is gone does not count: it is interrupted here first (`turns_interrupt_orphaned`), so
    a session is usable the moment a restarted Hermes listens. `running` holds the turns this
    process runs (`agent.engine.runner.running`, which counts `turn_id` already): one of this
    process's turns not in it is gone too.
    """
    # Announced outside the transaction: a refused turn must not roll back the announcement.
    owner = presence.presence_current().instance_id
    with transaction.atomic():
        return _turn_begin(
            running=running,
            turn_id=turn_id or uuid.uuid4(),
            session_id=session_id,
            actor=actor,
            origin=origin,
            text=text,
            model=model,
            model_choice=model_choice,
            models_allowed=models_allowed,
            owner=owner,
            stale_after=stale_after,
            admission=admission,
        )


def _turn_begin(
    *,
    running: Container[uuid.UUID],
    turn_id: uuid.UUID,
    session_id: uuid.UUID | None,
    actor: str,
    origin: str,
    text: str,
    model: str,
    model_choice: str | None,
    models_allowed: Collection[str],
    owner: uuid.UUID,
    stale_after: float | None,
    admission: Admission | None,
) -> TurnBegun:
    # Only this session's turns: a question frees its own session of a dead process's turn. Other
    # sessions' orphans end when a process starts, on Stop, or at their own next question; sweeping
    # them all here made every question read every running turn (docs/performance.md). A new
    # session has nothing to free.
    interrupted = (
        turns_interrupt_orphaned(running=running, stale_after=stale_after, session_id=session_id) if session_id else []
    )
    session: AgentSession | None = None
    earlier = SessionContext(messages=[])
    repaired: StoredMessage | None = None
    if session_id is not None:
        session = AgentSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None:
            raise SessionNotFound(session_id)
        # Under the session's row lock (PostgreSQL): of two questions racing into one session,
        # exactly one starts a turn. One turn at a time keeps the history a valid conversation.
        if session.turns.filter(status=Turn.Status.RUNNING).exists():
            raise SessionBusy(session_id)
        # The one read of the session's history a turn makes, bounded by its latest summary.
        earlier = session_context_recent(session)
        repaired = _session_repair(session, earlier)
    # Last of the locks this transaction takes, so that a refusal has changed nothing.
    hold = admission.admit() if admission is not None else 0
    now = timezone.now()
    question = [{"type": "text", "text": text}]
    with connection.cursor() as cursor:
        if session is None:
            chosen = model_choice or ""
            session_pk = _SESSION_NEW.run(
                cursor,
                actor=actor,
                origin=origin,
                title=session_title_from(text),
                model=chosen,
                created_at=now,
                last_active_at=now,
            )
        else:
            session_pk = session.pk
            session.title = session.title or session_title_from(text)
            if model_choice is not None:
                session.model = model_choice
            session.last_active_at = now
            session.save(update_fields=["title", "model", "last_active_at"])
            chosen = session.model
        used = chosen if chosen and (not models_allowed or chosen in models_allowed) else model
        # The session (when new), the turn and its question share the moment the question arrived.
        turn_pk = _TURN_NEW.run(
            cursor,
            id=turn_id,
            session_id=session_pk,
            actor=actor,
            model=used,
            owner=owner,
            started_at=now,
            heartbeat_at=now,
            tokens_reserved=hold,
        )
        question_pk = message_store(
            cursor, session_id=session_pk, turn_id=turn_pk, role=Message.Role.USER, content=question, now=now
        )
    asked = StoredMessage(question_pk, turn_pk, Message.Role.USER, question)
    if session is None:
        # Made just now, with its title, model and time: its history is the question alone.
        context = SessionContext(messages=[asked])
    else:
        added = [repaired] if repaired is not None else []
        context = SessionContext(
            messages=[*earlier.messages, *added, asked],
            tool_results_cleared_through=earlier.tool_results_cleared_through,
        )
    # What the model is sent: from the latest summary on, old tool results cleared (engine.context).
    return TurnBegun(
        session_id=session_pk,
        turn_id=turn_pk,
        session_created=session is None,
        history=context.history(),
        interrupted=interrupted,
        model=used,
        hold=hold,
    )


def session_compact(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    tool_results_cleared_through: int | None,
    summary: str = "",
    replaces_through: int | None = None,
) -> None:
    """Record a compaction: old tool results cleared for the model and/or a summary of older turns.

    Only the model's view changes: every message stays stored as it was. The summary is a user
    message of the turn that compacted, marked `summary`, standing for every message up to
    `replaces_through`.
    """
    now = timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            fenced_run(TURN_HEARTBEAT, cursor, turn_id=turn_id, heartbeat_at=now)
        if summary:
            Message.objects.create(
                session_id=session_id,
                turn_id=turn_id,
                role=Message.Role.USER,
                kind=Message.Kind.SUMMARY,
                replaces_through=replaces_through,
                content=[{"type": "text", "text": SUMMARY_HEADER + summary}],
            )
        AgentSession.objects.filter(pk=session_id).update(
            tool_results_cleared_through=tool_results_cleared_through,
            compactions=F("compactions") + 1,
            compacted_at=now,
        )
