"""The rail (the home page's side column): Oikos's approvals, MCP servers' questions, and the
executions peers and investigations proposed."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from agent.broadcast import CHANGES_GROUP, ELICITATIONS_GROUP, SESSIONS_GROUP
from agent.elicitation.store import elicitations_pending
from agent.memory.cards import note_proposals_shown
from agent.memory.notes import NOTES_GROUP
from agent.proposals import PROPOSALS_GROUP, proposals_pending
from controlroom import fragments, selectors
from controlroom.feeds import Page
from oikos.rail import ApprovalState


class RailFeed:
    # The sessions group: a turn starting or ending changes today's spend (`budget_meter`); the
    # changes group: the follow-up of an execution the rail's cards show (`Page.record_changed`).
    # The notes group: a note proposal made or decided (the cards beside the approvals).
    groups = [ELICITATIONS_GROUP, PROPOSALS_GROUP, SESSIONS_GROUP, CHANGES_GROUP, NOTES_GROUP]

    def __init__(self, page: Page) -> None:
        self.page = page
        self.elicitations_shown: list[str] | None = None

    async def snapshot(self) -> list[str]:
        await self.page.records_load(self.page.relay.state.approvals_shown())
        parts = fragments.rail_parts(self.page.relay.state)
        parts.extend(await self._elicitations_if_changed())
        parts.append(await self._proposals())
        parts.append(await self._note_proposals())
        return parts

    def approvals_shown(self) -> list[ApprovalState]:
        return list(self.page.relay.state.approvals_shown())

    def rail_parts(self) -> list[str]:
        """Oikos changed something: the rail as the relay now sees it."""
        return fragments.rail_parts(self.page.relay.state)

    def forms_new(self) -> str:
        return self.page.forms.new(self.page.relay.state.approvals_shown(), [])

    async def budget_meter(self) -> str:
        """Today's spend as the turns stored it: a turn started or ended (the meter also polls)."""
        return fragments.budget_meter_replace(await database_sync_to_async(selectors.budget_meter)())

    async def elicitations_changed(self, message: dict[str, Any]) -> None:
        """A question was asked or answered somewhere: redraw the rail's questions if the set changed.

        Only a change of the set redraws: a redraw would wipe what the operator is typing in a form.
        """
        await self.page.send(await self._elicitations_if_changed())

    async def proposals_changed(self, message: dict[str, Any]) -> None:
        """A proposal was made or decided somewhere: redraw the rail's proposals (they hold no typing)."""
        await self.page.send([await self._proposals()])

    async def notes_changed(self, message: dict[str, Any]) -> None:
        """A note proposal was made or decided somewhere: redraw the rail's note cards (they hold no typing)."""
        await self.page.send([await self._note_proposals()])

    async def _note_proposals(self) -> str:
        return fragments.note_proposals_replace(await database_sync_to_async(note_proposals_shown)())

    async def _elicitations_if_changed(self) -> list[str]:
        pending = await database_sync_to_async(elicitations_pending)()
        ids = [item.id for item in pending]
        if ids == self.elicitations_shown:
            return []
        self.elicitations_shown = ids
        return fragments.elicitations_parts(pending)

    async def _proposals(self) -> str:
        return fragments.proposals_replace(await database_sync_to_async(proposals_pending)())
