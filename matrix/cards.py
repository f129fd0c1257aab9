"""Approval cards: posted in the thread when a `request_execution` is parked (an `m.text`, which
notifies, carrying the bot's own ✅ and ❌ so one tap decides), decided by an operator's reaction or
reply, edited as Oikos reports the execution.

A decision goes to Oikos through the control room's `approval_decide`, as the operator the Matrix
user is mapped to, and is recorded in Hermes like a decision taken in the control room (exactly
one decision wins in Oikos; a late one hears who decided). The card follows Oikos's event
stream: a decision taken elsewhere (the control room) and each step of the execution edit it.
A card only moves forward (pending → approved/denied → running → completed/failed), whichever of
the decision's answer and the stream's events arrives first; its edits are sent one at a time,
each built from the state when it is sent (matrix/card_sender.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from channels.db import database_sync_to_async

from agent.conversation.events import Approval
from matrix import selectors, services
from matrix.card_sender import CardSender
from matrix.models import MatrixApprovalCard
from matrix.render import card_content, in_thread, reaction_content
from matrix.sender import MatrixSendError, RoomSender
from matrix.services import ThreadRef
from oikos.approvals import approval_decide
from oikos.client import OikosClient, OikosError, OikosEvent, oikos_config
from oikos.models import ApprovalDecision

logger = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
# The bot reacts with these on each card it posts: an operator taps one to approve or deny.
PRE_REACTIONS = ("✅", "❌")
EXECUTION_STATES = {"execution.started": "running", "execution.completed": "completed", "execution.failed": "failed"}


class ApprovalCards:
    def __init__(self, sender: RoomSender) -> None:
        self.sender = sender
        # Approvals this bridge is deciding right now: their `approval.decided` event is its own.
        self._deciding: set[str] = set()
        self.edits = CardSender(sender, deciding=self._deciding.__contains__)
        self.connected = asyncio.Event()
        self.last_event_id = ""

    async def post(self, thread: ThreadRef, approval: Approval, arguments: dict[str, Any]) -> None:
        request = {
            "action": approval.action,
            "target": approval.target,
            "risk_class": approval.risk_class,
            "reason": str(arguments.get("reason") or ""),
        }
        content = card_content(
            request=request, approval_id=approval.approval_id, status="pending", decided_by="", via="", detail=""
        )
        event_id = await self.sender.send(
            thread.room_id,
            lambda: in_thread(content, root_event_id=thread.root_event_id, reply_to=thread.root_event_id),
        )
        await database_sync_to_async(services.card_record)(
            thread=thread,
            approval_id=approval.approval_id,
            execution_id=approval.execution_id,
            event_id=event_id,
            request=request,
        )
        # One tap decides: the bot's own reactions are there to be tapped, and never taken as a
        # decision (matrix/bridge.py acts on no event of the bot's).
        for key in PRE_REACTIONS:
            try:
                await self.sender.send(
                    thread.room_id, functools.partial(reaction_content, event_id, key), event_type="m.reaction"
                )
            except MatrixSendError as exc:
                logger.warning("Could not react %s on the card of %s: %s", key, approval.approval_id, exc)

    async def decide(self, card: MatrixApprovalCard, *, approve: bool, operator: str) -> str:
        """Decide in Oikos as `operator`; returns the outcome, and a sentence when the card can't say it."""
        self._deciding.add(card.approval_id)
        try:
            result = await approval_decide(
                approval_id=card.approval_id,
                execution_id=card.execution_id,
                approve=approve,
                operator=operator,
                reason="decided in Matrix",
            )
            if result.outcome == ApprovalDecision.Outcome.DECIDED:
                await self.advance(
                    card.approval_id,
                    status=result.status or ("approved" if approve else "denied"),
                    decided_by=result.decided_by,
                    decided_via="matrix",
                )
            else:
                if result.outcome == ApprovalDecision.Outcome.ALREADY_DECIDED:
                    await self.advance(
                        card.approval_id, status=result.status, decided_by=result.decided_by, decided_via="elsewhere"
                    )
                # Said in the thread: the operator who reacted is told why nothing happened.
                await self._notice(card, result.notice)
            return str(result.outcome)
        finally:
            self._deciding.discard(card.approval_id)
            # A card held back for want of the decider's name is edited now.
            self.edits.wake(card.approval_id)

    async def advance(self, approval_id: str, *, status: str, **fields: Any) -> None:
        """Move the card forward to `status` (never back) and have it edited to say so."""
        card = await database_sync_to_async(services.card_advance)(approval_id=approval_id, status=status, **fields)
        if card is not None:
            self.edits.update(card)

    async def _notice(self, card: MatrixApprovalCard, text: str) -> None:
        thread = card.thread
        content = {"msgtype": "m.notice", "body": text}
        await self.sender.send(
            thread.room_id, lambda: in_thread(content, root_event_id=thread.root_event_id, reply_to=card.event_id)
        )

    # --- following Oikos ---------------------------------------------------------------------------

    async def follow(self) -> None:
        """Follow Oikos's event stream forever (cancel to stop), catching up on open cards at each connect."""
        if oikos_config() is None:
            logger.warning(
                "Oikos's REST API is not configured (OIKOS_API_URL, OIKOS_API_TOKEN): approval cards cannot be "
                "decided from Matrix nor follow their executions"
            )
            return
        delay = RETRY_FIRST_SECONDS
        while True:
            try:
                async with OikosClient.from_settings() as oikos:
                    # The first connection follows the stream from now, so the open cards are
                    # refreshed from Oikos (what happened while the bridge was down); reconnections
                    # resume after the last event seen.
                    if not self.last_event_id:
                        await self._catch_up(oikos)
                    self.connected.set()
                    delay = RETRY_FIRST_SECONDS
                    async for event in oikos.events(last_event_id=self.last_event_id):
                        self.last_event_id = event.id
                        await self.event_apply(event)
            except asyncio.CancelledError:
                raise
            except OikosError as exc:
                logger.warning("The Matrix bridge lost Oikos's event stream: %s", exc)
            except Exception:
                logger.exception("The Matrix bridge's Oikos follower failed")
            self.connected.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def event_apply(self, event: OikosEvent) -> None:
        approval_id = str(event.data.get("approval_id") or "")
        if not approval_id:
            return
        if event.type == "approval.decided":
            # This bridge's own decision too: the stream may name the decider before the decision's
            # answer is back, and before the execution starts.
            decision = str(event.data.get("decision") or event.data.get("status") or "")
            await self.advance(
                approval_id,
                status=decision,
                decided_by=str(event.data.get("decided_by") or ""),
                decided_via="matrix" if approval_id in self._deciding else "elsewhere",
            )
        elif event.type in EXECUTION_STATES:
            detail = str(event.data.get("message") or "") if event.type != "execution.started" else ""
            await self.advance(approval_id, status=EXECUTION_STATES[event.type], detail=detail)

    async def _catch_up(self, oikos: OikosClient) -> None:
        for card in await database_sync_to_async(selectors.cards_open)():
            if not card.execution_id:
                continue
            try:
                execution = await oikos.execution(card.execution_id)
            except OikosError as exc:
                logger.info("Could not refresh the card of %s: %s", card.approval_id, exc)
                continue
            status = str(execution.get("status") or "")
            if status and status != "proposed":
                by = str(execution.get("decided_by") or "")
                await self.advance(
                    card.approval_id, status=status, decided_by=by, decided_via=card.decided_via or "elsewhere"
                )
