"""A turn as the control room shows it, built from live events or from the database.

`TurnView` folds the turn's events (the engine's `text`, `thinking`, `tool_use`, `tool_result`,
`approval`, `error`, `done`, plus the control room's own `text_end` and `thinking_end` carrying a
finished block's full text) into items in display order. `apply()` returns what changed, so a
consumer re-renders only that; a fresh view fed the whole log renders the turn in one piece (a
snapshot). Everything here is plain data: no HTML, no database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from oikos.cards import CardContext, card_origin_of_turn

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

    @property
    def outcome_unknown(self) -> bool:
        return self.state == "unknown"


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

    def apply(self, event: dict[str, Any]) -> list[Change]:
        """Fold one event in; returns the changes to show (empty when nothing visible changed)."""
        kind = event.get("type")
        if kind == "text":
            return self._text(int(event.get("block", 0)), str(event.get("text", "")))
        if kind == "text_end":
            return self._text_end(int(event.get("block", 0)), str(event.get("text", "")))
        if kind in ("thinking", "thinking_end"):
            return self._thinking(
                int(event.get("block", 0)),
                str(event.get("text", "")),
                redacted=bool(event.get("redacted")),
                end=kind == "thinking_end",
            )
        if kind == "tool_use":
            arguments = event.get("input")
            item = ToolItem(
                tool_use_id=str(event.get("id", "")),
                name=str(event.get("name", "")),
                server=str(event.get("server", "")),
                tool=str(event.get("tool", "")),
                input=arguments if isinstance(arguments, dict) else {},
            )
            self.items.append(item)
            return [Change("item_new", item)]
        if kind == "tool_result":
            tool = self.tool_item(str(event.get("tool_use_id", "")))
            if tool is None:
                return []
            tool.done = True
            tool.is_error = bool(event.get("is_error"))
            tool.result = str(event.get("content", ""))
            tool.duration_ms = int(event.get("duration_ms", 0) or 0)
            tool.truncated = bool(event.get("truncated"))
            tool.state = str(event.get("state") or ("error" if tool.is_error else "ok"))
            return [Change("item_update", tool)]
        if kind == "approval":
            approval = ApprovalItem(
                approval_id=str(event.get("approval_id", "")),
                execution_id=str(event.get("execution_id", "")),
                target=str(event.get("target", "")),
                action=str(event.get("action", "")),
                risk_class=str(event.get("risk_class", "")),
                status=str(event.get("status", "proposed")),
                message=str(event.get("message", "")),
            )
            self.approval_origin_note(approval, str(event.get("tool_use_id", "")))
            self.items.append(approval)
            return [Change("item_new", approval)]
        if kind == "elicitation":
            return self._elicitation(event)
        if kind == "error":
            notice = NoticeItem(code=str(event.get("code", "")), message=str(event.get("message", "")))
            self.items.append(notice)
            return [Change("item_new", notice)]
        if kind == "done":
            self.status = str(event.get("status", "done"))
            self.stop_reason = str(event.get("stop_reason", ""))
            self.iterations = int(event.get("iterations", 0) or 0)
            usage = event.get("usage")
            self.usage = dict(usage) if isinstance(usage, dict) else {}
            self.model = str(event.get("model") or self.model)
            self.cost_usd = str(event.get("cost_usd") or "")
            # A turn that ended mid-block (cancelled, failed) still shows its text rendered.
            changes = [Change("item_update", item) for item in self._close_open_blocks()]
            return [*changes, Change("finished")]
        return []

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

    def _elicitation(self, event: dict[str, Any]) -> list[Change]:
        fields = event.get("fields")
        content = event.get("content")
        update = {
            "status": str(event.get("status") or "pending"),
            "content": content if isinstance(content, dict) else None,
            "reason": str(event.get("reason", "")),
            "answered_by": str(event.get("answered_by", "")),
        }
        for item in self.items:
            if isinstance(item, ElicitationItem) and item.id == str(event.get("id", "")):
                for name, value in update.items():
                    setattr(item, name, value)
                return [Change("item_update", item)]
        new = ElicitationItem(
            id=str(event.get("id", "")),
            server=str(event.get("server", "")),
            tool=str(event.get("tool", "")),
            message=str(event.get("message", "")),
            fields=[field for field in fields if isinstance(field, dict)] if isinstance(fields, list) else [],
            expires_at=str(event.get("expires_at", "")),
            purpose=str(event.get("purpose") or "form"),
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


def turn_view_replay(start: dict[str, Any], events: list[dict[str, Any]]) -> TurnView:
    """A view of a turn from its `turn_start` event and the events after it."""
    view = TurnView(
        turn_id=str(start["turn_id"]),
        session_id=str(start["session_id"]),
        question=str(start.get("question", "")),
        asked_by=str(start.get("actor", "")),
        started_at=str(start.get("started_at", "")),
        model=str(start.get("model", "")),
    )
    for event in events:
        view.apply(event)
    return view
