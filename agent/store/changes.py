"""Hermes's record of the executions it asked Oikos for (`agent.models.Change`).

One row per execution id, written when Oikos answers the request and kept current as Oikos reports
how it went. Writers:

- the engine, when a turn's `request_execution` comes back with an execution id
  (`agent.engine.tool_round`);
- `oikos.proposals`, when an operator's approval of a proposal is sent to Oikos;
- the watcher, from Oikos's event stream: status, who decided, how it ended; then the follow-up's
  claim, its turn and its verdict (`watch.followups`).

Every function is synchronous and idempotent where it can be: an event heard twice, or by two
processes, changes nothing the first did not.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from agent.models import Change

# Oikos's statuses after which an execution will not change again.
FINISHED = frozenset({"completed", "failed"})
# Statuses that end an execution before it ran: nothing to follow up.
NEVER_RAN = frozenset({"denied", "rejected", "expired", "cancelled"})


@dataclass(frozen=True)
class ChangeRequest:
    """What Oikos answered to a `request_execution`, and where in Hermes it was asked."""

    execution_id: str
    approval_id: str
    action: str
    target: str
    params: dict[str, Any]
    reason: str
    risk_class: str
    status: str
    asked_by: str
    session_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None
    activity_id: int | None = None
    proposal_id: uuid.UUID | None = None

    @classmethod
    def of_result(
        cls, *, arguments: Mapping[str, Any], structured: Any, asked_by: str, **where: Any
    ) -> ChangeRequest | None:
        """The request a `request_execution` call made, from its arguments and Oikos's structured
        answer; None when Oikos answered no execution id (refused, or not an execution)."""
        if not isinstance(structured, Mapping):
            return None
        execution_id = str(structured.get("execution_id") or "")
        if not execution_id:
            return None
        params = arguments.get("params")
        return cls(
            execution_id=execution_id,
            approval_id=str(structured.get("approval_id") or ""),
            action=str(structured.get("action") or arguments.get("action") or "")[:40],
            target=str(structured.get("target") or arguments.get("target") or "")[:200],
            params=dict(params) if isinstance(params, Mapping) else {},
            reason=str(arguments.get("reason") or ""),
            risk_class=str(structured.get("risk_class") or ""),
            status=str(structured.get("status") or ""),
            asked_by=asked_by,
            **where,
        )


def change_record(request: ChangeRequest) -> Change:
    """Store the request (once per execution id: a second writer finds the first's row). A request
    sent by approving the undo a follow-up offered (`undo_offered`) is marked as undoing it."""
    undoes = Change.objects.filter(undo_proposal_id=request.proposal_id).first() if request.proposal_id else None
    change, created = Change.objects.get_or_create(
        execution_id=request.execution_id,
        defaults={
            "approval_id": request.approval_id,
            "action": request.action,
            "target": request.target,
            "params": request.params,
            "reason": request.reason,
            "risk_class": request.risk_class,
            "status": request.status,
            "asked_by": request.asked_by,
            "session_id": request.session_id,
            "correlation_id": request.correlation_id,
            "activity_id": request.activity_id,
            "proposal_id": request.proposal_id,
            "requested_at": timezone.now(),
            "undo_of": undoes,
        },
    )
    if not created and request.status and not change.status:
        Change.objects.filter(pk=change.pk, status="").update(status=request.status)
    return change


def change_get(*, execution_id: str) -> Change | None:
    return Change.objects.filter(execution_id=execution_id).first()


def change_status(
    *,
    execution_id: str,
    status: str,
    decided_by: str = "",
    error: str = "",
    finished_at: datetime.datetime | None = None,
) -> Change | None:
    """What Oikos said of an execution Hermes asked for (None for one it did not ask for).

    A finished execution stays finished: a late `running` heard after `completed` is ignored.
    An execution that ended before it ran (denied, expired) has nothing to follow up.
    """
    change = change_get(execution_id=execution_id)
    if change is None:
        return None
    if change.status in FINISHED and status not in FINISHED:
        return change
    fields: dict[str, Any] = {"status": status}
    if decided_by:
        fields["decided_by"] = decided_by
    if error:
        fields["error"] = error
    if status in FINISHED:
        fields["finished_at"] = finished_at or timezone.now()
    if status in NEVER_RAN:
        fields["followup"] = Change.FollowUp.SKIPPED
        fields["followup_note"] = f"The execution was {status}: nothing ran, so nothing to check."
    Change.objects.filter(pk=change.pk).update(**fields, updated_at=timezone.now())
    change.refresh_from_db()
    return change


def followup_claim(*, execution_id: str, instance: uuid.UUID | None) -> Change | None:
    """Claim the follow-up of a finished execution: exactly one caller, in any process, gets the
    row; every other caller (and every later one) gets None."""
    claimed = Change.objects.filter(
        execution_id=execution_id, followup=Change.FollowUp.PENDING, status__in=FINISHED
    ).update(
        followup=Change.FollowUp.CLAIMED,
        followup_by=instance,
        followup_claimed_at=timezone.now(),
        updated_at=timezone.now(),
    )
    return change_get(execution_id=execution_id) if claimed else None


def followup_started(*, execution_id: str, turn_id: uuid.UUID) -> None:
    Change.objects.filter(execution_id=execution_id).update(followup_turn_id=turn_id, updated_at=timezone.now())


def followup_skip(*, execution_id: str, reason: str) -> None:
    """The follow-up will not run, and why (the budget is spent, there is no model, …)."""
    Change.objects.filter(execution_id=execution_id).exclude(followup=Change.FollowUp.DONE).update(
        followup=Change.FollowUp.SKIPPED, followup_note=reason, updated_at=timezone.now()
    )


def verdict_record(*, execution_id: str, verdict: str, detail: str) -> Change | None:
    """The follow-up's verdict; the follow-up is done."""
    if verdict not in Change.Verdict.values:
        raise ValueError(f"not a verdict: {verdict!r} (one of {', '.join(Change.Verdict.values)})")
    Change.objects.filter(execution_id=execution_id).update(
        verdict=verdict,
        verdict_detail=detail,
        verdict_at=timezone.now(),
        followup=Change.FollowUp.DONE,
        updated_at=timezone.now(),
    )
    return change_get(execution_id=execution_id)


# What Oikos can take back, and how: a deploy or a configuration change is rolled back to the
# snapshot Oikos takes before it. A restart or a reload has nothing to take back.
UNDO_ACTIONS = {"deploy": "rollback", "config": "rollback"}


@dataclass(frozen=True)
class Undo:
    target: str
    action: str
    reason: str


def undo_for(change: Change) -> Undo | None:
    """The inverse of a change, when Oikos can roll it back and it did happen (a failed or
    denied execution changed nothing to take back)."""
    action = UNDO_ACTIONS.get(change.action)
    if action is None or change.status != "completed" or not change.target:
        return None
    return Undo(
        target=change.target,
        action=action,
        reason=f"Undo {change.action} of {change.target} (execution {change.execution_id})",
    )


def undo_offered(*, execution_id: str, proposal_id: uuid.UUID) -> bool:
    """Mark the undo offered as this proposal; False when another was offered first."""
    offered = Change.objects.filter(execution_id=execution_id, undo_proposal_id=None).update(
        undo_proposal_id=proposal_id, updated_at=timezone.now()
    )
    return bool(offered)
