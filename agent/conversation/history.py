"""Turning stored messages into a history the Messages API accepts, whatever happened before.

A crash or a cancel can leave an assistant `tool_use` without its `tool_result`; the API rejects
such a history outright. `tool_uses_unanswered` finds them so the session can be repaired with
synthetic error results, and `messages_for_api` defends the request itself: it merges consecutive
same-role messages (compatible servers reject them), answers any gap in memory and drops results
that answer nothing.

A synthetic result never says "not run": a call left unanswered was cut off while in flight, and
Oikos may well have carried it out. It says the outcome is unknown and how to check
(`agent.conversation.outcomes`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from agent.conversation.outcomes import CUTOFF_INTERRUPTED, Cutoff, outcome_unknown_text

Block = dict[str, Any]
ApiMessage = dict[str, Any]


def synthetic_tool_results(tool_uses: Iterable[Block], cause: Cutoff = CUTOFF_INTERRUPTED) -> list[Block]:
    """Error results for `tool_use` blocks cut off by `cause`: outcome unknown, check before retrying."""
    return [
        {
            "type": "tool_result",
            "tool_use_id": block["id"],
            "is_error": True,
            "content": outcome_unknown_text(tool=str(block.get("name", "")), cause=cause),
        }
        for block in tool_uses
    ]


def _tool_uses(content: Sequence[Block]) -> list[Block]:
    return [block for block in content if block.get("type") == "tool_use"]


def _tool_result_ids(content: Sequence[Block]) -> set[str]:
    return {block["tool_use_id"] for block in content if block.get("type") == "tool_result"}


def tool_uses_unanswered(messages: Sequence[tuple[str, list[Block]]]) -> list[Block]:
    """The last assistant message's tool_use blocks that no later message answers."""
    for index in range(len(messages) - 1, -1, -1):
        role, content = messages[index]
        if role != "assistant":
            continue
        answered: set[str] = set()
        for _role, later in messages[index + 1 :]:
            answered |= _tool_result_ids(later)
        return [block for block in _tool_uses(content) if block["id"] not in answered]
    return []


def messages_for_api(messages: Sequence[tuple[str, list[Block]]]) -> list[ApiMessage]:
    """The stored (role, blocks) list as a valid `messages` parameter (deep copies)."""
    merged: list[ApiMessage] = []
    for role, content in messages:
        if not content:
            continue
        blocks = copy.deepcopy(list(content))
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})

    repaired: list[ApiMessage] = []
    for index, message in enumerate(merged):
        if message["role"] == "user":
            previous = merged[index - 1] if index > 0 else None
            expected = _tool_uses(previous["content"]) if previous else []
            expected_ids = {block["id"] for block in expected}
            # Results first (the API requires them to lead the message), only those that answer
            # the previous assistant message, and a synthetic error for any it left unanswered.
            results = [
                b for b in message["content"] if b.get("type") == "tool_result" and b["tool_use_id"] in expected_ids
            ]
            missing = [block for block in expected if block["id"] not in {b["tool_use_id"] for b in results}]
            others = [b for b in message["content"] if b.get("type") != "tool_result"]
            message["content"] = results + synthetic_tool_results(missing) + others
            if not message["content"]:
                continue
        elif message["role"] == "assistant" and repaired and repaired[-1]["role"] == "assistant":
            repaired[-1]["content"].extend(message["content"])
            continue
        repaired.append(message)

    if repaired and repaired[-1]["role"] == "assistant":
        unanswered = _tool_uses(repaired[-1]["content"])
        if unanswered:
            repaired.append({"role": "user", "content": synthetic_tool_results(unanswered)})
    return repaired


def tool_blocks_held(messages: Sequence[tuple[str, list[Block]]]) -> bool:
    """Whether the conversation holds a tool call or result: then the API requires tools defined."""
    return any(block.get("type") in ("tool_use", "tool_result") for _role, content in messages for block in content)


def content_strip_cache_control(content: Sequence[Block]) -> list[Block]:
    """Blocks as they should be stored: no request-time cache markers."""
    stripped = []
    for block in content:
        block = dict(block)
        block.pop("cache_control", None)
        stripped.append(block)
    return stripped
