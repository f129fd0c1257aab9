"""The ledger: one row per tool call, written `started` before the call goes out and completed
when it answers (or is cut off), each with its search entry. Synchronous and transactional."""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from agent.models import Activity, SearchEntry
from agent.search.entries import activity_entry, search_result_addition
from common.statements import Insert, Update

_ACTIVITY_NEW = Insert(
    Activity,
    [
        "correlation_id",
        "session_id",
        "actor",
        "tool_use_id",
        "server",
        "tool",
        "arguments",
        "result",
        "state",
        "is_error",
        "duration_ms",
        "started_at",
    ],
)


_ACTIVITY_END = Update(Activity, ["state", "result", "is_error", "duration_ms"], where=["id"])


SEARCH_ENTRY_NEW = Insert(
    SearchEntry,
    [
        "session_id",
        "turn_id",
        "message_id",
        "activity_id",
        "kind",
        "server",
        "tool",
        "tool_use_id",
        "text",
        "created_at",
    ],
)
_SEARCH_RESULT_ADD = Update(SearchEntry, appended=["text"], where=["activity_id"])


@dataclass(frozen=True)
class LedgerCall:
    """A tool call as its ledger row starts: whose turn it is, which tool, with what arguments."""

    correlation_id: uuid.UUID
    session_id: uuid.UUID | None
    actor: str
    tool_use_id: str
    server: str
    tool: str
    arguments: dict[str, Any]
    started_at: datetime.datetime


@dataclass(frozen=True)
class ActivityEnd:
    """How a tool call whose ledger row is `started` ended (`activity_finish`'s arguments)."""

    activity_id: int
    state: str
    result: dict[str, Any]
    is_error: bool
    duration_ms: int


def activity_start(*, call: LedgerCall) -> int:
    """Write a tool call's ledger row, state `started`, before the call is sent; returns its id.

    Written first so that a crash mid-call leaves a trace: the row says the call went out, and the
    session's next turn can tell the model its outcome is unknown instead of "not run".
    """
    with transaction.atomic(), connection.cursor() as cursor:
        return activity_create(cursor, call=call, state=Activity.State.STARTED)


def activity_create(
    cursor: CursorWrapper,
    *,
    call: LedgerCall,
    state: str,
    result: dict[str, Any] | None = None,
    is_error: bool = False,
    duration_ms: int = 0,
) -> int:
    """A ledger row and its search entry, inside the caller's transaction; the row's id."""
    result = result if result is not None else {}
    activity_id: int = _ACTIVITY_NEW.run(
        cursor,
        correlation_id=call.correlation_id,
        session_id=call.session_id,
        actor=call.actor,
        tool_use_id=call.tool_use_id,
        server=call.server,
        tool=call.tool,
        arguments=call.arguments,
        result=result,
        state=state,
        is_error=is_error,
        duration_ms=duration_ms,
        started_at=call.started_at,
    )
    entry = activity_entry(
        activity_id=activity_id,
        session_id=call.session_id,
        correlation_id=call.correlation_id,
        server=call.server,
        tool=call.tool,
        tool_use_id=call.tool_use_id,
        arguments=call.arguments,
        result=result,
        started_at=call.started_at,
    )
    if entry is not None:
        SEARCH_ENTRY_NEW.run(cursor, **entry)
    return activity_id


def activity_finish(*, activity_id: int, state: str, result: dict[str, Any], is_error: bool, duration_ms: int) -> None:
    """Complete a `started` row: `ok`/`error` (the tool answered) or `unknown` (cut off in flight)."""
    with transaction.atomic(), connection.cursor() as cursor:
        end = ActivityEnd(
            activity_id=activity_id, state=state, result=result, is_error=is_error, duration_ms=duration_ms
        )
        activity_end_write(cursor, end)


def activity_end_write(cursor: CursorWrapper, end: ActivityEnd) -> None:
    """A ledger row's outcome, and its result added to the row's search entry, in the caller's transaction."""
    _ACTIVITY_END.run(
        cursor,
        where=[end.activity_id],
        state=end.state,
        result=end.result,
        is_error=end.is_error,
        duration_ms=end.duration_ms,
    )
    addition = search_result_addition(end.result)
    if addition:
        _SEARCH_RESULT_ADD.run(cursor, where=[end.activity_id], text=addition)


def activity_record(*, call: LedgerCall, result: dict[str, Any], is_error: bool, duration_ms: int) -> int:
    """A finished call's row in one write, for an exchange recorded after the fact (`a2a talk`); its id."""
    state = Activity.State.ERROR if is_error else Activity.State.OK
    with transaction.atomic(), connection.cursor() as cursor:
        return activity_create(
            cursor, call=call, state=state, result=result, is_error=is_error, duration_ms=duration_ms
        )
