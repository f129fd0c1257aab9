"""The turn loop: stream the model, run the tools it asks for, repeat until it answers.

Hand-written on `client.messages.stream` rather than the SDK's tool runner: we need every event as
it happens, conversation state that lives in our database, and requests that any compatible
server accepts. The loop knows nothing about transports; it reports through `emit`.

Rules it keeps (DESIGN §4): budgets with a forced final answer, parallel tools with results in
order, bounded tool output, cache breakpoints, crash-safe persistence, no approvals by the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, cast

import anthropic
from django.utils import timezone

from agent.conversation.context import prompt_too_long
from agent.conversation.events import Done, Error, Event, TextDelta, ThinkingDelta, ToolResult, ToolUse
from agent.conversation.history import (
    content_strip_cache_control,
    messages_for_api,
    synthetic_tool_results,
    tool_blocks_held,
)
from agent.conversation.outcomes import (
    CUTOFF_CANCELLED,
    CUTOFF_TIME_LIMIT,
    OPERATOR_CANCEL_REASON,
    Cutoff,
    ToolOutcome,
    outcome_unknown_text,
)
from agent.conversation.results import tool_error_blocks, tool_error_record
from agent.elicitation.turn import TurnElicitor
from agent.elicitation.types import Answerer
from agent.engine.actions import ActionGate
from agent.engine.approvals import approval_from_result
from agent.engine.budgets import Budgets
from agent.engine.caching import cache_breakpoints_apply
from agent.engine.compaction import ContextFull, ContextKeeper
from agent.engine.model_stream import AttemptFailed, TimeLimitReached, model_stream
from agent.engine.prompt import unreachable_note
from agent.engine.storage import (
    FENCED_MESSAGE,
    STORAGE_ERROR,
    end_write_retried,
    storage_failure,
    storage_failure_text,
)
from agent.engine.thinking import ThinkingSettings, thinking_params, thinking_settled_strip
from agent.engine.truncation import tool_result_bound
from agent.llm import LLMFailure, llm_retry_delay
from agent.models import Turn
from agent.prices import turn_cost
from agent.store import ledger
from agent.store import turns as turn_store
from agent.tools.config import oikos_server_name
from agent.tools.context import ToolCallContext
from agent.tools.hub import ListingsAhead, ToolHub, UnreachableServer
from agent.tools.provenance import Capability
from common import metrics
from common.db import db_call
from common.logs import log_event, turn_context_set
from common.redaction import redact

logger = logging.getLogger("agent.engine")

Block = dict[str, Any]
Emit = Callable[[Event], None]

PREVIEW_CHARS = 4000
HEARTBEAT_SECONDS = 20.0

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

STOP_NOTES = {
    "max_iterations": "the limit of {n} tool rounds for one question",
    "token_budget": "this question's token budget",
    "timeout": "this question's time limit",
}


class ToolsUnavailable(Exception):
    """The conversation holds tool calls but no tool can be defined: the API would refuse it."""


class ModelCallFailed(Exception):
    """The model call failed; the partial text it streamed (if any) is attached.

    `code` is the turn's stop reason and error code: `llm_error`, or `timeout` when the turn's
    time limit ended the call.
    """

    def __init__(self, message: str, partial: list[Block], *, code: str = "llm_error") -> None:
        super().__init__(message)
        self.partial = partial
        self.code = code


@dataclass
class TurnState:
    session_id: uuid.UUID
    turn_id: uuid.UUID
    actor: str
    messages: list[tuple[str, list[Block]]]
    # The peer agent whose message started the turn; its tools are out of reach (the depth guard).
    origin_peer: str | None = None
    # Who answers an MCP server's questions (elicitation) in this turn; None: Hermes declines them.
    answerer: Answerer | None = None
    # Where the turn was started and what that lets it do (`agent.tools.provenance`).
    origin: str = ""
    capability: Capability = "write"
    # The question that started the turn, as stored: an operator's own words, when they are.
    question: str = ""
    iterations: int = 0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    text_blocks: int = 0
    thinking_blocks: int = 0

    def tokens_used(self) -> int:
        # Only tokens: usage also counts compaction calls and requests refused as too long.
        return sum(self.usage.get(key, 0) for key in USAGE_KEYS)

    def tool_context(self) -> ToolCallContext:
        return ToolCallContext(
            actor=self.actor,
            session_id=self.session_id,
            turn_id=self.turn_id,
            origin_peer=self.origin_peer,
            origin=self.origin,
            capability=self.capability,
        )


class TurnLoop:
    def __init__(
        self,
        *,
        state: TurnState,
        hub: ToolHub,
        client: anthropic.AsyncAnthropic,
        model: str,
        system: str,
        budgets: Budgets,
        emit: Emit,
        thinking: ThinkingSettings | None = None,
        tools_ahead: ListingsAhead | None = None,
    ) -> None:
        self.state = state
        self.hub = hub
        # The listing checks started while the question was stored (`ToolHub.verify_ahead`).
        self.tools_ahead = tools_ahead
        self.client = client
        self.model = model
        self.system = system
        self.budgets = budgets
        self.emit = emit
        self.thinking = thinking or ThinkingSettings()
        self.clock_start = time.monotonic()
        # The turn ends by this moment, whatever it is doing: a model call in flight is cut.
        self.time_limit = self.clock_start + budgets.timeout
        # Work (tool rounds) stops by this moment, leaving the rest for the forced final answer.
        self.deadline = self.time_limit - budgets.final_answer_reserve
        self.tools: list[Block] = []
        # Said to the model beside the system prompt: which servers did not answer at the start.
        self.system_note = ""
        self._last_stop_reason = "end_turn"
        # The model stream in flight: what it said so far is kept if the turn is cancelled.
        self._stream: Any = None
        # Why the turn is being cancelled when it is not the operator's Stop (its process is going
        # away): the turn then ends `interrupted` instead of `cancelled`.
        self.interrupted_by = ""
        # Who cancelled the turn, as its record says (`TurnHandle.cancel`): the operator's Stop
        # unless a frontend names another (a peer that hung up or cancelled its task).
        self.cancelled_by = OPERATOR_CANCEL_REASON
        # Events shown to the transport from model streams: once one is out, a call is not retried.
        self._emitted = 0
        # Why a cancellation of this turn cuts its tool calls off; a frontend that cancels for
        # another reason (a shutdown) sets its own before cancelling.
        self.cancel_cause: Cutoff = CUTOFF_CANCELLED
        # Whether `run()` has begun, and whether a stop came before it did (`TurnHandle.cancel`): a
        # task cancelled before its first step ends without running a line of `run()`.
        self.begun = False
        self.stop_requested = False
        # Per tool_use id: why its call was cut off in flight.
        self._cutoffs: dict[str, Cutoff] = {}
        # The tool results of the round a cancellation interrupted (finished ones real, others unknown).
        self._results_on_cancel: list[Block] = []
        self.elicitor = TurnElicitor(
            correlation_id=state.turn_id,
            session_id=state.session_id,
            actor=state.actor,
            emit=emit,
            answerer=state.answerer,
            time_limit=self.time_limit,
        )
        # Who may cause an action from this turn: confirmations and proposals (`agent.engine.actions`).
        self.actions = ActionGate(state=state, elicitor=self.elicitor, oikos_server=oikos_server_name())
        # Set when a write found the turn no longer this process's (`turn_store.TurnFenced`): it then
        # writes nothing more.
        self.fenced = False
        self._task: asyncio.Task[Any] | None = None
        # Per tool_use id: its `started` ledger row (id, tool), until its call begins.
        self._ledger_started: dict[str, tuple[int, str]] = {}
        # Outcomes of tool calls that answered, written to the ledger with the next stored message.
        self._ledger_ended: list[ledger.ActivityEnd] = []
        # The turn's last model call (it asked for no tool), stored with the turn's end.
        self._last_answer: turn_store.LastAnswer | None = None
        # A round's tool results being stored while the model is asked again (`_append_behind`), and
        # the ledger outcomes written with them.
        self._behind: tuple[asyncio.Future[None], list[ledger.ActivityEnd]] | None = None
        # Keeps every request inside the model's window, compacting the session when needed.
        self.context = ContextKeeper(
            state=state,
            client=client,
            model=model,
            budgets=budgets,
            time_limit=self.time_limit,
            before_compacting=self._writes_settle,
        )

    async def run(self) -> None:
        """Run the turn to its end, emitting events; always finishes with `done`.

        A cancelled turn keeps its partial text, answers in-flight tool calls with synthetic
        errors, is marked `cancelled`, and swallows the cancellation after reporting it.

        The turn's task runs in a context of its own (see `runner.turn_start`), so the log context
        set here tags every line logged by this turn, and by nothing else.
        """
        self.begun = True
        turn_context_set(correlation_id=str(self.state.turn_id), session_id=str(self.state.session_id))
        metrics.turn_started()
        log_event(logger, "turn.started", actor=self.state.actor, model=self.model, messages=len(self.state.messages))
        if self.stop_requested:
            await self._end(self._stop_ending())
            return
        self._task = asyncio.current_task()
        heartbeat = asyncio.create_task(self._heartbeat())
        ending: Coroutine[Any, Any, None]
        try:
            stop_reason = await self._loop()
        except asyncio.CancelledError:
            ending = self._stop_ending()
        except turn_store.TurnFenced:
            ending = self._fenced_ending()
        except ToolsUnavailable as refused:
            ending = self._finish(Turn.Status.ERROR, "tools_unavailable", error=str(refused), code="tools_unavailable")
        except ModelCallFailed as failure:
            ending = self._failed(failure)
        except Exception as exc:  # a bug must end the turn visibly, not leave it running
            ending = self._storage_failed(exc) if storage_failure(exc) else self._crashed(exc)
        else:
            ending = self._finish(Turn.Status.DONE, stop_reason)
        finally:
            heartbeat.cancel()
        await self._end(ending)

    async def _end(self, ending: Coroutine[Any, Any, None]) -> None:
        """Run the turn's ending; one whose writes fail ends anyway, with `error` and `done` said."""
        try:
            await _to_the_end(ending)
        except turn_store.TurnFenced:
            await _to_the_end(self._fenced_ending())
        except Exception as exc:
            if not storage_failure(exc):
                logger.exception("turn.ending_failed", extra={"event": "turn.ending_failed", "fields": {}})
            await _to_the_end(self._storage_failed(exc))

    def _crashed(self, exc: Exception) -> Coroutine[Any, Any, None]:
        # Logged here, in the turn's context: re-raised, it would only surface as "Task exception
        # was never retrieved" whenever the task is collected, under whichever turn runs then.
        logger.exception("turn.crashed", extra={"event": "turn.crashed", "fields": {}})
        return self._finish(Turn.Status.ERROR, "error", error=f"{exc.__class__.__name__}: {exc}", code="error")

    async def _fenced_ending(self) -> None:
        """Another process declared this turn interrupted: say so, and store nothing more."""
        self.fenced = True
        log_event(logger, "turn.fenced", level=logging.WARNING)
        metrics.turn_finished(Turn.Status.INTERRUPTED, stop_reason="interrupted", duration_seconds=self._duration())
        self._last_answer = None
        self._end_emit(Turn.Status.INTERRUPTED, "interrupted", error=FENCED_MESSAGE, code="interrupted")

    async def _storage_failed(self, exc: BaseException) -> None:
        """A write failed: the turn's end is written once, its followers told (`error`, `done`), and
        an end that could not be written is tried again a bounded number of times."""
        error = redact(storage_failure_text(exc))
        log_event(logger, "turn.storage_failed", level=logging.WARNING, error=error)
        metrics.turn_finished(Turn.Status.ERROR, stop_reason=STORAGE_ERROR, duration_seconds=self._duration())
        await self._writes_settle(quiet=True)
        ended, self._ledger_ended = self._ledger_ended, []
        self._ledger_started = {}

        async def end_write() -> None:
            await db_call(
                turn_store.turn_finish,
                turn_id=self.state.turn_id,
                status=Turn.Status.ERROR,
                stop_reason=STORAGE_ERROR,
                iterations=self.state.iterations,
                usage=dict(self.state.usage),
                model=self.model,
                error=error,
                ended=ended,
            )

        # Once before `done`, so a client that asks again at once finds the session free; then,
        # with the database still failing, again after `done`, which must not wait on it.
        stored = await end_write_retried(end_write, delays=())
        self._end_emit(Turn.Status.ERROR, STORAGE_ERROR, error=error, code=STORAGE_ERROR)
        if not stored:
            await end_write_retried(end_write)

    def _started_ids(self) -> set[int]:
        return {activity_id for activity_id, _tool in self._ledger_started.values()}

    def _duration(self) -> float:
        return time.monotonic() - self.clock_start

    def _stop_ending(self) -> Coroutine[Any, Any, None]:
        if self.fenced:
            return self._fenced_ending()
        if self.interrupted_by:
            return self._stopped(Turn.Status.INTERRUPTED, "interrupted", self.interrupted_by)
        return self._stopped(Turn.Status.CANCELLED, "cancelled", self.cancelled_by)

    async def _failed(self, failure: ModelCallFailed) -> None:
        await self._writes_settle(quiet=True)
        await self._keep_partial(failure.partial)
        await self._finish(Turn.Status.ERROR, failure.code, error=str(failure), code=failure.code)

    async def _loop(self) -> str:
        context = self.state.tool_context()
        specs = await self.hub.list_tools(context, verify=True, ahead=self.tools_ahead)
        self.tools_ahead = None
        self.tools = [spec.to_anthropic() for spec in specs]
        unreachable = self.hub.unreachable(context)
        if unreachable:
            log_event(
                logger,
                "turn.servers_unreachable",
                level=logging.WARNING,
                servers=",".join(server.name for server in unreachable),
                tools_known=all(server.tools_known for server in unreachable),
            )
        if not self.tools and tool_blocks_held(self.state.messages):
            raise ToolsUnavailable(_tools_unavailable_message(unreachable))
        self.system_note = unreachable_note(unreachable)
        while True:
            capped = self._budget_exhausted()
            if capped:
                return await self._final_answer(capped)
            message = await self._model_call(final=False)
            tool_uses = [block for block in message if block["type"] == "tool_use"]
            if not tool_uses:
                return self._last_stop_reason
            results = await self._tools_run(tool_uses)
            # The model reads these results next: from now on, whatever it asks may come from them.
            for block in tool_uses:
                spec = self.hub.spec(block["name"])
                self.actions.untrusted_read(f"the result of {spec.server}/{spec.tool}" if spec else block["name"])
            self._append_behind("user", results)

    # --- budgets ---------------------------------------------------------------------------------

    def _budget_exhausted(self) -> str:
        if self.state.iterations >= self.budgets.max_iterations:
            return "max_iterations"
        if self.state.tokens_used() >= self.budgets.turn_tokens:
            return "token_budget"
        if time.monotonic() >= self.deadline:
            return "timeout"
        return ""

    async def _final_answer(self, reason: str) -> str:
        """Ask once more, with tools disabled, for the best answer the model can give now."""
        note = STOP_NOTES[reason].format(n=self.budgets.max_iterations)
        nudge = {
            "type": "text",
            "text": f"[Hermes: {note} is reached. Do not call any more tools. Answer now with what "
            "you found so far, and say what is left unchecked.]",
        }
        role, content = self.state.messages[-1]
        if role == "user":
            self.state.messages[-1] = (role, [*content, nudge])
            await self._store("user", [nudge])
        else:
            await self._append("user", [nudge])
        # Bounded by the turn's time limit, like every model call: the reserve kept for it is what it gets.
        await self._model_call(final=True)
        return reason

    # --- the model -------------------------------------------------------------------------------

    async def _model_call(self, *, final: bool) -> list[Block]:
        """Stream one model response, emitting text and tool calls; store and return its blocks.

        An attempt that fails before anything was shown (a dropped connection, an overload, a 5xx)
        is tried again after a backoff, while the turn's time allows; once text or a tool call is
        out, it is not (the operator saw it; a second answer would contradict or repeat it).
        Every attempt logs one `llm.call` line.
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
                self._model_call_observe(started, outcome="cancelled", attempt=attempt)
                raise
            except TimeLimitReached:
                described = self._time_limit_text()
                self._model_call_observe(started, outcome="error", attempt=attempt, error=described)
                raise ModelCallFailed(described, self._partial_text(), code="timeout") from None
            except AttemptFailed as failed:
                refused = prompt_too_long(failed.__cause__)
                if refused is not None and not resent:
                    # Longer than the window after all: compacted and sent again, once, unseen.
                    resent = True
                    self._model_call_observe(started, outcome="too_long", attempt=attempt, error=failed.failure.message)
                    self.state.usage["too_long_retries"] = self.state.usage.get("too_long_retries", 0) + 1
                    params = await self._context_fit(lambda: self._request_params(final=final), refused=refused)
                    continue
                spoke = self._emitted > emitted
                delay = None if spoke else self._retry_delay(failed.failure, attempt=attempt)
                if delay is None:
                    described = failed.failure.message
                    if spoke:
                        described += " The answer was cut off after it began; what arrived is kept."
                    elif attempt > 1:
                        described += f" (tried {attempt} times)"
                    self._model_call_observe(started, outcome="error", attempt=attempt, error=described)
                    raise ModelCallFailed(described, self._partial_text()) from failed.__cause__
                self._model_call_observe(
                    started, outcome="retry", attempt=attempt, error=failed.failure.message, retry_in=delay
                )
                # Nothing of the failed attempt was shown; its empty blocks never existed.
                self.state.text_blocks, self.state.thinking_blocks = text_blocks, thinking_blocks
                await asyncio.sleep(delay)
                continue
            break
        self._stream = None

        usage = self._usage_add(message.usage)
        context_tokens = self.context.observe(params, message.usage)
        self._model_call_observe(started, outcome="ok", attempt=attempt, usage=usage, stop_reason=message.stop_reason)
        self._last_stop_reason = message.stop_reason
        content = content_strip_cache_control(cast(list[Block], message.to_param()["content"]))
        if final or message.stop_reason == "max_tokens":
            # No tools may run now: keep only what was said (a cut-off tool call is unusable; the
            # thinking before it is needed by no later request of this turn).
            content = [block for block in content if block["type"] == "text" and block["text"]]
            if not content and final:
                content = [self._fallback_text()]
        if content:
            self.state.messages.append(("assistant", content))
        # The message, complete, the turn's progress, and the `started` ledger rows of the calls it
        # asks for (written before any of them is sent, as the ledger requires): one transaction.
        runs_tools = not final and message.stop_reason != "max_tokens"
        calls = [self._ledger_row(block) for block in content if block["type"] == "tool_use"] if runs_tools else []
        await self._writes_settle()
        if not calls:
            # Asked for no tool call, so the turn ends now: its message is stored with the end (`_finish`).
            self._last_answer = turn_store.LastAnswer(
                session_id=self.state.session_id,
                message=content or None,
                context_tokens=context_tokens,
                context_window=self.context.window,
            )
            return content
        started_ids = await db_call(
            turn_store.turn_progress,
            turn_id=self.state.turn_id,
            iterations=self.state.iterations,
            usage=dict(self.state.usage),
            model=self.model,
            session_id=self.state.session_id,
            context_tokens=context_tokens,
            context_window=self.context.window,
            message=content or None,
            calls=calls,
        )
        for call, activity_id in zip(calls, started_ids, strict=True):
            self._ledger_started[call["tool_use_id"]] = (activity_id, call["tool"])
        return content

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
        if self._partial_text():
            return f"{limit} while the model was answering; what it said so far is kept."
        return f"{limit} before the model answered."

    def _on_stream_event(self, event: Any, *, final: bool) -> None:
        if event.type == "content_block_start" and event.content_block.type == "text":
            self.state.text_blocks += 1
        elif event.type == "content_block_start" and event.content_block.type in ("thinking", "redacted_thinking"):
            self.state.thinking_blocks += 1
            if event.content_block.type == "redacted_thinking":
                self._emitted += 1
                self.emit(ThinkingDelta(text="", block=self.state.thinking_blocks - 1, redacted=True))
        elif event.type == "thinking" and event.thinking:
            # Shown to the operator as it streams; never logged, never part of an answer.
            self._emitted += 1
            self.emit(ThinkingDelta(text=event.thinking, block=self.state.thinking_blocks - 1))
        elif event.type == "text" and event.text:
            self._emitted += 1
            self.emit(TextDelta(text=event.text, block=self.state.text_blocks - 1))
        elif event.type == "content_block_stop" and event.content_block.type == "tool_use" and not final:
            block = event.content_block
            spec = self.hub.spec(block.name)
            self._emitted += 1
            self.emit(
                ToolUse(
                    id=block.id,
                    name=block.name,
                    server=spec.server if spec else "",
                    tool=spec.tool if spec else block.name,
                    input=dict(block.input) if isinstance(block.input, dict) else {},
                )
            )

    def _fallback_text(self) -> Block:
        text = "[Hermes stopped this turn before the model produced an answer.]"
        self.emit(TextDelta(text=text, block=self.state.text_blocks))
        self.state.text_blocks += 1
        return {"type": "text", "text": text}

    def _usage_add(self, usage: Any) -> dict[str, int]:
        """Add one call's usage to the turn's; returns that call's usage."""
        call = {key: int(getattr(usage, key, 0) or 0) for key in USAGE_KEYS}
        for key, tokens in call.items():
            self.state.usage[key] += tokens
        return call

    def _model_call_observe(
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

    # --- tools -----------------------------------------------------------------------------------

    async def _tools_run(self, tool_uses: list[Block]) -> list[Block]:
        """Run every tool call of one response concurrently; results come back in call order.

        A call still in flight at the turn's time limit, or when the turn is stopped, is cut off
        and answered "outcome unknown — it may have run" (its own task records that in the
        ledger); calls that did finish keep their real results, on Stop too.
        """
        tasks = [asyncio.create_task(self._tool_run(block)) for block in tool_uses]
        remaining = max(self.deadline - time.monotonic(), 0.0)
        try:
            await asyncio.wait(tasks, timeout=remaining)
        except asyncio.CancelledError:
            self._results_on_cancel = await self._tools_cut_off(tool_uses, tasks, self.cancel_cause)
            raise
        return await self._tools_cut_off(tool_uses, tasks, CUTOFF_TIME_LIMIT)

    async def _tools_cut_off(
        self, tool_uses: list[Block], tasks: list[asyncio.Task[Block]], cause: Cutoff
    ) -> list[Block]:
        """Cut off the calls still running for `cause`; every call's result, in call order."""
        for block, task in zip(tool_uses, tasks, strict=True):
            if not task.done():
                self._cutoffs[block["id"]] = cause
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        results: list[Block] = []
        for block, task in zip(tool_uses, tasks, strict=True):
            if not task.cancelled() and task.exception() is None:
                results.append(task.result())
            else:
                results.extend(synthetic_tool_results([block], self._cutoffs.get(block["id"], cause)))
        return results

    async def _tool_run(self, block: Block) -> Block:
        spec = self.hub.spec(block["name"])
        started = time.monotonic()
        arguments = block["input"] if isinstance(block["input"], dict) else {}
        # Its `started` row was written with the model's message (`_model_call`), or is written now.
        activity_id, _tool = self._ledger_started.pop(block["id"], (None, ""))
        if activity_id is None:
            activity_id = await db_call(ledger.activity_start, **self._ledger_row(block))
        try:
            context = dataclasses.replace(self.state.tool_context(), tool_use_id=block["id"], elicitor=self.elicitor)
            held = await self.actions.hold(spec, arguments, tool_use_id=block["id"]) if spec else None
            outcome = held or await self.hub.call(block["name"], arguments, context=context)
        except asyncio.CancelledError:
            cause = self._cutoffs.get(block["id"], self.cancel_cause)
            text = outcome_unknown_text(tool=block["name"], cause=cause)
            outcome = ToolOutcome(
                content=tool_error_blocks(text),
                is_error=True,
                record=tool_error_record(cause.kind, text),
                structured=None,
                duration_ms=round((time.monotonic() - started) * 1000),
                unknown=True,
            )
            await self._ledger_finish(activity_id, outcome)
            self._tool_result_emit(block, outcome, text, truncated=False)
            raise
        bounded = tool_result_bound(outcome.content, limit=self.budgets.tool_result_chars)
        # Written with the round's tool results (`_store`): its row says `started` until then.
        self._ledger_ended.append(_activity_end(activity_id, outcome))
        preview = "".join(b["text"] for b in bounded.content if b.get("type") == "text")
        self._tool_result_emit(block, outcome, preview, truncated=bounded.truncated)
        if spec and not outcome.is_error:
            approval = approval_from_result(
                server=spec.server, tool=spec.tool, tool_use_id=block["id"], structured=outcome.structured
            )
            if approval:
                metrics.approval_raised(risk_class=approval.risk_class)
                log_event(
                    logger,
                    "approval.raised",
                    approval_id=approval.approval_id,
                    execution_id=approval.execution_id,
                    target=approval.target,
                    action=approval.action,
                    risk_class=approval.risk_class,
                )
                self.emit(approval)
        result: Block = {"type": "tool_result", "tool_use_id": block["id"], "content": bounded.content}
        if outcome.is_error:
            result["is_error"] = True
        return result

    def _tool_result_emit(self, block: Block, outcome: ToolOutcome, preview: str, *, truncated: bool) -> None:
        self.emit(
            ToolResult(
                tool_use_id=block["id"],
                name=block["name"],
                is_error=outcome.is_error,
                content=preview[:PREVIEW_CHARS],
                duration_ms=outcome.duration_ms,
                truncated=truncated or len(preview) > PREVIEW_CHARS,
                state=outcome.state,
            )
        )

    def _ledger_row(self, block: Block) -> dict[str, Any]:
        """The arguments of the call's `started` ledger row (`ledger.activity_start`)."""
        spec = self.hub.spec(block["name"])
        return {
            "correlation_id": self.state.turn_id,
            "session_id": self.state.session_id,
            "actor": self.state.actor,
            "tool_use_id": block["id"],
            "server": spec.server if spec else "",
            "tool": spec.tool if spec else block["name"],
            "arguments": block["input"] if isinstance(block["input"], dict) else {},
            "started_at": timezone.now(),
        }

    async def _ledger_finish(self, activity_id: int, outcome: ToolOutcome) -> None:
        end = _activity_end(activity_id, outcome)
        await db_call(
            ledger.activity_finish,
            activity_id=end.activity_id,
            state=end.state,
            result=end.result,
            is_error=end.is_error,
            duration_ms=end.duration_ms,
        )

    # --- persistence -----------------------------------------------------------------------------

    async def _append(self, role: str, content: list[Block]) -> None:
        self.state.messages.append((role, content))
        await self._store(role, content)

    async def _store(self, role: str, content: list[Block]) -> None:
        """Store a complete message, with the ledger outcomes of the calls finished since the last one."""
        await self._writes_settle()
        await self._message_write(role, content)[0]

    def _message_write(self, role: str, content: list[Block]) -> tuple[Awaitable[None], list[ledger.ActivityEnd]]:
        """The write storing a message, and the ledger outcomes it takes along (those not yet written)."""
        ended, self._ledger_ended = self._ledger_ended, []
        write = db_call(
            turn_store.message_append,
            session_id=self.state.session_id,
            turn_id=self.state.turn_id,
            role=role,
            content=content,
            ended=ended,
        )
        return write, ended

    def _append_behind(self, role: str, content: list[Block]) -> None:
        """`_append`, its write running while the turn goes on: a round's tool results are stored
        while the model is asked about them, instead of before (a write less on every round's path).

        Every later write of the turn waits for it first (`_writes_settle`), so the session's
        messages keep their order on PostgreSQL's concurrent connections too, and its failure fails
        the turn before any further tool call is sent. A crash meanwhile leaves the round's ledger
        rows `started`, repaired later as "may have run", as a crash just before the write would.
        """
        self.state.messages.append((role, content))
        stored, ended = self._message_write(role, content)
        write = asyncio.ensure_future(stored)
        # Retrieved here too: a turn cancelled hard (its process going away) may never settle it.
        write.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._behind = (write, ended)

    async def _writes_settle(self, *, quiet: bool = False) -> None:
        """Wait for the write `_append_behind` started; raise its failure (once), or with `quiet`
        (a turn already ending) log it.

        Shielded: a turn stopped meanwhile does not abandon its write; the stop settles it. The
        ledger outcomes of a failed write go back to be written with the next write, or by `_finish`.
        """
        if self._behind is None:
            return
        write, ended = self._behind
        try:
            # A stop while waiting raises CancelledError (not an Exception) and leaves `_behind`
            # set: the write goes on, and the stop's own settle collects it.
            await asyncio.shield(write)
        except Exception:
            self._behind = None
            self._ledger_ended[:0] = ended
            if not quiet:
                raise
            logger.exception("turn.write_failed", extra={"event": "turn.write_failed", "fields": {}})
            return
        self._behind = None

    async def _keep_partial(self, partial: list[Block]) -> None:
        if partial:
            await self._append("assistant", partial)

    def _partial_text(self) -> list[Block]:
        """The text the model call in flight streamed so far, as blocks worth keeping."""
        if self._stream is None:
            return []
        try:
            snapshot = self._stream.current_message_snapshot
        except (AssertionError, RuntimeError):
            return []
        return [{"type": "text", "text": b.text} for b in snapshot.content if b.type == "text" and b.text]

    async def _stopped(self, status: str, code: str, why: str) -> None:
        """End a turn stopped from outside (Stop, or its process going away), keeping what it said."""
        await self._writes_settle(quiet=True)
        await self._keep_partial(self._partial_text())
        role, content = self.state.messages[-1]
        if role == "assistant":
            unanswered = [block for block in content if block.get("type") == "tool_use"]
            if unanswered:
                # The calls that finished keep their results; those cut off "may have run".
                results = self._results_on_cancel
                if [r["tool_use_id"] for r in results] != [block["id"] for block in unanswered]:
                    results = synthetic_tool_results(unanswered, self.cancel_cause)
                await self._append("user", results)
        await self._finish(status, code, error=why, code=code)

    async def _finish(self, status: str, stop_reason: str, *, error: str = "", code: str = "") -> None:
        # An exception's text may quote anything, a credential included; it is stored and shown.
        error = redact(error)
        duration = time.monotonic() - self.clock_start
        metrics.turn_finished(status, stop_reason=stop_reason, duration_seconds=duration)
        usage = self.state.usage
        log_event(
            logger,
            "turn.finished",
            level=logging.INFO if status != Turn.Status.ERROR else logging.WARNING,
            status=status,
            stop_reason=stop_reason,
            iterations=self.state.iterations,
            duration_ms=round(duration * 1000),
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
            cache_write_tokens=usage["cache_creation_input_tokens"],
            error=error or None,
        )
        await self._writes_settle(quiet=True)
        ended, self._ledger_ended = self._ledger_ended, []
        # Rows written for calls that never began (cut off before their task ran): "may have run"
        # is all the ledger can say of a row that says `started`.
        for tool_use_id, (activity_id, tool) in self._ledger_started.items():
            cause = self._cutoffs.get(tool_use_id, self.cancel_cause)
            text = outcome_unknown_text(tool=tool, cause=cause)
            unknown = ToolOutcome(
                content=tool_error_blocks(text),
                is_error=True,
                record=tool_error_record(cause.kind, text),
                structured=None,
                duration_ms=0,
                unknown=True,
            )
            ended.append(_activity_end(activity_id, unknown))
        # With them, the outcomes of calls that answered after the last stored message (a turn
        # ending on an error): one write, refused whole if the turn is no longer this process's.
        try:
            await db_call(
                turn_store.turn_finish,
                turn_id=self.state.turn_id,
                status=status,
                stop_reason=stop_reason,
                iterations=self.state.iterations,
                usage=dict(self.state.usage),
                model=self.model,
                error=error,
                last=self._last_answer,
                ended=ended,
            )
        except Exception:
            # Written with the end the ending after a failure tries (`_storage_failed`).
            self._ledger_ended[:0] = [end for end in ended if end.activity_id not in self._started_ids()]
            raise
        self._ledger_started = {}
        self._last_answer = None
        self._end_emit(status, stop_reason, error=error, code=code)

    def _end_emit(self, status: str, stop_reason: str, *, error: str, code: str) -> None:
        if code:
            self.emit(Error(code=code, message=error))
        self.emit(
            Done(
                session_id=str(self.state.session_id),
                turn_id=str(self.state.turn_id),
                stop_reason=stop_reason,
                iterations=self.state.iterations,
                usage=dict(self.state.usage),
                status=status,
                model=self.model,
                cost_usd=_cost_text(turn_cost(model=self.model, usage=dict(self.state.usage))),
            )
        )

    async def _heartbeat(self) -> None:
        """Touch the turn while it runs; one found fenced stops the turn (it may be waiting on a
        model or a tool, with no write of its own due for minutes)."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await db_call(turn_store.turn_heartbeat, turn_id=self.state.turn_id)
            except turn_store.TurnFenced:
                self.fenced = True
                if self._task is not None:
                    self._task.cancel()
                return
            except Exception as exc:
                # The turn's next real write fails the turn if the database is still failing then.
                if not storage_failure(exc):
                    raise
                log_event(logger, "turn.heartbeat_failed", level=logging.WARNING, error=storage_failure_text(exc))


async def _to_the_end(ending: Coroutine[Any, Any, None]) -> None:
    """Run a turn's ending (its last writes, then `done`) to its end, whatever cancel lands
    meanwhile: a second Stop, a shutdown or a closing registry has nothing left to stop, and cut
    short the ending would leave the turn stored `running` and its followers waiting for a `done`
    that never comes. The cancellation is taken as reported: the ending says how the turn ended."""
    task = asyncio.ensure_future(ending)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
    task.result()


def _tools_unavailable_message(unreachable: list[UnreachableServer]) -> str:
    if not unreachable:
        return (
            "This conversation has used tools, but no tools are configured now, and the model API refuses "
            "to continue a conversation holding tool calls without any. Start a new session to ask."
        )
    names = ", ".join(f"{server.name!r}" for server in unreachable)
    reasons = "; ".join(server.error for server in unreachable)
    return (
        "This conversation has used tools, and the model API refuses to continue it without tools defined, "
        f"but Hermes has never listed the tools of the MCP server {names}, which is unreachable now ({reasons}). "
        "Ask again once the server is back, or start a new session to ask without tools."
    )


def _activity_end(activity_id: int, outcome: ToolOutcome) -> ledger.ActivityEnd:
    return ledger.ActivityEnd(
        activity_id=activity_id,
        state=outcome.state,
        result=outcome.record,
        is_error=outcome.is_error,
        duration_ms=outcome.duration_ms,
    )


def _cost_text(cost: Decimal | None) -> str | None:
    return None if cost is None else str(cost)
