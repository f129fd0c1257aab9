"""One model call of a turn: the request, the stream shown as it comes, retries, usage and logs.

An attempt that fails before anything was shown (a dropped connection, an overload, a 5xx) is
tried again after a backoff while the turn's time allows; once text or a tool call is out, it is
not (the operator saw it; a second answer would contradict or repeat it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anthropic

from agent.conversation.context import prompt_too_long
from agent.conversation.events import Event, TextDelta, ThinkingDelta, ToolUse
from agent.conversation.history import content_strip_cache_control, messages_for_api
from agent.engine.budgets import Budgets
from agent.engine.caching import cache_breakpoints_apply
from agent.engine.compaction import ContextFull, ContextKeeper
from agent.engine.model_stream import AttemptFailed, TimeLimitReached, model_stream
from agent.engine.state import USAGE_KEYS, Block, TurnState
from agent.engine.thinking import ThinkingSettings, thinking_params, thinking_settled_strip
from agent.llm import LLMFailure, llm_retry_delay
from agent.tools.hub import ToolHub
from common import metrics
from common.logs import log_event

logger = logging.getLogger("agent.engine")

# What a stopped call's output is estimated at (`ModelCaller._usage_streamed_add`): the usual
# characters per token of English text for Anthropic's tokenizers.
OUTPUT_CHARS_PER_TOKEN = 4

Emit = Callable[[Event], None]


class ModelCallFailed(Exception):
    """The model call failed; the partial text it streamed (if any) is attached.

    `code` is the turn's stop reason and error code: `llm_error`, or `timeout` when the turn's
    time limit ended the call.
    """

    def __init__(self, message: str, partial: list[Block], *, code: str = "llm_error") -> None:
        super().__init__(message)
        self.partial = partial
        self.code = code


@dataclass(frozen=True)
class ModelAnswer:
    """A model call's message, as kept (no cache marks; text only when no tool may run now)."""

    content: list[Block]
    stop_reason: str
    # The session's context in use after this call (`ContextKeeper.observe`).
    context_tokens: int | None


class ModelCaller:
    """Streams the turn's model calls, emitting text, thinking and tool calls as they arrive.

    It keeps what the tool list check found (the definitions and the note on unreachable servers)
    for every request, the stream in flight (what it said so far is kept if the turn is stopped),
    and how many events its streams have shown (once one is out, a call is not retried).
    """

    def __init__(
        self,
        *,
        state: TurnState,
        client: anthropic.AsyncAnthropic,
        model: str,
        system: str,
        budgets: Budgets,
        thinking: ThinkingSettings,
        context: ContextKeeper,
        hub: ToolHub,
        emit: Emit,
        time_limit: float,
    ) -> None:
        self.state = state
        self.client = client
        self.model = model
        self.system = system
        self.budgets = budgets
        self.thinking = thinking
        self.context = context
        self.hub = hub
        self.emit = emit
        self.time_limit = time_limit
        self.tools: list[Block] = []
        self.system_note = ""
        self._stream: Any = None
        self._emitted = 0

    def tools_offer(self, tools: list[Block], *, note: str) -> None:
        """The tool definitions every request carries, and the note said beside the system prompt."""
        self.tools, self.system_note = tools, note

    async def call(self, *, final: bool) -> ModelAnswer:
        """Stream one model response, emitting text and tool calls; its message as kept.

        `final` is the forced final answer: tools stay defined but may not be used. Every attempt
        logs one `llm.call` line.
        """
        params = await self._context_fit(lambda: self._request_params(final=final))
        self.state.iterations += 1
        attempt = 0
        resent = False
        while True:
            attempt += 1
            started = time.monotonic()
            emitted, text_blocks, thinking_blocks = self._emitted, self.state.text_blocks, self.state.thinking_blocks
            self._stream = None
            try:
                message = await model_stream(
                    self.client,
                    params,
                    time_limit=self.time_limit,
                    silence=self.budgets.llm_timeout,
                    opened=self._stream_opened,
                    on_event=lambda event: self._on_stream_event(event, final=final),
                )
            except asyncio.CancelledError:
                # Stopped mid-stream: what the call consumed so far is spent all the same.
                self._observe(started, outcome="cancelled", attempt=attempt, usage=self._usage_streamed_add())
                raise
            except TimeLimitReached:
                described = self._time_limit_text()
                self._observe(
                    started, outcome="error", attempt=attempt, error=described, usage=self._usage_streamed_add()
                )
                raise ModelCallFailed(described, self.partial_text(), code="timeout") from None
            except AttemptFailed as failed:
                refused = prompt_too_long(failed.__cause__)
                if refused is not None and not resent:
                    # Longer than the window after all: compacted and sent again, once, unseen.
                    resent = True
                    self._observe(started, outcome="too_long", attempt=attempt, error=failed.failure.message)
                    self.state.usage["too_long_retries"] = self.state.usage.get("too_long_retries", 0) + 1
                    params = await self._context_fit(lambda: self._request_params(final=final), refused=refused)
                    continue
                delay = self._attempt_failed(failed, started, attempt=attempt, spoke=self._emitted > emitted)
                # Nothing of the failed attempt was shown; its empty blocks never existed.
                self.state.text_blocks, self.state.thinking_blocks = text_blocks, thinking_blocks
                await asyncio.sleep(delay)
                continue
            break
        self._stream = None
        return self._answer(message, params, started, attempt=attempt, final=final)

    def _attempt_failed(self, failed: AttemptFailed, started: float, *, attempt: int, spoke: bool) -> float:
        """Seconds before the next attempt; `ModelCallFailed` when there is none."""
        delay = None if spoke else self._retry_delay(failed.failure, attempt=attempt)
        if delay is None:
            described = failed.failure.message
            if spoke:
                described += " The answer was cut off after it began; what arrived is kept."
            elif attempt > 1:
                described += f" (tried {attempt} times)"
            self._observe(started, outcome="error", attempt=attempt, error=described)
            raise ModelCallFailed(described, self.partial_text()) from failed.__cause__
        self._observe(started, outcome="retry", attempt=attempt, error=failed.failure.message, retry_in=delay)
        return delay

    def _answer(
        self, message: Any, params: dict[str, Any], started: float, *, attempt: int, final: bool
    ) -> ModelAnswer:
        """Count the call's usage, log it, and keep its message (text only when no tool may run now)."""
        usage = self._usage_add(message.usage)
        context_tokens = self.context.observe(params, message.usage)
        self._observe(started, outcome="ok", attempt=attempt, usage=usage, stop_reason=message.stop_reason)
        content = content_strip_cache_control(cast(list[Block], message.to_param()["content"]))
        if final or message.stop_reason == "max_tokens":
            # No tools may run now: keep only what was said (a cut-off tool call is unusable; the
            # thinking before it is needed by no later request of this turn).
            content = [block for block in content if block["type"] == "text" and block["text"]]
            if not content and final:
                content = [self._fallback_text()]
        return ModelAnswer(content=content, stop_reason=message.stop_reason, context_tokens=context_tokens)

    def partial_text(self) -> list[Block]:
        """The text the model call in flight streamed so far, as blocks worth keeping."""
        if self._stream is None:
            return []
        try:
            snapshot = self._stream.current_message_snapshot
        except (AssertionError, RuntimeError):
            return []
        return [{"type": "text", "text": b.text} for b in snapshot.content if b.type == "text" and b.text]

    def _request_params(self, *, final: bool) -> dict[str, Any]:
        tools, system, messages = cache_breakpoints_apply(
            tools=self.tools,
            system=self.system,
            messages=thinking_settled_strip(messages_for_api(self.state.messages)),
            system_note=self.system_note,
        )
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.budgets.max_tokens,
            "system": system,
            "messages": messages,
            **thinking_params(self.model, self.thinking, max_tokens=self.budgets.max_tokens),
        }
        if tools:
            params["tools"] = tools
            if final:
                # The history holds tool blocks, so the tools must stay defined; `none` forbids use.
                params["tool_choice"] = {"type": "none"}
        return params

    async def _context_fit(self, build: Callable[[], dict[str, Any]], **refusal: Any) -> dict[str, Any]:
        """The request, after compacting the session if it would not fit the window (`compaction`)."""
        try:
            return await self.context.fit(build, **refusal)
        except ContextFull as full:
            raise ModelCallFailed(str(full), []) from None

    def _stream_opened(self, stream: Any) -> None:
        self._stream = stream

    def _retry_delay(self, failure: LLMFailure, *, attempt: int) -> float | None:
        """Seconds before the next attempt, or None when there is none (not retryable, no tries or time left)."""
        if not failure.retryable or attempt > self.budgets.llm_retries:
            return None
        delay = llm_retry_delay(failure, attempt=attempt)
        if delay is None or time.monotonic() + delay >= self.time_limit:
            return None
        return delay

    def _time_limit_text(self) -> str:
        limit = f"This question's time limit ({self.budgets.timeout:g} s) ran out"
        if self.partial_text():
            return f"{limit} while the model was answering; what it said so far is kept."
        return f"{limit} before the model answered."

    def _on_stream_event(self, event: Any, *, final: bool) -> None:
        if event.type == "content_block_start" and event.content_block.type == "text":
            self.state.text_blocks += 1
        elif event.type == "content_block_start" and event.content_block.type in ("thinking", "redacted_thinking"):
            self.state.thinking_blocks += 1
            if event.content_block.type == "redacted_thinking":
                self._shown(ThinkingDelta(text="", block=self.state.thinking_blocks - 1, redacted=True))
        elif event.type == "thinking" and event.thinking:
            # Shown to the operator as it streams; never logged, never part of an answer.
            self._shown(ThinkingDelta(text=event.thinking, block=self.state.thinking_blocks - 1))
        elif event.type == "text" and event.text:
            self._shown(TextDelta(text=event.text, block=self.state.text_blocks - 1))
        elif event.type == "content_block_stop" and event.content_block.type == "tool_use" and not final:
            self._shown(self._tool_use(event.content_block))

    def _shown(self, event: Event) -> None:
        self._emitted += 1
        self.emit(event)

    def _tool_use(self, block: Any) -> ToolUse:
        spec = self.hub.spec(block.name)
        return ToolUse(
            id=block.id,
            name=block.name,
            server=spec.server if spec else "",
            tool=spec.tool if spec else block.name,
            input=dict(block.input) if isinstance(block.input, dict) else {},
        )

    def _fallback_text(self) -> Block:
        text = "[Hermes stopped this turn before the model produced an answer.]"
        self.emit(TextDelta(text=text, block=self.state.text_blocks))
        self.state.text_blocks += 1
        return {"type": "text", "text": text}

    def _usage_add(self, usage: Any, *, output_at_least: int = 0) -> dict[str, int]:
        """Add one call's usage to the turn's (its output counted as `output_at_least` at the
        fewest); returns that call's usage."""
        call = {key: int(getattr(usage, key, 0) or 0) for key in USAGE_KEYS}
        call["output_tokens"] = max(call["output_tokens"], output_at_least)
        for key, tokens in call.items():
            self.state.usage[key] += tokens
        return call

    def _usage_streamed_add(self) -> dict[str, int] | None:
        """Add what the call in flight consumed before it was cut off; returns it (None if nothing began).

        The input side is what `message_start` reported (the full prompt, cache reads and writes
        included). The output side comes only with `message_delta`, at the end, so it is estimated
        from what streamed so far: about four characters a token (`OUTPUT_CHARS_PER_TOKEN`), never
        less than `message_start`'s own count. docs/budget.md says so.
        """
        if self._stream is None:
            return None
        try:
            snapshot = self._stream.current_message_snapshot
        except (AssertionError, RuntimeError):
            # No `message_start` yet: the model API has not begun to answer.
            return None
        return self._usage_add(snapshot.usage, output_at_least=output_tokens_estimate(snapshot.content))

    def _observe(
        self,
        started: float,
        *,
        outcome: str,
        attempt: int = 1,
        usage: dict[str, int] | None = None,
        stop_reason: str = "",
        error: str = "",
        retry_in: float | None = None,
    ) -> None:
        duration = time.monotonic() - started
        metrics.llm_call(model=self.model, duration_seconds=duration, outcome=outcome, usage=usage)
        tokens = usage or {}
        log_event(
            logger,
            "llm.call",
            level=logging.WARNING if outcome in ("error", "retry") else logging.INFO,
            model=self.model,
            outcome=outcome,
            duration_ms=round(duration * 1000),
            iteration=self.state.iterations,
            attempt=attempt if attempt > 1 or outcome == "retry" else None,
            retry_in_ms=round(retry_in * 1000) if retry_in is not None else None,
            stop_reason=stop_reason or None,
            input_tokens=tokens.get("input_tokens"),
            output_tokens=tokens.get("output_tokens"),
            cache_read_tokens=tokens.get("cache_read_input_tokens"),
            cache_write_tokens=tokens.get("cache_creation_input_tokens"),
            error=error or None,
        )


def output_tokens_estimate(content: list[Any]) -> int:
    """Output tokens of the blocks streamed so far, estimated from their characters: text, thinking,
    and each tool call's name and input (thinking is billed as output)."""
    chars = 0
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            chars += len(block.text or "")
        elif kind == "thinking":
            chars += len(block.thinking or "")
        elif kind == "tool_use":
            chars += len(block.name or "") + len(json.dumps(block.input or {}))
    return math.ceil(chars / OUTPUT_CHARS_PER_TOKEN)
