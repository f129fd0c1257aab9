"""Thinking as the Messages API treats it: which models take which settings, and signed blocks.

The fake signs every `thinking` block it serves (an HMAC of its text under a secret of its own)
and gives every `redacted_thinking` block opaque signed `data`, so it can check what the real API
checks when a client sends them back:

- a block's signature (or data) must verify: a block edited, truncated or made up is refused
  (400 "Invalid `signature` in `thinking` block");
- with thinking enabled, the last assistant message of a tool-use cycle (the request ends with
  its tool results) must carry the thinking blocks that came with its tool calls, unchanged and
  first — "When `thinking` is enabled, a final `assistant` message must start with a thinking
  block". The fake remembers which thinking it served with which tool_use ids.

The request settings are checked per model family as the API documents them: the current models
(`claude-sonnet-5`, `claude-opus-5`) take `{"type": "adaptive"}` with `output_config.effort` and
refuse a manual `budget_tokens`; older ones (`claude-haiku-4-5`) take only
`{"type": "enabled", "budget_tokens": N}` (at least 1,024 and below `max_tokens`) and no effort.
Forcing a tool (`tool_choice` any/tool) is refused with thinking on, like the API does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic_script import ApiError, RedactedThinkingBlock, Reply, ThinkingBlock, ToolUseBlock

THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
MIN_BUDGET_TOKENS = 1024

FINAL_MESSAGE_NEEDS_THINKING = (
    "Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final "
    "`assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and "
    "`tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this "
    "requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


@dataclass(frozen=True)
class ThinkingSupport:
    """What a model accepts: `adaptive` thinking (with effort) or only a manual budget."""

    adaptive: bool
    budget: bool
    effort: bool


# The families of the fake's default models; a model not listed accepts neither setting.
MODEL_SUPPORT: dict[str, ThinkingSupport] = {
    "claude-sonnet-5": ThinkingSupport(adaptive=True, budget=False, effort=True),
    "claude-opus-5": ThinkingSupport(adaptive=True, budget=False, effort=True),
    "claude-haiku-4-5": ThinkingSupport(adaptive=False, budget=True, effort=False),
}


def _invalid(message: str) -> ApiError:
    return ApiError(status=400, type="invalid_request_error", message=message)


def thinking_enabled(body: Mapping[str, Any]) -> bool:
    """Whether the request lets the model think (adaptive, or enabled with a budget)."""
    config = body.get("thinking")
    return isinstance(config, dict) and config.get("type") in ("adaptive", "enabled")


def settings_problem(body: Mapping[str, Any]) -> ApiError | None:
    """The API's answer to the request's `thinking` and `output_config`, or None when accepted."""
    config = body.get("thinking")
    model = str(body.get("model"))
    support = MODEL_SUPPORT.get(model, ThinkingSupport(adaptive=False, budget=False, effort=False))
    if config is not None:
        if not isinstance(config, dict) or config.get("type") not in THINKING_TYPES:
            return _invalid(f"thinking.type: Input should be {', '.join(repr(t) for t in THINKING_TYPES)}")
        kind = config["type"]
        if kind == "adaptive" and not support.adaptive:
            return _invalid(f"thinking.type.adaptive: adaptive thinking is not supported on {model}.")
        if kind == "enabled":
            if not support.budget:
                return _invalid(
                    f"thinking.type.enabled is not supported on {model}. Use thinking.type.adaptive and "
                    "output_config.effort to control thinking."
                )
            budget = config.get("budget_tokens")
            if not isinstance(budget, int) or isinstance(budget, bool):
                return _invalid("thinking.enabled.budget_tokens: Field required")
            if budget < MIN_BUDGET_TOKENS:
                return _invalid(
                    f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET_TOKENS}"
                )
            if budget >= body["max_tokens"]:
                return _invalid("`max_tokens` must be greater than `thinking.budget_tokens`.")
        if thinking_enabled(body):
            choice = body.get("tool_choice")
            if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
                return _invalid("Thinking may not be enabled when tool_choice forces tool use.")
    output_config = body.get("output_config")
    if output_config is not None:
        if not isinstance(output_config, dict):
            return _invalid("output_config: Input should be a valid dictionary")
        effort = output_config.get("effort")
        if effort is not None:
            if effort not in EFFORTS:
                return _invalid(f"output_config.effort: Input should be {', '.join(repr(e) for e in EFFORTS)}")
            if not support.effort:
                return _invalid(f"output_config.effort: effort is not supported on {model}.")
    return None


class ThinkingLedger:
    """Signs the thinking the fake serves and checks what clients send back (module docstring)."""

    def __init__(self) -> None:
        self._secret = secrets.token_bytes(32)
        # tool_use id -> the thinking blocks served in the same response, as JSON.
        self._with_calls: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    # -- serving ------------------------------------------------------------------------------

    def sign(self, thinking: str) -> str:
        return base64.b64encode(b"\x12" + self._mac(b"thinking", thinking.encode())).decode()

    def opaque(self) -> str:
        nonce = secrets.token_bytes(24)
        return base64.b64encode(nonce + self._mac(b"redacted", nonce)).decode()

    def served(self, reply: Reply) -> None:
        """Remember the (signed) thinking that comes with each tool call of `reply`."""
        thinking = [
            block.to_json() for block in reply.content if isinstance(block, ThinkingBlock | RedactedThinkingBlock)
        ]
        if not thinking:
            return
        with self._lock:
            for block in reply.content:
                if isinstance(block, ToolUseBlock) and block.id is not None:
                    self._with_calls[block.id] = thinking

    # -- checking -----------------------------------------------------------------------------

    def history_problem(self, body: Mapping[str, Any]) -> ApiError | None:
        """The API's answer to the thinking blocks in `messages`, or None when accepted."""
        messages = body["messages"]
        for index, message in enumerate(messages):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for position, block in enumerate(content):
                kind = block.get("type")
                if kind not in ("thinking", "redacted_thinking"):
                    continue
                where = f"messages.{index}.content.{position}"
                if message["role"] != "assistant":
                    return _invalid(f"{where}: `{kind}` blocks can only be in `assistant` messages")
                if kind == "thinking" and not self._thinking_valid(block):
                    return _invalid(f"{where}: Invalid `signature` in `thinking` block")
                if kind == "redacted_thinking" and not self._redacted_valid(block):
                    return _invalid(f"{where}: Invalid `data` in `redacted_thinking` block")
        if thinking_enabled(body):
            return self._final_message_problem(messages)
        return None

    def _final_message_problem(self, messages: list[dict[str, Any]]) -> ApiError | None:
        """The last assistant message of a tool-use cycle must open with the thinking it came with."""
        if len(messages) < 2 or messages[-1]["role"] != "user" or messages[-2]["role"] != "assistant":
            return None
        last = messages[-1]["content"]
        if not (isinstance(last, list) and last and last[0].get("type") == "tool_result"):
            return None
        index = len(messages) - 2
        content = messages[index]["content"] if isinstance(messages[index]["content"], list) else []
        calls = [block["id"] for block in content if block.get("type") == "tool_use"]
        with self._lock:
            expected = next((self._with_calls[call] for call in calls if call in self._with_calls), None)
        if not expected:
            return None
        leading = content[: len(expected)]
        if [_thinking_form(block) for block in leading] != expected:
            found = next((b.get("type") for b in content if b.get("type") not in ("thinking", "redacted_thinking")), "")
            first = content[0].get("type") if content else "nothing"
            shown = first if first not in ("thinking", "redacted_thinking") else found or first
            return _invalid(f"messages.{index}.content.0.type: " + FINAL_MESSAGE_NEEDS_THINKING.format(found=shown))
        return None

    def _thinking_valid(self, block: dict[str, Any]) -> bool:
        signature, thinking = block.get("signature"), block.get("thinking")
        if not isinstance(signature, str) or not isinstance(thinking, str):
            return False
        try:
            raw = base64.b64decode(signature, validate=True)
        except ValueError:
            return False
        return hmac.compare_digest(raw, b"\x12" + self._mac(b"thinking", thinking.encode()))

    def _redacted_valid(self, block: dict[str, Any]) -> bool:
        data = block.get("data")
        if not isinstance(data, str):
            return False
        try:
            raw = base64.b64decode(data, validate=True)
        except ValueError:
            return False
        nonce, mac = raw[:24], raw[24:]
        return hmac.compare_digest(mac, self._mac(b"redacted", nonce))

    def _mac(self, kind: bytes, value: bytes) -> bytes:
        return hmac.new(self._secret, kind + b"\0" + value, hashlib.sha256).digest()


def _thinking_form(block: dict[str, Any]) -> dict[str, Any]:
    """A sent block in the form it was served (request-time `cache_control` is not part of it)."""
    return {key: value for key, value in block.items() if key != "cache_control"}


def impossible_thinking(reply: Reply, body: Mapping[str, Any]) -> str | None:
    """Why a model could not think in `reply` for `body` (thinking not enabled), or None."""
    if reply.thinks and not thinking_enabled(body):
        return (
            "the scripted reply thinks, but the request does not enable thinking "
            f"(thinking={body.get('thinking')!r}); script a reply without thinking blocks for it"
        )
    return None
