"""The transcript feed: a session's turns, drawn on connect and kept current from live events.

Consistency on (re)connect: the socket joins the session's group *before* reading the database,
so nothing published afterwards is missed. A turn still running is first drawn from the database,
then the owning process is asked for its state so far (`turn.state`); live events for that turn
are held until the state arrives and then applied from the state's `through` on. A gap in the
numbering (a dropped message) asks for the state again. If the owner never answers (it died),
the database drawing stays and the turn's `done`, if it ever comes, redraws it from the database.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async

from agent.broadcast import CHANGES_GROUP, session_group
from agent.conversation.events import Event, TurnStart, event_from_dict
from agent.live import turn_registry
from agent.memory.notes import NOTES_GROUP
from controlroom import fragments, selectors
from controlroom.feeds import Page
from oikos.change_view import ChangeView, chip_execution_id
from oikos.rail import ApprovalState
from transcript import selectors as transcript_selectors
from transcript.view import ApprovalItem, Change, ToolItem, TurnView, turn_view_replay

# Events held per turn while its state is on the way; past this the turn is redrawn at `done`.
BUFFER_LIMIT = 5000


@dataclass
class TurnSync:
    view: TurnView | None
    # The last engine event drawn (`through` of the last `turn.event` applied; see `agent.live`).
    through: int = -1
    waiting: bool = False
    in_page: bool = False
    buffer: list[dict[str, Any]] = field(default_factory=list)


class TranscriptFeed:
    """The latest `turns_shown` turns of `session_id` (none without a session)."""

    def __init__(self, page: Page, *, session_id: uuid.UUID | None, turns_shown: int) -> None:
        self.page = page
        self.session_id = session_id
        self.turns_shown = turns_shown
        self.turns: dict[str, TurnSync] = {}

    @property
    def groups(self) -> list[str]:
        # The changes group: the follow-up of an execution this session asked for (`Page.record_changed`);
        # the notes group: a note a `remember` chip of this session proposed was saved or dismissed.
        return [session_group(self.session_id), CHANGES_GROUP, NOTES_GROUP] if self.session_id is not None else []

    async def snapshot(self) -> tuple[list[str], dict[str, ApprovalState]]:
        """The transcript as stored, and what Oikos says of its approval cards; running turns are
        asked of their owners."""
        views: list[TurnView] = []
        if self.session_id is not None:
            views = await database_sync_to_async(transcript_selectors.session_turn_views)(
                session_id=self.session_id, limit=self.turns_shown
            )
        for view in views:
            sync = self.turns[view.turn_id] = TurnSync(view=view, in_page=True)
            if view.running:
                sync.waiting = True
                await self._state_request(view.turn_id)
        for view in views:
            self.page.forms.note(view)
        await self.page.chips_load(views)
        approvals = await self.page.approvals_current(self.page.forms.inline.values())
        parts = fragments.transcript_parts(views, approvals) if self.session_id else []
        if self.session_id is not None:
            # An investigation's card as it is now (the escalation may have been stored since the
            # page was served); later changes come as `investigation.news`.
            card = await database_sync_to_async(selectors.session_escalation)(session_id=self.session_id)
            if card is not None:
                parts.append(fragments.escalation_replace(await selectors.escalation_blast_fetch(card)))
            parts.append(await self._context_meter())
        parts.append(fragments.turn_controls(self.running()))
        return parts, approvals

    # --- turn events (from the registry of whichever process runs the turn) ------------------------

    async def turn_event(self, message: dict[str, Any]) -> None:
        turn_id, first, through = str(message["turn_id"]), int(message["first"]), int(message["through"])
        events = [event_from_dict(event) for event in message["events"]]
        sync = self.turns.get(turn_id)
        if sync is None and isinstance(events[0], TurnStart):
            await self._turn_new(turn_id, events[0], through)
            return
        if sync is None:
            # A turn this socket has not drawn yet (joined after its start): ask for it whole.
            sync = self.turns[turn_id] = TurnSync(view=None, waiting=True)
            await self._state_request(turn_id)
        if sync.waiting:
            await self._hold(turn_id, sync, message)
            return
        if through <= sync.through or (sync.view is not None and not sync.view.running):
            # Old news, or a turn already drawn finished from the database.
            return
        if first != sync.through + 1:
            if _ends(message):
                # An end announced without its owner (whose process is gone): draw it from the database.
                await self._hold(turn_id, sync, message)
                return
            sync.waiting = True
            sync.buffer.append(message)
            await self._state_request(turn_id)
            return
        await self._apply(sync, through, events)

    async def turn_state(self, message: dict[str, Any]) -> None:
        sync = self.turns.get(str(message["turn_id"]))
        if sync is None or not sync.waiting:
            return
        start = TurnStart.from_dict(message["start"])
        view = turn_view_replay(start, [event_from_dict(event) for event in message["events"]])
        sync.view, sync.through, sync.waiting = view, int(message["through"]), False
        held, sync.buffer = sync.buffer, []
        for event_message in sorted(held, key=lambda m: int(m["first"])):
            if int(event_message["first"]) == sync.through + 1:
                for event in event_message["events"]:
                    sync.view.apply(event_from_dict(event))
                sync.through = int(event_message["through"])
        await self._redraw(sync)

    async def _turn_new(self, turn_id: str, start: TurnStart, through: int) -> None:
        view = turn_view_replay(start, [])
        first = not self._turns_in_page()
        self.turns[turn_id] = TurnSync(view=view, through=through, in_page=True)
        await self.page.send([fragments.turn_append(view, {}, first=first), fragments.turn_controls(view)])

    async def _state_request(self, turn_id: str) -> None:
        await turn_registry().turn_state_request(turn_id=uuid.UUID(turn_id), reply_to=self.page.channel_name)

    async def _hold(self, turn_id: str, sync: TurnSync, message: dict[str, Any]) -> None:
        if _ends(message):
            # The turn is over and stored: the database has all of it, whatever the owner says.
            view = await database_sync_to_async(transcript_selectors.turn_view)(turn_id=uuid.UUID(turn_id))
            if view is not None:
                sync.view, sync.through, sync.waiting, sync.buffer = view, int(message["through"]), False, []
                await self._redraw(sync)
            return
        if len(sync.buffer) < BUFFER_LIMIT:
            sync.buffer.append(message)

    async def _apply(self, sync: TurnSync, through: int, events: list[Event]) -> None:
        assert sync.view is not None
        sync.through = through
        changes = [change for event in events for change in sync.view.apply(event)]
        if not changes:
            return
        approvals = await self._approvals_for(sync.view, changes)
        if any(change.kind in ("item_update", "finished") for change in changes):
            # A request_execution that ran at once: its chip shows Hermes's record of it; a
            # `remember` chip, the card of the note it proposed.
            await self.page.chips_load([sync.view])
            await database_sync_to_async(transcript_selectors.note_proposals_place)([sync.view])
        if any(change.kind == "finished" for change in changes):
            # Redrawn whole: with the notes it was given, stored as it started.
            sync.view.notes_given = await database_sync_to_async(transcript_selectors.turn_notes_given)(
                turn_id=uuid.UUID(sync.view.turn_id)
            )
        parts = fragments.turn_changes_parts(sync.view, changes, approvals)
        parts.append(self.page.forms.new(approvals.values(), changes))
        if any(change.kind == "finished" for change in changes):
            parts.append(fragments.turn_controls(self.running()))
            parts.append(await self._context_meter())
        await self.page.send(parts)

    async def _redraw(self, sync: TurnSync) -> None:
        assert sync.view is not None
        self.page.forms.note(sync.view)
        await self.page.chips_load([sync.view])
        approvals = await self.page.approvals_current(sync.view.approvals())
        if sync.in_page:
            drawn = fragments.turn_replace(sync.view, approvals)
        else:
            drawn = fragments.turn_append(sync.view, approvals, first=not self._turns_in_page())
        sync.in_page = True
        parts = [drawn, fragments.turn_controls(self.running())]
        parts.append(self.page.forms.new(approvals.values(), []))
        if not sync.view.running:
            parts.append(await self._context_meter())
        await self.page.send(parts)

    async def _context_meter(self) -> str:
        """The context meter as the session's last model call left it (a turn just ended)."""
        head = None
        if self.session_id is not None:
            head = await database_sync_to_async(selectors.session_head)(session_id=self.session_id)
        return fragments.context_meter_replace(head.context if head else None)

    async def _approvals_for(self, view: TurnView, changes: list[Change]) -> dict[str, ApprovalState]:
        new = [change.item for change in changes if isinstance(change.item, ApprovalItem)]
        for item in new:
            self.page.forms.inline[item.approval_id] = item
        if any(change.kind == "finished" for change in changes):
            # The whole turn is redrawn: every card in it shows what Oikos says now.
            return await self.page.approvals_current(view.approvals())
        return await self.page.approvals_current(new) if new else {}

    # --- what other feeds' news means for the transcript ---------------------------------------------

    def approvals_changed(self, approval_ids: list[str]) -> list[str]:
        """Oikos changed these approvals: the cards of them this page's turns show are redrawn."""
        state = self.page.relay.state
        changed = [
            state.approvals[approval_id]
            for approval_id in approval_ids
            if approval_id in self.page.forms.inline and approval_id in state.approvals
        ]
        if not changed:
            return []
        # A card Oikos has just confirmed (its event came after the tool result) becomes decidable.
        return [
            *(fragments.approval_cards_replace([approval]) for approval in changed),
            self.page.forms.new(changed, []),
        ]

    async def escalation_changed(self, changed: list[dict[str, Any]]) -> tuple[list[str], bool]:
        """Investigations changed: this session's escalation card redrawn, and whether one of them
        escalated (its turn is over: `finished_turns_redraw`)."""
        mine = [news for news in changed if news["session_id"] == str(self.session_id or "")]
        parts: list[str] = []
        if mine:
            card = await database_sync_to_async(selectors.session_escalation)(session_id=self.session_id)
            if card is not None:
                parts.append(fragments.escalation_replace(await selectors.escalation_blast_fetch(card)))
        return parts, any(news["escalated"] for news in mine)

    async def finished_turns_redraw(self) -> None:
        """The investigation's turn is over (its escalation is stored): draw it from the database.

        Its live events reach this socket only through a shared channel layer; the watcher that ran
        it is another process, so with the in-memory layer they never came. A turn this socket
        already drew finished is left as it is.
        """
        assert self.session_id is not None
        views = await database_sync_to_async(transcript_selectors.session_turn_views)(
            session_id=self.session_id, limit=self.turns_shown
        )
        for view in views:
            sync = self.turns.get(view.turn_id)
            if view.running or (sync is not None and sync.view is not None and not sync.view.running):
                continue
            self.turns[view.turn_id] = TurnSync(view=view, in_page=sync.in_page if sync else False)
            await self._redraw(self.turns[view.turn_id])

    async def notes_changed(self, message: dict[str, Any]) -> None:
        """A note proposal was made or decided: the `remember` chips of this page's turns whose card
        changed are redrawn (a chip whose proposal is not stored yet is left to its tool result)."""
        views = [sync.view for sync in self.turns.values() if sync.view is not None and sync.in_page]
        before = {id(item): item.note_proposal for view in views for item in view.items if isinstance(item, ToolItem)}
        chips = await database_sync_to_async(transcript_selectors.note_proposals_place)(views)
        changed = [
            chip for chip in chips if chip.note_proposal is not None and chip.note_proposal != before.get(id(chip))
        ]
        parts: list[str] = [
            fragments.item_html(view, chip, {}, oob="true")
            for view in views
            for chip in changed
            if any(chip is item for item in view.items)
        ]
        if parts:
            await self.page.send(parts)

    def record_note(self, record: ChangeView) -> None:
        """Hermes's record of an execution changed: its chips in this page's turns keep it for their next redraw."""
        for sync in self.turns.values():
            for item in sync.view.items if sync.view is not None else []:
                if isinstance(item, ToolItem) and chip_execution_id(item) == record.execution_id:
                    item.record = record

    def _turns_in_page(self) -> bool:
        return any(sync.in_page for sync in self.turns.values())

    def running(self) -> TurnView | None:
        for sync in self.turns.values():
            if sync.view is not None and sync.view.running:
                return sync.view
        return None


def _ends(message: dict[str, Any]) -> bool:
    """Whether a `turn.event` message carries the turn's `done`."""
    return any(event.get("type") == "done" for event in message["events"])
