"""Prompt-caching breakpoints for one request.

The API caches the prefix (tools → system → messages) up to each block marked `cache_control` and
allows at most 4 marks. We spend them as:
1. the last tool definition (the tool list rarely changes);
2. the system prompt (a `system_note` — what changes between turns, e.g. an unreachable server —
   goes after it in a block of its own, unmarked, so it never invalidates the tools' and the
   prompt's cache; the conversation's marks after it cache it along with the conversation);
3. the last block of the newest message, writing the whole conversation so far;
4. the last block of the user message before the latest assistant reply — the breakpoint the
   previous request wrote — so each request reads the prefix its predecessor cached.
Marks go on copies; stored history never carries them.
"""

from __future__ import annotations

from typing import Any

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4


def cache_breakpoints_apply(
    *, tools: list[dict[str, Any]], system: str, messages: list[dict[str, Any]], system_note: str = ""
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Return marked copies of (tools, system blocks, messages).

    Only what carries a mark is copied (the list, the marked message, its block list and the marked
    block): the rest is shared with the arguments, which are never changed. Deep copies of every
    tool schema and message, for each model call, were a measurable part of a turn (docs/performance.md).
    """
    marked_tools = list(tools)
    if marked_tools:
        marked_tools[-1] = {**marked_tools[-1], "cache_control": EPHEMERAL}
    system_blocks: list[dict[str, Any]] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    if system_note:
        system_blocks.append({"type": "text", "text": system_note})
    marked_messages = list(messages)

    targets: list[int] = []
    if marked_messages:
        targets.append(len(marked_messages) - 1)
        for index in range(len(marked_messages) - 2, -1, -1):
            if marked_messages[index]["role"] == "assistant":
                if index > 0 and marked_messages[index - 1]["role"] == "user":
                    targets.append(index - 1)
                break
    budget = MAX_BREAKPOINTS - (1 if marked_tools else 0) - 1
    for index in targets[:budget]:
        message = marked_messages[index]
        content = list(message["content"])
        if content:
            content[-1] = {**content[-1], "cache_control": EPHEMERAL}
            marked_messages[index] = {**message, "content": content}
    return marked_tools, system_blocks, marked_messages
