"""Note proposals as their cards draw them: plain data, read once (templates rendered from async
code get no querysets), for the rail, the chat's `remember` chip and the Notes page."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from django.utils import timezone

from agent.models import NoteProposal, note_title

# Decided proposals the rail keeps showing (the operator sees what came of their click), for so long.
RECENT_DECIDED = 3
RECENT_DECIDED_FOR = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class NoteProposalCard:
    id: int
    session_id: str
    session_title: str
    turn_id: str
    tool_use_id: str
    proposed_by: str
    text: str
    entities: list[str]
    tags: list[str]
    runbook: bool
    # pending | saved | dismissed
    status: str
    decided_by: str
    note_id: int | None
    created_at: datetime.datetime

    @property
    def pending(self) -> bool:
        return self.status == NoteProposal.Status.PENDING

    @property
    def saved(self) -> bool:
        return self.status == NoteProposal.Status.SAVED

    @property
    def title(self) -> str:
        return note_title(self.text)

    @property
    def scoped(self) -> bool:
        return bool(self.entities or self.tags)


def note_proposal_card(proposal_id: int) -> NoteProposalCard | None:
    row = NoteProposal.objects.select_related("session").filter(pk=proposal_id).first()
    return _card(row) if row else None


def note_proposals_shown() -> list[NoteProposalCard]:
    """The rail's cards: every pending proposal, oldest first, then the few decided in the last hour."""
    rows = NoteProposal.objects.select_related("session")
    pending = rows.filter(status=NoteProposal.Status.PENDING).order_by("created_at")
    recent = (
        rows.exclude(status=NoteProposal.Status.PENDING)
        .filter(decided_at__gte=timezone.now() - RECENT_DECIDED_FOR)
        .order_by("-decided_at")[:RECENT_DECIDED]
    )
    return [_card(row) for row in [*pending, *recent]]


def note_proposal_cards_of(tool_use_ids: Iterable[str]) -> dict[str, NoteProposalCard]:
    """The proposals the `remember` calls with these ids made, by tool_use id."""
    ids = [tool_use_id for tool_use_id in tool_use_ids if tool_use_id]
    if not ids:
        return {}
    rows = NoteProposal.objects.select_related("session").filter(tool_use_id__in=ids)
    return {row.tool_use_id: _card(row) for row in rows}


def _card(row: NoteProposal) -> NoteProposalCard:
    return NoteProposalCard(
        id=row.pk,
        session_id=str(row.session_id or ""),
        session_title=(row.session.title if row.session is not None else "") or "",
        turn_id=str(row.turn_id or ""),
        tool_use_id=row.tool_use_id,
        proposed_by=row.proposed_by,
        text=row.text,
        entities=[str(entity) for entity in row.entities or []],
        tags=[str(tag) for tag in row.tags or []],
        runbook=row.runbook,
        status=row.status,
        decided_by=row.decided_by,
        note_id=row.note_id,
        created_at=row.created_at,
    )
