"""A turn's side of elicitation: record the request, ask the turn's frontend, record the answer.

Frontends only decide *how* to get an answer (`Answerer`): the control room and `/chat` wait for
an operator (`agent.elicitation.store.elicitation_by_operator`), `ask` prompts on its terminal. A turn
with no answerer — a peer's (A2A, `mcp_serve`), an investigation's — declines at once: nobody is
there to ask, and a peer must never be able to put words in an operator's mouth. Whatever happens,
the request and the answer reach the ledger under the turn's correlation id and show in the turn's
live events; a wait never outlasts `HERMES_ELICITATION_TIMEOUT`, the tool call's own timeout or the
turn's time limit (then Hermes cancels and says so).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from agent.conversation.events import ElicitationEvent, Event
from agent.elicitation import store as elicitations
from agent.elicitation.types import Answerer, ElicitationAnswer, ElicitationAsk, ElicitationRecord
from common.db import db_call
from common.logs import log_event

logger = logging.getLogger("agent.engine")

NO_OPERATOR = "Declined by Hermes: nobody can be asked in this turn (no operator is following it)."

# Left for the server to read the answer and finish the call before the call's own timeout.
CALL_MARGIN_SECONDS = 1.0


@dataclass
class TurnElicitor:
    """The `Elicitor` of one turn (`ToolCallContext.elicitor`)."""

    correlation_id: uuid.UUID
    session_id: uuid.UUID
    actor: str
    emit: Callable[[Event], None]
    answerer: Answerer | None
    time_limit: float  # the turn's, monotonic

    async def __call__(self, ask: ElicitationAsk) -> ElicitationAnswer:
        now = time.monotonic()
        ends = [self.time_limit - now, float(settings.HERMES_ELICITATION_TIMEOUT)]
        if ask.deadline is not None:
            ends.append(ask.deadline - now - CALL_MARGIN_SECONDS)
        timeout = max(min(ends), 0.0)
        record = await db_call(
            elicitations.elicitation_open,
            correlation_id=self.correlation_id,
            session_id=self.session_id,
            actor=self.actor,
            ask=ask,
            timeout=timeout,
        )
        self._emit(record, ElicitationAnswer(action="decline"), pending=True)
        log_event(logger, "elicitation.asked", server=ask.server, tool=ask.tool, elicitation_id=record.id)
        await elicitations.elicitations_changed_publish_quietly()
        try:
            answer = await self._answer(record, timeout)
        except asyncio.CancelledError:
            # The turn was stopped while waiting: the server is told `cancel`, and so is the ledger.
            stopped = ElicitationAnswer(action="cancel", reason="Cancelled by Hermes: the turn was stopped.")
            await asyncio.shield(self._settle(record, stopped))
            raise
        final = await self._settle(record, answer)
        log_event(
            logger,
            "elicitation.answered",
            server=ask.server,
            tool=ask.tool,
            elicitation_id=record.id,
            action=final.action,
            answered_by=final.answered_by,
        )
        return final

    async def _answer(self, record: ElicitationRecord, limit: float) -> ElicitationAnswer:
        if record.ask.schema_error:
            return ElicitationAnswer(
                action="decline", reason=f"Declined by Hermes: it cannot show this form ({record.ask.schema_error})."
            )
        if self.answerer is None:
            return ElicitationAnswer(action="decline", reason=NO_OPERATOR)
        try:
            async with asyncio.timeout(limit):
                return await self.answerer(record)
        except TimeoutError:
            return ElicitationAnswer(action="cancel", reason=f"Cancelled by Hermes: no answer within {limit:.0f} s.")

    async def _settle(self, record: ElicitationRecord, answer: ElicitationAnswer) -> ElicitationAnswer:
        final = await db_call(elicitations.elicitation_settle, elicitation_id=record.id, answer=answer)
        self._emit(record, final, pending=False)
        await elicitations.elicitations_changed_publish_quietly()
        return final

    def _emit(self, record: ElicitationRecord, answer: ElicitationAnswer, *, pending: bool) -> None:
        ask = record.ask
        self.emit(
            ElicitationEvent(
                id=record.id,
                server=ask.server,
                tool=ask.tool,
                tool_use_id=ask.tool_use_id,
                message=ask.message,
                fields=[field.to_dict() for field in ask.fields],
                status="pending" if pending else answer.action,
                expires_at=record.expires_at,
                content=None if pending else answer.content,
                reason="" if pending else answer.reason,
                answered_by="" if pending else answer.answered_by,
                purpose=ask.purpose,
            )
        )
