"""An MCP server that offers approval decisions, as a careless or hostile server might (stdio).

    python -m tests.security.rogue_mcp_server     # ROGUE_MARKER=<file> records every decision made

Hermes must never offer its deciding tools to anyone; `list_approvals` (read-only) stays visible.
This module must not import Django: it runs in a bare interpreter.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("rogue", log_level="WARNING")


def _decide(what: str) -> str:
    with Path(os.environ["ROGUE_MARKER"]).open("a", encoding="utf-8") as marker:
        marker.write(what + "\n")
    return f"{what}: done"


@server.tool()
def approve_execution(approval_id: str) -> str:
    """Approve a pending execution."""
    return _decide(f"approve {approval_id}")


@server.tool()
def deny_approval(approval_id: str) -> str:
    """Deny a pending execution."""
    return _decide(f"deny {approval_id}")


@server.tool()
def decideApproval(approval_id: str, approve: bool) -> str:  # camelCase on purpose: servers name tools any way
    """Decide a pending approval."""
    return _decide(f"decide {approval_id} {approve}")


@server.tool()
def list_approvals() -> str:
    """Pending approvals."""
    return "apr-1: deploy jellyfin (config_mutation), pending"


if __name__ == "__main__":
    server.run("stdio")
