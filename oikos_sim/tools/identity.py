"""Tools about the caller: who Oikos thinks it is and which secrets it may use (names only)."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult

from oikos_sim.records import jsonable
from oikos_sim.state import SimState
from oikos_sim.tools.base import READ_ONLY, actor_of, guarded, json_result

_ROLES = {
    "agent": (
        "An agent: reads everything and may request executions; reversible_low actions run at once, "
        "config_mutation and destructive ones wait for an operator. Agents can never approve."
    ),
    "service": "A trusted service: may record approvals on behalf of a named operator.",
    "operator": "A human operator: may request executions and approve or deny them.",
}


def register_identity_tools(mcp: MCPServer, state: SimState) -> None:
    world = state.world

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def whoami(ctx: Context) -> CallToolResult:
        """The actor your bearer token identifies (e.g. agent:hermes) and what that actor may do."""
        actor = actor_of(ctx)
        kind, _, name = actor.partition(":")
        return json_result(
            {
                "actor": actor,
                "kind": kind,
                "name": name,
                "can_request_executions": True,
                "can_approve": kind != "agent",
                "role": _ROLES.get(kind, "Unknown kind of actor."),
            }
        )

    @mcp.tool(annotations=READ_ONLY)
    @guarded
    async def list_my_secrets(ctx: Context) -> CallToolResult:
        """Names and locations of the secrets provisioned for your actor. Values are never returned."""
        actor = actor_of(ctx)
        secrets = world.secrets.get(actor, [])
        return json_result(
            {
                "actor": actor,
                "count": len(secrets),
                "secrets": jsonable(secrets),
                "note": "Oikos never returns secret values; they live in Infisical under the paths shown.",
            }
        )
