"""The mini Oikos MCP server over stdio: `python -m tests.fakes.mcp_stdio_server` (from the repo root)."""

from __future__ import annotations

from tests.fakes.mcp_servers import build_mini_oikos

if __name__ == "__main__":
    build_mini_oikos(stdio=True).run("stdio")
