"""A turn as the control room shows it, built from live events or from the database.

`TurnView` folds the turn's typed events (`agent.conversation.events`: the engine's, plus the
registry's `TextEnd` and `ThinkingEnd` carrying a finished block's full text) into items in
display order. `apply()` returns what changed, so a
consumer re-renders only that; a fresh view fed the whole log renders the turn in one piece (a
snapshot). Everything here is plain data: no HTML, no database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.conversation.events import (
    Approval,
    Done,
    ElicitationEvent,
    Error,
    Event,
    TextDelta,
    TextEnd,
    ThinkingDelta,
    ThinkingEnd,
    ToolResult,
    ToolUse,
    TurnStart,
)
from agent.memory.cards import NoteProposalCard
from agent.memory.tool import REMEMBER
from agent.tools.local import LOCAL_SERVER
from oikos.cards import CardContext, card_origin_of_turn
from oikos.change_view import ChangeView

ItemKind = Literal["text", "thinking", "tool", "approval", "elicitation", "notice"]


@dataclass
class TextItem:
    block: int
    text: str = ""
    # A finished block is shown as rendered Markdown; a streaming one as escaped text.
    done: bool = False
    kind: ItemKind = "text"


@dataclass
class ThinkingItem:
    """The model's thinking (its summary, as the API provides it): shown collapsed, as plain text."""

    block: int
    text: str = ""
    done: bool = False
    # Encrypted by the API's safety systems: there is nothing to read.
    redacted: bool = False
    kind: ItemKind = "thinking"


@dataclass
class ToolItem:
    tool_use_id: str
    name: str
    server: str
    tool: str
    input: dict[str, Any]
    done: bool = False
    is_error: bool = False
    result: str = ""
    duration_ms: int = 0
    truncated: bool = False
    # `ok`, `error`, or `unknown`: cut off in flight (Stop, a time limit, a crash), it may have run.
    state: str = ""
    kind: ItemKind = "tool"
    # Hermes's record of the execution a `request_execution` started without approval, when loaded.
    record: ChangeView | None = None
    # The note a `remember` call proposed (`agent.memory.cards.NoteProposalCard`), when loaded.
    note_proposal: NoteProposalCard | None = None

    @property
    def outcome_unknown(self) -> bool:
        return self.state == "unknown"

    @property
    def note_tool(self) -> bool:
        """A call of Hermes's own `remember`: drawn with the card of the note it proposed."""
        return self.server == LOCAL_SERVER and self.tool == REMEMBER


@dataclass
class ApprovalItem:
    approval_id: str
    execution_id: str
    target: str
    action: str
    risk_class: str
    status: str
    message: str = ""
    kind: ItemKind = "approval"

    # The same reading surface as the rail's `ApprovalState`, so one card template shows either.
    requested_by: str = ""
    requested_at: str = ""
    reason: str = ""
    decided_by: str = ""
    # The turn it was raised in (known here), then what Oikos says about the target once loaded.
    context: CardContext | None = None
    # Oikos has been asked about this approval; a card still drawn from this record was not
    # confirmed (unknown to Oikos, or Oikos unreachable). Until then the card says it is checking.
    checked: bool = False
    # Hermes's record of the execution (`oikos.change_view.ChangeView`) when loaded; the card
    # fetches it itself otherwise.
    record: ChangeView | None = None

    @classmethod
    def of(cls, raised: Approval) -> ApprovalItem:
        """The card of an approval as the engine reported it (live, or read back from a tool result)."""
        return cls(
            approval_id=raised.approval_id,
            execution_id=raised.execution_id,
            target=raised.target,
            action=raised.action,
            risk_class=raised.risk_class,
            status=raised.status,
            message=raised.message,
        )

    # What a tool result said is never enough to decide on: the approval id is the tool's word. A
    # card becomes decidable only as the `ApprovalState` Oikos's REST API confirms (`approval_in`).
    decidable = False

    @property
    def pending(self) -> bool:
        return self.status in ("proposed", "pending")

    @property
    def stage(self) -> str:
        return "unconfirmed" if self.checked else "checking"


@dataclass
class ElicitationItem:
    """An MCP server's question during a tool call, and its answer once given (`status`)."""

    id: str
    server: str
    tool: str
    message: str
    fields: list[dict[str, Any]]
    status: str = "pending"
    content: dict[str, Any] | None = None
    reason: str = ""
    answered_by: str = ""
    expires_at: str = ""
    # `form` or `confirmation` (Hermes asking before an execution: "Run it" / "Don't run").
    purpose: str = "form"
    kind: ItemKind = "elicitation"

    @property
    def pending(self) -> bool:
        return self.status == "pending"


@dataclass
class NoticeItem:
    code: str
    message: str
    kind: ItemKind = "notice"


Item = TextItem | ThinkingItem | ToolItem | ApprovalItem | ElicitationItem | NoticeItem

ChangeKind = Literal["item_new", "text_append", "item_update", "finished"]


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    item: Item | None = None
    # For `text_append`: only the new characters.
    chunk: str = ""


@dataclass
class TurnView:
    turn_id: str
    session_id: str
    question: str
    # Who asked: `operator:<name>`, `peer:<agent>` (a turn a script or a peer started shows as theirs).
    asked_by: str = ""
    started_at: str = ""
    # The model answering the turn (the session's pick, or the default).
    model: str = ""
    status: str = "running"
    stop_reason: str = ""
    iterations: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    # The usage's list price in USD as a decimal string; empty when unknown (agent/budget.py).
    cost_usd: str = ""
    items: list[Item] = field(default_factory=list)
    # The operators' notes the turn was given (`Turn.notes_given`: id, title, runbook), once read
    # from the database (the turn's live events do not carry them).
    notes_given: list[dict[str, Any]] = field(default_factory=list)
    # The model's summary of the turns before this one, when the model is sent it instead of them:
    # the transcript shows a divider ("earlier turns summarised for the model") above this turn.
    summary_before: str = ""

    @property
    def running(self) -> bool:
        return self.status == "running"

    def text_block(self, block: int) -> TextItem | None:
        for item in self.items:
            if isinstance(item, TextItem) and item.block == block:
                return item
        return None

    def thinking_block(self, block: int) -> ThinkingItem | None:
        for item in self.items:
            if isinstance(item, ThinkingItem) and item.block == block:
                return item
        return None

    def tool_item(self, tool_use_id: str) -> ToolItem | None:
        for item in self.items:
            if isinstance(item, ToolItem) and item.tool_use_id == tool_use_id:
                return item
        return None

    def approval_origin_note(self, approval: ApprovalItem, tool_use_id: str) -> None:
        """A card raised in this turn: its origin is this turn, its reason the call's `reason`."""
        tool = self.tool_item(tool_use_id)
        arguments = tool.input if tool is not None else {}
        origin = card_origin_of_turn(
            session_id=self.session_id, turn_id=self.turn_id, question=self.question, arguments=arguments
        )
        approval.reason = approval.reason or origin.reason
        approval.context = CardContext(origin=origin)

    def approvals(self) -> list[ApprovalItem]:
        return [item for item in self.items if isinstance(item, ApprovalItem)]

    def apply(self, event: Event) -> list[Change]:
        """Fold one event in; returns the changes to show (empty when nothing visible changed)."""
        match event:
            case TextDelta(text=text, block=block):
                return self._text(block, text)
            case TextEnd(text=text, block=block):
                return self._text_end(block, text)
            case ThinkingDelta(text=text, block=block, redacted=redacted):
                return self._thinking(block, text, redacted=redacted, end=False)
            case ThinkingEnd(text=text, block=block, redacted=redacted):
                return self._thinking(block, text, redacted=redacted, end=True)
            case ToolUse():
                return self._tool_use(event)
            case ToolResult():
                return self._tool_result(event)
            case Approval():
                return self._approval(event)
            case ElicitationEvent():
                return self._elicitation(event)
            case Error(code=code, message=message):
                notice = NoticeItem(code=code, message=message)
                self.items.append(notice)
                return [Change("item_new", notice)]
            case Done():
                return self._done(event)
        return []

    def _tool_use(self, event: ToolUse) -> list[Change]:
        arguments = event.input if isinstance(event.input, dict) else {}
        item = ToolItem(tool_use_id=event.id, name=event.name, server=event.server, tool=event.tool, input=arguments)
        self.items.append(item)
        return [Change("item_new", item)]

    def _tool_result(self, event: ToolResult) -> list[Change]:
        tool = self.tool_item(event.tool_use_id)
        if tool is None:
            return []
        tool.done = True
        tool.is_error = bool(event.is_error)
        tool.result = event.content
        tool.duration_ms = int(event.duration_ms or 0)
        tool.truncated = bool(event.truncated)
        tool.state = event.state or ("error" if tool.is_error else "ok")
        return [Change("item_update", tool)]

    def _approval(self, event: Approval) -> list[Change]:
        approval = ApprovalItem.of(event)
        self.approval_origin_note(approval, event.tool_use_id)
        self.items.append(approval)
        return [Change("item_new", approval)]

    def _done(self, event: Done) -> list[Change]:
        self.status = event.status
        self.stop_reason = event.stop_reason
        self.iterations = int(event.iterations or 0)
        self.usage = dict(event.usage) if isinstance(event.usage, dict) else {}
        self.model = event.model or self.model
        self.cost_usd = event.cost_usd or ""
        # A turn that ended mid-block (cancelled, failed) still shows its text rendered.
        changes = [Change("item_update", item) for item in self._close_open_blocks()]
        return [*changes, Change("finished")]

    def _text(self, block: int, chunk: str) -> list[Change]:
        if not chunk:
            return []
        item = self.text_block(block)
        if item is None:
            item = TextItem(block=block, text=chunk)
            self.items.append(item)
            return [Change("item_new", item)]
        if item.done:
            return []
        item.text += chunk
        return [Change("text_append", item, chunk=chunk)]

    def _text_end(self, block: int, text: str) -> list[Change]:
        item = self.text_block(block)
        if item is None:
            if not text:
                return []
            item = TextItem(block=block, text=text, done=True)
            self.items.append(item)
            return [Change("item_new", item)]
        # The full text wins over whatever deltas arrived: a dropped delta cannot corrupt an answer.
        item.text, item.done = text, True
        return [Change("item_update", item)]

    def _thinking(self, block: int, chunk: str, *, redacted: bool, end: bool) -> list[Change]:
        item = self.thinking_block(block)
        if item is None:
            if not chunk and not redacted:
                return []
            item = ThinkingItem(block=block, text=chunk, done=end, redacted=redacted)
            self.items.append(item)
            return [Change("item_new", item)]
        if end:
            # The full text wins over the deltas; redrawn only when they missed something, so an
            # element the operator opened stays open.
            item.done = True
            if item.text == chunk:
                return []
            item.text = chunk
            return [Change("item_update", item)]
        if item.done or not chunk:
            return []
        item.text += chunk
        return [Change("text_append", item, chunk=chunk)]

    def _elicitation(self, event: ElicitationEvent) -> list[Change]:
        update = {
            "status": event.status or "pending",
            "content": event.content if isinstance(event.content, dict) else None,
            "reason": event.reason,
            "answered_by": event.answered_by,
        }
        for item in self.items:
            if isinstance(item, ElicitationItem) and item.id == event.id:
                for name, value in update.items():
                    setattr(item, name, value)
                return [Change("item_update", item)]
        fields = event.fields if isinstance(event.fields, list) else []
        new = ElicitationItem(
            id=event.id,
            server=event.server,
            tool=event.tool,
            message=event.message,
            fields=[field for field in fields if isinstance(field, dict)],
            expires_at=event.expires_at,
            purpose=event.purpose or "form",
            **update,  # type: ignore[arg-type]
        )
        self.items.append(new)
        return [Change("item_new", new)]

    def _close_open_blocks(self) -> list[TextItem | ThinkingItem]:
        closed: list[TextItem | ThinkingItem] = []
        for item in self.items:
            if isinstance(item, TextItem | ThinkingItem) and not item.done:
                item.done = True
                closed.append(item)
        return closed


def turn_view_replay(start: TurnStart, events: Iterable[Event]) -> TurnView:
    """A view of a turn from its `TurnStart` and the events after it."""
    view = TurnView(
        turn_id=start.turn_id,
        session_id=start.session_id,
        question=start.question,
        asked_by=start.actor,
        started_at=start.started_at,
        model=start.model,
    )
    for event in events:
        view.apply(event)
    return view
