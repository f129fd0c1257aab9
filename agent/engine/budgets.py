"""Budgets that bound one turn, so a pathological loop cannot burn the API bill or hang forever."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

# The share of a turn's time kept back for the forced final answer, and its most in seconds: work
# (model calls that may ask for tools, tool calls) stops that much before the limit, so the
# answer fits inside it. A peer that allows 5 s gets its answer (or a failure) by 5 s, not 65 s.
FINAL_ANSWER_SHARE = 0.2
FINAL_ANSWER_RESERVE_MAX = 60.0


@dataclass(frozen=True)
class Budgets:
    max_iterations: int = 15
    max_tokens: int = 16_000
    # Tokens processed across all model calls of the turn (input, cache and output).
    turn_tokens: int = 400_000
    # Wall-clock seconds for the whole turn, the forced final answer included.
    timeout: float = 600.0
    # Characters of one tool result that reach the model; the ledger keeps everything.
    tool_result_chars: int = 20_000
    # Seconds one model call may go without a stream event before it counts as failed.
    llm_timeout: float = 120.0
    # Further attempts at a model call that failed before it streamed anything.
    llm_retries: int = 2

    @property
    def final_answer_reserve(self) -> float:
        """Seconds at the end of the turn kept for the forced final answer."""
        return min(self.timeout * FINAL_ANSWER_SHARE, FINAL_ANSWER_RESERVE_MAX)

    @classmethod
    def from_settings(cls) -> Budgets:
        return cls(
            max_iterations=settings.HERMES_MAX_ITERATIONS,
            max_tokens=settings.HERMES_MAX_TOKENS,
            turn_tokens=settings.HERMES_TURN_TOKEN_BUDGET,
            timeout=settings.HERMES_TURN_TIMEOUT,
            tool_result_chars=settings.HERMES_TOOL_RESULT_MAX_CHARS,
            llm_timeout=settings.HERMES_LLM_TIMEOUT,
            llm_retries=settings.HERMES_LLM_RETRIES,
        )
