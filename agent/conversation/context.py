"""What the model is sent of a session, and how big it is: the pure half of context management.

A session can outlive any context window (docs/turns.md, "Long sessions"). The database keeps
every message for people; the model is sent a *view* of them, built here from the stored rows:
- the latest summary message (`Message.Kind.SUMMARY`), standing for every message up to its
  `replaces_through` id, then the messages after that, in order;
- tool results in messages up to the session's `tool_results_cleared_through` id replaced by a
  short marker that says how much was cleared and under which correlation id the ledger keeps it
  (the tool_use/tool_result pairing is untouched, so the API accepts the history).

The view is a function of stored state only, so every request of every turn builds the same prefix
until the next compaction: prompt caching rebuilds its prefix once per compaction, not per call.

Sizes come from the API: the usage of the last call (exact), the API's token counting where the
server has it, and otherwise an estimate from the request's characters, calibrated by the usage
seen. The window is the model family's unless configured, and is learned from a "prompt is too
long: N tokens > M maximum" refusal, which names it (a compatible server with a small window).
`agent.engine.compaction` does the compacting.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
from django.conf import settings

Block = dict[str, Any]

DEFAULT_WINDOW = 200_000
# Context windows by model family (a prefix of the model id); anything else gets DEFAULT_WINDOW.
FAMILY_WINDOWS: tuple[tuple[str, int], ...] = (("claude-", 200_000),)
# Characters per token assumed before any usage was seen: low on purpose (Claude's tokenizer gives
# about 3.5 for English and less for JSON), so an estimate errs towards compacting early.
CHARS_PER_TOKEN = 3.0

SUMMARY_HEADER = (
    "[Hermes: the earlier turns of this conversation, summarised because the conversation outgrew the "
    "model's context window. Hermes keeps the full history; each turn's tool calls are in the ledger "
    "under its correlation id.]\n\n"
)

_TOO_LONG = (
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum"),
    # Older models count the requested output in:
    # "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000".
    re.compile(r"exceed context limit: (\d+) \+ \d+ > (\d+)"),
)

# Windows learned from refusals, by (server, model): a compatible server's window is its own.
_learned_windows: dict[tuple[str, str], int] = {}
# Characters per token seen in the usage of past calls, by (server, model).
_learned_ratios: dict[tuple[str, str], float] = {}


def context_window(model: str, *, server: str = "") -> int:
    """The window of `model` on `server` (the client's base URL): learned, configured, or the family's."""
    learned = _learned_windows.get((server, model))
    if learned:
        return learned
    if settings.HERMES_CONTEXT_WINDOW:
        return int(settings.HERMES_CONTEXT_WINDOW)
    for prefix, window in FAMILY_WINDOWS:
        if model.startswith(prefix):
            return window
    return DEFAULT_WINDOW


def context_window_learn(model: str, *, server: str, maximum: int) -> None:
    """Remember the window a server named when it refused a prompt (this process, until restart)."""
    _learned_windows[(server, model)] = maximum


@dataclass(frozen=True)
class TooLong:
    """A request the API refused as longer than the window: how long it was, and the window."""

    tokens: int
    maximum: int


def prompt_too_long(exc: BaseException | None) -> TooLong | None:
    """The refusal `exc` is, when it is the API's "prompt is too long" (400 invalid_request_error)."""
    if not isinstance(exc, anthropic.BadRequestError):
        return None
    body = exc.body
    message = exc.message
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message", message))
    for pattern in _TOO_LONG:
        found = pattern.search(message)
        if found:
            return TooLong(tokens=int(found.group(1)), maximum=int(found.group(2)))
    return None


# --- the model's view of the stored messages ------------------------------------------------------


@dataclass(frozen=True)
class StoredMessage:
    id: int
    turn_id: uuid.UUID | None
    role: str
    content: list[Block]
    kind: str = ""
    replaces_through: int | None = None

    @property
    def is_summary(self) -> bool:
        return self.kind == "summary"


@dataclass(frozen=True)
class SessionContext:
    """A session's stored messages (all of them, oldest first) and what of them is cleared."""

    messages: list[StoredMessage]
    tool_results_cleared_through: int | None = None

    @property
    def summary(self) -> StoredMessage | None:
        return next((row for row in reversed(self.messages) if row.is_summary), None)

    def kept(self) -> list[StoredMessage]:
        """The messages the model is sent verbatim (cleared or not): those after the latest summary."""
        summary = self.summary
        start = (summary.replaces_through or 0) if summary else 0
        return [row for row in self.messages if not row.is_summary and row.id > start]

    def history(self, *, cleared_through: int | None = None) -> list[tuple[str, list[Block]]]:
        """The conversation for the model as (role, blocks): the summary, then the kept messages.

        `cleared_through` overrides the stored clearing boundary (to weigh a clearing before it is saved).
        """
        through = self.tool_results_cleared_through if cleared_through is None else cleared_through
        history: list[tuple[str, list[Block]]] = []
        summary = self.summary
        if summary is not None:
            history.append(("user", list(summary.content)))
        for row in self.kept():
            content = row.content
            if through is not None and row.id <= through and row.role == "user":
                content = tool_results_cleared(content, correlation_id=row.turn_id)
            history.append((row.role, content))
        return history


CLEAR_MIN_CHARS = 200


def tool_results_cleared(content: Sequence[Block], *, correlation_id: uuid.UUID | None) -> list[Block]:
    """`content` with each tool result's body replaced by a marker (results under 200 characters stay)."""
    cleared: list[Block] = []
    for block in content:
        if block.get("type") == "tool_result":
            size = _content_chars(block.get("content"))
            if size >= CLEAR_MIN_CHARS:
                where = f"under correlation id {correlation_id}" if correlation_id else "in the ledger"
                block = {**block, "content": f"[cleared: {size:,} chars; the ledger has it {where}]"}
        cleared.append(block)
    return cleared


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(json.dumps(part)) if part.get("type") != "text" else len(part["text"]) for part in content)
    return 0


def tool_results_uncleared(context: SessionContext, *, through: int) -> bool:
    """Whether clearing through message `through` would clear anything not cleared yet."""
    already = context.tool_results_cleared_through or 0
    for row in context.kept():
        in_range = already < row.id <= through and row.role == "user"
        if in_range and tool_results_cleared(row.content, correlation_id=row.turn_id) != row.content:
            return True
    return False


@dataclass(frozen=True)
class TurnSpan:
    """The kept messages of one turn, in order."""

    turn_id: uuid.UUID | None
    messages: list[StoredMessage] = field(default_factory=list)

    @property
    def last_id(self) -> int:
        return self.messages[-1].id


def turn_spans(messages: Iterable[StoredMessage]) -> list[TurnSpan]:
    """Messages grouped by turn, in order; a message without a turn joins the turn before it."""
    spans: list[TurnSpan] = []
    for row in messages:
        if spans and (row.turn_id is None or row.turn_id == spans[-1].turn_id):
            spans[-1].messages.append(row)
        else:
            spans.append(TurnSpan(turn_id=row.turn_id, messages=[row]))
    return spans


# --- sizes ----------------------------------------------------------------------------------------


class RequestChars:
    """The characters a turn's requests send the model (tools, system, messages) as JSON, measured
    once for what does not change between them.

    Tool definitions are most of a request's characters and the same objects on every call of a
    turn (only the one carrying the cache mark is a fresh copy), so each is measured once; a request
    weighed before it is sent is not measured again when its answer comes back. Objects measured
    are held, so their ids cannot be reused while remembered; none is changed after it is built.
    """

    def __init__(self) -> None:
        self._sizes: dict[int, tuple[object, int]] = {}
        self._last: tuple[object, int] | None = None

    def __call__(self, params: Mapping[str, Any]) -> int:
        if self._last is not None and self._last[0] is params:
            return self._last[1]
        tools = params.get("tools") or []
        # As `json.dumps` lays out [tools, system, messages]: brackets, and ", " between items.
        tools_chars = 2 + 2 * max(len(tools) - 1, 0) + sum(self._size(tool) for tool in tools)
        system_chars = _json_chars(params.get("system") or "")
        chars = 2 + tools_chars + 2 + system_chars + 2 + _json_chars(params.get("messages") or [])
        self._last = (params, chars)
        return chars

    def _size(self, item: object) -> int:
        known = self._sizes.get(id(item))
        if known is None or known[0] is not item:
            known = (item, _json_chars(item))
            self._sizes[id(item)] = known
        return known[1]


def _json_chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def prompt_tokens_of(usage: Any) -> int:
    """The input side of one call's usage: everything the request sent, cached or not."""
    return sum(
        int(getattr(usage, key, 0) or 0)
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


class ContextGauge:
    """The size of the next request, from the last exact figure and the characters added since.

    An exact figure comes from a call's usage or the API's token counting; until there is one, the
    characters are divided by a ratio learned from earlier calls to this server and model.
    """

    def __init__(self, *, server: str, model: str) -> None:
        self.key = (server, model)
        self._tokens: int | None = None
        self._chars = 0

    @property
    def exact(self) -> bool:
        return self._tokens is not None

    def estimate(self, chars: int) -> int:
        ratio = _learned_ratios.get(self.key, CHARS_PER_TOKEN)
        if self._tokens is None:
            return round(chars / ratio)
        return self._tokens + round(max(chars - self._chars, 0) / ratio)

    def measured(self, *, chars: int, tokens: int) -> None:
        """A request of `chars` characters was `tokens` tokens (its usage, or the API's count)."""
        self._tokens, self._chars = tokens, chars
        if tokens > 0 and chars > 0:
            _learned_ratios[self.key] = chars / tokens

    def forget(self) -> None:
        """The history changed under the figure (a compaction): estimate afresh."""
        self._tokens, self._chars = None, 0
