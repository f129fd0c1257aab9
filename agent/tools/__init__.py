"""The MCP tool hub: configured servers, model-facing tool names, calls and results.

The turn engine needs only `tool_hub()` (or a `ToolHub` it was given), `ToolSpec` and `ToolOutcome`.
"""

from __future__ import annotations

from agent.conversation.outcomes import ToolOutcome
from agent.tools.config import MCPConfigError, ServerConfig
from agent.tools.hub import ServerStatus, ToolHub, ToolSpec, tool_hub, tool_hub_close

__all__ = [
    "MCPConfigError",
    "ServerConfig",
    "ServerStatus",
    "ToolHub",
    "ToolOutcome",
    "ToolSpec",
    "tool_hub",
    "tool_hub_close",
]
