"""Decide and act: preflight, the one mutating tool (request_execution), and reads of its results."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from oikos_sim.executions import execution_detail, execution_summary
from oikos_sim.graph import blast_radius
from oikos_sim.policy import ACTIONS, classify
from oikos_sim.procedures import DISK_FULL_PCT
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, Slug, actor_of, guarded, json_result

# The longest request_execution waits for an auto-act run before answering "running".
AUTO_ACT_WAIT_SECONDS = 5.0
MUTATING = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

Action = Annotated[str, Field(description=f"One of: {', '.join(ACTIONS)}.", min_length=1, max_length=40)]
Reason = Annotated[
    str | None, Field(description="Why, in one sentence; shown to the approving operator.", max_length=500)
]
Params = Annotated[
    dict[str, str | int | float | bool] | None,
    Field(description='Action parameters, e.g. {"version": "10.10.3"} for deploy, {"key": "value"} for config.'),
]
ApprovalState = Annotated[
    Literal["pending", "approved", "denied", "all"], Field(description="Which approvals (default pending).")
]
ExecutionId = Annotated[str, Field(description="Execution id, e.g. exe-0001.", min_length=1, max_length=40)]


def register_action_tools(mcp: MCPServer, state: SimState) -> None:
    world, desk = state.world, state.desk

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def preflight(target: Slug, action: Action) -> CallToolResult:
        """Dry run of request_execution: the risk class (reversible_low / config_mutation / destructive),
        the approval mode (auto-act / operator-approval), the procedure that would run, and warnings.
        Changes nothing."""
        classification = classify(world, target, action)
        entity = world.entity_get(classification.target)
        radius = blast_radius(world, entity.slug, 3)
        warnings = []
        if entity.health != "healthy":
            warnings.append(f"{entity.slug} is {entity.health}: {entity.health_reason}")
        guest = world.guest_of(entity)
        if classification.action in ("deploy", "config") and guest and (guest.disk_pct or 0) >= DISK_FULL_PCT:
            warnings.append(f"{guest.slug} disk is {guest.disk_pct}% full: this will likely fail with ENOSPC")
        if classification.action in ("restart", "rollback", "destroy", "wipe") and radius:
            warnings.append(f"{len(radius)} entities depend on {entity.slug} and will be interrupted")
        return json_result(
            {
                "target": classification.target,
                "action": classification.action,
                "risk_class": classification.risk_class,
                "approval_mode": classification.approval_mode,
                "needs_approval": classification.needs_approval,
                "reason": classification.reason,
                "skill": classification.skill,
                "blast_radius_size": len(radius),
                "warnings": warnings,
            }
        )

    @mcp.tool(annotations=MUTATING)
    @guarded
    async def request_execution(
        target: Slug, action: Action, ctx: Context, reason: Reason = None, params: Params = None
    ) -> CallToolResult:
        """Ask Oikos to carry out an action on an entity: the only way to change anything. restart,
        reload and ping are reversible_low: they run at once and this call returns the outcome
        (status completed or failed). deploy and config (config_mutation) and rollback, destroy and
        wipe (destructive) are parked: this returns status proposed, needs_approval true and an
        approval_id, and an operator decides in the control room. Never retry a parked request."""
        execution = desk.request(target=target, action=action, requested_by=actor_of(ctx), reason=reason, params=params)
        if not execution.needs_approval:
            execution = await desk.finished(execution.id, within=AUTO_ACT_WAIT_SECONDS)
        return json_result(execution_summary(execution))

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def get_execution(execution_id: ExecutionId) -> CallToolResult:
        """One execution's current status (proposed, approved, running, completed, failed, denied) with
        who requested and decided it, timestamps and the actuator's output or error."""
        return json_result(execution_detail(desk.execution_get(execution_id)))

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def list_approvals(status: ApprovalState = "pending") -> CallToolResult:
        """Approval requests, pending by default: id, execution, target, action, risk class, who asked and
        why, and who decided. Only operators decide, in the control room."""
        approvals: list[dict[str, Any]] = [a.as_dict() for a in desk.approvals_list(status)]
        return json_result({"status": status, "count": len(approvals), "approvals": approvals})
