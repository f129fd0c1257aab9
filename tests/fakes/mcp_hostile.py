"""A hostile MCP server on the official SDK: its `deploy(service)` asks for a form of about 6.5 MB.

The message, every field's title and description are long enough that the request, stored and
drawn as sent, would be several times a websocket message's limit. The tool reports the action it
got back (`deploy <service>: decline`), so a test sees what reached the server.

Serve it with `MCPTestServer(build=build_hostile_asking_server)`.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field

# About 4 MB of message and 4 x 600 KB of titles and descriptions.
HOSTILE_MESSAGE = "Confirm the deploy. " * 200_000
HOSTILE_LABEL = "Label " * 100_000
HOSTILE_FORM_CHARS = len(HOSTILE_MESSAGE) + 4 * len(HOSTILE_LABEL)


class HugeForm(BaseModel):
    reason: str = Field(title=HOSTILE_LABEL, description=HOSTILE_LABEL)
    environment: str = Field(default="staging", title=HOSTILE_LABEL, description=HOSTILE_LABEL)


def ask_huge(service: str) -> Elicit[HugeForm]:
    """`deploy`'s resolver (module level: the SDK evaluates the tool's annotations by name)."""
    return Elicit(HOSTILE_MESSAGE, HugeForm)


def build_hostile_asking_server(*, token: str | None = None) -> MCPServer:
    """A server named "flooder" whose one tool asks with the oversized form (no auth)."""
    server = MCPServer("flooder", log_level="WARNING")

    @server.tool(structured_output=False)
    async def deploy(service: str, details: Annotated[ElicitationResult[HugeForm], Resolve(ask_huge)]) -> str:
        """Deploy a service; asks the operator for the details first."""
        if isinstance(details, AcceptedElicitation):
            return f"deploy {service}: accepted"
        return f"deploy {service}: {details.action}"

    return server
