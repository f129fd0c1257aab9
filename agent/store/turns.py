"""Writes to Hermes's own tables. Synchronous and transactional; async code calls them through
`common.db.db_call` (the turn engine) or `database_sync_to_async`. Nothing here knows about transports.

The writes on a turn's path (its question, each model message and tool call, their search entries,
the turn's and session's progress) run as statements made once (`common.statements`) on one cursor
per transaction; the rest use the ORM.
"""

from __future__ import annotations

import contextlib
import datetime
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from agent import presence
from agent.budget import usage_tokens_total
from agent.models import Activity, AgentSession, Message, Turn
from agent.prices import turn_cost
from agent.search.entries import message_entry
from agent.store.ledger import SEARCH_ENTRY_NEW, ActivityEnd, LedgerCall, activity_create, activity_end_write
from common.statements import Insert, Update

_SESSION_ACTIVE = Update(AgentSession, ["last_active_at"], where=["id"])
_SESSION_CONTEXT = Update(AgentSession, ["context_tokens", "context_window"], where=["id"])
_SESSION_ACTIVE_CONTEXT = Update(AgentSession, ["last_active_at", "context_tokens", "context_window"], where=["id"])
# Every write of a running turn is conditional on the turn still being this process's running one
# (`fenced_run`): one another process declared interrupted writes nothing more.
TURN_HEARTBEAT = Update(Turn, ["heartbeat_at"], where=["id", "status", "owner"])
_TURN_PROGRESS = Update(
    Turn, ["iterations", "usage", "heartbeat_at", "tokens_total", "cost_usd"], where=["id", "status", "owner"]
)
_TURN_END = Update(
    Turn,
    ["status", "stop_reason", "iterations", "usage", "error", "finished_at", "tokens_total", "cost_usd"],
    where=["id", "status", "owner"],
)
_MESSAGE_NEW = Insert(Message, ["session_id", "turn_id", "role", "content", "created_at"])


class TurnFenced(Exception):
    """The turn is no longer this process's running turn: another process declared it interrupted
    (it took this one for gone), or it ended. Nothing of the write was stored."""

    def __init__(self, turn_id: object) -> None:
        super().__init__(f"turn {turn_id} is no longer running in this process")
        self.turn_id = turn_id


def fenced_run(statement: Update, cursor: CursorWrapper, *, turn_id: uuid.UUID, **values: Any) -> None:
    """Run one of the turn's conditional updates first in its transaction; none changed: `TurnFenced`.

    First, so that on PostgreSQL the turn's row stays locked until the commit: a process
    interrupting the turn meanwhile waits for this write, then finds it already stored before its
    own (its repair of the session reads after it), and every later write of the turn is refused.
    """
    owner = presence.presence_current().instance_id
    if not statement.run(cursor, where=[turn_id, Turn.Status.RUNNING, owner], **values):
        raise TurnFenced(turn_id)


def message_append(
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    role: str,
    content: list[dict[str, Any]],
    ended: Collection[ActivityEnd] = (),
) -> None:
    """Store one complete message; with `ended`, the ledger rows of the calls it answers, in the
    same transaction (a round of tool results and its ledger outcomes are stored together or not
    at all: after a crash, both say "may have run")."""
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        fenced_run(TURN_HEARTBEAT, cursor, turn_id=turn_id, heartbeat_at=now)
        for end in ended:
            activity_end_write(cursor, end)
        message_store(cursor, session_id=session_id, turn_id=turn_id, role=role, content=content, now=now)
        _SESSION_ACTIVE.run(cursor, where=[session_id], last_active_at=now)


def message_store(
    cursor: CursorWrapper,
    *,
    session_id: uuid.UUID,
    turn_id: uuid.UUID,
    role: str,
    content: list[dict[str, Any]],
    now: datetime.datetime,
) -> int:
    """A complete message and its search entry (when it holds words people search for); its id."""
    message_id: int = _MESSAGE_NEW.run(
        cursor, session_id=session_id, turn_id=turn_id, role=role, content=content, created_at=now
    )
    entry = message_entry(
        session_id=session_id,
        turn_id=turn_id,
        message_id=message_id,
        role=role,
        kind=Message.Kind.MESSAGE,
        content=content,
        created_at=now,
    )
    if entry is not None:
        SEARCH_ENTRY_NEW.run(cursor, **entry)
    return message_id


def turn_heartbeat(*, turn_id: uuid.UUID) -> None:
    """Say the turn still runs; `TurnFenced` when it no longer runs here."""
    with transaction.atomic(), connection.cursor() as cursor:
        fenced_run(TURN_HEARTBEAT, cursor, turn_id=turn_id, heartbeat_at=timezone.now())


def _turn_spend(*, model: str, usage: dict[str, int]) -> dict[str, Any]:
    """The columns derived from a turn's usage, written with it (agent/budget.py sums them)."""
    return {"tokens_total": usage_tokens_total(usage), "cost_usd": turn_cost(model=model, usage=usage)}


def turn_progress(
    *,
    turn_id: uuid.UUID,
    iterations: int,
    usage: dict[str, int],
    model: str = "",
    session_id: uuid.UUID | None = None,
    context_tokens: int | None = None,
    context_window: int | None = None,
    message: list[dict[str, Any]] | None = None,
    calls: Collection[LedgerCall] = (),
) -> list[int]:
    """The turn's progress after a model call; with `session_id`, the session's context in use too.

    With `message` (and `session_id`), the call's assistant message is stored in the same
    transaction, and with `calls` the `started` ledger rows of the tool calls it asks for: one
    write per model call instead of two or more. Returns the rows' ids.
    """
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        fenced_run(
            _TURN_PROGRESS,
            cursor,
            turn_id=turn_id,
            iterations=iterations,
            usage=usage,
            heartbeat_at=now,
            **_turn_spend(model=model, usage=usage),
        )
        _model_answer_store(
            cursor,
            turn_id=turn_id,
            session_id=session_id,
            message=message,
            context_tokens=context_tokens,
            context_window=context_window,
            now=now,
        )
        return [activity_create(cursor, call=call, state=Activity.State.STARTED) for call in calls]


def _model_answer_store(
    cursor: CursorWrapper,
    *,
    turn_id: uuid.UUID,
    session_id: uuid.UUID | None,
    message: list[dict[str, Any]] | None,
    context_tokens: int | None,
    context_window: int | None,
    now: datetime.datetime,
) -> None:
    """A model call's message (with `session_id`), and the session's context in use now."""
    if session_id is None:
        return
    if message:
        message_store(
            cursor, session_id=session_id, turn_id=turn_id, role=Message.Role.ASSISTANT, content=message, now=now
        )
    if context_tokens is None:
        if message:
            _SESSION_ACTIVE.run(cursor, where=[session_id], last_active_at=now)
        return
    context = {"context_tokens": context_tokens, "context_window": context_window or 0}
    if message:
        _SESSION_ACTIVE_CONTEXT.run(cursor, where=[session_id], last_active_at=now, **context)
    else:
        _SESSION_CONTEXT.run(cursor, where=[session_id], **context)


@dataclass(frozen=True)
class LastAnswer:
    """The turn's last model call, stored with its end (`turn_finish`): its message and the
    session's context in use (`turn_progress`'s arguments of the same names)."""

    session_id: uuid.UUID
    message: list[dict[str, Any]] | None
    context_tokens: int | None
    context_window: int | None


def turn_finish(
    *,
    turn_id: uuid.UUID,
    status: str,
    stop_reason: str,
    iterations: int,
    usage: dict[str, int],
    model: str = "",
    error: str = "",
    last: LastAnswer | None = None,
    ended: Collection[ActivityEnd] = (),
) -> None:
    """End the turn; with `last`, its last model call's message is stored in the same transaction
    (a call that asked for no tool is the turn's last: one write instead of two), and with `ended`
    the ledger outcomes not yet written.

    Only a running turn of this process ends here: one already interrupted by another process
    (which took this one for dead) keeps that status, which is what its session was told, and
    nothing of this write is stored (`TurnFenced`).
    """
    now = timezone.now()
    with _synced(), transaction.atomic(), connection.cursor() as cursor:
        fenced_run(
            _TURN_END,
            cursor,
            turn_id=turn_id,
            status=status,
            stop_reason=stop_reason,
            iterations=iterations,
            usage=usage,
            error=error,
            finished_at=now,
            **_turn_spend(model=model, usage=usage),
        )
        for end in ended:
            activity_end_write(cursor, end)
        if last is not None:
            _model_answer_store(
                cursor,
                turn_id=turn_id,
                session_id=last.session_id,
                message=last.message,
                context_tokens=last.context_tokens,
                context_window=last.context_window,
                now=now,
            )


@contextlib.contextmanager
def _synced() -> Iterator[None]:
    """On SQLite, the commit inside is synced to disk: the turn's end, with everything before it.

    The connection runs `synchronous=NORMAL` in WAL mode (hermes_site/settings.py): commits are not
    synced, and a power cut or an I/O remount can lose answered turns. A FULL commit syncs the whole
    WAL, so syncing the turn's end keeps every answered turn, for one sync per turn instead of one
    per write (bench/sqlite_sync.py measures the three).
    """
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous=FULL")
    try:
        yield
    finally:
        # A connection left FULL (its write failed: it is closed and opened afresh, common/db.py) is only slower.
        with contextlib.suppress(Exception), connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=NORMAL")
