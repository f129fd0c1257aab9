"""A stdio MCP server whose `request_execution` answers like Oikos does for a change that needs an
operator: parked, with an approval id. Run as `python -m tests.observability.approval_mcp_server`.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("parked-executions", log_level="WARNING")


@server.tool()
def request_execution(target: str, action: str) -> dict[str, Any]:
    """Ask Oikos to run `action` on `target`; risky actions wait for an operator."""
    return {
        "status": "proposed",
        "needs_approval": True,
        "approval_id": "apr_0001",
        "execution_id": "exe_0001",
        "target": target,
        "action": action,
        "risk_class": "config_mutation",
        "message": f"{action} {target} waits for an operator's approval.",
    }


if __name__ == "__main__":
    server.run("stdio")
