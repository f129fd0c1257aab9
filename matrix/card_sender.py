"""Editing approval cards: one writer per card, each edit built from the card's state when it is sent.

A card's state moves from several places at once — the decision's answer, Oikos's event stream,
the catch-up after a reconnect — and a rate-limited homeserver holds sends back for seconds. Edits
built when their change happened and sent side by side could land in any order: a card said
"completed", then "running…" again. Here every change only updates the card's latest state and
wakes the card's one writer, which sends edits one after the other, each built (on every attempt,
429s included) from the latest state. The last edit that lands is therefore the newest state, and
changes that come while an edit is held back are folded into the next one.

The decider's name belongs on the first "running": while this bridge's own decision is in flight
(matrix/cards.py), a card that moved past "approved" without a decider is not edited yet; the
decision's answer brings the name and the writer sends both at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from matrix.models import MatrixApprovalCard
from matrix.render import card_content, edit_content
from matrix.sender import MatrixSendError, RoomSender
from matrix.services import CARD_FINAL, CARD_RANK

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CardState:
    room_id: str
    event_id: str
    approval_id: str
    request: dict[str, Any]
    status: str
    decided_by: str
    decided_via: str
    detail: str

    @classmethod
    def of(cls, card: MatrixApprovalCard) -> CardState:
        return cls(
            room_id=card.thread.room_id,
            event_id=card.event_id,
            approval_id=card.approval_id,
            request=dict(card.request),
            status=card.status,
            decided_by=card.decided_by,
            decided_via=card.decided_via,
            detail=card.detail,
        )

    def merged(self, newer: CardState) -> CardState:
        """The furthest state of the two, with whoever decided: snapshots may arrive out of order."""
        ahead = newer if CARD_RANK.get(newer.status, 0) > CARD_RANK.get(self.status, 0) else self
        return replace(
            ahead,
            decided_by=self.decided_by or newer.decided_by,
            decided_via=self.decided_via or newer.decided_via,
        )

    def content(self) -> dict[str, Any]:
        return edit_content(
            self.event_id,
            card_content(
                request=self.request,
                approval_id=self.approval_id,
                status=self.status,
                decided_by=self.decided_by,
                via=self.decided_via,
                detail=self.detail,
            ),
        )


class CardSender:
    def __init__(self, sender: RoomSender, *, deciding: Callable[[str], bool]) -> None:
        self.sender = sender
        # True while this bridge's own decision of the approval is in flight.
        self.deciding = deciding
        self._latest: dict[str, CardState] = {}
        # What each card's last edit showed, so an unchanged state is not sent twice.
        self._shown: dict[str, dict[str, Any]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()

    def update(self, card: MatrixApprovalCard) -> None:
        """Record the card's new state and have its writer edit the card (now, or after its current edit)."""
        state = CardState.of(card)
        known = self._latest.get(state.approval_id)
        self._latest[state.approval_id] = known.merged(state) if known else state
        self.wake(state.approval_id)

    def wake(self, approval_id: str) -> None:
        if approval_id not in self._latest:
            return
        self._dirty.add(approval_id)
        if approval_id not in self._writers:
            task = asyncio.get_running_loop().create_task(self._write(approval_id))
            self._writers[approval_id] = task

    async def idle(self) -> None:
        """Return once no card has an edit to send (tests and shutdown wait for it)."""
        while self._writers:
            await asyncio.gather(*self._writers.values(), return_exceptions=True)

    def _held(self, state: CardState) -> bool:
        passed_decision = CARD_RANK.get(state.status, 0) > CARD_RANK["approved"]
        return passed_decision and not state.decided_by and self.deciding(state.approval_id)

    async def _write(self, approval_id: str) -> None:
        try:
            while approval_id in self._dirty:
                self._dirty.discard(approval_id)
                state = self._latest[approval_id]
                if self._held(state):
                    continue  # `wake` again once the decision's answer is in
                shown: dict[str, Any] = {}

                def content() -> dict[str, Any]:
                    # Built at each attempt: a retry after a rate limit carries what is newest by then.
                    nonlocal shown
                    shown = self._latest[approval_id].content()
                    return shown

                if state.content() == self._shown.get(approval_id):
                    continue
                try:
                    await self.sender.send(state.room_id, content)
                except MatrixSendError as exc:
                    logger.warning("The approval card of %s could not be edited: %s", approval_id, exc)
                    continue
                self._shown[approval_id] = shown
        finally:
            del self._writers[approval_id]
            if self._latest[approval_id].status in CARD_FINAL and approval_id not in self._dirty:
                # Settled: a later change (a late decider's name) is read back from the database whole.
                del self._latest[approval_id]
                self._shown.pop(approval_id, None)
