"""Deciding an approval: forward the operator's decision to Oikos, record the attempt, say what happened."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from agent.broadcast import layer_quietly
from common import metrics
from oikos import services
from oikos.card_context import approval_contexts_attach
from oikos.client import AlreadyDecided, OikosClient, OikosError, OikosRefused
from oikos.models import ApprovalDecision
from oikos.rail import ApprovalState
from oikos.relay import OikosRelay, oikos_relay

Outcome = ApprovalDecision.Outcome

# Every approvals page listens here: a decision attempt was recorded (in any process), so its table
# of decisions taken in Hermes is drawn again. The message says nothing more; pages read the table.
DECISIONS_GROUP = "hermes.decisions"


@dataclass(frozen=True)
class DecisionResult:
    outcome: str
    # A sentence for the card ("" when the card's new state says it all).
    notice: str
    # The approval as Oikos recorded it (with its `execution`), when the decision went through.
    approval: dict[str, Any] = field(default_factory=dict)
    decided_by: str = ""
    status: str = ""


async def approval_decide(
    *, approval_id: str, execution_id: str, approve: bool, operator: str, reason: str = ""
) -> DecisionResult:
    """Approve or deny `approval_id` in Oikos as `operator`; every attempt is recorded in Hermes.

    Exactly one decision wins in Oikos: a stale card or a second click gets `already_decided`
    with the name of whoever decided first.
    """
    try:
        async with OikosClient.from_settings() as oikos:
            approval = await oikos.approval_decide(approval_id, approve=approve, operator=operator, reason=reason)
    except AlreadyDecided as taken:
        result = DecisionResult(
            outcome=Outcome.ALREADY_DECIDED,
            notice=f"Already decided by {taken.decided_by} ({taken.status}).",
            decided_by=taken.decided_by,
            status=taken.status,
        )
        detail = f"decided by {taken.decided_by}: {taken.status}"
    except OikosRefused as refused:
        result = DecisionResult(outcome=Outcome.REFUSED, notice=f"Oikos refused: {refused}")
        detail = f"{refused.status} {refused.code}: {refused}"
    except OikosError as failure:
        result = DecisionResult(outcome=Outcome.FAILED, notice=f"Not decided: {failure}")
        detail = str(failure)
    else:
        nested = approval.get("execution")
        execution: dict[str, Any] = nested if isinstance(nested, dict) else {}
        execution_id = str(approval.get("execution_id") or execution.get("execution_id") or execution_id)
        result = DecisionResult(
            outcome=Outcome.DECIDED,
            notice="",
            approval=approval,
            decided_by=str(approval.get("decided_by") or operator),
            status=str(approval.get("status") or ""),
        )
        detail = f"{result.status} by {result.decided_by}"
        metrics.approval_decided("approve" if approve else "deny")
    await database_sync_to_async(services.approval_decision_record)(
        approval_id=approval_id,
        execution_id=execution_id,
        decision="approve" if approve else "deny",
        operator=operator,
        outcome=result.outcome,
        reason=reason,
        detail=detail,
    )
    await decisions_changed_publish()
    return result


async def decisions_changed_publish() -> None:
    """Tell every approvals page that a decision attempt was recorded (a failure costs only the live view)."""
    layer = get_channel_layer()
    if layer is not None:
        await layer_quietly(layer.group_send(DECISIONS_GROUP, {"type": "decisions.changed"}))


async def approvals_listed() -> tuple[list[ApprovalState], str]:
    """Every approval Oikos knows, pending first, and why the list is empty when Oikos failed ("" if not).

    Oikos's list says whether each was approved; where its execution got to (running, completed,
    failed) comes from the relay, which follows the event stream and asks Oikos about the rest.
    """
    try:
        async with OikosClient.from_settings() as oikos:
            listed = await oikos.approvals("all")
    except OikosError as failure:
        return [], str(failure)
    approvals = []
    for item in listed:
        approval = ApprovalState(approval_id=str(item.get("id", "")))
        approval.update(item)
        approval.status = str(item.get("status") or "pending")
        approval.execution_status = {"pending": "proposed"}.get(approval.status, approval.status)
        approvals.append(approval)
    current = await oikos_relay().approvals_lookup((a.approval_id, a.execution_id) for a in approvals)
    approvals = [current.get(approval.approval_id, approval) for approval in approvals]
    # Cards the relay has not given a context yet get one now: from the cache, else from Oikos,
    # bounded in time (HERMES_CARD_CONTEXT_TIMEOUT).
    await approval_contexts_attach([approval for approval in approvals if approval.context is None])
    approvals.sort(key=lambda a: (not a.pending, a.requested_at))
    return approvals, ""


class ApprovalCardRecord(Protocol):
    """What a transcript's approval card (`transcript.view.ApprovalItem`) records of its approval."""

    approval_id: str
    execution_id: str
    checked: bool


async def approvals_confirmed(
    items: Iterable[ApprovalCardRecord], *, relay: OikosRelay | None = None
) -> dict[str, ApprovalState]:
    """What Oikos says about the approvals of these transcript cards, by approval id.

    A transcript card records what a tool result said, approval id included: that is never enough
    to offer Approve/Deny. Only an approval Oikos's REST API knows (the relay's state, else
    `GET /executions/<id>`) is in the answer, and only a pending one is decidable. A card left out
    stays the transcript's record, marked checked: it shows as not confirmed by Oikos, without buttons.
    """
    items = list(items)
    if not items:
        return {}
    found = await (relay or oikos_relay()).approvals_lookup((item.approval_id, item.execution_id) for item in items)
    for item in items:
        item.checked = True
    return found
