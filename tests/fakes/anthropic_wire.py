"""How a `Reply` looks on the wire: the SSE event sequence and the non-streaming Message JSON.

The event sequence is the one the real Messages API sends, and the one
`anthropic/lib/streaming/_messages.py` accumulates:

    message_start        message with empty content, stop_reason null, usage (input side + output 1)
    content_block_start  per block: {"type": "text", "text": ""}, a tool_use with input {},
                         {"type": "thinking", "thinking": "", "signature": ""}, or a
                         redacted_thinking block whole (its opaque `data`; no deltas follow)
    ping                 once, after the first content_block_start
    content_block_delta  text_delta fragments / input_json_delta fragments (the first one "") /
                         thinking_delta fragments then one signature_delta
    content_block_stop
    message_delta        stop_reason and the cumulative usage, output_tokens included
    message_stop
"""

from __future__ import annotations

import json
import math
import secrets
import string
from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic_script import Block, RedactedThinkingBlock, Reply, TextBlock, ThinkingBlock

SseEvent = tuple[str, dict[str, Any]]
"""An event name and its JSON payload."""

_ID_ALPHABET = string.ascii_letters + string.digits
CHARS_PER_TOKEN = 4


def new_id(prefix: str) -> str:
    """An id shaped like the API's (`msg_01…`, `toolu_01…`, `req_01…`)."""
    return prefix + "01" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(22))


def estimate_tokens(text: str) -> int:
    """The fake's tokenizer: about four characters a token, never less than one."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


@dataclass(frozen=True)
class Usage:
    """Input-side token counts of one request, as the prompt cache accounted them."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int


def output_tokens(reply: Reply) -> int:
    """Output tokens of a reply: its text and thinking plus each tool call's name and JSON input
    (thinking is billed as output, as the API bills it)."""
    total = 0
    for block in reply.content:
        if isinstance(block, TextBlock):
            total += estimate_tokens(block.text)
        elif isinstance(block, ThinkingBlock):
            total += estimate_tokens(block.thinking)
        elif isinstance(block, RedactedThinkingBlock):
            total += estimate_tokens(block.data or "")
        else:
            total += estimate_tokens(block.name + json.dumps(dict(block.input)))
    return max(1, total)


def usage_json(reply: Reply, usage: Usage) -> dict[str, Any]:
    """The final `usage` object of a reply, with the reply's overrides applied last."""
    body: dict[str, Any] = {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_creation_input_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": output_tokens(reply),
        "service_tier": "standard",
    }
    body.update(reply.usage)
    return body


def message_json(reply: Reply, *, message_id: str, model: str, usage: Usage) -> dict[str, Any]:
    """The complete Message a non-streaming request receives."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block.to_json() for block in reply.content],
        "stop_reason": reply.effective_stop_reason,
        "stop_sequence": None,
        "usage": usage_json(reply, usage),
    }


def message_events(reply: Reply, *, message_id: str, model: str, usage: Usage) -> list[SseEvent]:
    """Every event of a complete streamed answer, in order (faults are applied by the server)."""
    final_usage = usage_json(reply, usage)
    start_usage = {**final_usage, "output_tokens": min(1, final_usage["output_tokens"])}
    events: list[SseEvent] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage,
                },
            },
        )
    ]
    for index, block in enumerate(reply.content):
        events.append(_block_start(index, block))
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events.extend(_block_deltas(index, block, reply.chunk))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    if not reply.content:
        events.append(("ping", {"type": "ping"}))
    delta_usage = {
        key: final_usage[key]
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    }
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.effective_stop_reason, "stop_sequence": None},
                "usage": delta_usage,
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def error_event(error_type: str, message: str) -> SseEvent:
    """The `event: error` the API sends when it fails after the stream has begun."""
    return ("error", {"type": "error", "error": {"type": error_type, "message": message}})


def sse_frame(event: SseEvent) -> bytes:
    name, data = event
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _block_start(index: int, block: Block) -> SseEvent:
    if isinstance(block, TextBlock):
        content_block: dict[str, Any] = {"type": "text", "text": ""}
    elif isinstance(block, ThinkingBlock):
        content_block = {"type": "thinking", "thinking": "", "signature": ""}
    elif isinstance(block, RedactedThinkingBlock):
        content_block = {"type": "redacted_thinking", "data": block.data}
    else:
        content_block = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": content_block},
    )


def _block_deltas(index: int, block: Block, chunk: int) -> list[SseEvent]:
    deltas: list[dict[str, Any]]
    if isinstance(block, TextBlock):
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block.text, chunk)]
    elif isinstance(block, ThinkingBlock):
        # Like the API: the signature arrives whole, last, just before content_block_stop.
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(block.thinking, chunk)]
        deltas.append({"type": "signature_delta", "signature": block.signature})
    elif isinstance(block, RedactedThinkingBlock):
        deltas = []
    else:
        # Like the API: an empty first fragment, then the JSON in pieces that are not valid JSON
        # on their own, so only a client that concatenates them gets the input back.
        arguments = json.dumps(dict(block.input), ensure_ascii=False)
        pieces = [""] + (_pieces(arguments, chunk) if block.input else [])
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
    return [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]


def _pieces(value: str, chunk: int) -> list[str]:
    """`value` cut into fragments of `chunk` characters; two at least when it has two characters."""
    size = min(chunk, max(1, len(value) // 2)) if len(value) > 1 else max(1, len(value))
    return [value[start : start + size] for start in range(0, len(value), size)] or [""]
