"""Proposals: executions a turn that may not act asked for, held in Hermes until an operator decides.

A peer's turn (with `may_propose` in the peers file) or an investigation's (with
`HERMES_INVESTIGATIONS_MAY_PROPOSE`) never sends `request_execution` to Oikos: its call is stored
here instead (`proposal_open`) and shown as a card beside the approvals. An operator approves or
rejects it; exactly one decision wins (`proposal_decide`, one conditional update). Only an approved
proposal is sent to Oikos, by the control room, as the approving operator (`proposal_outcome_record`
keeps what Oikos answered) — even where Oikos would run the action without asking anyone.

Every page with the rail listens on `PROPOSALS_GROUP` for `proposals.changed`.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.utils import timezone

from agent.models import Proposal
from agent.store import changes
from agent.tools.config import oikos_server_name
from agent.tools.provenance import REQUEST_EXECUTION

logger = logging.getLogger(__name__)

PROPOSALS_GROUP = "hermes.proposals"
# Decided proposals the approvals page keeps showing.
RECENT_SHOWN = 20


class ProposalNotFound(Exception):
    pass


class ProposalDecided(Exception):
    """Someone decided it first; the message says who and how."""

    def __init__(self, proposal: Proposal) -> None:
        super().__init__(f"Already {proposal.status} by {proposal.decided_by or 'someone else'}.")
        self.proposal = proposal


@dataclass(frozen=True)
class ProposalCard:
    """Plain data for a card (templates rendered from async code get no querysets)."""

    id: str
    session_id: str
    proposed_by: str
    origin: str
    server: str
    tool: str
    target: str
    action: str
    reason: str
    params: dict[str, Any] | None
    sources: list[str]
    status: str
    decided_by: str
    outcome: dict[str, Any]
    created_at: datetime.datetime
    # The turn that proposed it.
    correlation_id: str = ""

    @property
    def pending(self) -> bool:
        return self.status == Proposal.Status.PENDING


def proposal_open(
    *,
    correlation_id: uuid.UUID,
    session_id: uuid.UUID | None,
    proposed_by: str,
    origin: str,
    tool_use_id: str,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    sources: list[str],
) -> ProposalCard:
    """Store a proposed execution; nothing is sent anywhere."""
    row = Proposal.objects.create(
        correlation_id=correlation_id,
        session_id=session_id,
        proposed_by=proposed_by,
        origin=origin,
        tool_use_id=tool_use_id,
        server=server,
        tool=tool,
        target=str(arguments.get("target") or "")[:200],
        action=str(arguments.get("action") or "")[:40],
        arguments=arguments,
        sources=sources,
        created_at=timezone.now(),
    )
    return _card(row)


def proposal_decide(*, proposal_id: uuid.UUID, approve: bool, operator: str) -> ProposalCard:
    """An operator's decision. Exactly one wins: the update only touches a pending row.

    Raises `ProposalNotFound`, or `ProposalDecided` when another decision came first.
    """
    status = Proposal.Status.APPROVED if approve else Proposal.Status.REJECTED
    won = Proposal.objects.filter(pk=proposal_id, status=Proposal.Status.PENDING).update(
        status=status, decided_by=operator, decided_at=timezone.now()
    )
    row = Proposal.objects.filter(pk=proposal_id).first()
    if row is None:
        raise ProposalNotFound(str(proposal_id))
    if not won:
        raise ProposalDecided(row)
    return _card(row)


def proposal_outcome_record(*, proposal_id: uuid.UUID, outcome: dict[str, Any]) -> ProposalCard:
    """What Oikos answered to the approved proposal's request (its execution, or why it failed)."""
    Proposal.objects.filter(pk=proposal_id).update(outcome=outcome)
    return _card(Proposal.objects.get(pk=proposal_id))


def proposal_get(*, proposal_id: uuid.UUID) -> ProposalCard | None:
    row = Proposal.objects.filter(pk=proposal_id).first()
    return _card(row) if row else None


def proposals_pending() -> list[ProposalCard]:
    """The proposals waiting for an operator, oldest first (the rail)."""
    rows = Proposal.objects.filter(status=Proposal.Status.PENDING).order_by("created_at")
    return [_card(row) for row in rows]


def proposals_recent() -> list[ProposalCard]:
    """Pending proposals, then the latest decided ones (the approvals page)."""
    decided = Proposal.objects.exclude(status=Proposal.Status.PENDING).order_by("-decided_at")[:RECENT_SHOWN]
    return proposals_pending() + [_card(row) for row in decided]


async def proposals_changed_publish() -> None:
    """Tell every page with the rail to redraw its proposals; a failure costs a redraw, not the proposal."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(PROPOSALS_GROUP, {"type": "proposals.changed"})
    except Exception:
        logger.warning("could not tell pages about a proposal", exc_info=True)


def _card(row: Proposal) -> ProposalCard:
    arguments = row.arguments if isinstance(row.arguments, dict) else {}
    reason, params = arguments.get("reason"), arguments.get("params")
    return ProposalCard(
        id=str(row.pk),
        session_id=str(row.session_id or ""),
        proposed_by=row.proposed_by,
        origin=row.origin,
        server=row.server,
        tool=row.tool,
        target=row.target,
        action=row.action,
        reason=str(reason or ""),
        params=params if isinstance(params, dict) else None,
        sources=[str(source) for source in row.sources] if isinstance(row.sources, list) else [],
        status=row.status,
        decided_by=row.decided_by,
        outcome=row.outcome if isinstance(row.outcome, dict) else {},
        created_at=row.created_at,
        correlation_id=str(row.correlation_id),
    )


def undo_propose(
    *, execution_id: str, proposed_by: str, correlation_id: uuid.UUID | None = None
) -> ProposalCard | None:
    """Offer the way back from a change as a proposal an operator approves (`oikos.proposals`
    then sends it through Oikos's policy like any request); the one already offered if there is one.
    None when the change cannot be undone (`agent.store.changes.undo_for`)."""
    change = changes.change_get(execution_id=execution_id)
    if change is None:
        return None
    if change.undo_proposal_id is not None:
        return proposal_get(proposal_id=change.undo_proposal_id)
    undo = changes.undo_for(change)
    if undo is None:
        return None
    card = proposal_open(
        correlation_id=correlation_id or change.correlation_id or uuid.uuid4(),
        session_id=change.session_id,
        proposed_by=proposed_by,
        origin="followup",
        tool_use_id="",
        server=oikos_server_name(),
        tool=REQUEST_EXECUTION,
        arguments={"target": undo.target, "action": undo.action, "reason": undo.reason},
        sources=[],
    )
    if not changes.undo_offered(execution_id=execution_id, proposal_id=uuid.UUID(card.id)):
        # Offered meanwhile by another caller (the follow-up and the card's button): theirs stands.
        Proposal.objects.filter(pk=card.id).delete()
        change.refresh_from_db()
        return proposal_get(proposal_id=change.undo_proposal_id) if change.undo_proposal_id else None
    return card
