"""One round of tool calls: every call of a model response runs at once, results come back in order.

A call still in flight at the turn's time limit, or when the turn is stopped, is cut off and
answered "outcome unknown — it may have run" (its own task records that in the ledger); calls that
did finish keep their real results, on Stop too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async

from agent.broadcast import changes_changed_publish
from agent.conversation.events import PREVIEW_CHARS, Event, ToolResult
from agent.conversation.history import synthetic_tool_results, tool_blocks_held
from agent.conversation.outcomes import CUTOFF_TIME_LIMIT, Cutoff, ToolOutcome
from agent.elicitation.turn import TurnElicitor
from agent.engine.actions import ActionGate
from agent.engine.approvals import approval_from_result
from agent.engine.budgets import Budgets
from agent.engine.journal import TurnJournal
from agent.engine.prompt import unreachable_note
from agent.engine.state import Block, TurnState
from agent.engine.stop import StopRequest
from agent.engine.truncation import tool_result_bound
from agent.store.changes import ChangeRequest, change_record
from agent.tools.config import oikos_server_name
from agent.tools.hub import ListingsAhead, ToolHub, ToolSpec, UnreachableServer
from agent.tools.provenance import tool_is_execution_request
from common import metrics
from common.logs import log_event

logger = logging.getLogger("agent.engine")

Emit = Callable[[Event], None]


class ToolsUnavailable(Exception):
    """The conversation holds tool calls but no tool can be defined: the API would refuse it."""


class ToolRound:
    """Runs the turn's tool calls, a model response's worth at a time.

    It keeps why each call was cut off in flight (per tool_use id), and the results of the round a
    stop interrupted (finished ones real, the others unknown) for the turn's ending to store.
    """

    def __init__(
        self,
        *,
        state: TurnState,
        hub: ToolHub,
        journal: TurnJournal,
        budgets: Budgets,
        stop: StopRequest,
        emit: Emit,
        time_limit: float,
        deadline: float,
        tools_ahead: ListingsAhead | None = None,
    ) -> None:
        self.state = state
        self.hub = hub
        self.journal = journal
        self.budgets = budgets
        self.stop = stop
        self.emit = emit
        # Work stops by this moment, leaving the rest of the turn's time for its final answer.
        self.deadline = deadline
        # The listing checks started while the question was stored (`ToolHub.verify_ahead`).
        self.tools_ahead = tools_ahead
        self.elicitor = TurnElicitor(
            correlation_id=state.turn_id,
            session_id=state.session_id,
            actor=state.actor,
            emit=emit,
            answerer=state.answerer,
            time_limit=time_limit,
        )
        # Who may cause an action from this turn: confirmations and proposals (`agent.engine.actions`).
        self.actions = ActionGate(state=state, elicitor=self.elicitor, oikos_server=oikos_server_name())
        self._cutoffs: dict[str, Cutoff] = {}
        self.results_on_cancel: list[Block] = []

    async def prepare(self) -> tuple[list[Block], str]:
        """The tool definitions the turn offers, and the note on the servers that did not answer."""
        context = self.state.tool_context()
        specs = await self.hub.list_tools(context, verify=True, ahead=self.tools_ahead)
        self.tools_ahead = None
        tools = [spec.to_anthropic() for spec in specs]
        unreachable = self.hub.unreachable(context)
        if unreachable:
            log_event(
                logger,
                "turn.servers_unreachable",
                level=logging.WARNING,
                servers=",".join(server.name for server in unreachable),
                tools_known=all(server.tools_known for server in unreachable),
            )
        if not tools and tool_blocks_held(self.state.messages):
            raise ToolsUnavailable(_tools_unavailable_message(unreachable))
        return tools, unreachable_note(unreachable)

    def cutoff_of(self, tool_use_id: str) -> Cutoff:
        """Why the call was cut off: as recorded when it was, else the stop's cause."""
        return self._cutoffs.get(tool_use_id, self.stop.cause)

    async def run(self, tool_uses: list[Block]) -> list[Block]:
        """Run every tool call of one response concurrently; their results, in call order."""
        tasks = [asyncio.create_task(self._call(block)) for block in tool_uses]
        remaining = max(self.deadline - time.monotonic(), 0.0)
        try:
            await asyncio.wait(tasks, timeout=remaining)
        except asyncio.CancelledError:
            self.results_on_cancel = await self._cut_off(tool_uses, tasks, self.stop.cause)
            raise
        results = await self._cut_off(tool_uses, tasks, CUTOFF_TIME_LIMIT)
        # The model reads these results next: from now on, whatever it asks may come from them.
        for block in tool_uses:
            spec = self.hub.spec(block["name"])
            self.actions.untrusted_read(f"the result of {spec.server}/{spec.tool}" if spec else block["name"])
        return results

    async def _cut_off(self, tool_uses: list[Block], tasks: list[asyncio.Task[Block]], cause: Cutoff) -> list[Block]:
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

    async def _call(self, block: Block) -> Block:
        spec = self.hub.spec(block["name"])
        started = time.monotonic()
        arguments = block["input"] if isinstance(block["input"], dict) else {}
        activity_id = await self.journal.tool_started(block)
        try:
            context = dataclasses.replace(self.state.tool_context(), tool_use_id=block["id"], elicitor=self.elicitor)
            held = await self.actions.hold(spec, arguments, tool_use_id=block["id"]) if spec else None
            outcome = held or await self.hub.call(block["name"], arguments, context=context)
        except asyncio.CancelledError:
            elapsed_ms = round((time.monotonic() - started) * 1000)
            outcome = ToolOutcome.unknown(tool=block["name"], cause=self.cutoff_of(block["id"]), duration_ms=elapsed_ms)
            await self.journal.tool_cut_off(activity_id, outcome)
            self._result_emit(block, outcome, outcome.content[0]["text"], truncated=False)
            raise
        bounded = tool_result_bound(outcome.content, limit=self.budgets.tool_result_chars)
        self.journal.tool_ended(activity_id, outcome)
        preview = "".join(b["text"] for b in bounded.content if b.get("type") == "text")
        self._result_emit(block, outcome, preview, truncated=bounded.truncated)
        if spec and not outcome.is_error:
            self._approval_emit(spec, block, outcome)
            if tool_is_execution_request(server=spec.server, tool=spec.tool, oikos_server=oikos_server_name()):
                await self._change_record(arguments, outcome, activity_id)
        result: Block = {"type": "tool_result", "tool_use_id": block["id"], "content": bounded.content}
        if outcome.is_error:
            result["is_error"] = True
        return result

    async def _change_record(self, arguments: dict[str, Any], outcome: ToolOutcome, activity_id: int) -> None:
        """An execution Oikos accepted goes on Hermes's record of changes (`agent.store.changes`):
        its follow-up, undo and "what changed?" start there."""
        request = ChangeRequest.of_result(
            arguments=arguments,
            structured=outcome.structured,
            asked_by=self.state.actor,
            session_id=self.state.session_id,
            correlation_id=self.state.turn_id,
            activity_id=activity_id,
        )
        if request is not None:
            # Oikos has the execution: a Stop arriving now must not lose Hermes's record of it.
            await asyncio.shield(database_sync_to_async(change_record)(request))
            # Pages listing changes show it (controlroom/feeds/lists.py).
            await changes_changed_publish(execution_id=request.execution_id, session_id=request.session_id)

    def _approval_emit(self, spec: ToolSpec, block: Block, outcome: ToolOutcome) -> None:
        """A `request_execution` parked for an operator's approval becomes an `approval` event."""
        approval = approval_from_result(
            server=spec.server, tool=spec.tool, tool_use_id=block["id"], structured=outcome.structured
        )
        if not approval:
            return
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

    def _result_emit(self, block: Block, outcome: ToolOutcome, preview: str, *, truncated: bool) -> None:
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
