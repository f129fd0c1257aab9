"""The control room's websocket: a snapshot on connect, then live turn events and rail updates.

The socket only ever speaks server → browser (questions, Stop and decisions are plain POSTs with
CSRF), so a consumer is a renderer: it holds the feeds its page asked for (`controlroom.feeds`:
the transcript, the rail, the session list, the approvals grid, the investigations list), routes
each channel-layer message to the feed that answers it (`handlers`), and sends htmx out-of-band
swaps. It never runs a turn; it follows what the registry publishes (see `agent.live`).

Every feed joins its groups *before* its snapshot reads the database, so nothing published
afterwards is missed (`controlroom.feeds.transcript` says how turns are kept consistent).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from channels.db import aclose_old_connections
from channels.generic.websocket import AsyncWebsocketConsumer

from common import metrics
from controlroom import fragments
from controlroom.feeds import Page
from controlroom.feeds.lists import (
    ApprovalsFeed,
    ChangesFeed,
    DigestFeed,
    InvestigationsFeed,
    NotesFeed,
    SchedulesFeed,
    SessionsFeed,
)
from controlroom.feeds.rail import RailFeed
from controlroom.feeds.transcript import TranscriptFeed
from controlroom.frames import frames_pack
from controlroom.identity import operator_name
from controlroom.investigation_feed import InvestigationFeed, investigation_feed
from oikos.rail import ApprovalState
from oikos.relay import oikos_relay
from transcript import selectors as transcript_selectors

FORBIDDEN = 4403

Handler = Callable[[dict[str, Any]], Awaitable[None]]


class ControlRoomConsumer(AsyncWebsocketConsumer):
    """`/ws/ui/?session=<uuid>&turns=<n>&rail=1&sessions=1&approvals=1&investigations=1&changes=1&notes=1&schedules=list`:
    one conversation (its latest `n` turns, a session page's count by default), the rail (with the
    latest digest's card), the session list, the approvals page's cards, the investigations page's
    list, the Changes page's list, the Notes page's list and the Schedules page's list (or,
    `schedules=<id>`, one schedule's runs) — each optional. Every socket announces a new investigation."""

    page: Page
    transcript: TranscriptFeed
    rail: RailFeed | None
    sessions: SessionsFeed | None
    approvals: ApprovalsFeed | None
    investigations: InvestigationsFeed | None
    changes: ChangesFeed | None
    notes: NotesFeed | None
    schedules: SchedulesFeed | None
    digest: DigestFeed | None
    news: InvestigationFeed

    async def connect(self) -> None:
        if operator_name(self.scope) is None:
            await self.close(code=FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        asked = {
            name
            for name in ("rail", "sessions", "approvals", "investigations", "changes", "notes")
            if query.get(name, [""])[0] == "1"
        }
        session_id = _uuid_or_none(query.get("session", [""])[0])
        # Every page follows Oikos (inline approval cards follow their execution); only the home
        # page draws the rail.
        self.page = Page(channel_name=self.channel_name, relay=oikos_relay(), send=self._send)
        # The drawer draws fewer turns than a session page; the snapshot draws what the page did.
        turns_shown = _turns_shown(query.get("turns", [""])[0])
        self.transcript = TranscriptFeed(self.page, session_id=session_id, turns_shown=turns_shown)
        self.rail = RailFeed(self.page) if "rail" in asked else None
        self.sessions = SessionsFeed(self.page, session_id=session_id) if "sessions" in asked else None
        self.approvals = ApprovalsFeed(self.page) if "approvals" in asked else None
        self.investigations = InvestigationsFeed() if "investigations" in asked else None
        self.changes = ChangesFeed(self.page) if "changes" in asked else None
        self.notes = NotesFeed(self.page) if "notes" in asked else None
        shown = query.get("schedules", [""])[0]
        self.schedules = SchedulesFeed(self.page, shown=shown) if shown else None
        # The home page (the one with the rail) shows the latest digest.
        self.digest = DigestFeed(self.page) if self.rail is not None else None
        await self.accept()
        metrics.websocket_opened()
        self.counted = True
        for group in self._groups():
            await self.channel_layer.group_add(group, self.channel_name)
        await self.page.relay.subscribe(self.channel_name)
        # Every page announces an investigation Hermes opens (controlroom/investigation_feed.py).
        self.news = investigation_feed()
        await self.news.subscribe(self.channel_name)
        await self._snapshot()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "counted", False):
            metrics.websocket_closed()
            self.counted = False
        if not hasattr(self, "page"):
            return
        for group in self._groups():
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.page.relay.unsubscribe(self.channel_name)
        if hasattr(self, "news"):
            await self.news.unsubscribe(self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing is accepted from the browser on this socket; actions are POSTs with CSRF."""

    def handlers(self) -> dict[str, Handler]:
        """Which feed answers which channel-layer message (a feed the page did not ask for, none)."""
        table: dict[str, Handler] = {
            "turn.event": self.transcript.turn_event,
            "turn.state": self.transcript.turn_state,
            "rail.update": self._rail_update,
            "investigation.news": self._investigation_news,
        }
        if self.rail is not None:
            table["elicitations.changed"] = self.rail.elicitations_changed
            table["proposals.changed"] = self.rail.proposals_changed
        if self.sessions is not None or self.rail is not None:
            table["sessions.changed"] = self._sessions_changed
        if self.rail is not None or self.transcript.session_id is not None or self.notes is not None:
            table["notes.changed"] = self._notes_changed
        if self.approvals is not None:
            table["decisions.changed"] = self.approvals.decisions_changed
        if self.changes is not None or self.rail is not None or self.transcript.session_id is not None:
            table["changes.changed"] = self._changes_changed
        if self.schedules is not None or self.digest is not None:
            table["schedules.changed"] = self._schedules_changed
        return table

    async def dispatch(self, message: dict[str, Any]) -> None:
        if hasattr(self, "page") and not message["type"].startswith("websocket."):
            handler = self.handlers().get(message["type"])
            if handler is not None:
                await aclose_old_connections()
                await handler(message)
            return
        await super().dispatch(message)

    async def _send(self, parts: list[str]) -> None:
        """Every message this socket sends: the parts packed under Daphne's message limit (`controlroom.frames`)."""
        for frame in frames_pack(parts):
            await self.send(text_data=frame)

    def _groups(self) -> list[str]:
        feeds = (
            self.transcript,
            self.sessions,
            self.rail,
            self.approvals,
            self.changes,
            self.notes,
            self.schedules,
            self.digest,
        )
        # A group two feeds listen to is joined once.
        return list(dict.fromkeys(group for feed in feeds if feed is not None for group in feed.groups))

    async def _snapshot(self) -> None:
        parts, current = await self.transcript.snapshot()
        if self.rail is not None:
            parts.extend(await self.rail.snapshot())
        listed: list[ApprovalState] = []
        if self.approvals is not None:
            grid, listed = await self.approvals.snapshot()
            parts.extend(grid)
        rail_shown = self.rail.approvals_shown() if self.rail is not None else []
        forms = self.page.forms
        candidates = [*forms.inline_candidates(current, rail_shown), *(a for a in listed if a.decidable)]
        parts.append(forms.replace(candidates))
        if self.changes is not None:
            # What changed between the page's render and this socket joining its group.
            parts.append(fragments.change_list_refresh())
        if self.notes is not None:
            # A note saved between the page's render and this socket joining its group.
            parts.append(fragments.note_list_refresh())
        # Likewise a schedule saved or a digest that ended in that moment.
        if self.schedules is not None:
            parts.append(self.schedules.refresh())
        if self.digest is not None:
            parts.append(await self.digest.card())
        await self._send(parts)

    # --- news several feeds answer, in page order --------------------------------------------------

    async def _rail_update(self, message: dict[str, Any]) -> None:
        """Oikos changed: the rail, the cards of the changed approvals in this page's turns, the grid."""
        approval_ids = list(message.get("approvals", []))
        state = self.page.relay.state
        changed = [state.approvals[approval_id] for approval_id in approval_ids if approval_id in state.approvals]
        # A card whose execution just finished shows Hermes's record of it (its follow-up starts).
        await self.page.records_load([*changed, *(self.rail.approvals_shown() if self.rail is not None else [])])
        parts = self.rail.rail_parts() if self.rail is not None else []
        parts.extend(self.transcript.approvals_changed(approval_ids))
        if self.rail is not None:
            parts.append(self.rail.forms_new())
        if self.approvals is not None:
            parts.extend(await self.approvals.approvals_changed(approval_ids))
        if parts:
            await self._send(parts)

    async def _changes_changed(self, message: dict[str, Any]) -> None:
        """Hermes's record of an execution changed (its follow-up, verdict, undo): every drawing of it
        in this page redrawn — for a page showing its session, or the rail; the Changes page's list
        fetched again."""
        if self.changes is not None:
            await self.changes.changes_changed(message)
        execution_id = str(message.get("execution_id") or "")
        mine = bool(message.get("session_id")) and message.get("session_id") == str(self.transcript.session_id or "")
        if not execution_id or not (mine or self.rail is not None):
            return
        record = await self.page.record_changed(execution_id)
        if record is None:
            return
        self.transcript.record_note(record)
        parts: list[str] = [fragments.change_record(record, oob=True)]
        if mine:
            # An investigation's card says what its action came to.
            escalation, _ = await self.transcript.escalation_changed(
                [{"session_id": record.session_id, "escalated": False}]
            )
            parts.extend(escalation)
        await self._send(parts)

    async def _schedules_changed(self, message: dict[str, Any]) -> None:
        """A schedule was saved or removed, or one of its runs moved: the Schedules page's list (or
        the schedule's runs) fetched again, the home page's digest card drawn again."""
        if self.schedules is not None:
            await self.schedules.schedules_changed(message)
        if self.digest is not None:
            await self.digest.schedules_changed(message)

    async def _sessions_changed(self, message: dict[str, Any]) -> None:
        """A turn started or ended somewhere: the session list fetched again, the rail's spend redrawn."""
        if self.sessions is not None:
            await self.sessions.sessions_changed(message)
        if self.rail is not None:
            await self._send([await self.rail.budget_meter()])

    async def _notes_changed(self, message: dict[str, Any]) -> None:
        """A note or a note proposal changed: the rail's note cards, this session's `remember` chips,
        the Notes page's list."""
        if self.notes is not None:
            await self.notes.notes_changed(message)
        if self.rail is not None:
            await self.rail.notes_changed(message)
        if self.transcript.session_id is not None:
            await self.transcript.notes_changed(message)

    async def _investigation_news(self, message: dict[str, Any]) -> None:
        """Investigations opened or changed (in any process): announced, and every list showing them
        fetched again; the escalation card of the session this page shows is redrawn."""
        opened, changed = list(message.get("opened", [])), list(message.get("changed", []))
        parts = [fragments.investigation_announce(news) for news in opened]
        if self.sessions is not None:
            parts.append(self.sessions.refresh())
        if self.investigations is not None:
            parts.append(self.investigations.refresh())
        escalation, escalated = await self.transcript.escalation_changed(changed)
        await self._send([*parts, *escalation])
        if escalated:
            await self.transcript.finished_turns_redraw()


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
