"""The control room's websocket: a snapshot on connect, then live turn events and rail updates.

The socket only ever speaks server → browser (questions, Stop and decisions are plain POSTs with
CSRF), so a consumer is a renderer: it folds the messages it is sent into `TurnView`s and sends
htmx out-of-band swaps. It never runs a turn; it follows what the registry publishes (see `agent.live`).

Consistency on (re)connect: the consumer joins the session's group *before* reading the database,
so nothing published afterwards is missed. A turn still running is first drawn from the database,
then the owning process is asked for its state so far (`turn.state`); live events for that turn
are held until the state arrives and then applied from the state's `seq` on. A gap in the
numbering (a dropped message) asks for the state again. If the owner never answers (it died),
the database drawing stays and the turn's `done`, if it ever comes, redraws it from the database.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from agent.broadcast import ELICITATIONS_GROUP, SESSIONS_GROUP, session_group
from agent.elicitation.store import elicitations_pending
from agent.live import turn_registry
from agent.proposals import PROPOSALS_GROUP, proposals_pending
from common import metrics
from controlroom import fragments, selectors
from controlroom.frames import frames_pack
from controlroom.identity import operator_name
from controlroom.investigation_feed import InvestigationFeed, investigation_feed
from oikos.approvals import approvals_confirmed, approvals_listed
from oikos.rail import ApprovalState
from oikos.relay import OikosRelay, oikos_relay
from transcript import selectors as transcript_selectors
from transcript.view import ApprovalItem, Change, TurnView, turn_view_replay

# Events held per turn while its state is on the way; past this the turn is redrawn at `done`.
BUFFER_LIMIT = 5000
FORBIDDEN = 4403


@dataclass
class TurnSync:
    view: TurnView | None
    seq: int = -1
    waiting: bool = False
    in_page: bool = False
    buffer: list[dict[str, Any]] = field(default_factory=list)


class ControlRoomConsumer(AsyncWebsocketConsumer):
    """`/ws/ui/?session=<uuid>&turns=<n>&rail=1&sessions=1&approvals=1&investigations=1`: one
    conversation (its latest `n` turns, a session page's count by default), the rail, the session
    list, the approvals page's cards and the investigations page's list — each optional. Every
    socket announces a new investigation."""

    session_id: uuid.UUID | None
    with_rail: bool
    with_approvals: bool
    with_sessions: bool
    with_investigations: bool
    relay: OikosRelay
    feed: InvestigationFeed

    async def connect(self) -> None:
        if operator_name(self.scope) is None:
            await self.close(code=FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.session_id = _uuid_or_none(query.get("session", [""])[0])
        self.with_rail = query.get("rail", [""])[0] == "1"
        self.with_approvals = query.get("approvals", [""])[0] == "1"
        self.with_sessions = query.get("sessions", [""])[0] == "1"
        self.with_investigations = query.get("investigations", [""])[0] == "1"
        # The drawer draws fewer turns than a session page; the snapshot draws what the page did.
        self.turns_shown = _turns_shown(query.get("turns", [""])[0])
        self.turns: dict[str, TurnSync] = {}
        self.inline_approvals: dict[str, ApprovalItem] = {}
        self.forms_shown: set[str] = set()
        await self.accept()
        metrics.websocket_opened()
        self.counted = True
        if self.session_id is not None:
            await self.channel_layer.group_add(session_group(self.session_id), self.channel_name)
        if self.with_sessions:
            await self.channel_layer.group_add(SESSIONS_GROUP, self.channel_name)
        self.elicitations_shown: list[str] | None = None
        if self.with_rail:
            await self.channel_layer.group_add(ELICITATIONS_GROUP, self.channel_name)
            await self.channel_layer.group_add(PROPOSALS_GROUP, self.channel_name)
        # Every page follows Oikos (inline approval cards follow their execution); only the home
        # page draws the rail.
        self.relay = oikos_relay()
        await self.relay.subscribe(self.channel_name)
        # Every page announces an investigation Hermes opens (controlroom/investigation_feed.py).
        self.feed = investigation_feed()
        await self.feed.subscribe(self.channel_name)
        await self._snapshot()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "counted", False):
            metrics.websocket_closed()
            self.counted = False
        session_id = getattr(self, "session_id", None)
        if session_id is not None:
            await self.channel_layer.group_discard(session_group(session_id), self.channel_name)
        if getattr(self, "with_sessions", False):
            await self.channel_layer.group_discard(SESSIONS_GROUP, self.channel_name)
        if getattr(self, "with_rail", False):
            await self.channel_layer.group_discard(ELICITATIONS_GROUP, self.channel_name)
            await self.channel_layer.group_discard(PROPOSALS_GROUP, self.channel_name)
        if hasattr(self, "relay"):
            await self.relay.unsubscribe(self.channel_name)
        if hasattr(self, "feed"):
            await self.feed.unsubscribe(self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing is accepted from the browser on this socket; actions are POSTs with CSRF."""

    async def _send(self, parts: list[str]) -> None:
        """Every message this socket sends: the parts packed under Daphne's message limit (`controlroom.frames`)."""
        for frame in frames_pack(parts):
            await self.send(text_data=frame)

    # --- the snapshot ----------------------------------------------------------------------------

    async def _snapshot(self) -> None:
        views: list[TurnView] = []
        if self.session_id is not None:
            views = await database_sync_to_async(transcript_selectors.session_turn_views)(
                session_id=self.session_id, limit=self.turns_shown
            )
        for view in views:
            sync = self.turns[view.turn_id] = TurnSync(view=view, in_page=True)
            if view.running:
                sync.waiting = True
                await turn_registry().turn_state_request(turn_id=uuid.UUID(view.turn_id), reply_to=self.channel_name)
        for view in views:
            self._approvals_note(view)
        approvals = await self._approvals_current(self.inline_approvals.values())
        parts = fragments.transcript_parts(views, approvals) if self.session_id else []
        if self.session_id is not None:
            # An investigation's card as it is now (the escalation may have been stored since the
            # page was served); later changes come as `investigation.news`.
            card = await database_sync_to_async(selectors.session_escalation)(session_id=self.session_id)
            if card is not None:
                parts.append(fragments.escalation_replace(card))
        parts.append(fragments.turn_controls(self._running()))
        if self.with_rail:
            parts.extend(fragments.rail_parts(self.relay.state))
            parts.extend(await self._elicitations_if_changed())
            parts.append(await self._proposals())
        listed: list[ApprovalState] = []
        if self.with_approvals:
            # Drawn again: an approval raised between the page's render and this socket shows too.
            listed, problem = await approvals_listed()
            parts.append(fragments.approval_grid_replace(listed, problem))
        candidates = [*self._form_candidates(approvals), *(approval for approval in listed if approval.decidable)]
        # One form per approval, however many cards of it the page shows.
        shown = list({approval.approval_id: approval for approval in candidates}.values())
        self.forms_shown = {approval.approval_id for approval in shown}
        parts.append(fragments.approval_forms_replace(shown))
        await self._send(parts)

    # --- MCP servers' questions (elicitations) in the rail -----------------------------------------

    async def elicitations_changed(self, message: dict[str, Any]) -> None:
        """A question was asked or answered somewhere: redraw the rail's questions if the set changed.

        Only a change of the set redraws: a redraw would wipe what the operator is typing in a form.
        """
        await self._send(await self._elicitations_if_changed())

    async def _elicitations_if_changed(self) -> list[str]:
        pending = await database_sync_to_async(elicitations_pending)()
        ids = [item.id for item in pending]
        if ids == self.elicitations_shown:
            return []
        self.elicitations_shown = ids
        return fragments.elicitations_parts(pending)

    # --- executions proposed by peers and investigations, in the rail ---------------------------------

    async def proposals_changed(self, message: dict[str, Any]) -> None:
        """A proposal was made or decided somewhere: redraw the rail's proposals (they hold no typing)."""
        await self._send([await self._proposals()])

    async def _proposals(self) -> str:
        return fragments.proposals_replace(await database_sync_to_async(proposals_pending)())

    # --- turn events (from the registry of whichever process runs the turn) ------------------------

    async def turn_event(self, message: dict[str, Any]) -> None:
        turn_id, seq, event = str(message["turn_id"]), int(message["seq"]), dict(message["event"])
        sync = self.turns.get(turn_id)
        if event.get("type") == "turn_start" and sync is None:
            view = turn_view_replay(event, [])
            first = not self._turns_in_page()
            self.turns[turn_id] = TurnSync(view=view, seq=seq, in_page=True)
            await self._send([fragments.turn_append(view, {}, first=first), fragments.turn_controls(view)])
            return
        if sync is None:
            # A turn this socket has not drawn yet (joined after its start): ask for it whole.
            sync = self.turns[turn_id] = TurnSync(view=None, waiting=True)
            await turn_registry().turn_state_request(turn_id=uuid.UUID(turn_id), reply_to=self.channel_name)
        if sync.waiting:
            await self._hold(turn_id, sync, message)
            return
        if seq <= sync.seq or (sync.view is not None and not sync.view.running):
            # Old news, or a turn already drawn finished from the database.
            return
        if seq != sync.seq + 1:
            if event.get("type") == "done":
                # An end announced without its owner (whose process is gone): draw it from the database.
                await self._hold(turn_id, sync, message)
                return
            sync.waiting = True
            sync.buffer.append(message)
            await turn_registry().turn_state_request(turn_id=uuid.UUID(turn_id), reply_to=self.channel_name)
            return
        await self._apply(sync, seq, event)

    async def turn_state(self, message: dict[str, Any]) -> None:
        sync = self.turns.get(str(message["turn_id"]))
        if sync is None or not sync.waiting:
            return
        view = turn_view_replay(message["start"], list(message["events"]))
        sync.view, sync.seq, sync.waiting = view, int(message["seq"]), False
        held, sync.buffer = sync.buffer, []
        for event_message in sorted(held, key=lambda m: int(m["seq"])):
            if int(event_message["seq"]) == sync.seq + 1:
                sync.view.apply(dict(event_message["event"]))
                sync.seq += 1
        await self._redraw(sync)

    async def _hold(self, turn_id: str, sync: TurnSync, message: dict[str, Any]) -> None:
        if message["event"].get("type") == "done":
            # The turn is over and stored: the database has all of it, whatever the owner says.
            view = await database_sync_to_async(transcript_selectors.turn_view)(turn_id=uuid.UUID(turn_id))
            if view is not None:
                sync.view, sync.seq, sync.waiting, sync.buffer = view, int(message["seq"]), False, []
                await self._redraw(sync)
            return
        if len(sync.buffer) < BUFFER_LIMIT:
            sync.buffer.append(message)

    async def _apply(self, sync: TurnSync, seq: int, event: dict[str, Any]) -> None:
        assert sync.view is not None
        sync.seq = seq
        changes = sync.view.apply(event)
        if not changes:
            return
        approvals = await self._approvals_for(sync.view, changes)
        parts = fragments.turn_changes_parts(sync.view, changes, approvals)
        parts.append(self._forms_for_new(approvals.values(), changes))
        if any(change.kind == "finished" for change in changes):
            parts.append(fragments.turn_controls(self._running()))
        await self._send(parts)

    async def _redraw(self, sync: TurnSync) -> None:
        assert sync.view is not None
        self._approvals_note(sync.view)
        approvals = await self._approvals_current(sync.view.approvals())
        if sync.in_page:
            drawn = fragments.turn_replace(sync.view, approvals)
        else:
            drawn = fragments.turn_append(sync.view, approvals, first=not self._turns_in_page())
        sync.in_page = True
        parts = [drawn, fragments.turn_controls(self._running())]
        parts.append(self._forms_for_new(approvals.values(), []))
        await self._send(parts)

    # --- the session list -------------------------------------------------------------------------

    async def sessions_changed(self, message: dict[str, Any]) -> None:
        """A session started or finished a turn: the page refetches its list, keeping its search."""
        await self._send([fragments.session_list_refresh(current=str(self.session_id or ""))])

    # --- investigations ---------------------------------------------------------------------------

    async def investigation_news(self, message: dict[str, Any]) -> None:
        """Investigations opened or changed (in any process): announced, and every list showing them
        fetched again; the escalation card of the session this page shows is redrawn."""
        opened, changed = list(message.get("opened", [])), list(message.get("changed", []))
        parts = [fragments.investigation_announce(news) for news in opened]
        if self.with_sessions:
            parts.append(fragments.session_list_refresh(current=str(self.session_id or "")))
        if self.with_investigations:
            parts.append(fragments.investigation_list_refresh())
        mine = [news for news in changed if news["session_id"] == str(self.session_id or "")]
        if mine:
            card = await database_sync_to_async(selectors.session_escalation)(session_id=self.session_id)
            if card is not None:
                parts.append(fragments.escalation_replace(card))
        await self._send(parts)
        if any(news["escalated"] for news in mine):
            await self._finished_turns_redraw()

    async def _finished_turns_redraw(self) -> None:
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

    # --- the rail ---------------------------------------------------------------------------------

    async def rail_update(self, message: dict[str, Any]) -> None:
        parts = fragments.rail_parts(self.relay.state) if self.with_rail else []
        changed_inline = [
            self.relay.state.approvals[approval_id]
            for approval_id in message.get("approvals", [])
            if approval_id in self.inline_approvals and approval_id in self.relay.state.approvals
        ]
        if changed_inline:
            parts.extend(fragments.approval_cards_replace([approval]) for approval in changed_inline)
            # A card Oikos has just confirmed (its event came after the tool result) becomes decidable.
            parts.append(self._forms_for_new(changed_inline, []))
        if self.with_rail:
            parts.append(self._forms_for_new(self.relay.state.approvals_shown(), []))
        if self.with_approvals and message.get("approvals"):
            # The page shows every approval, decided ones too: Oikos's list is the truth.
            listed, problem = await approvals_listed()
            parts.append(fragments.approval_grid_replace(listed, problem))
            parts.append(self._forms_for_new(listed, []))
        if parts:
            await self._send(parts)

    # --- approvals shown in this page --------------------------------------------------------------

    def _approvals_note(self, view: TurnView) -> None:
        for item in view.approvals():
            self.inline_approvals[item.approval_id] = item

    async def _approvals_for(self, view: TurnView, changes: list[Change]) -> dict[str, ApprovalState]:
        new = [change.item for change in changes if isinstance(change.item, ApprovalItem)]
        for item in new:
            self.inline_approvals[item.approval_id] = item
        if any(change.kind == "finished" for change in changes):
            # The whole turn is redrawn: every card in it shows what Oikos says now.
            return await self._approvals_current(view.approvals())
        return await self._approvals_current(new) if new else {}

    async def _approvals_current(self, items: Any) -> dict[str, ApprovalState]:
        return await approvals_confirmed(items, relay=self.relay)

    def _form_candidates(self, current: dict[str, ApprovalState]) -> list[ApprovalState | ApprovalItem]:
        shown: dict[str, ApprovalState | ApprovalItem] = {}
        for approval_id, item in self.inline_approvals.items():
            shown[approval_id] = current.get(approval_id, item)
        if self.with_rail:
            for approval in self.relay.state.approvals_shown():
                shown[approval.approval_id] = approval
        return [approval for approval in shown.values() if approval.decidable]

    def _forms_for_new(self, current: Any, changes: list[Change]) -> str:
        """Decision forms for pending approvals this page shows for the first time."""
        candidates: dict[str, ApprovalState | ApprovalItem] = {}
        for change in changes:
            if isinstance(change.item, ApprovalItem):
                candidates[change.item.approval_id] = change.item
        for approval in current:
            candidates[approval.approval_id] = approval
        new = [a for a in candidates.values() if a.decidable and a.approval_id not in self.forms_shown]
        if not new:
            return ""
        self.forms_shown.update(a.approval_id for a in new)
        return fragments.approval_forms_append(new)

    def _turns_in_page(self) -> bool:
        return any(sync.in_page for sync in self.turns.values())

    def _running(self) -> TurnView | None:
        for sync in self.turns.values():
            if sync.view is not None and sync.view.running:
                return sync.view
        return None


def _uuid_or_none(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _turns_shown(value: str) -> int:
    """`turns=<n>` of the socket's query: 1 to a session page's count; the page's count otherwise."""
    try:
        return min(max(int(value), 1), transcript_selectors.SESSION_TURNS_SHOWN)
    except ValueError:
        return transcript_selectors.SESSION_TURNS_SHOWN
