"""The typed events a turn emits. Every transport (SSE, websocket, `manage.py ask`) renders these.

Events are plain frozen dataclasses with a `type` tag and a JSON-able `to_dict()`, so they travel
through the channel layer and onto the wire unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

EventType = Literal["text", "thinking", "tool_use", "tool_result", "approval", "elicitation", "done", "error"]


@dataclass(frozen=True)
class Event:
    type: ClassVar[EventType]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class TextDelta(Event):
    type: ClassVar[EventType] = "text"
    text: str
    # Index of the assistant text block this delta belongs to, counted across the whole turn, so
    # a renderer knows when one block ends and the next begins.
    block: int = 0


@dataclass(frozen=True)
class ThinkingDelta(Event):
    """A piece of the model's thinking (its summary, as the API provides it), for the operator only.

    Never part of an answer: peers (A2A, MCP) read only `text`, and the engine never logs it.
    """

    type: ClassVar[EventType] = "thinking"
    text: str
    # Index of the thinking block, counted across the whole turn (apart from text blocks).
    block: int = 0
    # A block the API's safety systems encrypted: it has no readable text.
    redacted: bool = False


@dataclass(frozen=True)
class ToolUse(Event):
    type: ClassVar[EventType] = "tool_use"
    id: str
    name: str
    server: str
    tool: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult(Event):
    type: ClassVar[EventType] = "tool_result"
    tool_use_id: str
    name: str
    is_error: bool
    # A bounded preview for display; the ledger has the full result.
    content: str
    duration_ms: int
    truncated: bool = False
    # `ok`, `error`, or `unknown`: cut off in flight (Stop, a time limit, an MCP timeout), it may have run.
    state: str = "ok"


@dataclass(frozen=True)
class Approval(Event):
    type: ClassVar[EventType] = "approval"
    tool_use_id: str
    approval_id: str
    execution_id: str
    target: str
    action: str
    risk_class: str
    status: str
    message: str = ""


@dataclass(frozen=True)
class ElicitationEvent(Event):
    """An MCP server asked for input during a call (`status` `pending`), or the answer it got
    (`accept`, `decline`, `cancel`). Sent twice per request, under the same `id`."""

    type: ClassVar[EventType] = "elicitation"
    id: str
    server: str
    tool: str
    tool_use_id: str
    message: str
    # The requested schema's fields (`agent.elicitation.types.ElicitField.to_dict`).
    fields: list[dict[str, Any]]
    status: str
    # ISO 8601: when Hermes cancels it if nobody answered.
    expires_at: str = ""
    content: dict[str, Any] | None = None
    reason: str = ""
    answered_by: str = ""
    # `form`, or `confirmation`: Hermes asks before running an execution (`agent.engine.actions`).
    purpose: str = "form"


@dataclass(frozen=True)
class Done(Event):
    type: ClassVar[EventType] = "done"
    session_id: str
    turn_id: str
    stop_reason: str
    iterations: int
    usage: dict[str, int] = field(default_factory=dict)
    status: str = "done"
    # The model that answered (the session's pick, or the default).
    model: str = ""
    # The list price of `usage` in USD as a decimal string ("0.012345"); None when the model's
    # price is unknown (agent/budget.py).
    cost_usd: str | None = None


@dataclass(frozen=True)
class Error(Event):
    type: ClassVar[EventType] = "error"
    code: str
    message: str


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event sent through JSON (channel layer, subprocess output)."""
    kind = data.get("type")
    for cls in (TextDelta, ThinkingDelta, ToolUse, ToolResult, Approval, ElicitationEvent, Done, Error):
        if cls.type == kind:
            fields = {f.name for f in dataclasses.fields(cls)}
            return cls(**{k: v for k, v in data.items() if k in fields})
    raise ValueError(f"unknown event type {kind!r}")
