"""The typed events a turn emits. Every transport (SSE, websocket, `manage.py ask`) renders these.

Events are plain frozen dataclasses with a `type` tag, a JSON-able `to_dict()` and `from_dict()`,
so they travel through the channel layer and onto the wire unchanged and come back typed. The
engine emits the first kind; the turn registry (`agent.live`) adds the wire events (`TurnStart`,
`TextEnd`, `ThinkingEnd`) to what it publishes, and they never enter a turn's engine numbering.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

EventType = Literal[
    "text",
    "thinking",
    "tool_use",
    "tool_result",
    "approval",
    "elicitation",
    "done",
    "error",
    "turn_start",
    "text_end",
    "thinking_end",
]


@dataclass(frozen=True)
class Event:
    type: ClassVar[EventType]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """This event from its `to_dict()`; keys it does not know are ignored (a newer sender's)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


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


# How much of a tool's result a `ToolResult` carries to the transports (the model and the ledger get more).
PREVIEW_CHARS = 4000


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


@dataclass(frozen=True)
class TurnStart(Event):
    """The first thing published of a turn (number 0): who asked what, so a page can draw it."""

    type: ClassVar[EventType] = "turn_start"
    turn_id: str
    session_id: str
    question: str
    # Who asked: `operator:<name>`, `peer:<agent>`.
    actor: str
    model: str
    # ISO 8601.
    started_at: str


@dataclass(frozen=True)
class TextEnd(Event):
    """A text block's full text once it ended: it wins over the coalesced deltas, so a delta the
    channel layer dropped never corrupts the rendered answer."""

    type: ClassVar[EventType] = "text_end"
    text: str
    block: int = 0


@dataclass(frozen=True)
class ThinkingEnd(Event):
    """A thinking block's full text once it ended (see `TextEnd`)."""

    type: ClassVar[EventType] = "thinking_end"
    text: str
    block: int = 0
    redacted: bool = False


# Published by the turn registry, never emitted by the engine: not among a turn's numbered events.
WIRE_ONLY: tuple[type[Event], ...] = (TurnStart, TextEnd, ThinkingEnd)

_KINDS: tuple[type[Event], ...] = (
    TextDelta,
    ThinkingDelta,
    ToolUse,
    ToolResult,
    Approval,
    ElicitationEvent,
    Done,
    Error,
)
_BY_TYPE: dict[str, type[Event]] = {cls.type: cls for cls in (*_KINDS, *WIRE_ONLY)}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event sent through JSON (channel layer, subprocess output)."""
    cls = _BY_TYPE.get(str(data.get("type")))
    if cls is None:
        raise ValueError(f"unknown event type {data.get('type')!r}")
    return cls.from_dict(data)
