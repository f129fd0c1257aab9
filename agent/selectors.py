"""Reads of Hermes's own tables, as plain data that async callers and transports can hold freely.

Synchronous like the services; async code calls them through `database_sync_to_async`.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count, Min, Q

from agent.conversation.context import SessionContext, StoredMessage
from agent.models import AgentSession, Message, Turn


class PageOutOfRange(Exception):
    def __init__(self, page: int, page_count: int) -> None:
        super().__init__(f"page {page} does not exist; there are {page_count} page(s)")
        self.page = page
        self.page_count = page_count


@dataclass(frozen=True)
class SessionSummary:
    id: uuid.UUID
    title: str
    actor: str
    origin: str
    created_at: datetime.datetime
    last_active_at: datetime.datetime
    turn_count: int
    # The model the session was switched to; empty: the default.
    model: str = ""


@dataclass(frozen=True)
class SessionPage:
    sessions: list[SessionSummary]
    page: int
    page_count: int
    total: int

    @property
    def has_next(self) -> bool:
        return self.page < self.page_count

    @property
    def has_previous(self) -> bool:
        return self.page > 1


@dataclass(frozen=True)
class TurnRecord:
    id: uuid.UUID
    actor: str
    status: str
    stop_reason: str
    error: str
    model: str
    usage: dict[str, int]
    tokens_total: int
    # The list price of the usage in USD (agent/budget.py); None when the model's price is unknown.
    cost_usd: Decimal | None
    iterations: int
    started_at: datetime.datetime
    finished_at: datetime.datetime | None

    @property
    def duration_ms(self) -> int | None:
        if self.finished_at is None:
            return None
        return round((self.finished_at - self.started_at).total_seconds() * 1000)


@dataclass(frozen=True)
class MessageRecord:
    id: int
    turn_id: uuid.UUID | None
    role: str
    content: list[dict[str, Any]]
    created_at: datetime.datetime
    # `summary`: the model's summary of the messages up to `replaces_through` (agent.conversation.context).
    kind: str = ""
    replaces_through: int | None = None


@dataclass(frozen=True)
class ContextInUse:
    """How much of the model's window the session fills (as of its last model call), and compactions."""

    tokens: int
    window: int
    compactions: int
    compacted_at: datetime.datetime | None

    @property
    def percent(self) -> int:
        return round(100 * self.tokens / self.window) if self.window else 0


@dataclass(frozen=True)
class SessionDetail:
    session: SessionSummary
    turns: list[TurnRecord]
    messages: list[MessageRecord]
    context: ContextInUse
    # The first turn of these, when the session has turns before it (the earlier page's `before`).
    earlier_than: uuid.UUID | None = None


def session_page(*, page: int, page_size: int) -> SessionPage:
    """One page of sessions, most recently active first. Page 1 always exists, even when empty.

    The turn counts are counted for the page's sessions only: counting every session's turns to
    show twenty of them grows with the whole history.

    Raises:
        PageOutOfRange: `page` is past the last page.
    """
    paginator = Paginator(AgentSession.objects.order_by("-last_active_at", "-id"), page_size)
    if page > paginator.num_pages:
        raise PageOutOfRange(page, paginator.num_pages)
    rows = list(paginator.page(page).object_list)
    counts = dict(
        Turn.objects.filter(session_id__in=[row.id for row in rows])
        .values("session_id")
        .annotate(count=Count("id"))
        .values_list("session_id", "count")
    )
    return SessionPage(
        sessions=[_summary(row, counts.get(row.id, 0)) for row in rows],
        page=page,
        page_count=paginator.num_pages,
        total=paginator.count,
    )


def session_detail(
    *, session_id: uuid.UUID, before: uuid.UUID | None = None, limit: int | None = None
) -> SessionDetail | None:
    """A session with its turns and their messages (content blocks as stored), oldest first.

    `limit` bounds the turns to the latest ones (or the ones before the turn `before`), so that a
    session of thousands of turns is read a page at a time; the messages are those from the first
    turn's first message up to the next page's (so messages stored without a turn keep their
    place). Raises `LookupError` when `before` is not a turn of the session.
    """
    session = AgentSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
    turns_of = Turn.objects.filter(session=session)
    turn_count = turns_of.count()
    upper: int | None = None
    if before is not None:
        anchor = turns_of.filter(pk=before).values_list("started_at", "id").first()
        if anchor is None:
            raise LookupError(before)
        started_at, anchor_id = anchor
        turns_of = turns_of.filter(Q(started_at__lt=started_at) | Q(id__lt=anchor_id), started_at__lte=started_at)
        upper = _first_message_id(session_id=session_id, turn_ids=[anchor_id])
    rows = list(turns_of.order_by("-started_at", "-id")[: limit + 1] if limit else turns_of.order_by("-started_at"))
    earlier = limit is not None and len(rows) > limit
    rows = rows[:limit] if limit else rows
    rows.reverse()
    turns = [
        TurnRecord(
            id=turn.id,
            actor=turn.actor,
            status=turn.status,
            stop_reason=turn.stop_reason,
            error=turn.error,
            model=turn.model,
            usage=turn.usage,
            tokens_total=turn.tokens_total,
            cost_usd=turn.cost_usd,
            iterations=turn.iterations,
            started_at=turn.started_at,
            finished_at=turn.finished_at,
        )
        for turn in rows
    ]
    messages_of = Message.objects.filter(session=session)
    if earlier:
        lower = _first_message_id(session_id=session_id, turn_ids=[turn.id for turn in rows])
        messages_of = messages_of.filter(id__gte=lower) if lower is not None else messages_of.none()
    if upper is not None:
        messages_of = messages_of.filter(id__lt=upper)
    messages = [
        MessageRecord(
            id=message.pk,
            turn_id=message.turn_id,
            role=message.role,
            content=message.content,
            created_at=message.created_at,
            kind=message.kind,
            replaces_through=message.replaces_through,
        )
        for message in messages_of.order_by("id")
    ]
    return SessionDetail(
        session=_summary(session, turn_count),
        turns=turns,
        messages=messages,
        context=session_context_in_use(session),
        earlier_than=rows[0].id if earlier else None,
    )


def _first_message_id(*, session_id: uuid.UUID, turn_ids: list[uuid.UUID]) -> int | None:
    first = Message.objects.filter(session_id=session_id, turn_id__in=turn_ids).aggregate(first=Min("id"))
    return first["first"]


def session_context_in_use(session: AgentSession) -> ContextInUse:
    return ContextInUse(
        tokens=session.context_tokens,
        window=session.context_window,
        compactions=session.compactions,
        compacted_at=session.compacted_at,
    )


@dataclass(frozen=True)
class TurnStatus:
    id: uuid.UUID
    session_id: uuid.UUID
    status: str


def turn_status(*, turn_id: uuid.UUID) -> TurnStatus | None:
    row = Turn.objects.filter(pk=turn_id).values_list("session_id", "status").first()
    return None if row is None else TurnStatus(id=turn_id, session_id=row[0], status=row[1])


def _summary(session: AgentSession, turn_count: int) -> SessionSummary:
    return SessionSummary(
        id=session.id,
        title=session.title,
        actor=session.actor,
        origin=session.origin,
        created_at=session.created_at,
        last_active_at=session.last_active_at,
        turn_count=turn_count,
        model=session.model,
    )


def turns_finished(*, turn_ids: list[uuid.UUID]) -> list[Turn]:
    """These turns, if they have ended (to announce their end)."""
    return list(Turn.objects.filter(pk__in=turn_ids).exclude(status=Turn.Status.RUNNING))


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended, as stored: what `GET /turns/<id>/events` answers once it is over."""

    session_id: uuid.UUID
    status: str
    stop_reason: str
    error: str
    iterations: int
    usage: dict[str, int]
    cost_usd: str | None
    # Every text block the turn's assistant messages hold, in order (what its `text` events said).
    answer_blocks: list[str]


def turn_outcome(*, turn_id: uuid.UUID) -> TurnOutcome | None:
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None:
        return None
    contents = Message.objects.filter(turn_id=turn_id, role=Message.Role.ASSISTANT).order_by("id")
    blocks = [
        block["text"]
        for content in contents.values_list("content", flat=True)
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text")
    ]
    return TurnOutcome(
        session_id=turn.session_id,
        status=turn.status,
        stop_reason=turn.stop_reason,
        error=turn.error,
        iterations=turn.iterations,
        usage=dict(turn.usage),
        cost_usd=None if turn.cost_usd is None else str(turn.cost_usd),
        answer_blocks=blocks,
    )


def session_context(session: AgentSession) -> SessionContext:
    """The session's stored messages as the context manager reads them (all of them, oldest first)."""
    rows = session.messages.order_by("id").values_list("id", "turn_id", "role", "content", "kind", "replaces_through")
    return SessionContext(
        messages=[StoredMessage(*row) for row in rows],
        tool_results_cleared_through=session.tool_results_cleared_through,
    )


def session_context_recent(session: AgentSession) -> SessionContext:
    """What a new turn needs of the session: its latest summary and the messages after what that
    summary replaces (all of them when there is none), in one bounded read instead of every message.

    `SessionContext.history()` gives the same conversation from it as from `session_context`.
    """
    columns = ("id", "turn_id", "role", "content", "kind", "replaces_through")
    summary = session.messages.filter(kind=Message.Kind.SUMMARY).order_by("-id").values_list(*columns).first()
    rows = session.messages.exclude(kind=Message.Kind.SUMMARY)
    if summary is not None:
        rows = rows.filter(id__gt=summary[5] or 0)
    messages = [StoredMessage(*row) for row in rows.order_by("id").values_list(*columns)]
    if summary is not None:
        messages.insert(0, StoredMessage(*summary))
    return SessionContext(messages=messages, tool_results_cleared_through=session.tool_results_cleared_through)


def session_context_load(*, session_id: uuid.UUID) -> SessionContext:
    return session_context(AgentSession.objects.get(pk=session_id))


def turn_questions(*, turn_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The operator's question that started each of these turns (its first user message's text)."""
    rows = (
        Message.objects.exclude(kind=Message.Kind.SUMMARY)
        .filter(turn_id__in=turn_ids, role=Message.Role.USER)
        .order_by("id")
        .values_list("turn_id", "content")
    )
    questions: dict[uuid.UUID, str] = {}
    for turn_id, content in rows:
        parts = content if isinstance(content, list) else []
        questions.setdefault(turn_id, "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text"))
    return questions
