"""Reads for the control room: sessions, a session's turns as `TurnView`s, the tool-call ledger.

Synchronous (async callers wrap them in `database_sync_to_async`) and returning plain data, so
templates rendered from consumers never touch a queryset.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When

from agent import selectors as agent_selectors
from agent.budget import INVESTIGATION_ORIGIN, BudgetConfig, spend_today
from agent.llm import ModelConfig
from agent.models import Activity, AgentSession, Turn
from agent.selectors import ContextInUse
from oikos import selectors as oikos_selectors
from oikos.card_context import target_facts
from oikos.change_view import ChangeView, change_views_of_calls, session_change_views
from watch import selectors as watch_selectors
from watch.models import Investigation
from watch.recollection import Recollection, recollection_of

# The chat drawer, on every page but home, draws fewer: it is a side pane, and its turns would
# otherwise be most of the ledger's and search's render time. "Open in full" has the rest.
DRAWER_TURNS_SHOWN = 5


# Where a session not started in the control room came from (`AgentSession.origin`), as its badge
# in the session list says it and what the badge's tooltip adds. Investigations (`signal`) carry
# their own badge; the control room's own sessions (`ui`) carry none.
SESSION_ORIGINS: dict[str, tuple[str, str]] = {
    "cli": ("ask", "Asked from a terminal with manage.py ask"),
    "api": ("API", "Asked over the HTTP API (/chat)"),
    "mcp": ("MCP", "Asked by an MCP client through Hermes's MCP server"),
    "a2a": ("A2A", "A peer agent talking to Hermes over A2A"),
    "matrix": ("Matrix", "Asked in the Matrix room"),
    "schedule": ("scheduled", "Asked by a schedule (the Schedules page)"),
}
ORIGINS_UNBADGED = frozenset({"", "ui", INVESTIGATION_ORIGIN})


@dataclass(frozen=True)
class SessionRow:
    id: str
    title: str
    actor: str
    origin: str
    last_active_at: datetime.datetime
    # For a session Hermes opened on an Oikos event: the investigation's state (open, resolved,
    # skipped) and how often the event fired; "" and 0 otherwise.
    investigation: str = ""
    fired_count: int = 0

    @property
    def origin_badge(self) -> str:
        """The badge of a session started outside the control room; "" for the control room's own."""
        if self.origin in ORIGINS_UNBADGED:
            return ""
        return SESSION_ORIGINS.get(self.origin, (self.origin, ""))[0]

    @property
    def origin_hint(self) -> str:
        return SESSION_ORIGINS.get(self.origin, ("", f"Started over {self.origin}"))[1]


@dataclass(frozen=True)
class EscalationCard:
    """An investigation's escalation, rendered at the top of its session."""

    state: str
    storm: bool
    fired_count: int
    skipped_reason: str
    entity: str
    event_type: str
    event_at: str
    summary: str
    impact: str
    likely_cause: str
    next_step: str
    evidence: list[dict[str, Any]]
    approvals: list[dict[str, Any]]
    correlation_id: str
    finished: bool
    # Executions it proposed in Hermes (`agent.proposals`), waiting for or decided by an operator.
    proposals: list[dict[str, Any]] = field(default_factory=list)
    # What depends on the entity, as Oikos last told a card (`oikos.card_context`), drawn as a graph.
    blast_radius: list[dict[str, Any]] = field(default_factory=list)
    # The executions the investigation's session asked for, and what their follow-ups found.
    changes: list[ChangeView] = field(default_factory=list)
    # The earlier investigations of its entity and kind its brief recalled (`watch.recollection`).
    recollection: Recollection | None = None


def session_escalation(*, session_id: uuid.UUID) -> EscalationCard | None:
    """The escalation card of a session that is an investigation; None for any other session."""
    investigation = Investigation.objects.filter(session_id=session_id).first()
    if investigation is None:
        return None
    escalation = investigation.escalation or {}
    return EscalationCard(
        state=investigation.state,
        storm=investigation.storm,
        fired_count=investigation.fired_count,
        skipped_reason=investigation.skipped_reason,
        entity=investigation.entity,
        event_type=str(investigation.event.get("type", "")),
        event_at=str(investigation.event.get("at", "")),
        summary=str(escalation.get("summary", "")),
        impact=str(escalation.get("impact", "")),
        likely_cause=str(escalation.get("likely_cause", "")),
        next_step=str(escalation.get("next_step", "")),
        evidence=list(escalation.get("evidence", [])),
        approvals=list(escalation.get("approvals", [])),
        correlation_id=str(escalation.get("correlation_id", "")),
        finished=bool(escalation),
        proposals=list(escalation.get("proposals", [])),
        blast_radius=_blast_radius_cached(investigation.entity),
        changes=session_change_views([session_id]).get(str(session_id), []),
        recollection=recollection_of(investigation),
    )


async def escalation_blast_fetch(card: EscalationCard) -> EscalationCard:
    """The card with its entity's blast radius, asked of Oikos when no card has asked lately (bounded
    in time and cached like a card's, `oikos/card_context.py`); unchanged when Oikos cannot say."""
    if not card.entity or card.blast_radius:
        return card
    facts = (await target_facts([card.entity])).get(card.entity)
    return replace(card, blast_radius=facts.blast_radius) if facts is not None else card


def escalation_blast_load(card: EscalationCard) -> EscalationCard:
    """`escalation_blast_fetch` for a page being served."""
    return async_to_sync(escalation_blast_fetch)(card)


def _blast_radius_cached(entity: str) -> list[dict[str, Any]]:
    """The entity's blast radius if a card fetched it recently (`escalation_blast_load` fetches it)."""
    if not entity:
        return []
    ttl = float(settings.HERMES_CARD_CONTEXT_TTL)
    facts = oikos_selectors.target_facts_cached(targets=[entity], ttl=ttl, failure_ttl=0).get(entity)
    return facts.blast_radius if facts is not None else []


def budget_meter() -> dict[str, Any]:
    """Today's spend against the daily budgets, for the rail's meter (agent/budget.py)."""
    spend = spend_today()
    config = BudgetConfig.from_settings()
    daily = config.daily
    return {
        "tokens": spend.tokens,
        # Held by turns still running beyond what they spent so far: admission counts it too.
        "reserved": spend.reserved_tokens,
        "cost_usd": spend.cost_usd or "",
        "daily": daily,
        "percent": min(100, round(100 * spend.tokens / daily)) if daily else 0,
        "high": round(daily * 0.8),
        "exhausted": bool(daily) and spend.committed >= daily,
        "investigation_tokens": spend.investigation_tokens,
        "investigation_budget": config.investigation_daily,
        "timezone": config.timezone,
    }


def session_exists(*, session_id: uuid.UUID) -> bool:
    return AgentSession.objects.filter(pk=session_id).exists()


def session_model(*, session_id: uuid.UUID | None) -> str:
    """The model the session's next turn uses unless the operator picks another: the one it was
    switched to (while the allowlist still offers it), else the default."""
    chosen = AgentSession.objects.filter(pk=session_id).values_list("model", flat=True).first() if session_id else ""
    return _model_in_use(chosen or "")


def _model_in_use(chosen: str) -> str:
    config = ModelConfig.from_settings()
    return chosen if chosen and chosen in config.models else config.model


def model_picker(*, session_id: uuid.UUID | None, chosen: str | None = None) -> dict[str, Any]:
    """What the composer's model selector shows: the models offered (none when there is no choice)
    and the one selected. `chosen`: the session's own pick, when the caller has read it already."""
    offered = list(ModelConfig.from_settings().models)
    model = _model_in_use(chosen) if chosen is not None else session_model(session_id=session_id)
    return {"models": offered if len(offered) > 1 else [], "model": model}


@dataclass(frozen=True)
class SessionHead:
    """What a conversation's header and composer show of its session, read in one query."""

    title: str
    model: str
    context: ContextInUse


def session_head(*, session_id: uuid.UUID) -> SessionHead | None:
    session = AgentSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
    return SessionHead(
        title=session.title, model=session.model, context=agent_selectors.session_context_in_use(session)
    )


def sessions_recent(*, query: str = "", limit: int = 30) -> list[SessionRow]:
    """Sessions, most recently active first; `query` matches the title or the start of the id."""
    sessions = AgentSession.objects.select_related("investigation").order_by("-last_active_at")
    query = query.strip()
    if query:
        sessions = sessions.filter(Q(title__icontains=query) | Q(id__startswith=query.lower()))
    return [
        SessionRow(
            id=str(session.id),
            title=session.title or "Untitled session",
            actor=session.actor,
            origin=session.origin,
            last_active_at=session.last_active_at,
            **_investigation_of(session),
        )
        for session in sessions[:limit]
    ]


def _investigation_of(session: AgentSession) -> dict[str, Any]:
    try:
        # The reverse side of `Investigation.session`, fetched with the list (select_related).
        investigation: Investigation = getattr(session, "investigation")  # noqa: B009
    except Investigation.DoesNotExist:
        return {}
    return {"investigation": investigation.state, "fired_count": investigation.fired_count}


# --- the ledger ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerFilters:
    turn: uuid.UUID | None = None
    session: uuid.UUID | None = None
    server: str = ""
    tool: str = ""
    errors_only: bool = False
    # One of `Activity.State` ("" for any), as the page shows it (see `activity_state_shown`).
    state: str = ""


@dataclass(frozen=True)
class LedgerPage:
    """One page of the ledger, newest first, and where the pages beside it start.

    Keyset pagination: a page is named by the row it follows (`older_than`) or precedes
    (`newer_than`), so page 2,000 costs what page 1 costs and no page counts the whole ledger.
    """

    calls: Sequence[Activity]
    # The id to pass as `older_than` for the next, older page; None on the oldest page.
    older_than: int | None
    # The id to pass as `newer_than` for the previous, newer page; None on the newest page.
    newer_than: int | None
    # Hermes's record of the executions the page's `request_execution` calls started, by row id.
    records: dict[int, ChangeView] = field(default_factory=dict)


def ledger_page(
    *, filters: LedgerFilters, older_than: int | None = None, newer_than: int | None = None, per_page: int = 50
) -> LedgerPage:
    """Tool calls, newest first, narrowed by `filters`; each row's `shown_state` is its state as shown.

    Without a cursor, the newest page; `older_than`/`newer_than` (a row's id) the page after/before
    that row. A cursor naming no row gives the newest page.
    """
    turn_running = Exists(Turn.objects.filter(pk=OuterRef("correlation_id"), status=Turn.Status.RUNNING))
    calls = Activity.objects.annotate(turn_running=turn_running).annotate(
        shown_state=Case(
            When(state=Activity.State.STARTED, turn_running=False, then=Value(Activity.State.UNKNOWN.value)),
            default=F("state"),
        )
    )
    if filters.state:
        calls = calls.filter(shown_state=filters.state)
    if filters.turn:
        calls = calls.filter(correlation_id=filters.turn)
    if filters.session:
        calls = calls.filter(session_id=filters.session)
    if filters.server:
        calls = calls.filter(server=filters.server)
    if filters.tool:
        calls = calls.filter(tool=filters.tool)
    if filters.errors_only:
        # Calls whose outcome is unknown were answered to the model as errors: they are listed too.
        calls = calls.filter(Q(is_error=True) | Q(shown_state=Activity.State.UNKNOWN))
    cursor_id = newer_than if newer_than is not None else older_than
    cursor = Activity.objects.filter(pk=cursor_id).values_list("started_at", "id").first() if cursor_id else None
    newest_first = newer_than is None or cursor is None
    if cursor is not None:
        started_at, row_id = cursor
        # "(started_at, id) before the cursor", spelt so that the bound on started_at alone is an
        # index range (an OR of the two is a filter, read from the top of the index down).
        if newest_first:
            calls = calls.filter(Q(started_at__lt=started_at) | Q(id__lt=row_id), started_at__lte=started_at)
        else:
            calls = calls.filter(Q(started_at__gt=started_at) | Q(id__gt=row_id), started_at__gte=started_at)
    order = ("-started_at", "-id") if newest_first else ("started_at", "id")
    # One row more than the page says whether there is a page beyond it.
    rows = list(calls.order_by(*order)[: per_page + 1])
    beyond = len(rows) > per_page
    rows = rows[:per_page]
    if not newest_first:
        rows.reverse()
    if not rows:
        return LedgerPage(calls=[], older_than=None, newer_than=None)
    # The executions these calls started: their status and verdict (`oikos.change_view`).
    records = change_views_of_calls(row.pk for row in rows if row.tool == "request_execution")
    if newest_first:
        older, newer = beyond, cursor is not None
    else:
        older, newer = True, beyond
    return LedgerPage(
        calls=rows,
        older_than=rows[-1].pk if older else None,
        newer_than=rows[0].pk if newer else None,
        records=records,
    )


def ledger_choices() -> dict[str, list[str]]:
    """The servers and tools that appear in the ledger, for the filter menus."""
    return {"servers": _distinct_values("server"), "tools": _distinct_values("tool")}


def _distinct_values(column: str) -> list[str]:
    """The distinct values of an indexed ledger column, in order, by one index probe per value.

    `SELECT DISTINCT` reads every row (hundreds of thousands: the ledger grows with every call);
    there are only tens of servers and tools, and this walks the index from one to the next.
    """
    # Both names are interpolated into SQL below: they must be ours, never input.
    if column not in ("server", "tool"):
        raise ValueError(column)
    table = Activity._meta.db_table
    sql = (
        f"WITH RECURSIVE found(value) AS ("
        f" SELECT MIN({column}) FROM {table}"
        f" UNION ALL SELECT (SELECT MIN({column}) FROM {table} WHERE {column} > found.value)"
        f" FROM found WHERE found.value IS NOT NULL"
        f") SELECT value FROM found WHERE value IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [row[0] for row in cursor.fetchall()]


def session_origins() -> list[str]:
    """Where the stored sessions were opened (ui, api, cli, signal, ...), for the search filter."""
    return list(AgentSession.objects.order_by("origin").values_list("origin", flat=True).distinct())


# --- approval cards ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DigestCard:
    """The home page's card of the latest digest (plain data: a consumer renders it too)."""

    # False: no digest has run yet (the card is a quiet hint); the rest is then empty.
    ran: bool
    # The answer's first line, as the run stored it ("All green."); "" when the answer had none.
    verdict: str = ""
    schedule_name: str = ""
    finished_at: datetime.datetime | None = None
    session_id: str = ""
    turn_id: str = ""
    # Whether a digest schedule exists at all (the hint says "none yet" or "not run yet").
    scheduled: bool = False


def digest_card() -> DigestCard:
    """The latest finished digest, for the home page."""
    run = watch_selectors.digest_latest()
    if run is None:
        return DigestCard(ran=False, scheduled=watch_selectors.digest_scheduled())
    return DigestCard(
        ran=True,
        verdict=run.verdict,
        schedule_name=run.schedule.name,
        finished_at=run.finished_at or run.claimed_at,
        session_id=str(run.session_id or ""),
        turn_id=str(run.turn_id or ""),
        scheduled=True,
    )
