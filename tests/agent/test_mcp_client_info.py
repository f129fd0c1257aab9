"""Hermes as an MCP client says who it is: `clientInfo` is `hermes` and Hermes's own version (not the
MCP SDK's), as a server that reads it sees."""

from __future__ import annotations

import sys
import textwrap
import tomllib
from pathlib import Path

from agent.tools import ToolHub
from agent.tools.config import ServerConfig
from tests.fakes.subprocesses import REPO_ROOT

# A stdio MCP server on the official SDK with one tool: the caller's `clientInfo`.
SERVER = textwrap.dedent(
    """
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("introductions")

    @server.tool(structured_output=False)
    def who_calls(ctx: Context) -> str:
        info = ctx.session.client_params.client_info
        return f"{info.name} {info.version}"

    server.run("stdio")
    """
)


async def test_hermes_introduces_itself_to_mcp_servers(tmp_path: Path) -> None:
    script = tmp_path / "introductions.py"
    script.write_text(SERVER)
    config = ServerConfig(name="intro", transport="stdio", timeout=20.0, command=sys.executable, args=(str(script),))
    hub = ToolHub([config])
    try:
        outcome = await hub.call("mcp__intro__who_calls", {})
    finally:
        await hub.aclose()

    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert not outcome.is_error, outcome.content
    assert outcome.content[0]["text"] == f"hermes {version}"
