"""Reads for the control room: sessions, a session's turns as `TurnView`s, the tool-call ledger.

Synchronous (async callers wrap them in `database_sync_to_async`) and returning plain data, so
templates rendered from consumers never touch a queryset.
"""

from __future__ import annotations

import bisect
import datetime
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.core.paginator import Page, Paginator
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

SESSION_TURNS_SHOWN = 200


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
    )


def budget_meter() -> dict[str, Any]:
    """Today's spend against the daily budgets, for the rail's meter (agent/budget.py)."""
    spend = spend_today()
    daily = settings.HERMES_DAILY_TOKEN_BUDGET
    return {
        "tokens": spend.tokens,
        "cost_usd": spend.cost_usd or "",
        "daily": daily,
        "percent": min(100, round(100 * spend.tokens / daily)) if daily else 0,
        "high": round(daily * 0.8),
        "exhausted": bool(daily) and spend.tokens >= daily,
        "investigation_tokens": spend.investigation_tokens,
        "investigation_budget": settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET,
        "timezone": settings.HERMES_BUDGET_TIMEZONE,
    }


def session_exists(*, session_id: uuid.UUID) -> bool:
    return AgentSession.objects.filter(pk=session_id).exists()


def session_title(*, session_id: uuid.UUID) -> str:
    return AgentSession.objects.filter(pk=session_id).values_list("title", flat=True).first() or ""


def session_model(*, session_id: uuid.UUID | None) -> str:
    """The model the session's next turn uses unless the operator picks another: the one it was
    switched to (while the allowlist still offers it), else the default."""
    chosen = AgentSession.objects.filter(pk=session_id).values_list("model", flat=True).first() if session_id else ""
    return chosen if chosen and chosen in settings.HERMES_MODELS else settings.HERMES_MODEL


def model_picker(*, session_id: uuid.UUID | None) -> dict[str, Any]:
    """What the composer's model selector shows: the models offered (none when there is no choice)
    and the one selected."""
    offered = list(settings.HERMES_MODELS)
    return {"models": offered if len(offered) > 1 else [], "model": session_model(session_id=session_id)}


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


def session_turn_views(*, session_id: uuid.UUID, limit: int = SESSION_TURNS_SHOWN) -> list[TurnView]:
    """The session's latest turns, oldest first, as the transcript shows them."""
    turns = list(Turn.objects.filter(session_id=session_id).order_by("-started_at")[:limit])
    turns.reverse()
    if not turns:
        return []
    turn_ids = [turn.id for turn in turns]
    messages: dict[uuid.UUID, list[tuple[str, list[dict[str, Any]]]]] = defaultdict(list)
    first_ids: dict[uuid.UUID, int] = {}
    rows = (
        _people_messages().filter(turn_id__in=turn_ids).order_by("id").values_list("id", "turn_id", "role", "content")
    )
    for message_id, turn_id, role, content in rows:
        first_ids.setdefault(turn_id, message_id)
        messages[turn_id].append((role, content if isinstance(content, list) else []))
    calls = {row.tool_use_id: row for row in Activity.objects.filter(correlation_id__in=turn_ids) if row.tool_use_id}
    views = [_turn_view(turn, messages[turn.id], calls) for turn in turns]
    _elicitations_place(views)
    summaries = _summaries_before(session_id=session_id, first_ids=first_ids)
    for view in views:
        view.summary_before = summaries.get(uuid.UUID(view.turn_id), "")
    return views


def turn_view(*, turn_id: uuid.UUID) -> TurnView | None:
    turn = Turn.objects.filter(pk=turn_id).first()
    if turn is None:
        return None
    rows = list(_people_messages().filter(turn_id=turn_id).order_by("id").values_list("id", "role", "content"))
    calls = {row.tool_use_id: row for row in Activity.objects.filter(correlation_id=turn_id) if row.tool_use_id}
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


def _people_messages() -> QuerySet[Message]:
    """Messages as people read them: everything but the summaries written for the model."""
    return Message.objects.exclude(kind=Message.Kind.SUMMARY)


def _summaries_before(*, session_id: uuid.UUID, first_ids: dict[uuid.UUID, int]) -> dict[uuid.UUID, str]:
    """Per turn, the model's summary of the turns before it, when one ends right before it.

    A summary replaces the messages up to its `replaces_through` id, always a whole number of
    turns: the turn whose first message follows that id is where the transcript marks it.
    """
    summaries = Message.objects.filter(session_id=session_id, kind=Message.Kind.SUMMARY).order_by("id")
    boundaries = {
        through: "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
        for through, content in summaries.values_list("replaces_through", "content")
        if through is not None
    }
    if not boundaries:
        return {}
    ids = list(_people_messages().filter(session_id=session_id).order_by("id").values_list("id", flat=True))
    found: dict[uuid.UUID, str] = {}
    for turn_id, first in first_ids.items():
        index = bisect.bisect_left(ids, first)
        if index > 0 and ids[index - 1] in boundaries:
            found[turn_id] = boundaries[ids[index - 1]]
    return found


def session_context_in_use(*, session_id: uuid.UUID) -> ContextInUse | None:
    """The context the session fills now (the control room's meter)."""
    session = AgentSession.objects.filter(pk=session_id).first()
    return None if session is None else agent_selectors.session_context_in_use(session)


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


def ledger_page(*, filters: LedgerFilters, page: int = 1, per_page: int = 50) -> Page[Activity]:
    """Tool calls, newest first, narrowed by `filters`; each row's `shown_state` is its state as shown."""
    turn_running = Exists(Turn.objects.filter(pk=OuterRef("correlation_id"), status=Turn.Status.RUNNING))
    calls = (
        Activity.objects.annotate(turn_running=turn_running)
        .annotate(
            shown_state=Case(
                When(state=Activity.State.STARTED, turn_running=False, then=Value(Activity.State.UNKNOWN.value)),
                default=F("state"),
            )
        )
        .order_by("-started_at", "-id")
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
    return cast("Page[Activity]", Paginator(calls, per_page).get_page(page))


def ledger_choices() -> dict[str, list[str]]:
    """The servers and tools that appear in the ledger, for the filter menus."""
    return {
        "servers": list(Activity.objects.order_by("server").values_list("server", flat=True).distinct()),
        "tools": list(Activity.objects.order_by("tool").values_list("tool", flat=True).distinct()),
    }


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
