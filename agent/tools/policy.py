"""Which MCP tools Hermes offers at all: decision tools are recognised by the server they come from.

Oikos refuses decisions made with the agent's own token, and that is the real guarantee: an approval
is decided only through Oikos's REST API, with a deciding operator named, from the control room.
This is the second lock, on Hermes's side, an explicit policy per server:

- **The Oikos server** (the one named by `HERMES_OIKOS_SERVER`) is held to an *allowlist*: the 28
  tools of the Oikos contract (`OIKOS_TOOLS` below, kept equal to `oikos_sim`'s), which we know to
  be reads plus `request_execution`. A tool outside that surface is offered only when Oikos
  annotates it `readOnlyHint` (a newer Oikos's new reads keep working) or the server's
  `tools.allow` names it. So an approval or decision tool Oikos might add is not offered, whatever
  it is called — no list of words to outguess.
- **Every other server's** tools are never taken for decision tools, whatever their names: no other
  server can decide an Oikos approval, and only Oikos's `request_execution` raises an approval card
  (`agent.engine.approvals`). What keeps another server's *writes* from turns nobody at Hermes
  started is the turn's provenance (`agent.tools.provenance`): those turns get only tools that read.
  An operator withholds a tool from everyone with the globs of its `tools.deny` and of
  `HERMES_MCP_TOOLS_DENY`, matched in any spelling (`grant_approval`, `grantApproval`, `Grant-Approval`).

A withheld tool is left out of every listing — so neither the model, nor `/query`, nor a peer talking
to Hermes can reach it through the tool hub — and the reason is logged once per process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from common.logs import log_event

logger = logging.getLogger(__name__)

# The Oikos contract's MCP surface (docs/architecture.md, "The Oikos contract");
# `tests/agent/test_tool_policy.py` keeps it equal to oikos_sim's. All are read-only but
# `request_execution`, which Oikos classifies and may park.
OIKOS_TOOLS = frozenset(
    {
        "get_entity",
        "list_entities",
        "get_relations",
        "get_blast_radius",
        "search_knowledge",
        "get_health_summary",
        "whoami",
        "explain",
        "preflight",
        "get_change_history",
        "get_state_snapshot",
        "list_my_secrets",
        "tail_log",
        "get_service_status",
        "list_lxcs",
        "get_lxc_state",
        "ping_service",
        "request_execution",
        "get_agent_activity",
        "get_signal_history",
        "get_patterns",
        "get_skills",
        "get_audit_trail",
        "get_trend",
        "get_event_timeline",
        "query_metrics",
        "get_execution",
        "list_approvals",
    }
)
# The reads among them: what Oikos documents as changing nothing, which a read-only turn may call
# whatever its annotations say (`agent.tools.provenance`).
OIKOS_READ_TOOLS = OIKOS_TOOLS - {"request_execution"}

# Words of a tool name, whether written snake_case, kebab-case, dotted or camelCase.
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def tool_name_words(name: str) -> list[str]:
    """`submitDecision` → ["submit", "decision"]; `approval.grant` → ["approval", "grant"]."""
    return [word.lower() for word in _WORD.findall(name)]


def tool_name_matches(name: str, patterns: Iterable[str]) -> str | None:
    """The first glob of `patterns` matching `name` in any spelling (case-insensitive; matched against
    the name and its words joined by `_`, so `*grant*approval*` also matches `grantApproval`)."""
    spellings = (name.lower(), "_".join(tool_name_words(name)))
    for pattern in patterns:
        lowered = pattern.lower()
        if any(fnmatchcase(spelling, lowered) for spelling in spellings):
            return pattern
    return None


@dataclass(frozen=True)
class ToolPolicy:
    """One server's policy (see the module docstring); `withheld()` says why a tool is not offered."""

    oikos: bool = False
    # Tools of the Oikos server outside its known surface that the operator vouches for.
    allow: tuple[str, ...] = ()
    # Globs of the server's `tools.deny` and of `HERMES_MCP_TOOLS_DENY`.
    deny: tuple[str, ...] = ()

    def withheld(self, tool: str, *, read_only: bool = False) -> str | None:
        """Why `tool` is never offered, or None when the policy lets it through. `read_only`: the
        server annotates it `readOnlyHint`."""
        pattern = tool_name_matches(tool, self.deny)
        if pattern is not None:
            return f"it matches the denied pattern {pattern!r}"
        if not self.oikos or tool in OIKOS_TOOLS or tool in self.allow or read_only:
            return None
        return "it is not in the known Oikos tool surface and Oikos does not annotate it read-only (tools.allow)"


_reported: set[tuple[str, str]] = set()


def tool_withheld_report(server: str, tool: str, reason: str) -> None:
    """Say once per process why a server's tool is missing from Hermes's list."""
    if (server, tool) not in _reported:
        _reported.add((server, tool))
        log_event(logger, "mcp.tool_withheld", level=logging.WARNING, server=server, tool=tool, reason=reason)
