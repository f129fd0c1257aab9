"""A conversation's turns as `TurnView`s, read from the database: what every frontend draws or exports."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from agent.conversation.events import PREVIEW_CHARS
from agent.engine.approvals import REQUEST_EXECUTION, approval_from_result
from agent.memory.cards import note_proposal_cards_of
from agent.models import Activity, Elicitation, Message, Turn
from transcript.view import (
    ApprovalItem,
    ElicitationItem,
    NoticeItem,
    TextItem,
    ThinkingItem,
    ToolItem,
    TurnView,
)

# A session page (and the chat drawer, and its socket's snapshot) draws this many of the latest
# turns: enough to scroll back through, few enough that a session of thousands of turns opens as
# fast as a short one (bench/scale.py). Earlier turns are a link away.
SESSION_TURNS_SHOWN = 20


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
    note_proposals_place(views)
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
    note_proposals_place([view])
    if rows:
        summaries = _summaries_before(session_id=turn.session_id, first_ids={turn.id: rows[0][0]})
        view.summary_before = summaries.get(turn.id, "")
    return view


def note_proposals_place(views: list[TurnView]) -> list[ToolItem]:
    """Each `remember` chip gets the card of the note it proposed, as it stands now; returns the chips."""
    chips = [item for view in views for item in view.items if isinstance(item, ToolItem) and item.note_tool]
    cards = note_proposal_cards_of(chip.tool_use_id for chip in chips)
    for chip in chips:
        chip.note_proposal = cards.get(chip.tool_use_id, chip.note_proposal)
    return chips


def turn_notes_given(*, turn_id: uuid.UUID) -> list[dict[str, Any]]:
    """The notes the turn was given (written as it started, agent/memory/recall.py)."""
    given = Turn.objects.filter(pk=turn_id).values_list("notes_given", flat=True).first()
    return _notes_given(given)


def _notes_given(value: Any) -> list[dict[str, Any]]:
    """Only well-formed entries: an id that is a number (it becomes a link), a title, runbook or not."""
    entries = value if isinstance(value, list) else []
    return [
        {"id": int(entry["id"]), "title": str(entry.get("title") or ""), "runbook": bool(entry.get("runbook"))}
        for entry in entries
        if isinstance(entry, dict) and str(entry.get("id", "")).isdigit()
    ]


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
        notes_given=_notes_given(turn.notes_given),
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
    settled yet (the session's next turn does, `presence.activity_settle_interrupted`): its outcome
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
        item = ApprovalItem.of(approval)
        view.approval_origin_note(item, tool.tool_use_id)
        view.items.append(item)
