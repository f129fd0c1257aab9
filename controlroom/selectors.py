"""Reads for the control room: sessions, a session's turns as `TurnView`s, the tool-call ledger.

Synchronous (async callers wrap them in `database_sync_to_async`) and returning plain data, so
templates rendered from consumers never touch a queryset.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Case, Exists, F, OuterRef, Q, QuerySet, Value, When
from django.utils import timezone

from agent import selectors as agent_selectors
from agent.budget import spend_today
from agent.engine.approvals import REQUEST_EXECUTION, approval_from_result
from agent.engine.loop import PREVIEW_CHARS
from agent.models import Activity, AgentSession, Elicitation, Message, Turn
from agent.selectors import ContextInUse
from agent.tools.config import oikos_server_name
from controlroom.cards import CardOrigin, TargetFacts
from controlroom.models import ApprovalDecision, TargetContext
from controlroom.transcript import (
    ApprovalItem,
    ElicitationItem,
    NoticeItem,
    TextItem,
    ThinkingItem,
    ToolItem,
    TurnView,
)
from watch.models import Investigation

# A session page (and the chat drawer, and its socket's snapshot) draws this many of the latest
# turns: enough to scroll back through, few enough that a session of thousands of turns opens as
# fast as a short one (bench/scale.py). Earlier turns are a link away.
SESSION_TURNS_SHOWN = 20
# The chat drawer, on every page but home, draws fewer: it is a side pane, and its turns would
# otherwise be most of the ledger's and search's render time. "Open in full" has the rest.
DRAWER_TURNS_SHOWN = 5


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
    )


def budget_meter() -> dict[str, Any]:
    """Today's spend against the daily budgets, for the rail's meter (agent/budget.py)."""
    spend = spend_today()
    daily = settings.HERMES_DAILY_TOKEN_BUDGET
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
        "investigation_budget": settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET,
        "timezone": settings.HERMES_BUDGET_TIMEZONE,
    }


def session_exists(*, session_id: uuid.UUID) -> bool:
    return AgentSession.objects.filter(pk=session_id).exists()


def session_model(*, session_id: uuid.UUID | None) -> str:
    """The model the session's next turn uses unless the operator picks another: the one it was
    switched to (while the allowlist still offers it), else the default."""
    chosen = AgentSession.objects.filter(pk=session_id).values_list("model", flat=True).first() if session_id else ""
    return _model_in_use(chosen or "")


def _model_in_use(chosen: str) -> str:
    return chosen if chosen and chosen in settings.HERMES_MODELS else settings.HERMES_MODEL


def model_picker(*, session_id: uuid.UUID | None, chosen: str | None = None) -> dict[str, Any]:
    """What the composer's model selector shows: the models offered (none when there is no choice)
    and the one selected. `chosen`: the session's own pick, when the caller has read it already."""
    offered = list(settings.HERMES_MODELS)
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


@dataclass(frozen=True)
class TurnsPage:
    """Some of a session's turns, oldest first, and where the earlier ones start."""

    turns: list[TurnView]
    # The id of the first turn shown, when there are turns before it: the next page's `before`.
    earlier_than: uuid.UUID | None
    # The turn these come before (None: the latest turns, the page that follows live).
    before: uuid.UUID | None = None


def session_turn_views(*, session_id: uuid.UUID, limit: int = SESSION_TURNS_SHOWN) -> list[TurnView]:
    """The session's latest turns, oldest first, as the transcript shows them."""
    return session_turns_page(session_id=session_id, limit=limit).turns


def session_turns_page(
    *, session_id: uuid.UUID, before: uuid.UUID | None = None, limit: int = SESSION_TURNS_SHOWN
) -> TurnsPage:
    """The session's latest `limit` turns, or the `limit` turns before the turn `before`.

    Bounded so that a session of thousands of turns opens as fast as a short one; the transcript
    links to the earlier turns. A `before` that is not a turn of the session reads as the latest.
    """
    turns_of = Turn.objects.filter(session_id=session_id)
    anchor = turns_of.filter(pk=before).values_list("started_at", "id").first() if before else None
    if anchor is not None:
        started_at, turn_id = anchor
        turns_of = turns_of.filter(Q(started_at__lt=started_at) | Q(id__lt=turn_id), started_at__lte=started_at)
    # One turn more than shown says whether there are earlier ones.
    turns = list(turns_of.order_by("-started_at", "-id")[: limit + 1])
    earlier = len(turns) > limit
    turns = turns[:limit]
    turns.reverse()
    if not turns:
        return TurnsPage(turns=[], earlier_than=None, before=before if anchor else None)
    turn_ids = [turn.id for turn in turns]
    messages: dict[uuid.UUID, list[tuple[str, list[dict[str, Any]]]]] = defaultdict(list)
    first_ids: dict[uuid.UUID, int] = {}
    rows = (
        _people_messages().filter(turn_id__in=turn_ids).order_by("id").values_list("id", "turn_id", "role", "content")
    )
    for message_id, turn_id, role, content in rows:
        first_ids.setdefault(turn_id, message_id)
        messages[turn_id].append((role, content if isinstance(content, list) else []))
    calls = {row.tool_use_id: row for row in _calls_shown().filter(correlation_id__in=turn_ids) if row.tool_use_id}
    views = [_turn_view(turn, messages[turn.id], calls) for turn in turns]
    _elicitations_place(views)
    summaries = _summaries_before(session_id=session_id, first_ids=first_ids)
    for view in views:
        view.summary_before = summaries.get(uuid.UUID(view.turn_id), "")
    return TurnsPage(turns=views, earlier_than=turns[0].id if earlier else None, before=before if anchor else None)


def turn_view(*, turn_id: uuid.UUID) -> TurnView | None:
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None:
        return None
    rows = list(_people_messages().filter(turn_id=turn_id).order_by("id").values_list("id", "role", "content"))
    calls = {row.tool_use_id: row for row in _calls_shown().filter(correlation_id=turn_id) if row.tool_use_id}
    view = _turn_view(turn, [(role, content) for _id, role, content in rows], calls)
    _elicitations_place([view])
    if rows:
        summaries = _summaries_before(session_id=turn.session_id, first_ids={turn.id: rows[0][0]})
        view.summary_before = summaries.get(turn.id, "")
    return view


def _elicitations_place(views: list[TurnView]) -> None:
    """Put each turn's MCP questions (elicitations) right after the tool call that asked them."""
    by_turn: dict[str, list[Elicitation]] = defaultdict(list)
    rows = Elicitation.objects.filter(correlation_id__in=[view.turn_id for view in views]).order_by("created_at")
    for row in rows:
        by_turn[str(row.correlation_id)].append(row)
    for view in views:
        for row in by_turn.get(view.turn_id, []):
            item = ElicitationItem(
                id=str(row.pk),
                server=row.server,
                tool=row.tool,
                message=row.message,
                fields=list(row.fields),
                status=row.status,
                content=row.content,
                reason=row.reason,
                answered_by=row.answered_by,
                expires_at=row.expires_at.isoformat(),
                purpose=row.purpose,
            )
            after = next(
                (
                    index
                    for index, shown in enumerate(view.items)
                    if isinstance(shown, ToolItem) and shown.tool_use_id == row.tool_use_id
                ),
                len(view.items) - 1,
            )
            view.items.insert(after + 1, item)


def _calls_shown() -> QuerySet[Activity]:
    """Ledger rows as a transcript's tool chips read them: without the arguments and the full
    result (the chips show the model's copy of both, from the messages)."""
    return Activity.objects.defer("arguments", "result")


def _people_messages() -> QuerySet[Message]:
    """Messages as people read them: everything but the summaries written for the model."""
    return Message.objects.exclude(kind=Message.Kind.SUMMARY)


def _summaries_before(*, session_id: uuid.UUID, first_ids: dict[uuid.UUID, int]) -> dict[uuid.UUID, str]:
    """Per turn, the model's summary of the turns before it, when one ends right before it.

    A summary replaces the messages up to its `replaces_through` id, always a whole number of
    turns: the turn whose first message follows that id is where the transcript marks it. One
    probe of the (session, id) index per summary — a session compacts a few times, and reading
    every message id of a long session to place them costs more than the page.
    """
    summaries = Message.objects.filter(session_id=session_id, kind=Message.Kind.SUMMARY).order_by("id")
    boundaries = {
        through: "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
        for through, content in summaries.values_list("replaces_through", "content")
        if through is not None
    }
    if not boundaries or not first_ids:
        return {}
    turn_of_first = {first: turn_id for turn_id, first in first_ids.items()}
    people = _people_messages().filter(session_id=session_id)
    lowest, highest = min(turn_of_first), max(turn_of_first)
    # Only a summary ending on the message right before these turns, or among them, marks one.
    floor = people.filter(id__lt=lowest).order_by("-id").values_list("id", flat=True).first()
    near = [through for through in boundaries if through == floor or lowest <= through < highest]
    found: dict[uuid.UUID, str] = {}
    for through in people.filter(id__in=near).values_list("id", flat=True):
        following = people.filter(id__gt=through).order_by("id").values_list("id", flat=True).first()
        if following in turn_of_first:
            found[turn_of_first[following]] = boundaries[through]
    return found


def _turn_is_stale(turn: Turn) -> bool:
    """A `running` turn whose heartbeat stopped belongs to a process that died."""
    if turn.status != Turn.Status.RUNNING:
        return False
    beat = turn.heartbeat_at or turn.started_at
    return (timezone.now() - beat).total_seconds() > settings.HERMES_TURN_STALE_SECONDS


def _turn_view(turn: Turn, messages: list[tuple[str, list[dict[str, Any]]]], calls: dict[str, Activity]) -> TurnView:
    view = TurnView(
        turn_id=str(turn.id),
        session_id=str(turn.session_id),
        question="",
        asked_by=turn.actor,
        started_at=turn.started_at.isoformat(),
        status=Turn.Status.INTERRUPTED if _turn_is_stale(turn) else turn.status,
        stop_reason=turn.stop_reason,
        iterations=turn.iterations,
        usage=dict(turn.usage or {}),
        model=turn.model,
        cost_usd="" if turn.cost_usd is None else str(turn.cost_usd),
    )
    block = thinking = 0
    for index, (role, content) in enumerate(messages):
        if role == Message.Role.USER and index == 0:
            view.question = _text_of(content)
            continue
        for part in content:
            kind = part.get("type")
            if role == Message.Role.ASSISTANT and kind == "text" and part.get("text"):
                view.items.append(TextItem(block=block, text=str(part["text"]), done=True))
                block += 1
            elif role == Message.Role.ASSISTANT and kind in ("thinking", "redacted_thinking"):
                text = str(part.get("thinking", "")) if kind == "thinking" else ""
                view.items.append(
                    ThinkingItem(block=thinking, text=text, done=True, redacted=kind == "redacted_thinking")
                )
                thinking += 1
            elif role == Message.Role.ASSISTANT and kind == "tool_use":
                call = calls.get(str(part.get("id", "")))
                view.items.append(_tool_item(part, call, turn_running=view.status == Turn.Status.RUNNING))
            elif role == Message.Role.USER and kind == "tool_result":
                _tool_result_apply(view, part)
    if view.status in (Turn.Status.ERROR, Turn.Status.CANCELLED, Turn.Status.INTERRUPTED):
        message = turn.error or "The process running this turn stopped before it finished."
        view.items.append(NoticeItem(code=view.status, message=message))
    return view


def _text_of(content: list[dict[str, Any]]) -> str:
    return "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def _tool_item(block: dict[str, Any], call: Activity | None, *, turn_running: bool) -> ToolItem:
    name = str(block.get("name", ""))
    arguments = block.get("input")
    state = activity_state_shown(call.state, turn_running=turn_running) if call else ""
    return ToolItem(
        tool_use_id=str(block.get("id", "")),
        name=name,
        server=call.server if call else "",
        tool=call.tool if call else name,
        input=arguments if isinstance(arguments, dict) else {},
        is_error=(call.is_error or state == Activity.State.UNKNOWN) if call else False,
        duration_ms=call.duration_ms if call else 0,
        state=state,
    )


def activity_state_shown(state: str, *, turn_running: bool) -> str:
    """A ledger row's state as an operator should read it.

    A row left `started` by a turn that is no longer running was cut off by a crash that nobody has
    settled yet (the session's next turn does, `services.activity_settle_interrupted`): its outcome
    is unknown — it may have run — not "in flight".
    """
    if state == Activity.State.STARTED and not turn_running:
        return Activity.State.UNKNOWN
    return state


def _tool_result_apply(view: TurnView, block: dict[str, Any]) -> None:
    tool = view.tool_item(str(block.get("tool_use_id", "")))
    if tool is None:
        return
    content = block.get("content", "")
    text = content if isinstance(content, str) else _text_of(content if isinstance(content, list) else [])
    tool.done = True
    tool.is_error = tool.is_error or bool(block.get("is_error"))
    if not tool.state:  # no ledger row (a call from before the ledger kept states)
        tool.state = "error" if tool.is_error else "ok"
    tool.result = text[:PREVIEW_CHARS]
    tool.truncated = len(text) > PREVIEW_CHARS
    if tool.tool != REQUEST_EXECUTION or tool.is_error:
        return
    try:
        structured = json.loads(text)
    except ValueError:
        return
    # The server comes from the ledger row: a `request_execution` of any other server raises no card.
    approval = approval_from_result(
        server=tool.server, tool=tool.tool, tool_use_id=tool.tool_use_id, structured=structured
    )
    if approval is not None:
        item = ApprovalItem(
            approval_id=approval.approval_id,
            execution_id=approval.execution_id,
            target=approval.target,
            action=approval.action,
            risk_class=approval.risk_class,
            status=approval.status,
            message=approval.message,
        )
        view.approval_origin_note(item, tool.tool_use_id)
        view.items.append(item)


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
    if newest_first:
        older, newer = beyond, cursor is not None
    else:
        older, newer = True, beyond
    return LedgerPage(
        calls=rows,
        older_than=rows[-1].pk if older else None,
        newer_than=rows[0].pk if newer else None,
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


def approval_decisions_recent(*, limit: int = 50) -> list[ApprovalDecision]:
    return list(ApprovalDecision.objects.order_by("-decided_at", "-id")[:limit])


# --- approval cards ----------------------------------------------------------------------------------


def approval_origins(*, approval_ids: list[str]) -> dict[str, CardOrigin]:
    """The turns whose `request_execution` raised these approvals, by approval id.

    Found in the ledger: the call's row keeps the arguments (the model's `reason`) and the result
    (the approval id Oikos answered). An approval raised outside Hermes has no origin.
    """
    if not approval_ids:
        return {}
    calls = (
        Activity.objects.filter(
            tool=REQUEST_EXECUTION,
            server=oikos_server_name(),
            result__structured_content__approval_id__in=approval_ids,
        )
        .exclude(session=None)
        .values_list("correlation_id", "session_id", "arguments", "result")
    )
    found: dict[uuid.UUID, tuple[str, uuid.UUID, str]] = {}
    for turn_id, session_id, arguments, result in calls:
        structured = result.get("structured_content") if isinstance(result, dict) else None
        approval_id = str(structured.get("approval_id", "")) if isinstance(structured, dict) else ""
        reason = arguments.get("reason") if isinstance(arguments, dict) else None
        found[turn_id] = (approval_id, session_id, reason if isinstance(reason, str) else "")
    questions: dict[uuid.UUID, str] = {}
    rows = (
        _people_messages()
        .filter(turn_id__in=list(found), role=Message.Role.USER)
        .order_by("id")
        .values_list("turn_id", "content")
    )
    for turn_id, content in rows:
        questions.setdefault(turn_id, _text_of(content if isinstance(content, list) else []))
    return {
        approval_id: CardOrigin(
            session_id=str(session_id), turn_id=str(turn_id), question=questions.get(turn_id, ""), reason=reason
        )
        for turn_id, (approval_id, session_id, reason) in found.items()
        if approval_id
    }


def target_facts_cached(*, targets: list[str], ttl: float, failure_ttl: float) -> dict[str, TargetFacts]:
    """What Oikos said about these targets, where it is recent enough to show without asking again.

    A failed answer is kept for `failure_ttl` only: long enough that an Oikos that is down does not
    slow every page, short enough that the card recovers soon after it is back.
    """
    now = timezone.now()
    found: dict[str, TargetFacts] = {}
    for row in TargetContext.objects.filter(target__in=targets):
        failed = bool(row.blast_problem or row.executions_problem)
        if (now - row.fetched_at).total_seconds() >= (min(ttl, failure_ttl) if failed else ttl):
            continue
        found[row.target] = TargetFacts(
            target=row.target,
            blast_radius=list(row.blast_radius or []),
            executions=list(row.executions or []),
            blast_problem=row.blast_problem,
            executions_problem=row.executions_problem,
            fetched_at=row.fetched_at,
        )
    return found
