"""What the right rail knows about Oikos: fleet health, approvals, executions, recent events.

Plain state folded from Oikos's REST answers and its event stream; the relay owns one per process
and the templates read it. Oikos data is untrusted: it is stored as strings and always escaped.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from oikos.cards import CardContext
from oikos.change_view import ChangeView
from oikos.client import OikosEvent

RECENT_EVENTS = 30
EXECUTIONS_KEPT = 50
DECIDED_SHOWN = 5
# Executions the rail keeps once they end: an operator glancing at the rail sees what just ran.
FINISHED_EXECUTION_STATUSES = ("completed", "failed", "denied")


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return "" if value is None else str(value)


@dataclass
class ApprovalState:
    approval_id: str
    execution_id: str = ""
    target: str = ""
    action: str = ""
    risk_class: str = ""
    # pending, approved, denied
    status: str = "pending"
    requested_by: str = ""
    requested_at: str = ""
    reason: str = ""
    decided_by: str = ""
    # proposed, approved, running, completed, failed, denied
    execution_status: str = "proposed"
    message: str = ""
    changed_at: float = field(default_factory=time.monotonic)
    # Why it was asked, where, and what is at stake (`oikos.card_context`); None until loaded.
    context: CardContext | None = None
    # Hermes's record of the execution once it finished (`oikos.change_view`); loaded by the pages
    # that draw the card, which fetches it itself when it is not.
    record: ChangeView | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def decidable(self) -> bool:
        """Whether the card offers Approve/Deny: this state comes from Oikos's REST API (its pending
        list, its event stream, an execution it returned), so pending here is Oikos's word."""
        return self.pending

    @property
    def stage(self) -> str:
        """The one word the card leads with: what happens, or happened, to the execution."""
        if self.status == "pending":
            return "pending"
        if self.status == "denied":
            return "denied"
        return self.execution_status or self.status

    def update(self, data: dict[str, Any]) -> None:
        for attribute, key in (
            ("execution_id", "execution_id"),
            ("target", "target"),
            ("action", "action"),
            ("risk_class", "risk_class"),
            ("requested_by", "requested_by"),
            ("requested_at", "requested_at"),
            ("reason", "reason"),
            ("decided_by", "decided_by"),
            ("message", "message"),
        ):
            if data.get(key):
                setattr(self, attribute, _text(data, key))
        self.changed_at = time.monotonic()


@dataclass
class ExecutionState:
    execution_id: str
    approval_id: str = ""
    target: str = ""
    action: str = ""
    risk_class: str = ""
    status: str = ""
    requested_by: str = ""
    message: str = ""
    at: str = ""


@dataclass
class RailState:
    health: dict[str, Any] | None = None
    approvals: dict[str, ApprovalState] = field(default_factory=dict)
    executions: OrderedDict[str, ExecutionState] = field(default_factory=OrderedDict)
    recent: deque[OikosEvent] = field(default_factory=lambda: deque(maxlen=RECENT_EVENTS))
    # Why the rail cannot show live Oikos data right now ("" when connected).
    problem: str = ""
    connected: bool = False

    # --- loading from REST -----------------------------------------------------------------------

    def approvals_load(self, pending: list[dict[str, Any]]) -> set[str]:
        """Take Oikos's pending list as the truth about what is pending now; returns changed ids."""
        changed: set[str] = set()
        listed = {str(item.get("id", "")) for item in pending}
        for approval_id, approval in list(self.approvals.items()):
            if approval.pending and approval_id not in listed:
                # Decided while the stream was down and no longer in the backlog: leave the rail.
                del self.approvals[approval_id]
                changed.add(approval_id)
        for item in pending:
            approval_id = str(item.get("id", ""))
            if not approval_id:
                continue
            approval = self.approvals.setdefault(approval_id, ApprovalState(approval_id=approval_id))
            approval.update(item)
            approval.status = "pending"
            changed.add(approval_id)
        return changed

    def approval_from_execution(self, detail: dict[str, Any]) -> ApprovalState | None:
        """Remember an approval learnt from `GET /executions/<id>` (an older card in a transcript)."""
        approval_id = _text(detail, "approval_id")
        if not approval_id:
            return None
        approval = self.approvals.get(approval_id)
        if approval is None:
            approval = self.approvals[approval_id] = ApprovalState(approval_id=approval_id)
        execution_status = _text(detail, "status")
        # A snapshot taken earlier (a decision's answer, a lookup) never undoes what the event
        # stream already reported.
        if _progress(execution_status) < _progress(approval.execution_status):
            return approval
        approval.update(detail)
        if execution_status:
            approval.execution_status = execution_status
            approval.status = _approval_status(execution_status)
        return approval

    # --- the event stream ------------------------------------------------------------------------

    def apply(self, event: OikosEvent) -> set[str]:
        """Fold one Oikos event in; returns the ids of approvals whose cards changed."""
        self.recent.appendleft(event)
        data = event.data
        if event.type == "approval.created":
            approval_id = _text(data, "approval_id")
            if not approval_id:
                return set()
            approval = self.approvals.setdefault(approval_id, ApprovalState(approval_id=approval_id))
            approval.update(data)
            approval.status = "pending"
            approval.requested_at = approval.requested_at or event.at
            return {approval_id}
        if event.type == "approval.decided":
            approval_id = _text(data, "approval_id")
            if not approval_id:
                return set()
            approval = self.approvals.setdefault(approval_id, ApprovalState(approval_id=approval_id))
            approval.update(data)
            approval.status = _text(data, "decision") or _text(data, "status") or "approved"
            approval.execution_status = _text(data, "execution_status") or approval.status
            return {approval_id}
        if event.type.startswith("execution."):
            return self._execution(event)
        return set()

    def _execution(self, event: OikosEvent) -> set[str]:
        data = event.data
        execution_id = _text(data, "execution_id")
        if not execution_id:
            return set()
        execution = self.executions.pop(execution_id, None) or ExecutionState(execution_id=execution_id)
        for attribute in ("approval_id", "target", "action", "risk_class", "status", "requested_by", "message"):
            if data.get(attribute):
                setattr(execution, attribute, _text(data, attribute))
        execution.at = event.at
        # Most recently changed last; the oldest fall off.
        self.executions[execution_id] = execution
        while len(self.executions) > EXECUTIONS_KEPT:
            self.executions.popitem(last=False)
        approval = self.approvals.get(execution.approval_id) if execution.approval_id else None
        if approval is None:
            return set()
        approval.execution_status = execution.status
        approval.message = execution.message or approval.message
        approval.changed_at = time.monotonic()
        return {approval.approval_id}

    # --- what the rail shows ---------------------------------------------------------------------

    def approvals_shown(self) -> list[ApprovalState]:
        """Pending approvals, oldest first, then the last few decided ones following their execution."""
        pending = sorted((a for a in self.approvals.values() if a.pending), key=lambda a: a.requested_at)
        decided = sorted((a for a in self.approvals.values() if not a.pending), key=lambda a: -a.changed_at)
        return pending + decided[:DECIDED_SHOWN]

    def executions_shown(self, limit: int = 6) -> list[ExecutionState]:
        return list(reversed(self.executions.values()))[:limit]

    def events_shown(self, limit: int = 12) -> list[OikosEvent]:
        return list(self.recent)[:limit]


_PROGRESS = {"proposed": 0, "approved": 1, "running": 2, "completed": 3, "failed": 3, "denied": 3}


def _progress(execution_status: str) -> int:
    return _PROGRESS.get(execution_status, 0)


def _approval_status(execution_status: str) -> str:
    if execution_status == "proposed":
        return "pending"
    if execution_status == "denied":
        return "denied"
    return "approved"
