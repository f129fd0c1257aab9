"""The vocabulary of a scripted model: what one `/v1/messages` request is answered with.

A `Reply` is immutable data. `FakeAnthropic` turns it into the wire format (see `anthropic_wire`),
so the same reply can be queued, returned from a responder, or asserted on afterwards.

    Reply.text("The cluster is healthy.")                 # streamed in several text_delta events
    Reply.tool_use("mcp__oikos__health_summary", {})      # stop_reason "tool_use"
    Reply.blocks([text("Checking both."), tool_use("a", {}), tool_use("b", {"x": 1})])
    Reply.blocks([thinking("Health first."), tool_use("a", {})])  # signed by the fake when served
    Reply.blocks([redacted_thinking(), text("Done.")])    # opaque, signed `data`
    Reply.http_error(529, "overloaded_error", "Overloaded")
    Reply.drop(after_events=4)                             # connection closed mid-stream
    Reply.pings(after_events=1, every=0.5)                 # alive but silent: `ping` events forever
    Reply.not_event_stream("text/html", "<h1>Bad gateway</h1>")  # 200, but not SSE
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

DEFAULT_CHUNK = 12
"""Characters per `text_delta` / `input_json_delta` fragment unless a reply says otherwise."""

FAULT_TEXT = "This answer is cut short by a scripted failure of the model API."


@dataclass(frozen=True)
class TextBlock:
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class ToolUseBlock:
    """A tool call. `id=None` means "a fresh `toolu_…` id each time this block is served"."""

    name: str
    input: Mapping[str, Any]
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": dict(self.input)}


@dataclass(frozen=True)
class ThinkingBlock:
    """Thinking, streamed as `thinking_delta` fragments and closed by a `signature_delta`.

    `signature=None` means "signed by the fake when served" (`anthropic_thinking`): the client
    must send the block back exactly as received for the signature to verify.
    """

    thinking: str
    signature: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "thinking", "thinking": self.thinking, "signature": self.signature}


@dataclass(frozen=True)
class RedactedThinkingBlock:
    """Thinking the API's safety systems encrypted: one opaque `data` value, no text, no deltas.

    `data=None` means "opaque data made and signed by the fake when served".
    """

    data: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "redacted_thinking", "data": self.data}


Block = TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock
THINKING_BLOCKS = (ThinkingBlock, RedactedThinkingBlock)


def text(value: str) -> TextBlock:
    """A text block for `Reply.blocks`."""
    return TextBlock(text=value)


def thinking(value: str) -> ThinkingBlock:
    """A thinking block for `Reply.blocks`; put it before the text and tool calls, as models do."""
    return ThinkingBlock(thinking=value)


def redacted_thinking() -> RedactedThinkingBlock:
    """A redacted_thinking block for `Reply.blocks`."""
    return RedactedThinkingBlock()


def tool_use(name: str, input: Mapping[str, Any] | None = None, *, id: str | None = None) -> ToolUseBlock:
    """A tool_use block for `Reply.blocks`; the input must be JSON-serializable."""
    arguments = dict(input or {})
    json.dumps(arguments)  # fail in the test that builds the script, not mid-stream
    return ToolUseBlock(name=name, input=arguments, id=id)


@dataclass(frozen=True)
class ApiError:
    """An error answer in the API's shape: HTTP status, `error.type` and `error.message`."""

    status: int
    type: str
    message: str

    def to_json(self, *, request_id: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": self.type, "message": self.message},
            "request_id": request_id,
        }


FaultKind = Literal["stream_error", "drop", "stall", "truncated", "pings", "not_sse"]


@dataclass(frozen=True)
class Fault:
    """How a streamed reply goes wrong.

    - `stream_error`: after `after_events` events, an `event: error` inside the 200 stream.
    - `drop`: after `after_events` events, the connection is closed without finishing the body.
    - `stall`: after `after_events` events, nothing more is sent until the client hangs up
      (or the fake stops).
    - `truncated`: every event except `message_delta` and `message_stop`, then a clean end of body.
    - `pings`: after `after_events` events, an `event: ping` every `interval` seconds until the
      client hangs up (or the fake stops): a connection that is alive but never says anything.
    - `not_sse`: a 200 answer with `content_type` and `body` instead of an event stream (a proxy's
      error page, or a server that ignored `"stream": true`); `body=None` sends the Message JSON.
    """

    kind: FaultKind
    after_events: int = 0
    error: ApiError | None = None
    interval: float = 0.0
    content_type: str = ""
    body: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the classmethods, not the constructor.

    `content` holds the blocks of a successful answer, `error` the status of an `http_error`,
    `fault` how a streamed answer goes wrong.
    """

    content: tuple[Block, ...] = ()
    stop_reason: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    chunk: int = DEFAULT_CHUNK
    delay: float = 0.0
    error: ApiError | None = None
    retry_after: float | None = None
    fault: Fault | None = None

    # -- successful answers -------------------------------------------------------------------

    @classmethod
    def text(
        cls,
        value: str,
        *,
        chunk: int = DEFAULT_CHUNK,
        delay: float = 0.0,
        stop_reason: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> Reply:
        """A text answer, streamed as `text_delta` fragments of `chunk` characters.

        `delay` pauses that many seconds between events, so a test can watch text arrive
        before the answer is complete. `usage` overrides any computed usage field.
        """
        return cls.blocks([text(value)], chunk=chunk, delay=delay, stop_reason=stop_reason, usage=usage)

    @classmethod
    def tool_use(
        cls,
        name: str,
        input: Mapping[str, Any] | None = None,
        *,
        id: str | None = None,
        chunk: int = DEFAULT_CHUNK,
        delay: float = 0.0,
        usage: Mapping[str, int] | None = None,
    ) -> Reply:
        """A single tool call; its input is streamed as several `input_json_delta` fragments."""
        return cls.blocks([tool_use(name, input, id=id)], chunk=chunk, delay=delay, usage=usage)

    @classmethod
    def blocks(
        cls,
        blocks: Sequence[Block],
        *,
        chunk: int = DEFAULT_CHUNK,
        delay: float = 0.0,
        stop_reason: str | None = None,
        usage: Mapping[str, int] | None = None,
    ) -> Reply:
        """Any mix of thinking, text and tool_use blocks, e.g. a preamble and two parallel tool calls.

        `stop_reason` defaults to `tool_use` when any block is a tool call, else `end_turn`;
        pass e.g. `"max_tokens"` to script a cut-off answer.
        """
        if chunk < 1:
            raise ValueError("chunk must be at least 1 character")
        if delay < 0:
            raise ValueError("delay cannot be negative")
        for block in blocks:
            if not isinstance(block, TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock):
                raise TypeError(f"Reply.blocks takes text(...), tool_use(...) and thinking(...) blocks, not {block!r}")
        return cls(content=tuple(blocks), stop_reason=stop_reason, usage=dict(usage or {}), chunk=chunk, delay=delay)

    # -- failures -----------------------------------------------------------------------------

    @classmethod
    def http_error(cls, status: int, type: str, message: str, *, retry_after: float | None = None) -> Reply:
        """An error status before any stream starts, e.g. `(529, "overloaded_error", "Overloaded")`.

        The SDK retries 408/409/429/5xx on its own; `retry_after` (seconds) is sent as the
        `retry-after` header, which the SDK obeys instead of its backoff (keeps tests fast).
        """
        if not 400 <= status <= 599:
            raise ValueError(f"http_error needs a 4xx or 5xx status, not {status}")
        return cls(error=ApiError(status=status, type=type, message=message), retry_after=retry_after)

    @classmethod
    def stream_error(
        cls,
        after_events: int = 3,
        *,
        type: str = "overloaded_error",
        message: str = "Overloaded",
        reply: Reply | None = None,
    ) -> Reply:
        """An `event: error` inside the 200 stream after `after_events` events of `reply`."""
        error = ApiError(status=200, type=type, message=message)
        return _with_fault(reply, Fault(kind="stream_error", after_events=after_events, error=error))

    @classmethod
    def drop(cls, after_events: int = 3, *, reply: Reply | None = None) -> Reply:
        """The connection closes after `after_events` events of `reply`, body unfinished."""
        return _with_fault(reply, Fault(kind="drop", after_events=after_events))

    @classmethod
    def stall(cls, after_events: int = 3, *, reply: Reply | None = None) -> Reply:
        """After `after_events` events of `reply` the fake sends nothing until the client gives up."""
        return _with_fault(reply, Fault(kind="stall", after_events=after_events))

    @classmethod
    def pings(cls, after_events: int = 1, *, every: float = 1.0, reply: Reply | None = None) -> Reply:
        """After `after_events` events of `reply`, only `event: ping` every `every` seconds, forever.

        The SDK skips pings, so a client sees no event at all while bytes keep arriving: a per-read
        HTTP timeout never fires.
        """
        if every <= 0:
            raise ValueError("every must be positive")
        return _with_fault(reply, Fault(kind="pings", after_events=after_events, interval=every))

    @classmethod
    def not_event_stream(cls, content_type: str = "application/json", body: str | None = None) -> Reply:
        """A 200 answer to a streaming request that is not `text/event-stream`.

        `body=None` sends the complete Message JSON, as a server that ignores `"stream": true` would.
        """
        return _with_fault(None, Fault(kind="not_sse", content_type=content_type, body=body))

    @classmethod
    def truncated(cls, *, reply: Reply | None = None) -> Reply:
        """`reply` streamed without its `message_delta` and `message_stop`; the body ends cleanly."""
        return _with_fault(reply, Fault(kind="truncated"))

    # -- derived facts ------------------------------------------------------------------------

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        if any(isinstance(block, ToolUseBlock) for block in self.content):
            return "tool_use"
        return "end_turn"

    def with_tool_ids(self, new_id: Callable[[], str]) -> Reply:
        """This reply with every unset tool_use id filled by `new_id()` (called once per block)."""
        filled = tuple(
            dataclasses.replace(block, id=new_id()) if isinstance(block, ToolUseBlock) and block.id is None else block
            for block in self.content
        )
        return dataclasses.replace(self, content=filled)

    def with_signatures(self, sign: Callable[[str], str], opaque: Callable[[], str]) -> Reply:
        """This reply with every unsigned thinking block signed (`sign(thinking)`) and every empty
        redacted block given opaque data (`opaque()`)."""
        filled = tuple(
            dataclasses.replace(block, signature=sign(block.thinking))
            if isinstance(block, ThinkingBlock) and block.signature is None
            else dataclasses.replace(block, data=opaque())
            if isinstance(block, RedactedThinkingBlock) and block.data is None
            else block
            for block in self.content
        )
        return dataclasses.replace(self, content=filled)

    @property
    def thinks(self) -> bool:
        return any(isinstance(block, THINKING_BLOCKS) for block in self.content)


def _with_fault(reply: Reply | None, fault: Fault) -> Reply:
    if fault.after_events < 0:
        raise ValueError("after_events cannot be negative")
    base = reply if reply is not None else Reply.text(FAULT_TEXT, chunk=8)
    if base.error is not None or base.fault is not None:
        raise ValueError("a fault applies to a successful reply, not to another failure")
    return dataclasses.replace(base, fault=fault)
