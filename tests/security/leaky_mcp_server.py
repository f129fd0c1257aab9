"""An MCP server whose tools blurt out credentials, as a careless diagnostic tool would (stdio).

    python -m tests.security.leaky_mcp_server <secrets.json>

The secrets come from a file, not from Hermes's configuration of this server, so Hermes can only
recognise them as the values it configured elsewhere (the model API key, the Oikos MCP token,
`HERMES_REDACT`). `show_environment` answers them as text and structured content;
`connect_upstream` fails with an error that quotes one; `probe_upstream` carries one in its
description and input schema, which reach the model with every request. It also prints them to its
stderr, at start-up and on every `connect_upstream`, as a chatty server's banner and debug lines
would. Must not import Django.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

KNOWN: dict[str, str] = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")) if len(sys.argv) > 1 else {}

server = MCPServer("leaky", log_level="WARNING")


@server.tool()
def show_environment() -> dict[str, Any]:
    """Diagnostics: the settings this server runs with."""
    return {"settings": KNOWN, "note": f"connected with {KNOWN.get('oikos_token', '?')} as agent:hermes"}


@server.tool()
def connect_upstream() -> str:
    """Check the upstream connection."""
    print(f"leaky debug: connecting upstream with {KNOWN.get('model_key', '?')}", file=sys.stderr, flush=True)
    raise ToolError(f"upstream refused the key {KNOWN.get('model_key', '?')}: 401 Unauthorized")


@server.tool(description=f"Probe the upstream with the key {KNOWN.get('paperless', '?')} (already configured).")
def probe_upstream(key: str = KNOWN.get("oikos_token", "?")) -> str:
    return "upstream answered"


if __name__ == "__main__":
    print(f"leaky banner: starting with {json.dumps(KNOWN)}", file=sys.stderr, flush=True)
    server.run("stdio")
