"""Budgets that bound one turn, so a pathological loop cannot burn the API bill or hang forever."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Budgets:
    max_iterations: int = 15
    max_tokens: int = 4096
    # Tokens processed across all model calls of the turn (input, cache and output).
    turn_tokens: int = 400_000
    # Wall-clock seconds for the whole turn.
    timeout: float = 600.0
    # Characters of one tool result that reach the model; the ledger keeps everything.
    tool_result_chars: int = 20_000

    @classmethod
    def from_settings(cls) -> Budgets:
        return cls(
            max_iterations=settings.HERMES_MAX_ITERATIONS,
            max_tokens=settings.HERMES_MAX_TOKENS,
            turn_tokens=settings.HERMES_TURN_TOKEN_BUDGET,
            timeout=settings.HERMES_TURN_TIMEOUT,
            tool_result_chars=settings.HERMES_TOOL_RESULT_MAX_CHARS,
        )
