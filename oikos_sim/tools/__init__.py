"""The Oikos MCP server: 28 tools over one simulated world, and the agent-activity ledger."""

from __future__ import annotations

import time
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer

from oikos_sim.auth import ACTOR_SCOPE_KEY
from oikos_sim.replay import Replay
from oikos_sim.state import SimState
from oikos_sim.tools.actions import register_action_tools
from oikos_sim.tools.history import register_history_tools
from oikos_sim.tools.identity import register_identity_tools
from oikos_sim.tools.inventory import register_inventory_tools
from oikos_sim.tools.knowledge import register_knowledge_tools
from oikos_sim.tools.metrics import register_metric_tools
from oikos_sim.tools.runtime import register_runtime_tools

INSTRUCTIONS = """\
Oikos is the control plane of the hubris homelab: three Proxmox VE nodes (host:pve1-3), their LXC
containers and VMs (lxc:*, vm:*) and the services on them (service:*). Everything here is read-only
except request_execution, which Oikos classifies by risk: reversible_low actions run at once,
config_mutation and destructive ones wait for an operator's approval. Start with get_health_summary,
then explain / get_blast_radius on what looks wrong."""


# Where a caller's correlation id travels in a tools/call request's `_meta` (Hermes sends its turn
# id there), so the operator can match a ledger row here to the caller's own ledger.
CORRELATION_META_KEY = "hermes/correlation_id"


class ActivityLedger:
    """Server middleware that writes every tools/call to the agent-activity ledger.

    The row is written when the call ends, whether or not the caller is still there to hear the
    answer: a call whose client vanished mid-flight is in the ledger like any other.
    """

    def __init__(self, state: SimState) -> None:
        self.state = state

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        started = time.perf_counter()
        is_error = True
        try:
            result = await call_next(ctx)
            is_error = bool(getattr(result, "is_error", False))
            return result
        finally:
            params = ctx.params or {}
            request = ctx.request
            actor = request.scope.get(ACTOR_SCOPE_KEY) if request is not None else None
            meta = params.get("_meta")
            correlation_id = meta.get(CORRELATION_META_KEY) if isinstance(meta, dict) else None
            self.state.world.activity_record(
                actor=str(actor or "unknown"),
                tool=str(params.get("name", "?")),
                arguments=dict(params.get("arguments") or {}),
                is_error=is_error,
                duration_ms=round((time.perf_counter() - started) * 1000),
                correlation_id=str(correlation_id) if correlation_id else None,
            )


def mcp_server_build(state: SimState) -> MCPServer:
    """An ``MCPServer`` with every Oikos tool registered against ``state``."""
    mcp: MCPServer = MCPServer(
        "oikos",
        title="Oikos (simulated)",
        version="0.14.2-sim",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        # A recorded world answers inside the ledger, so replayed calls are in it like any other.
        middleware=[ActivityLedger(state), *([Replay(state.replay)] if state.replay else [])],
    )
    register_inventory_tools(mcp, state)
    register_knowledge_tools(mcp, state)
    register_identity_tools(mcp, state)
    register_action_tools(mcp, state)
    register_history_tools(mcp, state)
    register_runtime_tools(mcp, state)
    register_metric_tools(mcp, state)
    return mcp
