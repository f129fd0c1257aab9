"""Executions and approvals: proposed -> approved -> running -> completed | failed, or denied.

Every state change happens under one lock and publishes its event while holding it, so the
event stream's order is the order things happened, and of any number of concurrent decisions on
one approval exactly one wins. Runs are asyncio tasks on the server's event loop, so ``request``
and ``decide`` must be called from that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from oikos_sim.clock import iso, utc_now
from oikos_sim.errors import AlreadyDecided, InvalidRequest, NotFound
from oikos_sim.events import EventBus
from oikos_sim.policy import ApprovalMode, RiskClass, classify
from oikos_sim.procedures import procedure_run
from oikos_sim.world import World

ExecutionStatus = Literal["proposed", "approved", "running", "completed", "failed", "denied"]
ApprovalStatus = Literal["pending", "approved", "denied"]
MAX_PARAMS = 20
MAX_TEXT = 500


@dataclass
class Execution:
    id: str
    target: str
    action: str
    risk_class: RiskClass
    approval_mode: ApprovalMode
    status: ExecutionStatus
    requested_by: str
    requested_at: datetime
    reason: str | None
    params: dict[str, Any]
    approval_id: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    output: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def needs_approval(self) -> bool:
        return self.status == "proposed"

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed", "denied")


@dataclass
class Approval:
    id: str
    execution_id: str
    target: str
    action: str
    risk_class: RiskClass
    status: ApprovalStatus
    requested_by: str
    requested_at: datetime
    reason: str | None
    decided_by: str | None = None
    decided_at: datetime | None = None
    via: str | None = None
    decision_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "execution_id": self.execution_id,
            "target": self.target,
            "action": self.action,
            "risk_class": self.risk_class,
            "status": self.status,
            "requested_by": self.requested_by,
            "requested_at": iso(self.requested_at),
            "decided_by": self.decided_by,
            "decided_at": iso(self.decided_at) if self.decided_at else None,
            "reason": self.reason,
            "via": self.via,
            "decision_reason": self.decision_reason,
        }


def execution_message(execution: Execution) -> str:
    """One sentence a model can relay as is."""
    what = f"{execution.action} of {execution.target}"
    if execution.status == "proposed":
        return (
            f"{what} is {execution.risk_class} and waits for an operator to approve {execution.approval_id} "
            "in the control room; nothing has changed yet."
        )
    if execution.status == "completed":
        seconds = (execution.finished_at - execution.started_at).total_seconds()  # type: ignore[operator]
        return f"{what} completed in {seconds:.1f} s."
    if execution.status == "failed":
        return f"{what} failed: {execution.error}."
    if execution.status == "denied":
        return f"{what} was denied by {execution.decided_by}; nothing was changed."
    return f"{what} is {execution.status}; get_execution({execution.id!r}) reports how it ends."


def execution_summary(execution: Execution) -> dict[str, Any]:
    """The shape ``request_execution`` returns (the Hermes engine relies on exactly these keys)."""
    return {
        "execution_id": execution.id,
        "approval_id": execution.approval_id,
        "target": execution.target,
        "action": execution.action,
        "risk_class": execution.risk_class,
        "approval_mode": execution.approval_mode,
        "status": execution.status,
        "needs_approval": execution.needs_approval,
        "message": execution_message(execution),
    }


def execution_detail(execution: Execution) -> dict[str, Any]:
    """The summary plus who asked, why, the timestamps and the actuator's output."""
    stamps = ("requested_at", "decided_at", "started_at", "finished_at")
    detail = execution_summary(execution) | {
        "requested_by": execution.requested_by,
        "reason": execution.reason,
        "params": execution.params,
        "decided_by": execution.decided_by,
        "output": list(execution.output),
        "error": execution.error,
    }
    for name in stamps:
        moment = getattr(execution, name)
        detail[name] = iso(moment) if moment else None
    return detail


def _params_check(params: dict[str, Any] | None) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict) or len(params) > MAX_PARAMS:
        raise InvalidRequest(f"params must be an object with at most {MAX_PARAMS} keys.")
    for key, value in params.items():
        if not isinstance(key, str) or not isinstance(value, str | int | float | bool):
            raise InvalidRequest(f"params.{key} must be a string, number or boolean.")
    return dict(params)


class ExecutionDesk:
    def __init__(self, world: World, events: EventBus, *, execution_seconds: float = 1.0) -> None:
        self.world = world
        self.events = events
        self.execution_seconds = execution_seconds
        self.lock = threading.Lock()
        self.executions: dict[str, Execution] = {}
        self.approvals: dict[str, Approval] = {}
        self._finished: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- requests ------------------------------------------------------------------------------

    def request(
        self,
        *,
        target: str,
        action: str,
        requested_by: str,
        reason: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Execution:
        """Classify and record an execution; auto-act ones start running at once."""
        classification = classify(self.world, target, action)
        checked = _params_check(params)
        if reason is not None and len(reason) > MAX_TEXT:
            raise InvalidRequest(f"reason is limited to {MAX_TEXT} characters.")
        with self.lock:
            execution = Execution(
                id=f"exe-{len(self.executions) + 1:04d}",
                target=classification.target,
                action=classification.action,
                risk_class=classification.risk_class,
                approval_mode=classification.approval_mode,
                status="proposed" if classification.needs_approval else "approved",
                requested_by=requested_by,
                requested_at=utc_now(),
                reason=reason,
                params=checked,
            )
            self.executions[execution.id] = execution
            self._finished[execution.id] = asyncio.Event()
            if classification.needs_approval:
                self._approval_open(execution)
            else:
                execution.decided_by = "policy:auto-act"
                execution.decided_at = execution.requested_at
                self._start(execution)
        detail = f"{classification.risk_class}, {classification.approval_mode}" + (f": {reason}" if reason else "")
        self.world.audit_record(
            actor=requested_by,
            action=execution.action,
            target=execution.target,
            detail=detail,
            result="requested",
        )
        return execution

    def park(
        self,
        *,
        target: str,
        action: str,
        requested_by: str = "agent:hermes",
        risk_class: str | None = None,
        reason: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Execution:
        """An execution already waiting for an operator when the sim starts (`--pending-approval`).

        It is recorded exactly as `request` records a parked one (execution `proposed`, approval
        `pending`, `approval.created` published, audit row), so nothing tells it from a request made
        a moment ago. `risk_class` may raise the policy's class (a recorded world's Oikos may
        classify differently), never lower it to one Oikos runs without asking.
        """
        classification = classify(self.world, target, action)
        risk: RiskClass = classification.risk_class
        if risk_class is not None:
            if risk_class not in ("config_mutation", "destructive"):
                raise InvalidRequest(
                    f"risk_class {risk_class!r} is not parked: only config_mutation and destructive wait for approval."
                )
            risk = risk_class  # type: ignore[assignment]
        elif not classification.needs_approval:
            raise InvalidRequest(
                f"{classification.action} of {classification.target} is {risk}: Oikos runs it at once, it is never "
                "parked (give risk_class to park it anyway)."
            )
        checked = _params_check(params)
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_TEXT):
            raise InvalidRequest(f"reason is a string of at most {MAX_TEXT} characters.")
        with self.lock:
            execution = Execution(
                id=f"exe-{len(self.executions) + 1:04d}",
                target=classification.target,
                action=classification.action,
                risk_class=risk,
                approval_mode="operator-approval",
                status="proposed",
                requested_by=requested_by,
                requested_at=utc_now(),
                reason=reason,
                params=checked,
            )
            self.executions[execution.id] = execution
            self._finished[execution.id] = asyncio.Event()
            self._approval_open(execution)
        detail = f"{risk}, operator-approval" + (f": {reason}" if reason else "")
        self.world.audit_record(
            actor=requested_by, action=execution.action, target=execution.target, detail=detail, result="requested"
        )
        return execution

    def _approval_open(self, execution: Execution) -> Approval:
        """The pending approval of a parked execution (called under `lock`)."""
        approval = Approval(
            id=f"apr-{len(self.approvals) + 1:04d}",
            execution_id=execution.id,
            target=execution.target,
            action=execution.action,
            risk_class=execution.risk_class,
            status="pending",
            requested_by=execution.requested_by,
            requested_at=execution.requested_at,
            reason=execution.reason,
        )
        self.approvals[approval.id] = approval
        execution.approval_id = approval.id
        self.events.publish("approval.created", self._approval_event(approval))
        return approval

    async def finished(self, execution_id: str, *, within: float) -> Execution:
        """Wait up to ``within`` seconds for the execution to end; returns it either way."""
        execution = self.execution_get(execution_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._finished[execution_id].wait(), within)
        return execution

    # -- decisions -----------------------------------------------------------------------------

    def decide(
        self, approval_id: str, *, approve: bool, operator: str, via: str, reason: str | None = None
    ) -> Approval:
        """Record an operator's decision; ``AlreadyDecided`` for every decision after the first."""
        with self.lock:
            approval = self.approvals.get(approval_id)
            if approval is None:
                raise NotFound(f"No approval {approval_id!r}.")
            if approval.status != "pending":
                raise AlreadyDecided(approval.id, approval.status, approval.decided_by)
            now = utc_now()
            approval.status = "approved" if approve else "denied"
            approval.decided_by, approval.decided_at = operator, now
            approval.via, approval.decision_reason = via, reason
            execution = self.executions[approval.execution_id]
            execution.decided_by, execution.decided_at = operator, now
            execution.status = "approved" if approve else "denied"
            self.events.publish(
                "approval.decided",
                self._approval_event(approval)
                | {
                    "decision": approval.status,
                    "decision_reason": reason,
                    "execution_status": execution.status,
                },
            )
            if approve:
                self._start(execution)
            else:
                self._finished[execution.id].set()
        self.world.audit_record(
            actor=operator,
            action=f"{approval.status} {approval.action}",
            target=approval.target,
            detail=f"{approval.id} via {via}" + (f": {reason}" if reason else ""),
            result=approval.status,
        )
        return approval

    # -- reads ---------------------------------------------------------------------------------

    def execution_get(self, execution_id: str) -> Execution:
        execution = self.executions.get(execution_id.strip())
        if execution is None:
            known = ", ".join(list(self.executions)[-5:]) or "none yet"
            raise NotFound(f"No execution {execution_id!r}. Recent executions: {known}.")
        return execution

    def approval_get(self, approval_id: str) -> Approval:
        approval = self.approvals.get(approval_id.strip())
        if approval is None:
            raise NotFound(f"No approval {approval_id!r}.")
        return approval

    def executions_recent(self, *, target: str = "", limit: int = 10) -> list[Execution]:
        """The latest executions, newest first; only those of `target` when given."""
        with self.lock:
            chosen = [e for e in self.executions.values() if not target or e.target == target.strip()]
        return list(reversed(chosen))[:limit]

    def approvals_list(self, status: str = "pending") -> list[Approval]:
        if status not in ("pending", "approved", "denied", "all"):
            raise InvalidRequest("status must be one of pending, approved, denied, all.")
        with self.lock:
            return [a for a in self.approvals.values() if status == "all" or a.status == status]

    # -- running -------------------------------------------------------------------------------

    def _start(self, execution: Execution) -> None:
        task = asyncio.get_running_loop().create_task(self._run(execution), name=f"oikos-sim {execution.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, execution: Execution) -> None:
        with self.lock:
            execution.status = "running"
            execution.started_at = utc_now()
            self.events.publish("execution.started", self._execution_event(execution))
        await asyncio.sleep(self.execution_seconds)
        outcome = procedure_run(self.world, target=execution.target, action=execution.action, params=execution.params)
        self.world.journal_append(execution.target, outcome.journal)
        with self.lock:
            execution.status = "completed" if outcome.ok else "failed"
            execution.finished_at = utc_now()
            execution.output = outcome.output
            execution.error = outcome.error
            event_type = "execution.completed" if outcome.ok else "execution.failed"
            self.events.publish(event_type, self._execution_event(execution))
            if outcome.health is not None:
                health, reason = outcome.health
                before, after = self.world.health_set(execution.target, health, reason)
                if before != after:
                    self.events.publish(
                        "entity.health_changed",
                        {"slug": execution.target, "from": before, "to": after, "reason": reason},
                    )
        self.world.audit_record(
            actor="service:oikos-actuator",
            action=execution.action,
            target=execution.target,
            detail=f"{execution.id} requested by {execution.requested_by}",
            result=execution.status if outcome.ok else f"failed: {outcome.error}",
        )
        self._finished[execution.id].set()

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @staticmethod
    def _approval_event(approval: Approval) -> dict[str, Any]:
        return {
            "approval_id": approval.id,
            "execution_id": approval.execution_id,
            "target": approval.target,
            "action": approval.action,
            "risk_class": approval.risk_class,
            "status": approval.status,
            "requested_by": approval.requested_by,
            "reason": approval.reason,
            "decided_by": approval.decided_by,
            "via": approval.via,
        }

    @staticmethod
    def _execution_event(execution: Execution) -> dict[str, Any]:
        return {
            "execution_id": execution.id,
            "approval_id": execution.approval_id,
            "target": execution.target,
            "action": execution.action,
            "risk_class": execution.risk_class,
            "status": execution.status,
            "requested_by": execution.requested_by,
            "decided_by": execution.decided_by,
            "error": execution.error,
            "finished_at": iso(execution.finished_at) if execution.finished_at else None,
            "message": execution_message(execution),
        }
