"""The lists a page may keep current: its sessions, the approvals page's grid, the investigations,
the changes, the notes, the schedules (and one schedule's runs), the home page's digest card."""

from __future__ import annotations

import uuid
from typing import Any

from channels.db import database_sync_to_async

from agent.broadcast import CHANGES_GROUP, SESSIONS_GROUP
from agent.memory.cards import note_proposals_shown
from agent.memory.notes import NOTES_GROUP
from controlroom import fragments
from controlroom.feeds import Page
from controlroom.selectors import digest_card
from oikos.approvals import DECISIONS_GROUP, approvals_listed
from oikos.rail import ApprovalState
from oikos.selectors import approval_decisions_recent
from watch.schedules import SCHEDULES_GROUP


class SessionsFeed:
    groups = [SESSIONS_GROUP]

    def __init__(self, page: Page, *, session_id: uuid.UUID | None) -> None:
        self.page = page
        self.session_id = session_id

    def refresh(self) -> str:
        """The page refetches its session list, keeping its search (the current one highlighted)."""
        return fragments.session_list_refresh(current=str(self.session_id or ""))

    async def sessions_changed(self, message: dict[str, Any]) -> None:
        """A session started or finished a turn."""
        await self.page.send([self.refresh()])


class ApprovalsFeed:
    """The approvals page's grid: every approval, decided ones too (Oikos's list is the truth); and
    its table of the decisions taken in Hermes, drawn again whenever one is recorded."""

    groups = [DECISIONS_GROUP]

    def __init__(self, page: Page) -> None:
        self.page = page

    async def snapshot(self) -> tuple[list[str], list[ApprovalState]]:
        """Drawn again: an approval raised, or a decision taken, between the page's render and this
        socket shows too."""
        listed, problem = await approvals_listed()
        return [fragments.approval_grid_replace(listed, problem), await self._decisions()], listed

    async def decisions_changed(self, message: dict[str, Any]) -> None:
        """A decision was recorded somewhere (this page, another browser, Matrix)."""
        await self.page.send([await self._decisions()])

    async def _decisions(self) -> str:
        return fragments.decisions_replace(await database_sync_to_async(approval_decisions_recent)())

    async def approvals_changed(self, approval_ids: list[str]) -> list[str]:
        if not approval_ids:
            return []
        listed, problem = await approvals_listed()
        return [fragments.approval_grid_replace(listed, problem), self.page.forms.new(listed, [])]


class InvestigationsFeed:
    """The investigations page's list, fetched again on any news (`controlroom.investigation_feed`)."""

    groups: list[str] = []

    def refresh(self) -> str:
        return fragments.investigation_list_refresh()


class ChangesFeed:
    """The Changes page's list, fetched again (with the page's filters) whenever Hermes's record of
    an execution changes (`agent.broadcast.changes_changed_publish`)."""

    groups = [CHANGES_GROUP]

    def __init__(self, page: Page) -> None:
        self.page = page

    async def changes_changed(self, message: dict[str, Any]) -> None:
        await self.page.send([fragments.change_list_refresh()])


class NotesFeed:
    """The Notes page's list, fetched again (with the page's filters) whenever a note is created,
    changed or saved from a proposal anywhere (`agent.memory.notes.notes_changed_publish`)."""

    groups = [NOTES_GROUP]

    def __init__(self, page: Page) -> None:
        self.page = page

    async def notes_changed(self, message: dict[str, Any]) -> None:
        proposals = await database_sync_to_async(note_proposals_shown)()
        await self.page.send([fragments.note_list_refresh(), fragments.note_proposals_replace(proposals)])


class SchedulesFeed:
    """The Schedules page's list (`shown="list"`), or one schedule's runs (`shown` its id), fetched
    again whenever a schedule is saved or removed or one of its runs moves
    (`watch.schedules.schedules_changed_publish`)."""

    groups = [SCHEDULES_GROUP]

    def __init__(self, page: Page, *, shown: str) -> None:
        self.page = page
        self.schedule_id = int(shown) if shown.isdigit() else None

    def refresh(self) -> str:
        if self.schedule_id is None:
            return fragments.schedule_list_refresh()
        return fragments.schedule_runs_refresh(self.schedule_id)

    async def schedules_changed(self, message: dict[str, Any]) -> None:
        changed = message.get("schedule_id")
        if self.schedule_id is None or changed is None or changed == self.schedule_id:
            await self.page.send([self.refresh()])


class DigestFeed:
    """The home page's card of the latest digest, drawn again when a schedule's run ends."""

    groups = [SCHEDULES_GROUP]

    def __init__(self, page: Page) -> None:
        self.page = page

    async def card(self) -> str:
        return fragments.digest_replace(await database_sync_to_async(digest_card)())

    async def schedules_changed(self, message: dict[str, Any]) -> None:
        await self.page.send([await self.card()])
