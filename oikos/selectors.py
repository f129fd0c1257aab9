"""Reads of Hermes's own Oikos records: approval decisions, the turns that raised approvals, cached target facts."""

from __future__ import annotations

import uuid

from django.utils import timezone

from agent import selectors as agent_selectors
from agent.engine.approvals import REQUEST_EXECUTION
from agent.models import Activity
from agent.tools.config import oikos_server_name
from oikos.cards import CardOrigin, TargetFacts
from oikos.models import ApprovalDecision, TargetContext


def approval_decisions_recent(*, limit: int = 50) -> list[ApprovalDecision]:
    return list(ApprovalDecision.objects.order_by("-decided_at", "-id")[:limit])


def approval_origins(*, approval_ids: list[str]) -> dict[str, CardOrigin]:
    """The turns whose `request_execution` raised these approvals, by approval id.

    Found in the ledger: the call's row keeps the arguments (the model's `reason`) and the result
    (the approval id Oikos answered). An approval raised outside Hermes has no origin.
    """
    if not approval_ids:
        return {}
    calls = (
        Activity.objects.filter(
            tool=REQUEST_EXECUTION,
            server=oikos_server_name(),
            result__structured_content__approval_id__in=approval_ids,
        )
        .exclude(session=None)
        .values_list("correlation_id", "session_id", "arguments", "result")
    )
    found: dict[uuid.UUID, tuple[str, uuid.UUID, str]] = {}
    for turn_id, session_id, arguments, result in calls:
        structured = result.get("structured_content") if isinstance(result, dict) else None
        approval_id = str(structured.get("approval_id", "")) if isinstance(structured, dict) else ""
        reason = arguments.get("reason") if isinstance(arguments, dict) else None
        found[turn_id] = (approval_id, session_id, reason if isinstance(reason, str) else "")
    questions = agent_selectors.turn_questions(turn_ids=list(found))
    return {
        approval_id: CardOrigin(
            session_id=str(session_id), turn_id=str(turn_id), question=questions.get(turn_id, ""), reason=reason
        )
        for turn_id, (approval_id, session_id, reason) in found.items()
        if approval_id
    }


def target_facts_cached(*, targets: list[str], ttl: float, failure_ttl: float) -> dict[str, TargetFacts]:
    """What Oikos said about these targets, where it is recent enough to show without asking again.

    A failed answer is kept for `failure_ttl` only: long enough that an Oikos that is down does not
    slow every page, short enough that the card recovers soon after it is back.
    """
    now = timezone.now()
    found: dict[str, TargetFacts] = {}
    for row in TargetContext.objects.filter(target__in=targets):
        failed = bool(row.blast_problem or row.executions_problem)
        if (now - row.fetched_at).total_seconds() >= (min(ttl, failure_ttl) if failed else ttl):
            continue
        found[row.target] = TargetFacts(
            target=row.target,
            blast_radius=list(row.blast_radius or []),
            executions=list(row.executions or []),
            blast_problem=row.blast_problem,
            executions_problem=row.executions_problem,
            fetched_at=row.fetched_at,
        )
    return found
