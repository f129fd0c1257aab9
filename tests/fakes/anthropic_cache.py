"""Input token accounting with an honest simulation of prompt caching.

The prompt is read as the API reads it: tool definitions, then system blocks, then each message's
content blocks, in that order. A `cache_control` marker on a block (or the request's top-level
`cache_control`, which marks the last block) is a breakpoint: the prefix up to and including that
block is written to the cache. A later request whose prompt begins with a prefix written earlier
reads it from the cache instead. Like the API, a hit is looked for at each breakpoint and up to
20 blocks before it, so a breakpoint that moves forward as a conversation grows still finds the
prefix the previous request wrote.

For one request:
    cache_read_input_tokens      the longest previously written prefix found,
    cache_creation_input_tokens  from there up to the last breakpoint (newly written),
    input_tokens                 everything after the last breakpoint.
The three add up to the whole prompt. Entries never expire while the fake runs; the cache is keyed
by model, as the API's is.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic_wire import Usage, estimate_tokens

LOOKBACK_BLOCKS = 20


@dataclass(frozen=True)
class _PromptBlock:
    tokens: int
    marked: bool
    prefix_hash: str


class PromptCache:
    """Prefixes written so far, and the accounting of each new request against them."""

    def __init__(self, *, min_cacheable_tokens: int = 0) -> None:
        # The API ignores breakpoints on prefixes shorter than a model minimum (1024+ tokens);
        # tests usually keep prompts small, so the default caches any prefix.
        self._min_cacheable_tokens = min_cacheable_tokens
        self._written: set[str] = set()
        self._lock = threading.Lock()

    def account(self, body: dict[str, Any]) -> Usage:
        """Count the request's input tokens and record the prefixes its breakpoints write."""
        blocks = _prompt_blocks(body)
        total = sum(block.tokens for block in blocks)
        cumulative: list[int] = []
        running = 0
        for block in blocks:
            running += block.tokens
            cumulative.append(running)
        breakpoints = [
            index
            for index, block in enumerate(blocks)
            if block.marked and cumulative[index] >= self._min_cacheable_tokens
        ]
        if not breakpoints:
            return Usage(input_tokens=total, cache_creation_input_tokens=0, cache_read_input_tokens=0)
        with self._lock:
            hit = self._longest_hit(blocks, breakpoints)
            for index in breakpoints:
                self._written.add(blocks[index].prefix_hash)
        read = cumulative[hit] if hit is not None else 0
        cached_through = cumulative[breakpoints[-1]]
        return Usage(
            input_tokens=total - cached_through,
            cache_creation_input_tokens=cached_through - read,
            cache_read_input_tokens=read,
        )

    def _longest_hit(self, blocks: list[_PromptBlock], breakpoints: list[int]) -> int | None:
        for breakpoint_index in reversed(breakpoints):
            for index in range(breakpoint_index, max(-1, breakpoint_index - LOOKBACK_BLOCKS - 1), -1):
                if blocks[index].prefix_hash in self._written:
                    return index
        return None


def prompt_tokens(body: dict[str, Any]) -> int:
    """The fake's count of a request's input tokens: what `/v1/messages/count_tokens` answers, what
    a context window is checked against, and what the usage of an answer adds up to."""
    return sum(block.tokens for block in _prompt_blocks(body))


def _prompt_blocks(body: dict[str, Any]) -> list[_PromptBlock]:
    """The prompt as an ordered list of blocks, each with the hash of the prefix it ends."""
    raw: list[tuple[str, dict[str, Any]]] = []
    for tool in body.get("tools") or []:
        raw.append(("tool", tool))
    system = body.get("system")
    if isinstance(system, str):
        raw.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        raw.extend(("system", block) for block in system)
    for message in body.get("messages") or []:
        content = message.get("content")
        role = str(message.get("role"))
        if isinstance(content, str):
            raw.append((role, {"type": "text", "text": content}))
        elif isinstance(content, list):
            raw.extend((role, block) for block in content)
    top_level_marker = body.get("cache_control") is not None
    digest = hashlib.sha256(str(body.get("model")).encode())
    blocks: list[_PromptBlock] = []
    for position, (place, block) in enumerate(raw):
        marked = isinstance(block, dict) and block.get("cache_control") is not None
        marked = marked or (top_level_marker and position == len(raw) - 1)
        # The marker itself is not part of the prompt: moving a breakpoint keeps the prefix.
        canonical = json.dumps([place, _without_cache_control(block)], sort_keys=True)
        digest.update(canonical.encode())
        blocks.append(
            _PromptBlock(tokens=estimate_tokens(canonical), marked=marked, prefix_hash=digest.copy().hexdigest())
        )
    return blocks


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, dict):
        return {key: _without_cache_control(value) for key, value in block.items() if key != "cache_control"}
    if isinstance(block, list):
        return [_without_cache_control(item) for item in block]
    return block
