"""Who a tool call is made for, so the hub can apply rules that depend on the turn.

It also carries who answers an MCP server's questions during the call (elicitation).

Two rules need it: which tools the turn's provenance allows (`agent.tools.provenance`), and the
depth guard: a turn started by a peer agent (over A2A or MCP)
must never call that peer back — not through its MCP server, not through `a2a_send` — or two
agents could drive each other in a loop nobody started.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agent.elicitation.types import Elicitor
from agent.tools.provenance import Capability


@dataclass(frozen=True)
class ToolCallContext:
    actor: str = ""
    session_id: uuid.UUID | None = None
    turn_id: uuid.UUID | None = None
    # The peer agent whose message started this turn (`None` for operators and scripts).
    origin_peer: str | None = None
    # The tool_use block this call answers (one context per call; "" outside a turn).
    tool_use_id: str = ""
    # Who answers the elicitations of this call's server: the turn's frontend, through the engine.
    # None: nobody can be asked (a peer's or an investigation's turn, a script), so Hermes declines.
    elicitor: Elicitor | None = None
    # Where the turn was started (`agent.tools.provenance`): "" outside a turn (scripts, `/query`).
    origin: str = ""
    # What the turn may do: an operator's turn writes; a peer's or Hermes's own only reads, or proposes.
    capability: Capability = "write"

    def forbids_peer(self, peer: str) -> bool:
        """Whether calling `peer` from this turn would call the turn's own origin back."""
        return self.origin_peer is not None and self.origin_peer == peer
