"""What one turn knows while it runs, shared by the loop and its parts (`agent.engine.loop`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from agent.elicitation.types import Answerer
from agent.tools.context import ToolCallContext
from agent.tools.provenance import Capability

Block = dict[str, Any]

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass
class TurnState:
    session_id: uuid.UUID
    turn_id: uuid.UUID
    actor: str
    messages: list[tuple[str, list[Block]]]
    # The peer agent whose message started the turn; its tools are out of reach (the depth guard).
    origin_peer: str | None = None
    # Who answers an MCP server's questions (elicitation) in this turn; None: Hermes declines them.
    answerer: Answerer | None = None
    # Where the turn was started and what that lets it do (`agent.tools.provenance`).
    origin: str = ""
    capability: Capability = "write"
    # The question that started the turn, as stored: an operator's own words, when they are.
    question: str = ""
    # Whether the turn is given the operators' notes matching its question (agent/memory/recall.py).
    recall: bool = True
    iterations: int = 0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    text_blocks: int = 0
    thinking_blocks: int = 0

    def tokens_used(self) -> int:
        # Only tokens: usage also counts compaction calls and requests refused as too long.
        return sum(self.usage.get(key, 0) for key in USAGE_KEYS)

    def tool_context(self) -> ToolCallContext:
        return ToolCallContext(
            actor=self.actor,
            session_id=self.session_id,
            turn_id=self.turn_id,
            origin_peer=self.origin_peer,
            origin=self.origin,
            capability=self.capability,
        )
