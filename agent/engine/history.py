"""Turning stored messages into a history the Messages API accepts, whatever happened before.

A crash or a cancel can leave an assistant `tool_use` without its `tool_result`; the API rejects
such a history outright. `tool_uses_unanswered` finds them so the session can be repaired with
synthetic error results, and `messages_for_api` defends the request itself: it merges consecutive
same-role messages (compatible servers reject them), answers any gap in memory and drops results
that answer nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

Block = dict[str, Any]
ApiMessage = dict[str, Any]

INTERRUPTED_RESULT = "Not run: the turn was interrupted before this tool call finished."


def synthetic_tool_results(tool_use_ids: Iterable[str], text: str = INTERRUPTED_RESULT) -> list[Block]:
    return [
        {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True, "content": text}
        for tool_use_id in tool_use_ids
    ]


def _tool_use_ids(content: Sequence[Block]) -> list[str]:
    return [block["id"] for block in content if block.get("type") == "tool_use"]


def _tool_result_ids(content: Sequence[Block]) -> set[str]:
    return {block["tool_use_id"] for block in content if block.get("type") == "tool_result"}


def tool_uses_unanswered(messages: Sequence[tuple[str, list[Block]]]) -> list[str]:
    """Ids of the last assistant message's tool_use blocks that no later message answers."""
    for index in range(len(messages) - 1, -1, -1):
        role, content = messages[index]
        if role != "assistant":
            continue
        answered: set[str] = set()
        for _role, later in messages[index + 1 :]:
            answered |= _tool_result_ids(later)
        return [tool_use_id for tool_use_id in _tool_use_ids(content) if tool_use_id not in answered]
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
            expected = _tool_use_ids(previous["content"]) if previous else []
            # Results first (the API requires them to lead the message), only those that answer
            # the previous assistant message, and a synthetic error for any it left unanswered.
            results = [b for b in message["content"] if b.get("type") == "tool_result" and b["tool_use_id"] in expected]
            missing = [i for i in expected if i not in {b["tool_use_id"] for b in results}]
            others = [b for b in message["content"] if b.get("type") != "tool_result"]
            message["content"] = results + synthetic_tool_results(missing) + others
            if not message["content"]:
                continue
        elif message["role"] == "assistant" and repaired and repaired[-1]["role"] == "assistant":
            repaired[-1]["content"].extend(message["content"])
            continue
        repaired.append(message)

    if repaired and repaired[-1]["role"] == "assistant":
        unanswered = _tool_use_ids(repaired[-1]["content"])
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
