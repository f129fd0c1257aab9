"""Compaction: every request of a turn fits the model's window, however long the session is.

Always on, client-side, so it works with every compatible server. Before each model request the
turn's `ContextKeeper` weighs it (`agent.conversation.context.ContextGauge`: the last call's usage, the
API's token counting near the limit, an estimate otherwise). At `HERMES_COMPACT_AT` of the window
it compacts first; a request the API refuses as too long anyway is compacted and sent again, once
(the operator never sees the refusal). Compacting goes, cheapest first:

1. Old tool results are cleared for the model: every result but the running turn's latest round is
   replaced by a marker naming its size and correlation id (the ledger has it whole). No model
   call; enough when tool output filled the context, which it usually is.
2. Whole older turns are summarised by a separate model call, its prompt asking to keep
   identifiers, decisions, approvals and open questions. The summary is stored as a message of the
   session marked `summary` (with the previous summary folded in); the model's view starts from
   it. The latest `HERMES_COMPACT_KEEP_TURNS` turns and the running turn stay verbatim. Turns too
   many for one summarising request are folded in chunks.

Afterwards the request is rebuilt from the database (the view is a function of stored state), so the
prompt-cache prefix changes once, at the compaction, and is read again from the next call on.
Each compaction aims well under the threshold (`RELIEF`), so the next one is many turns away.
What is stored for people never changes: the transcript, the admin and `/sessions/<id>` keep every
message; the transcript marks where the model's summary begins.

Rejected: Anthropic's server-side context management (compaction and tool-result clearing, beta).
It keeps state the database does not see, and compatible servers do not have it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anthropic
import httpx2
from django.conf import settings

from agent import selectors
from agent.conversation.context import (
    CHARS_PER_TOKEN,
    SUMMARY_HEADER,
    ContextGauge,
    RequestChars,
    SessionContext,
    StoredMessage,
    TooLong,
    TurnSpan,
    context_window,
    context_window_learn,
    prompt_tokens_of,
    tool_results_uncleared,
    turn_spans,
)
from agent.conversation.history import messages_for_api
from agent.engine.budgets import Budgets
from agent.engine.model_stream import AttemptFailed, TimeLimitReached, model_stream
from agent.llm import llm_retry_delay
from agent.store import sessions as session_store
from common import metrics
from common.db import db_call
from common.logs import log_event

logger = logging.getLogger("agent.engine")

Params = dict[str, Any]

# After compacting, a request should weigh at most this share of the threshold.
RELIEF = 0.6
# From this share of the threshold on, the API's token counting is asked for an exact figure
# (once per turn, before its first call; every later call knows its size from the usage).
COUNT_FROM = 0.5
COUNT_TIMEOUT = 10.0
# One summarising request carries at most this share of the window of turns to fold in.
CHUNK_SHARE = 0.5
# What one tool call contributes to the summarising request: its input and the head of its result.
SUMMARY_INPUT_CHARS = 500
SUMMARY_RESULT_CHARS = 1500
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

SUMMARY_PROMPT = """\
You write the running summary of a conversation between a homelab operator and Hermes, the \
operator's agent for the Oikos control plane. The summary replaces the older turns for Hermes, \
which continues the conversation from it and from the latest turns, so anything left out is \
forgotten.

Keep, exactly as written: identifiers (entity slugs, hosts, services, LXCs, execution ids, \
approval ids, correlation ids, versions, paths, URLs), facts and preferences the operator stated, \
what was asked, what Hermes found, decisions taken, actions requested through Oikos and their \
outcomes, approvals (pending, approved or denied, and by whom), and open questions and promised \
follow-ups. Drop greetings, repetition and raw tool output nobody needs again.

Write plain text in short sections (Facts, Findings, Actions and approvals, Open questions), \
oldest first within each. Fold the summary so far into the new one: the result must stand alone."""


class ContextFull(Exception):
    """The request cannot be brought under the model's window: the running turn alone fills it."""


class CompactionFailed(Exception):
    """The summarising model call failed."""


class ContextKeeper:
    """Keeps one turn's requests inside the model's window (one per `TurnLoop`)."""

    def __init__(
        self,
        *,
        state: Any,
        client: anthropic.AsyncAnthropic,
        model: str,
        budgets: Budgets,
        time_limit: float,
        before_compacting: Callable[[], Awaitable[None]],
    ) -> None:
        # The turn's `TurnState`: its messages are replaced after a compaction, its usage grows.
        self.state = state
        # Awaited before the stored session is read to compact it: the turn's writes still on
        # their way (`TurnJournal.append_behind`) are part of what it compacts.
        self.before_compacting = before_compacting
        self.client = client
        self.model = model
        self.budgets = budgets
        self.time_limit = time_limit
        self.server = str(client.base_url)
        self.gauge = ContextGauge(server=self.server, model=model)
        self.request_chars = RequestChars()
        self.compact_at = float(settings.HERMES_COMPACT_AT)
        self.keep_turns = int(settings.HERMES_COMPACT_KEEP_TURNS)

    @property
    def window(self) -> int:
        return context_window(self.model, server=self.server)

    @property
    def threshold(self) -> int:
        return int(self.window * self.compact_at)

    async def fit(self, build: Callable[[], Params], *, refused: TooLong | None = None) -> Params:
        """The request `build()` makes, after compacting the session when it would not fit.

        `refused`: the API refused the last request as too long; it is compacted whatever the
        estimate says, and `ContextFull` is raised when nothing can be compacted.
        """
        params = build()
        chars = self.request_chars(params)
        if refused is not None:
            context_window_learn(self.model, server=self.server, maximum=refused.maximum)
            self.gauge.measured(chars=chars, tokens=refused.tokens)
            tokens, trigger = refused.tokens, "too_long"
        else:
            tokens = await self._weigh(params, chars)
            if tokens < self.threshold:
                return params
            trigger = "threshold"
        fixed_chars = self.request_chars({**params, "messages": []})
        try:
            compacted = await self._compact(trigger=trigger, tokens=tokens, fixed_chars=fixed_chars)
        except CompactionFailed as failed:
            if refused is not None:
                raise ContextFull(f"{_too_long_text(refused)} Compacting it failed: {failed}") from None
            log_event(logger, "context.compaction_failed", level=logging.WARNING, error=str(failed))
            return params
        if not compacted:
            if refused is not None:
                raise ContextFull(
                    f"{_too_long_text(refused)} Nothing is left to compact: this question alone fills "
                    "the model's window. Ask a shorter question, or start a new session."
                )
            return params
        return build()

    def observe(self, params: Params, usage: Any) -> int:
        """A request was answered: its usage is the exact size. Returns the context now in use
        (the request and its answer, which the next request carries)."""
        prompt = prompt_tokens_of(usage)
        if prompt > 0:
            self.gauge.measured(chars=self.request_chars(params), tokens=prompt)
        return prompt + int(getattr(usage, "output_tokens", 0) or 0)

    # --- weighing ---------------------------------------------------------------------------------

    async def _weigh(self, params: Params, chars: int) -> int:
        estimate = self.gauge.estimate(chars)
        if not self.gauge.exact and estimate >= self.threshold * COUNT_FROM:
            counted = await self._count(params)
            if counted is not None:
                self.gauge.measured(chars=chars, tokens=counted)
                return counted
        return estimate

    async def _count(self, params: Params) -> int | None:
        """The API's count of the request's input tokens, or None where the server has no counting."""
        if not settings.HERMES_TOKEN_COUNTING or self.server in _counting_unavailable:
            return None
        request = {key: params[key] for key in ("model", "system", "messages", "tools", "tool_choice") if key in params}
        try:
            async with asyncio.timeout(min(COUNT_TIMEOUT, max(self.time_limit - time.monotonic(), 0.1))):
                counted = await self.client.messages.count_tokens(**request)
        except (anthropic.NotFoundError, anthropic.PermissionDeniedError, anthropic.UnprocessableEntityError):
            _counting_unavailable.add(self.server)  # a compatible server without the endpoint
            return None
        except (anthropic.APIError, httpx2.HTTPError, TimeoutError) as exc:
            log_event(logger, "context.count_failed", level=logging.WARNING, error=f"{exc.__class__.__name__}: {exc}")
            return None
        return int(counted.input_tokens)

    # --- compacting -------------------------------------------------------------------------------

    async def _compact(self, *, trigger: str, tokens: int, fixed_chars: int) -> bool:
        """Clear old tool results, then summarise older turns if that is not enough; True when the
        model's view of the session changed (and `state.messages` was rebuilt)."""
        await self.before_compacting()
        context = await db_call(selectors.session_context_load, session_id=self.state.session_id)
        kept = context.kept()
        spans = turn_spans(kept)
        current = spans[-1] if spans and spans[-1].turn_id == self.state.turn_id else None
        earlier = spans[:-1] if current is not None else spans
        target = int(self.threshold * RELIEF)

        cleared = context.tool_results_cleared_through
        through = _clear_through(current, kept)
        if through is not None and tool_results_uncleared(context, through=through):
            cleared = through
        after = self._estimate(context.history(cleared_through=cleared), fixed_chars)
        summary, replaces_through, summarised, calls = "", None, 0, 0
        if after > target and earlier:
            keep = min(self.keep_turns, len(earlier))
            while keep > 0 and self._estimate(_spans_history(earlier[-keep:], current), fixed_chars) > target // 2:
                keep -= 1
            folded = earlier[: len(earlier) - keep]
            summary, calls = await self._summarise(context.summary, folded)
            replaces_through, summarised = folded[-1].last_id, len(folded)
            after = self._estimate(_view(context, summary, replaces_through, cleared), fixed_chars)
        if after > self.threshold and kept and tool_results_uncleared(context, through=kept[-1].id):
            # Still too big: the running turn's own latest results go too. The model reads the
            # marker (their size, the ledger) and can narrow its query; failing would help nobody.
            cleared = kept[-1].id
        if cleared == context.tool_results_cleared_through and not summary:
            return False
        await db_call(
            session_store.session_compact,
            session_id=self.state.session_id,
            turn_id=self.state.turn_id,
            tool_results_cleared_through=cleared,
            summary=summary,
            replaces_through=replaces_through,
        )
        fresh = await db_call(selectors.session_context_load, session_id=self.state.session_id)
        self.state.messages = fresh.history()
        self.gauge.forget()
        estimate = self._estimate(self.state.messages, fixed_chars)
        kind = "summarised" if summary else "cleared"
        metrics.context_compacted(trigger=trigger, kind=kind)
        log_event(
            logger,
            "context.compacted",
            trigger=trigger,
            kind=kind,
            tokens_before=tokens,
            tokens_after=estimate,
            window=self.window,
            tool_results_cleared_through=cleared,
            turns_summarised=summarised or None,
            model_calls=calls or None,
        )
        return True

    def _estimate(self, history: Sequence[tuple[str, list[dict[str, Any]]]], fixed_chars: int) -> int:
        chars = fixed_chars + len(json.dumps(messages_for_api(history), ensure_ascii=False))
        return ContextGauge(server=self.server, model=self.model).estimate(chars)

    async def _summarise(self, previous: StoredMessage | None, spans: list[TurnSpan]) -> tuple[str, int]:
        """The summary of the previous summary and `spans`; and how many model calls it took."""
        summary = _text_of(previous.content) if previous is not None else ""
        calls = 0
        for chunk in _chunks([_span_text(span) for span in spans], limit=self._chunk_chars()):
            summary = await self._summary_call(summary, chunk)
            calls += 1
        return summary, calls

    def _chunk_chars(self) -> int:
        return int(self.window * CHUNK_SHARE * CHARS_PER_TOKEN)

    async def _summary_call(self, summary: str, turns: str) -> str:
        """One summarising request (retried like a turn's call while nothing came back)."""
        so_far = f"The summary so far:\n<summary>\n{summary}\n</summary>\n\n" if summary else ""
        params: Params = {
            "model": self.model,
            "max_tokens": min(self.budgets.max_tokens, max(256, self.window // 10)),
            "system": SUMMARY_PROMPT,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": f"{so_far}The turns to fold in, oldest first:\n<turns>\n{turns}\n</turns>\n\n"
                            "Write the updated summary.",
                        }
                    ],
                }
            ],
        }
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                message = await model_stream(
                    self.client,
                    params,
                    time_limit=self.time_limit,
                    silence=self.budgets.llm_timeout,
                    opened=lambda _stream: None,
                    on_event=lambda _event: None,
                )
            except TimeLimitReached:
                metrics.llm_call(model=self.model, duration_seconds=time.monotonic() - started, outcome="error")
                raise CompactionFailed("the turn's time limit ran out while summarising") from None
            except AttemptFailed as failed:
                outcome = "error"
                delay = llm_retry_delay(failed.failure, attempt=attempt) if failed.failure.retryable else None
                if delay is not None and attempt <= self.budgets.llm_retries:
                    outcome = "retry"
                metrics.llm_call(model=self.model, duration_seconds=time.monotonic() - started, outcome=outcome)
                if outcome == "error" or delay is None or time.monotonic() + delay >= self.time_limit:
                    raise CompactionFailed(failed.failure.message) from None
                await asyncio.sleep(delay)
                continue
            break
        usage = {key: int(getattr(message.usage, key, 0) or 0) for key in USAGE_KEYS}
        for key, tokens in usage.items():
            self.state.usage[key] += tokens
        self.state.usage["compaction_calls"] = self.state.usage.get("compaction_calls", 0) + 1
        metrics.llm_call(model=self.model, duration_seconds=time.monotonic() - started, usage=usage)
        metrics.context_compaction_call(model=self.model)
        log_event(
            logger,
            "llm.call",
            model=self.model,
            purpose="compaction",
            outcome="ok",
            duration_ms=round((time.monotonic() - started) * 1000),
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
        )
        text = "\n".join(block.text for block in message.content if block.type == "text").strip()
        if not text:
            raise CompactionFailed("the model wrote an empty summary")
        return text


# Servers (base URLs) whose token counting answered "not here": asked once per process.
_counting_unavailable: set[str] = set()


def _too_long_text(refused: TooLong) -> str:
    return f"The conversation is too long for the model ({refused.tokens:,} tokens; its window is {refused.maximum:,})."


def _clear_through(current: TurnSpan | None, kept: list[StoredMessage]) -> int | None:
    """The last message whose tool results may be cleared: everything before the running turn's
    latest round of results (the model has not answered those yet)."""
    if not kept:
        return None
    if current is None:
        return kept[-1].id
    rounds = [row for row in current.messages if row.role == "user" and _has_tool_result(row.content)]
    return (rounds[-1].id if rounds else current.messages[0].id) - 1


def _has_tool_result(content: list[dict[str, Any]]) -> bool:
    return any(block.get("type") == "tool_result" for block in content)


def _view(
    context: SessionContext, summary: str, replaces_through: int | None, cleared: int | None
) -> list[tuple[str, list[dict[str, Any]]]]:
    """What the model would be sent after a compaction not saved yet (a summary and a clearing)."""
    kept = [row for row in context.kept() if replaces_through is None or row.id > replaces_through]
    history = SessionContext(messages=kept, tool_results_cleared_through=cleared).history()
    return [("user", [{"type": "text", "text": SUMMARY_HEADER + summary}]), *history]


def _spans_history(spans: list[TurnSpan], current: TurnSpan | None) -> list[tuple[str, list[dict[str, Any]]]]:
    rows = [row for span in [*spans, *([current] if current else [])] for row in span.messages]
    return [(row.role, row.content) for row in rows]


def _chunks(texts: list[str], *, limit: int) -> list[str]:
    """Turn texts joined into chunks of at most `limit` characters (a longer turn is cut)."""
    chunks: list[str] = []
    for text in texts:
        text = text[:limit]
        if chunks and len(chunks[-1]) + len(text) + 1 <= limit:
            chunks[-1] += "\n" + text
        else:
            chunks.append(text)
    return chunks


def _text_of(content: list[dict[str, Any]]) -> str:
    return "\n".join(str(block.get("text", "")) for block in content if block.get("type") == "text")


def _span_text(span: TurnSpan) -> str:
    """One turn as the summariser reads it: the question, the answers, each tool call in brief."""
    lines = [f"--- turn {span.turn_id} ---"]
    for index, row in enumerate(span.messages):
        for block in row.content:
            kind = block.get("type")
            if kind == "text" and block.get("text"):
                if row.role == "user" and index > 0:
                    continue  # Hermes's own notes to the model (a forced final answer's nudge)
                lines.append(f"{'Operator' if row.role == 'user' else 'Hermes'}: {block['text']}")
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)[:SUMMARY_INPUT_CHARS]
                lines.append(f"Hermes called {block.get('name')} {arguments}")
            elif kind == "tool_result":
                content = block.get("content")
                text = content if isinstance(content, str) else _text_of(content if isinstance(content, list) else [])
                if len(text) > SUMMARY_RESULT_CHARS:
                    text = text[:SUMMARY_RESULT_CHARS] + f" … [{len(text) - SUMMARY_RESULT_CHARS:,} more chars]"
                label = "error" if block.get("is_error") else "result"
                lines.append(f"  {label}: {text}")
    return "\n".join(lines)
