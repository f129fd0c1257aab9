"""Writes to Hermes's own tables. Synchronous and transactional; async code calls them through
`agent.db.db_call` (the turn engine) or `database_sync_to_async`. Nothing here knows about transports.

The writes on a turn's path (its question, each model message and tool call, their search entries,
the turn's and session's progress) run as statements made once (`agent.statements`) on one cursor
per transaction; the rest use the ORM.
"""

from __future__ import annotations

import contextlib
import datetime
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F
from django.utils import timezone

from agent import presence
from agent.budget import Admission, usage_tokens_total
from agent.engine.context import SUMMARY_HEADER, SessionContext, StoredMessage
from agent.engine.history import synthetic_tool_results, tool_uses_unanswered
from agent.models import Activity, AgentSession, Instance, Message, SearchEntry, ToolCatalog, Turn
from agent.prices import turn_cost
from agent.redaction import redact
from agent.search.entries import activity_entry, message_entry, search_result_addition
from agent.selectors import session_context_recent
from agent.statements import Insert, Update
from agent.tools.outcomes import CUTOFF_INTERRUPTED, outcome_unknown_text
from agent.tools.results import tool_error_record

TITLE_MAX = 80

# The turn's hot writes (`agent.statements`): columns not named take their fields' defaults.
_SESSION_NEW = Insert(AgentSession, ["actor", "origin", "title", "model", "created_at", "last_active_at"])
_SESSION_ACTIVE = Update(AgentSession, ["last_active_at"], where=["id"])
_SESSION_CONTEXT = Update(AgentSession, ["context_tokens", "context_window"], where=["id"])
_SESSION_ACTIVE_CONTEXT = Update(AgentSession, ["last_active_at", "context_tokens", "context_window"], where=["id"])
_TURN_NEW = Insert(Turn, ["session_id", "actor", "model", "owner", "started_at", "heartbeat_at", "tokens_reserved"])
# Every write of a running turn is conditional on the turn still being this process's running one
# (`_fenced_run`): one another process declared interrupted writes nothing more.
_TURN_HEARTBEAT = Update(Turn, ["heartbeat_at"], where=["id", "status", "owner"])
_TURN_PROGRESS = Update(
    Turn, ["iterations", "usage", "heartbeat_at", "tokens_total", "cost_usd"], where=["id", "status", "owner"]
)
_TURN_END = Update(
    Turn,
    ["status", "stop_reason", "iterations", "usage", "error", "finished_at", "tokens_total", "cost_usd"],
    where=["id", "status", "owner"],
)
_MESSAGE_NEW = Insert(Message, ["session_id", "turn_id", "role", "content", "created_at"])
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
_SEARCH_ENTRY_NEW = Insert(
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


class SessionNotFound(Exception):
    def __init__(self, session_id: object) -> None:
        super().__init__(f"no session with id {session_id}")
        self.session_id = session_id


class TurnFenced(Exception):
    """The turn is no longer this process's running turn: another process declared it interrupted
    (it took this one for gone), or it ended. Nothing of the write was stored."""

    def __init__(self, turn_id: object) -> None:
        super().__init__(f"turn {turn_id} is no longer running in this process")
        self.turn_id = turn_id


def _fenced_run(statement: Update, cursor: CursorWrapper, *, turn_id: uuid.UUID, **values: Any) -> None:
    """Run one of the turn's conditional updates first in its transaction; none changed: `TurnFenced`.

    First, so that on PostgreSQL the turn's row stays locked until the commit: a process
    interrupting the turn meanwhile waits for this write, then finds it already stored before its
    own (its repair of the session reads after it), and every later write of the turn is refused.
    """
    owner = presence.presence_current().instance_id
    if not statement.run(cursor, where=[turn_id, Turn.Status.RUNNING, owner], **values):
        raise TurnFenced(turn_id)


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


INTERRUPTED_BY_EXIT = "The Hermes process running this turn stopped before it finished."


def instance_announce(*, role: str, host: str, pid: int, pid_started: str, lock_key: int | None) -> uuid.UUID:
    """Record a Hermes process that starts; its id then owns the turns it runs.

    Rows of processes that stopped cleanly over a day ago go (each `ask` adds one); those of
    processes that died stay, since only a probe can tell them from living ones, and crashes are rare.
    """
    Instance.objects.filter(stopped_at__lt=timezone.now() - datetime.timedelta(days=1)).delete()
    return Instance.objects.create(role=role, host=host, pid=pid, pid_started=pid_started, lock_key=lock_key).pk


def instance_retire(*, instance_id: uuid.UUID) -> None:
    Instance.objects.filter(pk=instance_id, stopped_at__isnull=True).update(stopped_at=timezone.now())


def turns_interrupt(*, turn_ids: list[uuid.UUID], error: str = INTERRUPTED_BY_EXIT) -> list[uuid.UUID]:
    """Mark these turns `interrupted` if they are still `running`; returns the ones that were."""
    if not turn_ids:
        return []
    running = Turn.objects.filter(pk__in=turn_ids, status=Turn.Status.RUNNING)
    ended = list(running.values_list("id", flat=True))
    running.filter(pk__in=ended).update(
        status=Turn.Status.INTERRUPTED,
        stop_reason="interrupted",
        error=error,
        finished_at=timezone.now(),
    )
    # Their calls in flight when the process went may have run: say so in the ledger too.
    activity_settle_interrupted(correlation_ids=ended)
    return ended


def turns_interrupt_orphaned(
    *, stale_after: float | None = None, session_id: uuid.UUID | None = None
) -> list[uuid.UUID]:
    """Interrupt every `running` turn (of `session_id`, when given) whose process is gone
    (`agent.presence` says how that is decided); returns their ids. Cheap when nothing runs: one
    query on the status index.

    A turn whose owner cannot be probed (another host without PostgreSQL's lock, or no owner)
    counts as gone once its heartbeat is `stale_after` seconds old (`HERMES_TURN_STALE_SECONDS`).
    """
    # First: announcing this process (on first use) runs this sweep itself.
    current = presence.presence_current()
    running = Turn.objects.filter(status=Turn.Status.RUNNING)
    if session_id is not None:
        running = running.filter(session_id=session_id)
    rows = list(running.values_list("id", "owner", "heartbeat_at", "started_at"))
    if not rows:
        return []
    gone, undecided = presence.owners_gone({owner for _id, owner, _beat, _started in rows if owner is not None})
    cutoff = timezone.now() - datetime.timedelta(
        seconds=settings.HERMES_TURN_STALE_SECONDS if stale_after is None else stale_after
    )
    orphaned = []
    for turn_id, owner, beat, started in rows:
        if owner == current.instance_id:
            # Ours: alive exactly while this process's runner still runs it.
            if not presence.turn_running_here(turn_id):
                orphaned.append(turn_id)
        elif owner in gone or ((owner is None or owner in undecided) and (beat or started) < cutoff):
            orphaned.append(turn_id)
    return turns_interrupt(turn_ids=orphaned)


def turn_begin(
    *,
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
    a session is usable the moment a restarted Hermes listens.
    """
    # Announced outside the transaction: a refused turn must not roll back the announcement.
    owner = presence.presence_current().instance_id
    with transaction.atomic():
        return _turn_begin(
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
    # them all here made every question read every running turn (a sixth of the server's time
    # with 200 questions at once). A new session has nothing to free.
    interrupted = turns_interrupt_orphaned(stale_after=stale_after, session_id=session_id) if session_id else []
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
            session_id=session_pk,
            actor=actor,
            model=used,
            owner=owner,
            started_at=now,
            heartbeat_at=now,
            tokens_reserved=hold,
        )
        # Counted as running here before the commit, so a sweep in this process between the commit
        # and the turn's task starting cannot take it for an orphan.
        presence.turn_running_add(turn_pk)
        question_pk = _message_store(
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
            _fenced_run(_TURN_HEARTBEAT, cursor, turn_id=turn_id, heartbeat_at=now)
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


@dataclass(frozen=True)
class ActivityEnd:
    """How a tool call whose ledger row is `started` ended (`activity_finish`'s arguments)."""

    activity_id: int
    state: str
    result: dict[str, Any]
    is_error: bool
    duration_ms: int


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
        _fenced_run(_TURN_HEARTBEAT, cursor, turn_id=turn_id, heartbeat_at=now)
        for end in ended:
            _activity_end(cursor, end)
        _message_store(cursor, session_id=session_id, turn_id=turn_id, role=role, content=content, now=now)
        _SESSION_ACTIVE.run(cursor, where=[session_id], last_active_at=now)


def _message_store(
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
        _SEARCH_ENTRY_NEW.run(cursor, **entry)
    return message_id


def turn_heartbeat(*, turn_id: uuid.UUID) -> None:
    """Say the turn still runs; `TurnFenced` when it no longer runs here."""
    with transaction.atomic(), connection.cursor() as cursor:
        _fenced_run(_TURN_HEARTBEAT, cursor, turn_id=turn_id, heartbeat_at=timezone.now())


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
    calls: Collection[dict[str, Any]] = (),
) -> list[int]:
    """The turn's progress after a model call; with `session_id`, the session's context in use too.

    With `message` (and `session_id`), the call's assistant message is stored in the same
    transaction, and with `calls` (`activity_start`'s arguments) the `started` ledger rows of the
    tool calls it asks for: one write per model call instead of two or more. Returns the rows' ids.
    """
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        _fenced_run(
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
        return [_activity_create(cursor, state=Activity.State.STARTED, **call) for call in calls]


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
        _message_store(
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
        _fenced_run(
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
            _activity_end(cursor, end)
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
        # A connection left FULL (its write failed: it is closed and opened afresh, agent/db.py) is only slower.
        with contextlib.suppress(Exception), connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous=NORMAL")


def activity_start(
    *,
    correlation_id: uuid.UUID,
    session_id: uuid.UUID | None,
    actor: str,
    tool_use_id: str,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    started_at: datetime.datetime,
) -> int:
    """Write a tool call's ledger row, state `started`, before the call is sent; returns its id.

    Written first so that a crash mid-call leaves a trace: the row says the call went out, and the
    session's next turn can tell the model its outcome is unknown instead of "not run".
    """
    with transaction.atomic(), connection.cursor() as cursor:
        return _activity_create(
            cursor,
            correlation_id=correlation_id,
            session_id=session_id,
            actor=actor,
            tool_use_id=tool_use_id,
            server=server,
            tool=tool,
            arguments=arguments,
            state=Activity.State.STARTED,
            started_at=started_at,
        )


def _activity_create(
    cursor: CursorWrapper,
    *,
    correlation_id: uuid.UUID,
    session_id: uuid.UUID | None,
    actor: str,
    tool_use_id: str,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    state: str,
    started_at: datetime.datetime,
    result: dict[str, Any] | None = None,
    is_error: bool = False,
    duration_ms: int = 0,
) -> int:
    """A ledger row and its search entry, inside the caller's transaction; the row's id."""
    result = result if result is not None else {}
    activity_id: int = _ACTIVITY_NEW.run(
        cursor,
        correlation_id=correlation_id,
        session_id=session_id,
        actor=actor,
        tool_use_id=tool_use_id,
        server=server,
        tool=tool,
        arguments=arguments,
        result=result,
        state=state,
        is_error=is_error,
        duration_ms=duration_ms,
        started_at=started_at,
    )
    entry = activity_entry(
        activity_id=activity_id,
        session_id=session_id,
        correlation_id=correlation_id,
        server=server,
        tool=tool,
        tool_use_id=tool_use_id,
        arguments=arguments,
        result=result,
        started_at=started_at,
    )
    if entry is not None:
        _SEARCH_ENTRY_NEW.run(cursor, **entry)
    return activity_id


def activity_finish(*, activity_id: int, state: str, result: dict[str, Any], is_error: bool, duration_ms: int) -> None:
    """Complete a `started` row: `ok`/`error` (the tool answered) or `unknown` (cut off in flight)."""
    with transaction.atomic(), connection.cursor() as cursor:
        end = ActivityEnd(
            activity_id=activity_id, state=state, result=result, is_error=is_error, duration_ms=duration_ms
        )
        _activity_end(cursor, end)


def _activity_end(cursor: CursorWrapper, end: ActivityEnd) -> None:
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


def activity_record(
    *,
    correlation_id: uuid.UUID,
    session_id: uuid.UUID | None,
    actor: str,
    tool_use_id: str,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    result: dict[str, Any],
    is_error: bool,
    duration_ms: int,
    started_at: datetime.datetime,
) -> int:
    """A finished call's row in one write, for an exchange recorded after the fact (`a2a talk`); its id."""
    with transaction.atomic(), connection.cursor() as cursor:
        return _activity_create(
            cursor,
            correlation_id=correlation_id,
            session_id=session_id,
            actor=actor,
            tool_use_id=tool_use_id,
            server=server,
            tool=tool,
            arguments=arguments,
            result=result,
            state=Activity.State.ERROR if is_error else Activity.State.OK,
            is_error=is_error,
            duration_ms=duration_ms,
            started_at=started_at,
        )


def tool_catalog_save(*, server: str, target: str, tools: list[dict[str, Any]]) -> None:
    """Keep `server`'s latest tool list (replacing the one before), for processes that find it down."""
    ToolCatalog.objects.update_or_create(
        server=server, defaults={"target": target, "tools": tools, "listed_at": timezone.now()}
    )


def activity_settle_interrupted(
    *, session_id: uuid.UUID | None = None, correlation_ids: list[uuid.UUID] | None = None
) -> int:
    """Turn `started` rows of turns that are no longer running into `unknown`; returns how many.

    A crash (SIGKILL, an OOM kill, a power cut) leaves the row of every call in flight at
    `started`. Once its turn is known to be over — the session's next turn begins, or the turn is
    marked interrupted — the call's outcome is unknown: it may have run. Rows of turns still
    running are left alone.
    """
    rows = Activity.objects.filter(state=Activity.State.STARTED)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    if correlation_ids is not None:
        rows = rows.filter(correlation_id__in=correlation_ids)
    rows = rows.exclude(correlation_id__in=Turn.objects.filter(status=Turn.Status.RUNNING).values("id"))
    settled = 0
    for tool in set(rows.values_list("tool", flat=True)):
        message = outcome_unknown_text(tool=tool, cause=CUTOFF_INTERRUPTED)
        settled += rows.filter(tool=tool).update(
            state=Activity.State.UNKNOWN, is_error=True, result=tool_error_record(CUTOFF_INTERRUPTED.kind, message)
        )
    return settled
