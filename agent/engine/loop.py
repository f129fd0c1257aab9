"""The turn loop: stream the model, run the tools it asks for, repeat until it answers.

Hand-written on `client.messages.stream` rather than the SDK's tool runner: we need every event as
it happens, conversation state that lives in our database, and requests that any compatible
server accepts. The loop knows nothing about transports; it reports through `emit`.

This module is the state machine only: how a turn goes on, and how it ends (done, capped, failed,
stopped, fenced). Its parts are siblings: the model call (`model_call`), the tool round
(`tool_round`) and every write (`journal`); the rules they keep are in docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any

import anthropic
from django.conf import settings

from agent.conversation.events import Done, Error, Event
from agent.conversation.history import synthetic_tool_results
from agent.engine.budgets import Budgets
from agent.engine.compaction import ContextKeeper
from agent.engine.journal import TurnJournal
from agent.engine.model_call import ModelCaller, ModelCallFailed
from agent.engine.state import Block, TurnState
from agent.engine.stop import StopRequest
from agent.engine.storage import FENCED_MESSAGE, STORAGE_ERROR, end_write_retried, storage_failure, storage_failure_text
from agent.engine.thinking import ThinkingSettings
from agent.engine.tool_round import ToolRound, ToolsUnavailable
from agent.memory.recall import earlier_question, recall_for_turn
from agent.models import Turn
from agent.prices import turn_cost
from agent.store import turns as turn_store
from agent.tools.hub import ListingsAhead, ToolHub
from common import metrics
from common.db import db_call
from common.logs import log_event, turn_context_set
from common.redaction import redact

logger = logging.getLogger("agent.engine")

Emit = Callable[[Event], None]

HEARTBEAT_SECONDS = 20.0

STOP_NOTES = {
    "max_iterations": "the limit of {n} tool rounds for one question",
    "token_budget": "this question's token budget",
    "timeout": "this question's time limit",
}


class TurnLoop:
    """One turn, from its question to its `done`.

    The turn ends by `time_limit` whatever it is doing (a model call in flight is cut); its tool
    rounds stop by `deadline`, leaving the rest for the forced final answer. `stop` is written by
    the turn's `TurnHandle` (Stop, a peer gone, a shutdown) and read here; `fenced` is set when a
    write found the turn no longer this process's, and it then writes nothing more.
    """

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
        stop: StopRequest,
        thinking: ThinkingSettings | None = None,
        tools_ahead: ListingsAhead | None = None,
    ) -> None:
        self.state = state
        self.model = model
        self.budgets = budgets
        self.emit = emit
        self.stop = stop
        self.clock_start = time.monotonic()
        self.time_limit = self.clock_start + budgets.timeout
        self.deadline = self.time_limit - budgets.final_answer_reserve
        self.fenced = False
        self._task: asyncio.Task[Any] | None = None
        self.journal = TurnJournal(state=state, model=model, spec_of=hub.spec)
        self.tools = ToolRound(
            state=state,
            hub=hub,
            journal=self.journal,
            budgets=budgets,
            stop=self.stop,
            emit=emit,
            time_limit=self.time_limit,
            deadline=self.deadline,
            tools_ahead=tools_ahead,
        )
        # Keeps every request inside the model's window, compacting the session when needed.
        self.context = ContextKeeper(
            state=state,
            client=client,
            model=model,
            budgets=budgets,
            time_limit=self.time_limit,
            before_compacting=self.journal.settle,
        )
        self.caller = ModelCaller(
            state=state,
            client=client,
            model=model,
            system=system,
            budgets=budgets,
            thinking=thinking or ThinkingSettings(),
            context=self.context,
            hub=hub,
            emit=emit,
            time_limit=self.time_limit,
        )

    async def run(self) -> None:
        """Run the turn to its end, emitting events; always finishes with `done`.

        A cancelled turn keeps its partial text, answers in-flight tool calls with synthetic
        errors, is marked `cancelled`, and swallows the cancellation after reporting it.

        The turn's task runs in a context of its own (see `runner.turn_start`), so the log context
        set here tags every line logged by this turn, and by nothing else.
        """
        stopped_before = self.stop.begin()
        turn_context_set(correlation_id=str(self.state.turn_id), session_id=str(self.state.session_id))
        metrics.turn_started()
        log_event(logger, "turn.started", actor=self.state.actor, model=self.model, messages=len(self.state.messages))
        if stopped_before:
            await self._end(self._stop_ending())
            return
        self._task = asyncio.current_task()
        heartbeat = asyncio.create_task(self._heartbeat())
        try:
            ending = await self._loop_ending()
        finally:
            heartbeat.cancel()
        await self._end(ending)

    async def _loop_ending(self) -> Coroutine[Any, Any, None]:
        """Run the loop; the ending its outcome calls for."""
        try:
            stop_reason = await self._loop()
        except asyncio.CancelledError:
            return self._stop_ending()
        except turn_store.TurnFenced:
            return self._fenced_ending()
        except ToolsUnavailable as refused:
            return self._finish(Turn.Status.ERROR, "tools_unavailable", error=str(refused), code="tools_unavailable")
        except ModelCallFailed as failure:
            return self._failed(failure)
        except Exception as exc:  # a bug must end the turn visibly, not leave it running
            return self._storage_failed(exc) if storage_failure(exc) else self._crashed(exc)
        return self._finish(Turn.Status.DONE, stop_reason)

    async def _loop(self) -> str:
        (tools, unreachable), notes = await asyncio.gather(self.tools.prepare(), self._notes_recalled())
        self.caller.tools_offer(tools, note="\n\n".join(part for part in (notes, unreachable) if part))
        while not (capped := self._budget_exhausted()):
            stop_reason, tool_uses = await self._model_step(final=False)
            if not tool_uses:
                return stop_reason
            results = await self.tools.run(tool_uses)
            self.journal.append_behind("user", results)
        return await self._final_answer(capped)

    async def _notes_recalled(self) -> str:
        """The operators' notes for this turn's question, as the request's block ("" for none).
        Recall turned off (for the turn, or `HERMES_RECALL_TOKENS=0`) costs no database hop."""
        if not self.state.recall or settings.HERMES_RECALL_TOKENS <= 0:
            return ""
        return await db_call(
            recall_for_turn,
            turn_id=self.state.turn_id,
            question=self.state.question,
            earlier=earlier_question(self.state.messages),
        )

    async def _model_step(self, *, final: bool) -> tuple[str, list[Block]]:
        """One model call, its message kept by the journal; its stop reason and the calls it asks for."""
        answer = await self.caller.call(final=final)
        tool_uses = await self.journal.model_message(
            answer.content, context_tokens=answer.context_tokens, context_window=self.context.window
        )
        return answer.stop_reason, tool_uses

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
            await self.journal.store("user", [nudge])
        else:
            await self.journal.append("user", [nudge])
        # Bounded by the turn's time limit, like every model call: the reserve kept for it is what it gets.
        await self._model_step(final=True)
        return reason

    # --- endings ---------------------------------------------------------------------------------

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
        self.journal.fenced()
        self._end_emit(Turn.Status.INTERRUPTED, "interrupted", error=FENCED_MESSAGE, code="interrupted")

    async def _storage_failed(self, exc: BaseException) -> None:
        """A write failed: the turn's end is written once, its followers told (`error`, `done`), and
        an end that could not be written is tried again a bounded number of times."""
        error = redact(storage_failure_text(exc))
        log_event(logger, "turn.storage_failed", level=logging.WARNING, error=error)
        metrics.turn_finished(Turn.Status.ERROR, stop_reason=STORAGE_ERROR, duration_seconds=self._duration())
        end_write = await self.journal.end_after_failure(error=error, stop_reason=STORAGE_ERROR)
        # Once before `done`, so a client that asks again at once finds the session free; then,
        # with the database still failing, again after `done`, which must not wait on it.
        stored = await end_write_retried(end_write, delays=())
        self._end_emit(Turn.Status.ERROR, STORAGE_ERROR, error=error, code=STORAGE_ERROR)
        if not stored:
            await end_write_retried(end_write)

    def _duration(self) -> float:
        return time.monotonic() - self.clock_start

    def _stop_ending(self) -> Coroutine[Any, Any, None]:
        if self.fenced:
            return self._fenced_ending()
        if self.stop.interrupted:
            return self._stopped(Turn.Status.INTERRUPTED, "interrupted", self.stop.interrupted)
        return self._stopped(Turn.Status.CANCELLED, "cancelled", self.stop.reason)

    async def _failed(self, failure: ModelCallFailed) -> None:
        await self.journal.settle(quiet=True)
        await self._keep_partial(failure.partial)
        await self._finish(Turn.Status.ERROR, failure.code, error=str(failure), code=failure.code)

    async def _keep_partial(self, partial: list[Block]) -> None:
        if partial:
            await self.journal.append("assistant", partial)

    async def _stopped(self, status: str, code: str, why: str) -> None:
        """End a turn stopped from outside (Stop, or its process going away), keeping what it said."""
        await self.journal.settle(quiet=True)
        await self._keep_partial(self.caller.partial_text())
        role, content = self.state.messages[-1]
        if role == "assistant":
            unanswered = [block for block in content if block.get("type") == "tool_use"]
            if unanswered:
                # The calls that finished keep their results; those cut off "may have run".
                results = self.tools.results_on_cancel
                if [r["tool_use_id"] for r in results] != [block["id"] for block in unanswered]:
                    results = synthetic_tool_results(unanswered, self.stop.cause)
                await self.journal.append("user", results)
        await self._finish(status, code, error=why, code=code)

    async def _finish(self, status: str, stop_reason: str, *, error: str = "", code: str = "") -> None:
        # An exception's text may quote anything, a credential included; it is stored and shown.
        error = redact(error)
        duration = self._duration()
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
        await self.journal.turn_end(status=status, stop_reason=stop_reason, error=error, cutoff_of=self.tools.cutoff_of)
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


def _cost_text(cost: Decimal | None) -> str | None:
    return None if cost is None else str(cost)
