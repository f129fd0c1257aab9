"""Changes on Hermes's record for tests of what reads it (`GET /changes`, the Changes page,
`changes_since`): written with `agent.store.changes.change_record`, as the engine writes them."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from agent.models import AgentSession, Change
from agent.store.changes import ChangeRequest, change_record, change_status


def change_row(
    execution_id: str,
    *,
    target: str = "service:sonarr",
    action: str = "restart",
    at: datetime.datetime | None = None,
    session: AgentSession | None = None,
    status: str = "running",
    asked_by: str = "operator:alice",
    **finished: Any,
) -> Change:
    """A change requested at `at` (now without it); a finished `status` (with `decided_by=`, `error=`) is
    recorded as Oikos reports it."""
    change = change_record(
        ChangeRequest(
            execution_id=execution_id,
            approval_id="",
            action=action,
            target=target,
            params={"why": "test"},
            reason=f"{action} {target}",
            risk_class="reversible_low",
            status=status,
            asked_by=asked_by,
            session_id=session.id if session else None,
            correlation_id=uuid.uuid4() if session else None,
        )
    )
    if at is not None:
        Change.objects.filter(pk=change.pk).update(requested_at=at)
    if finished or status in ("completed", "failed"):
        change_status(execution_id=execution_id, status=status, **finished)
    change.refresh_from_db()
    return change
