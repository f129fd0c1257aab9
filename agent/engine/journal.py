"""What a running turn stores: its messages and its ledger rows, in the order crash-safety needs.

The rules (docs/architecture.md): the `started` ledger row of a tool call is written before the
call goes out, with the model message asking for it, in one transaction; an answered call's
outcome is written with the next stored message; a round's tool results are stored while the model
is asked about them (write-behind), and every later write waits for that one first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from django.utils import timezone

from agent.conversation.outcomes import Cutoff, ToolOutcome
from agent.engine.state import Block, TurnState
from agent.models import Turn
from agent.store import ledger
from agent.store import turns as turn_store
from agent.tools.hub import ToolSpec
from common.db import db_call

logger = logging.getLogger("agent.engine")

SpecOf = Callable[[str], ToolSpec | None]


class TurnJournal:
    """Every write of one running turn: messages, ledger rows, progress and the turn's end.

    It holds what is between writes: the `started` rows of calls not yet begun (per tool_use id:
    row id and tool), the outcomes of calls that answered, waiting for the next stored message, the
    write-behind of a round's tool results still on its way, and the turn's last model message,
    stored with the turn's end.
    """

    def __init__(self, *, state: TurnState, model: str, spec_of: SpecOf) -> None:
        self.state = state
        self.model = model
        self.spec_of = spec_of
        self._started: dict[str, tuple[int, str]] = {}
        self._ended: list[ledger.ActivityEnd] = []
        self._behind: tuple[asyncio.Future[None], list[ledger.ActivityEnd]] | None = None
        self._last_answer: turn_store.LastAnswer | None = None

    # --- the model's messages and the ledger ---------------------------------------------------

    def ledger_call(self, block: Block) -> ledger.LedgerCall:
        """The call's `started` ledger row (`ledger.activity_start`)."""
        spec = self.spec_of(block["name"])
        return ledger.LedgerCall(
            correlation_id=self.state.turn_id,
            session_id=self.state.session_id,
            actor=self.state.actor,
            tool_use_id=block["id"],
            server=spec.server if spec else "",
            tool=spec.tool if spec else block["name"],
            arguments=block["input"] if isinstance(block["input"], dict) else {},
            started_at=timezone.now(),
        )

    async def model_message(
        self, content: list[Block], *, context_tokens: int | None, context_window: int | None
    ) -> list[Block]:
        """Keep a model call's message; returns the tool calls it asks for.

        With calls, the message, the turn's progress and their `started` ledger rows are one
        transaction, written before any call is sent; without, the turn ends now and the message is
        stored with its end (`turn_end`).
        """
        if content:
            self.state.messages.append(("assistant", content))
        tool_uses = [block for block in content if block["type"] == "tool_use"]
        calls = [self.ledger_call(block) for block in tool_uses]
        await self.settle()
        if not calls:
            self._last_answer = turn_store.LastAnswer(
                session_id=self.state.session_id,
                message=content or None,
                context_tokens=context_tokens,
                context_window=context_window,
            )
            return tool_uses
        started_ids = await db_call(
            turn_store.turn_progress,
            turn_id=self.state.turn_id,
            iterations=self.state.iterations,
            usage=dict(self.state.usage),
            model=self.model,
            session_id=self.state.session_id,
            context_tokens=context_tokens,
            context_window=context_window,
            message=content or None,
            calls=calls,
        )
        for call, activity_id in zip(calls, started_ids, strict=True):
            self._started[call.tool_use_id] = (activity_id, call.tool)
        return tool_uses

    async def tool_started(self, block: Block) -> int:
        """The call's `started` row: written with the model's message, or now."""
        activity_id, _tool = self._started.pop(block["id"], (None, ""))
        if activity_id is None:
            activity_id = await db_call(ledger.activity_start, call=self.ledger_call(block))
        return activity_id

    def tool_ended(self, activity_id: int, outcome: ToolOutcome) -> None:
        """An answered call: its row says `started` until the round's results are stored with it."""
        self._ended.append(_activity_end(activity_id, outcome))

    async def tool_cut_off(self, activity_id: int, outcome: ToolOutcome) -> None:
        """A call cut off in flight: its row says so at once, whatever the turn does next."""
        end = _activity_end(activity_id, outcome)
        await db_call(
            ledger.activity_finish,
            activity_id=end.activity_id,
            state=end.state,
            result=end.result,
            is_error=end.is_error,
            duration_ms=end.duration_ms,
        )

    # --- messages ------------------------------------------------------------------------------

    async def append(self, role: str, content: list[Block]) -> None:
        self.state.messages.append((role, content))
        await self.store(role, content)

    async def store(self, role: str, content: list[Block]) -> None:
        """Store a complete message, with the ledger outcomes of the calls finished since the last one."""
        await self.settle()
        await self._message_write(role, content)[0]

    def _message_write(self, role: str, content: list[Block]) -> tuple[Awaitable[None], list[ledger.ActivityEnd]]:
        """The write storing a message, and the ledger outcomes it takes along (those not yet written)."""
        ended, self._ended = self._ended, []
        write = db_call(
            turn_store.message_append,
            session_id=self.state.session_id,
            turn_id=self.state.turn_id,
            role=role,
            content=content,
            ended=ended,
        )
        return write, ended

    def append_behind(self, role: str, content: list[Block]) -> None:
        """`append`, its write running while the turn goes on: a round's tool results are stored
        while the model is asked about them, instead of before (a write less on every round's path).

        Every later write of the turn waits for it first (`settle`), so the session's messages keep
        their order on PostgreSQL's concurrent connections too, and its failure fails the turn
        before any further tool call is sent. A crash meanwhile leaves the round's ledger rows
        `started`, repaired later as "may have run", as a crash just before the write would.
        """
        self.state.messages.append((role, content))
        stored, ended = self._message_write(role, content)
        write = asyncio.ensure_future(stored)
        # Retrieved here too: a turn cancelled hard (its process going away) may never settle it.
        write.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._behind = (write, ended)

    async def settle(self, *, quiet: bool = False) -> None:
        """Wait for the write `append_behind` started; raise its failure (once), or with `quiet`
        (a turn already ending) log it.

        Shielded: a turn stopped meanwhile does not abandon its write; the stop settles it. The
        ledger outcomes of a failed write go back to be written with the next write, or the end.
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
            self._ended[:0] = ended
            if not quiet:
                raise
            logger.exception("turn.write_failed", extra={"event": "turn.write_failed", "fields": {}})
            return
        self._behind = None

    # --- the turn's end ------------------------------------------------------------------------

    async def turn_end(self, *, status: str, stop_reason: str, error: str, cutoff_of: Callable[[str], Cutoff]) -> None:
        """Write the turn's end with its last message and every ledger outcome not yet written.

        Rows of calls that never began (cut off before their task ran) end "may have run": that is
        all the ledger can say of a row that says `started`. One write, refused whole if the turn
        is no longer this process's (`turn_store.TurnFenced`).
        """
        await self.settle(quiet=True)
        ended, self._ended = self._ended, []
        for tool_use_id, (activity_id, tool) in self._started.items():
            unknown = ToolOutcome.unknown(tool=tool, cause=cutoff_of(tool_use_id), duration_ms=0)
            ended.append(_activity_end(activity_id, unknown))
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
            # Written with the end the ending after a failure tries (`end_after_failure`).
            started_ids = {activity_id for activity_id, _tool in self._started.values()}
            self._ended[:0] = [end for end in ended if end.activity_id not in started_ids]
            raise
        self._started = {}
        self._last_answer = None

    async def end_after_failure(self, *, error: str, stop_reason: str) -> Callable[[], Awaitable[None]]:
        """The write ending a turn whose storage failed, to try as often as the caller likes."""
        await self.settle(quiet=True)
        ended, self._ended = self._ended, []
        self._started = {}

        async def end_write() -> None:
            await db_call(
                turn_store.turn_finish,
                turn_id=self.state.turn_id,
                status=Turn.Status.ERROR,
                stop_reason=stop_reason,
                iterations=self.state.iterations,
                usage=dict(self.state.usage),
                model=self.model,
                error=error,
                ended=ended,
            )

        return end_write

    def fenced(self) -> None:
        """The turn is no longer this process's: its last message is not stored."""
        self._last_answer = None


def _activity_end(activity_id: int, outcome: ToolOutcome) -> ledger.ActivityEnd:
    return ledger.ActivityEnd(
        activity_id=activity_id,
        state=outcome.state,
        result=outcome.record,
        is_error=outcome.is_error,
        duration_ms=outcome.duration_ms,
    )
