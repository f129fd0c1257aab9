"""Writes of the control room. Synchronous; async code calls them through `database_sync_to_async`."""

from __future__ import annotations

import logging
import threading
import time

from oikos.cards import TargetFacts
from oikos.models import ApprovalDecision, TargetContext

logger = logging.getLogger(__name__)


def target_facts_store(*, facts: TargetFacts) -> None:
    """Keep what Oikos said about a card's target, replacing the previous answer."""
    TargetContext.objects.update_or_create(
        target=facts.target,
        defaults={
            "blast_radius": facts.blast_radius,
            "executions": facts.executions,
            "blast_problem": facts.blast_problem,
            "executions_problem": facts.executions_problem,
            "fetched_at": facts.fetched_at,
        },
    )


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


# Refused attempts come from anyone who can reach the control room, signed in or not: recorded, but
# at most this many a minute per process, so that they cannot grow the audit table without bound.
REFUSED_ATTEMPTS_PER_MINUTE = 60


class _MinuteBudget:
    """How many of something may happen in the last minute, and whether the overflow was reported."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._moments: list[float] = []
        self._reported = False
        self._lock = threading.Lock()

    def take(self) -> bool:
        """True when one more fits into the last minute (and counts it); False, logging once, when not."""
        now = time.monotonic()
        with self._lock:
            self._moments = [moment for moment in self._moments if now - moment < 60.0]
            if not self._moments:
                self._reported = False  # a quiet minute: the next burst is reported again
            if len(self._moments) < self.limit:
                self._moments.append(now)
                return True
            report, self._reported = not self._reported, True
        if report:
            logger.warning(
                "more than %d refused approval decision attempts in a minute: the rest are not recorded", self.limit
            )
        return False


_refused_budget = _MinuteBudget(REFUSED_ATTEMPTS_PER_MINUTE)


def approval_decision_refusal_record(
    *,
    approval_id: str,
    execution_id: str,
    decision: str,
    operator: str,
    reason: str,
    refusal: str,
    peer: str,
) -> ApprovalDecision | None:
    """Keep one decision attempt Hermes refused before asking Oikos; None when over the per-minute cap.

    Every value but `refusal` came from the refused request itself: cut to the columns' sizes, and
    `decision` kept only when it is one.
    """
    if not _refused_budget.take():
        return None
    return ApprovalDecision.objects.create(
        approval_id=approval_id[:100],
        execution_id=execution_id[:100],
        decision=decision if decision in ApprovalDecision.Decision.values else "",
        operator=operator[:150],
        outcome=ApprovalDecision.Outcome.REJECTED,
        reason=reason[:500],
        detail=f"{refusal} (from {peer or 'an unknown address'})"[:1000],
    )
