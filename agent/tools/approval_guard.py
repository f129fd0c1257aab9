"""No tool that decides approvals is ever offered: the model can ask for executions, never approve them.

Oikos refuses decisions made with the agent's own token, and that is the real guarantee. This is the
second lock, on Hermes's side: whatever a connected MCP server offers, a tool whose name says it
approves, denies or decides is left out of every listing — so neither the model, nor `/query`, nor a
peer talking to Hermes can reach it through the tool hub.
"""

from __future__ import annotations

import logging
import re

logger = logging.getLogger(__name__)

DECIDING_WORDS = frozenset({"approve", "deny", "reject", "decide", "authorize", "authorise", "override"})

# Words of a tool name, whether written snake_case, kebab-case, dotted or camelCase.
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_reported: set[tuple[str, str]] = set()


def tool_decides_approvals(name: str) -> bool:
    """Whether the tool name says it decides an approval (`approve_execution`, `denyApproval`, `decide`)."""
    return any(word.lower() in DECIDING_WORDS for word in _WORD.findall(name))


def tool_withheld_report(server: str, tool: str) -> None:
    """Say once per process why a server's tool is missing from Hermes's list."""
    if (server, tool) not in _reported:
        _reported.add((server, tool))
        logger.warning("MCP server %s offers %s, which decides approvals: Hermes never offers it", server, tool)
