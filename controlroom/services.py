"""Writes of the control room. Synchronous; async code calls them through `database_sync_to_async`."""

from __future__ import annotations

from controlroom.models import ApprovalDecision


def approval_decision_record(
    *,
    approval_id: str,
    execution_id: str,
    decision: str,
    operator: str,
    outcome: str,
    reason: str = "",
    detail: str = "",
) -> ApprovalDecision:
    """Keep one decision attempt, whatever Oikos answered (the control room's own audit trail)."""
    return ApprovalDecision.objects.create(
        approval_id=approval_id,
        execution_id=execution_id,
        decision=decision,
        operator=operator,
        outcome=outcome,
        reason=reason,
        detail=detail,
    )
