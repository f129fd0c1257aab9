"""Deciding a proposal (`agent.proposals`): an operator's approval sends it to Oikos, as that operator.

The decision is taken in Hermes first (exactly one wins); only then is the execution requested,
through Oikos's REST API with the control room's identity and the approving operator named in the
body — not with the agent's token, so Oikos records who asked for it, and not as a proposal's turn
that might auto-run it. Oikos classifies it as it would any request: a risky action is parked again
for its own approval.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from channels.db import database_sync_to_async

from agent import proposals
from agent.broadcast import changes_changed_publish
from agent.proposals import ProposalCard, ProposalDecided, ProposalNotFound
from agent.store.changes import ChangeRequest, change_record, change_status
from oikos.client import OikosClient, OikosError

# Oikos keeps a reason of this many characters at most.
REASON_MAX_CHARS = 500


@dataclass(frozen=True)
class ProposalResult:
    card: ProposalCard | None
    # A sentence for the card ("" when its state says it all).
    notice: str


async def proposal_settle(*, proposal_id: uuid.UUID, approve: bool, operator: str) -> ProposalResult:
    """Approve or reject as `operator`; an approval is then requested from Oikos for `operator`."""
    try:
        card = await database_sync_to_async(proposals.proposal_decide)(
            proposal_id=proposal_id, approve=approve, operator=operator
        )
    except ProposalNotFound:
        return ProposalResult(card=None, notice="There is no such proposal.")
    except ProposalDecided as taken:
        card = await database_sync_to_async(proposals.proposal_get)(proposal_id=proposal_id)
        return ProposalResult(card=card, notice=str(taken))
    if approve:
        card = await _send(card, operator=operator)
    await proposals.proposals_changed_publish()
    return ProposalResult(card=card, notice="")


async def _send(card: ProposalCard, *, operator: str) -> ProposalCard:
    why = f"proposed by {card.proposed_by} in Hermes, approved there by {operator}"
    reason = f"{card.reason} ({why})" if card.reason else why.capitalize()
    try:
        async with OikosClient.from_settings() as oikos:
            execution = await oikos.execution_request(
                target=card.target,
                action=card.action,
                operator=operator,
                reason=reason[:REASON_MAX_CHARS],
                params=card.params,
            )
    except OikosError as failure:
        outcome = {"error": str(failure)}
    else:
        outcome = {
            "execution_id": str(execution.get("execution_id") or execution.get("id") or ""),
            "status": str(execution.get("status") or ""),
            "approval_id": str(execution.get("approval_id") or ""),
        }
        request = ChangeRequest.of_result(
            arguments={"target": card.target, "action": card.action, "params": card.params or {}, "reason": reason},
            structured={**execution, **outcome},
            asked_by=card.proposed_by,
            session_id=uuid.UUID(card.session_id) if card.session_id else None,
            correlation_id=uuid.UUID(card.correlation_id) if card.correlation_id else None,
            proposal_id=uuid.UUID(card.id),
        )
        if request is not None:
            await database_sync_to_async(_change_record_approved)(request, operator=operator)
            await changes_changed_publish(execution_id=request.execution_id, session_id=request.session_id)
    return await database_sync_to_async(proposals.proposal_outcome_record)(
        proposal_id=uuid.UUID(card.id), outcome=outcome
    )


def _change_record_approved(request: ChangeRequest, *, operator: str) -> None:
    """On Hermes's record of changes: asked by the proposer, approved in Hermes by `operator`."""
    change_record(request)
    change_status(execution_id=request.execution_id, status=request.status or "approved", decided_by=operator)
