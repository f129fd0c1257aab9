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
from django.db.models import Count

from agent.engine.context import SessionContext, StoredMessage
from agent.models import AgentSession, Message, ToolCatalog, Turn
from agent.redaction import redact


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
    # `summary`: the model's summary of the messages up to `replaces_through` (engine.context).
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


def session_page(*, page: int, page_size: int) -> SessionPage:
    """One page of sessions, most recently active first. Page 1 always exists, even when empty.

    Raises:
        PageOutOfRange: `page` is past the last page.
    """
    sessions = AgentSession.objects.annotate(turn_count=Count("turns")).order_by("-last_active_at", "-id")
    paginator = Paginator(sessions, page_size)
    if page > paginator.num_pages:
        raise PageOutOfRange(page, paginator.num_pages)
    rows = paginator.page(page).object_list
    return SessionPage(
        sessions=[_summary(row, row.turn_count) for row in rows],
        page=page,
        page_count=paginator.num_pages,
        total=paginator.count,
    )


def session_detail(*, session_id: uuid.UUID) -> SessionDetail | None:
    """A session with its turns and its messages (content blocks as stored), oldest first."""
    session = AgentSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
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
        for turn in Turn.objects.filter(session=session).order_by("started_at", "id")
    ]
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
        for message in Message.objects.filter(session=session).order_by("id")
    ]
    return SessionDetail(
        session=_summary(session, len(turns)), turns=turns, messages=messages, context=session_context_in_use(session)
    )


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


def tool_catalog_get(*, server: str, target: str) -> list[dict[str, Any]] | None:
    """The tool list `server` last answered at `target`, or None when none is known."""
    # Stored redacted (a URL may carry a token): compare like with like.
    row = ToolCatalog.objects.filter(server=server, target=redact(target)).values_list("tools", flat=True).first()
    return None if row is None else list(row)


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


def session_context_load(*, session_id: uuid.UUID) -> SessionContext:
    return session_context(AgentSession.objects.get(pk=session_id))
