"""Thinking: what each model is asked for, and which thinking blocks go back to it.

Settings (`HERMES_THINKING`, `HERMES_EFFORT`) become request parameters per model family, as the
Messages API accepts them:
- current models (Claude Opus/Sonnet 4.6 and later, every 5.x, Fable, Mythos) take adaptive
  thinking, `{"type": "adaptive"}`, with `output_config.effort`; some of them accept nothing else;
- older thinking models (Claude 3.7 Sonnet, the 4.x before 4.6, Haiku 4.5) need
  `{"type": "enabled", "budget_tokens": N}`: the budget is derived from the effort, and kept
  below `max_tokens` (which thinking counts toward);
- anything else (Claude 3.5 and before, a model of a compatible server such as Ollama) gets no
  thinking parameter, since such a server may refuse one.
`off` sends nothing, so each model's default applies: no thinking, except on the models that
always think. The family is read from the model id; an id the rule does not know is treated as
"no thinking", never guessed at.

History: a thinking block goes back to the API exactly as it came, signature included, while the
turn that produced it runs — the API requires the thinking of a tool-use cycle's last assistant
message, and the model reasons across its tool calls with it. Once a turn is settled (a newer
question follows it), its thinking is dropped from requests: older models ignore it anyway, newer
ones would bill it as input on every later call. The drop is always the same for a given history
(everything before the newest question), so a thinking block is only ever sent after the very
prefix it was produced with — what models that check a block's prefix require. The database keeps
every block: the transcript shows them, and nothing is lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings

ApiMessage = dict[str, Any]
Family = Literal["adaptive", "budget", "none"]

THINKING_BLOCK_TYPES = frozenset({"thinking", "redacted_thinking"})
# Thinking tokens an older model may spend per effort; kept under `max_tokens` (see `_budget`).
EFFORT_BUDGET = {"low": 2_048, "medium": 6_000, "high": 12_000}
MIN_BUDGET = 1_024

_CLAUDE = re.compile(r"(?:^|[.:/])claude-(?P<rest>[a-z0-9-]+)")
_ALWAYS_ADAPTIVE = frozenset({"fable", "mythos"})
_LINES = frozenset({"opus", "sonnet", "haiku", *_ALWAYS_ADAPTIVE})


@dataclass(frozen=True)
class ThinkingSettings:
    mode: str = "adaptive"  # adaptive | off
    effort: str = "high"  # low | medium | high

    @classmethod
    def from_settings(cls) -> ThinkingSettings:
        return cls(mode=settings.HERMES_THINKING, effort=settings.HERMES_EFFORT)


def model_family(model: str) -> Family:
    """How `model` takes thinking, read from its id (`claude-opus-4-6`, `claude-3-7-sonnet-2025…`,
    `anthropic.claude-sonnet-4-5-v1`, …)."""
    match = _CLAUDE.search(model.lower())
    if match is None:
        return "none"
    parts = match["rest"].split("-")
    line = next((part for part in parts if part in _LINES), "")
    # Version numbers are short; a release date (20250514) is not one.
    numbers = [int(part) for part in parts if part.isdigit() and len(part) <= 2]
    if not line:
        return "none"
    if line in _ALWAYS_ADAPTIVE:
        return "adaptive"
    if not numbers:
        return "none"
    version = (numbers[0], numbers[1] if len(numbers) > 1 else 0)
    if version >= (5, 0) or (line in ("opus", "sonnet") and version >= (4, 6)):
        return "adaptive"
    if version >= (4, 0) or (line == "sonnet" and version >= (3, 7)):
        return "budget"
    return "none"


def thinking_params(model: str, thinking: ThinkingSettings, *, max_tokens: int) -> dict[str, Any]:
    """The request parameters that ask `model` for thinking as configured (none when off)."""
    if thinking.mode != "adaptive":
        return {}
    family = model_family(model)
    if family == "adaptive":
        return {"thinking": {"type": "adaptive"}, "output_config": {"effort": thinking.effort}}
    if family == "budget":
        budget = _budget(thinking.effort, max_tokens=max_tokens)
        return {"thinking": {"type": "enabled", "budget_tokens": budget}} if budget else {}
    return {}


def _budget(effort: str, *, max_tokens: int) -> int:
    """The effort's budget, leaving at least a quarter of `max_tokens` for the answer; 0 when
    `max_tokens` is too small to think at all (the API's minimum budget is 1,024)."""
    budget = min(EFFORT_BUDGET.get(effort, EFFORT_BUDGET["high"]), max_tokens * 3 // 4)
    return budget if budget >= MIN_BUDGET else 0


def thinking_settled_strip(messages: list[ApiMessage]) -> list[ApiMessage]:
    """`messages` (API form) without the thinking of settled turns: those before the newest
    question, i.e. the last user message that answers no tool call. An assistant message left
    empty is dropped, and the user messages it separated are joined (the API wants alternation)."""
    newest_question = max(
        (index for index, message in enumerate(messages) if message["role"] == "user" and not _answers_tools(message)),
        default=0,
    )
    kept: list[ApiMessage] = []
    for index, message in enumerate(messages):
        if index < newest_question and message["role"] == "assistant":
            content = [block for block in message["content"] if block.get("type") not in THINKING_BLOCK_TYPES]
            if not content:
                continue
            message = {**message, "content": content}
        if kept and kept[-1]["role"] == message["role"]:
            kept[-1] = {**kept[-1], "content": [*kept[-1]["content"], *message["content"]]}
            continue
        kept.append(message)
    return kept


def _answers_tools(message: ApiMessage) -> bool:
    return any(block.get("type") == "tool_result" for block in message["content"])


def thinking_blocks(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The thinking and redacted_thinking blocks of one message's content."""
    return [block for block in content if block.get("type") in THINKING_BLOCK_TYPES]
