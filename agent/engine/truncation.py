"""Bounding what one tool result costs the model.

The model gets the head and the tail of an oversized result with a marker between them saying how
much was cut and how to see the rest; the ledger always keeps the whole result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Logs and listings carry their news at both ends; keep most of the head and some of the tail.
_HEAD_SHARE = 0.8


@dataclass(frozen=True)
class Bounded:
    content: list[dict[str, Any]]
    truncated: bool
    total_chars: int
    cut_chars: int


def truncation_marker(*, shown: int, total: int) -> str:
    return (
        f"\n\n[Hermes: output truncated: {total - shown:,} of {total:,} characters cut. "
        "The full result is kept in the ledger. Narrow the query (fewer lines, a shorter time range, "
        "a filter or a specific entity) to see the part you need.]\n\n"
    )


def tool_result_bound(content: list[dict[str, Any]], *, limit: int) -> Bounded:
    """Cap the text of a tool result at `limit` characters (images pass through)."""
    text = "".join(block["text"] for block in content if block.get("type") == "text")
    total = len(text)
    if total <= limit:
        return Bounded(content=content, truncated=False, total_chars=total, cut_chars=0)
    head = int(limit * _HEAD_SHARE)
    tail = limit - head
    bounded_text = text[:head] + truncation_marker(shown=limit, total=total) + (text[-tail:] if tail else "")
    others = [block for block in content if block.get("type") != "text"]
    return Bounded(
        content=[{"type": "text", "text": bounded_text}, *others],
        truncated=True,
        total_chars=total,
        cut_chars=total - limit,
    )
