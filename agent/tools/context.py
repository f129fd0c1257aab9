"""Who a tool call is made for, so the hub can apply rules that depend on the turn.

The rule that needs it today is the depth guard: a turn started by a peer agent (over A2A or MCP)
must never call that peer back — not through its MCP server, not through `a2a_send` — or two
agents could drive each other in a loop nobody started.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCallContext:
    actor: str = ""
    session_id: uuid.UUID | None = None
    turn_id: uuid.UUID | None = None
    # The peer agent whose message started this turn (`None` for operators and scripts).
    origin_peer: str | None = None

    def forbids_peer(self, peer: str) -> bool:
        """Whether calling `peer` from this turn would call the turn's own origin back."""
        return self.origin_peer is not None and self.origin_peer == peer
