"""MCP tool results → Anthropic `tool_result` content blocks, and one bounded record for the ledger.

Size is the subtle part. A tool with structured output answers twice (MCP asks servers to send the
serialized JSON as text next to `structured_content`), so a 10 MB answer arrives as 20 MB. What
Hermes keeps of it is bounded:

- the ledger record stores the result once: the text content, capped at
  `HERMES_LEDGER_RESULT_MAX_CHARS` (head and tail, with a marker saying how much was cut);
  `structured_content` is stored too only when the result has no text, or when it is small
  (`STRUCTURED_SMALL_CHARS`) — otherwise the record says it was left out and why;
- `tool_result_structured` (what approvals, envelopes and `/query` read) is kept for small results
  only: parsing or copying a 10 MB structure to find an approval in it costs more memory than
  the whole turn;
- the text blocks for the model share the result's strings (no copy); the engine bounds them.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

# The image types the Messages API accepts in a tool_result.
ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

EMPTY_RESULT_TEXT = "(the tool returned no content)"

# Structured content up to this size (as JSON) is kept alongside the text: it costs nothing, and
# it is what approvals and envelopes read. Larger, the text carries the same JSON.
STRUCTURED_SMALL_CHARS = 64 * 1024

# Logs and listings carry their news at both ends (as `agent.engine.truncation` does for the model).
_HEAD_SHARE = 0.8


def tool_result_blocks(result: CallToolResult) -> list[dict[str, Any]]:
    """Anthropic content blocks for a tool result, in the order the server sent its content.

    Consecutive text contents (and embedded text resources, and the notes standing in for what the
    model cannot read) are joined into one text block; images keep their place between them, so a
    caption stays next to its picture. With no text at all, `structured_content` stands in as JSON,
    first. Never empty: the API rejects empty text blocks, and a model told nothing about an empty
    result tends to call the tool again.
    """
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    seen_text = False

    def texts_flush() -> None:
        if texts:
            blocks.append({"type": "text", "text": "\n".join(texts) or EMPTY_RESULT_TEXT})
            texts.clear()

    for item in result.content:
        text = _content_text(item)
        if text is not None:
            texts.append(text)
            seen_text = True
        elif isinstance(item, ImageContent):
            texts_flush()
            blocks.append(
                {"type": "image", "source": {"type": "base64", "media_type": item.mime_type, "data": item.data}}
            )
    texts_flush()
    if not seen_text and result.structured_content is not None:
        blocks.insert(0, {"type": "text", "text": json.dumps(result.structured_content, ensure_ascii=False)})
    return blocks or [{"type": "text", "text": EMPTY_RESULT_TEXT}]


def _content_text(item: object) -> str | None:
    """What a content item says as text; None for an image the model can see."""
    if isinstance(item, TextContent):
        return item.text
    if isinstance(item, ImageContent):
        if item.mime_type in ANTHROPIC_IMAGE_TYPES:
            return None
        return f"[image of type {item.mime_type} omitted: the model cannot read it]"
    if isinstance(item, EmbeddedResource):
        return _resource_text(item.resource)
    if isinstance(item, ResourceLink):
        return f"[resource link: {item.name} <{item.uri}>]"
    if isinstance(item, AudioContent):
        return f"[audio of type {item.mime_type} omitted: the model cannot hear it]"
    return None


def tool_result_structured(result: CallToolResult) -> Any | None:
    """The result's structured content, else its text parsed when that text is one JSON object.

    None for a result larger than `STRUCTURED_SMALL_CHARS` that has text (the text carries it).
    """
    texts = [item.text for item in result.content if isinstance(item, TextContent)]
    if result.structured_content is not None:
        if texts and json_size(result.structured_content, limit=STRUCTURED_SMALL_CHARS) is None:
            return None
        return result.structured_content
    if sum(len(text) for text in texts) > STRUCTURED_SMALL_CHARS:
        return None
    text = "\n".join(texts).strip()
    if not text.startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def tool_result_record(result: CallToolResult, *, max_chars: int) -> dict[str, Any]:
    """What the server returned, JSON-able and stored once, for `agent_activity.result`.

    Text (and images, and embedded resources) up to `max_chars` characters in all; beyond that,
    text keeps its head and tail around a marker and other items are replaced by a note. `cut`
    says how much was left out. Structured content: see the module docstring.
    """
    budget = _Budget(max_chars)
    content = [_content_item_record(item, budget) for item in result.content]
    has_text = any(isinstance(item, TextContent) for item in result.content)
    record: dict[str, Any] = {"content": content, "is_error": result.is_error}
    structured = result.structured_content
    if structured is not None:
        size = json_size(structured, limit=min(STRUCTURED_SMALL_CHARS, budget.left) if has_text else budget.left)
        if size is not None:
            record["structured_content"] = structured
            budget.spend(size)
        elif has_text:
            record["structured_content_omitted"] = (
                "larger than the text content's copy of it: MCP servers send structured output twice, "
                "as structured_content and as its JSON in the text content, and the ledger keeps one"
            )
        else:
            # The only copy: stored as (capped) JSON text, as the model was shown it.
            record["content"].append({"type": "text", "text": budget.text(json.dumps(structured, ensure_ascii=False))})
            record["structured_content_omitted"] = "stored as JSON text in content, capped like any text"
    if result.meta:
        record["meta"] = json.loads(json.dumps(result.meta, default=str))
    if budget.cut:
        record["cut"] = {"total_chars": budget.total, "cut_chars": budget.cut, "limit_chars": max_chars}
    return record


def json_size(value: Any, *, limit: int) -> int | None:
    """How many characters `value` serializes to, or None when more than `limit`.

    The encoder's incremental form yields small chunks, so a 10 MB structure is abandoned after
    `limit` characters instead of being written out whole.
    """
    size = 0
    for chunk in json.JSONEncoder(ensure_ascii=False, default=str).iterencode(value):
        size += len(chunk)
        if size > limit:
            return None
    return size


class _Budget:
    """Characters the ledger may still store of one result, and what was cut."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.total = 0
        self.cut = 0

    @property
    def left(self) -> int:
        return max(self.limit - self.used, 0)

    def spend(self, chars: int) -> None:
        self.used += chars

    def text(self, text: str) -> str:
        """`text`, or its head and tail around a marker when it does not fit what is left."""
        self.total += len(text)
        left = self.left
        if len(text) <= left:
            self.used += len(text)
            return text
        head = int(left * _HEAD_SHARE)
        tail = left - head
        self.used += left
        self.cut += len(text) - left
        marker = (
            f"\n\n[Hermes: the ledger keeps {left:,} of {len(text):,} characters of this result "
            f"(HERMES_LEDGER_RESULT_MAX_CHARS={self.limit:,}); {len(text) - left:,} were cut here.]\n\n"
        )
        return text[:head] + marker + (text[-tail:] if tail else "")

    def item(self, size: int) -> bool:
        """Whether an item of `size` characters (an image, a blob) still fits; counts it either way."""
        self.total += size
        if size <= self.left:
            self.used += size
            return True
        self.cut += size
        return False


def _content_item_record(item: Any, budget: _Budget) -> dict[str, Any]:
    if isinstance(item, TextContent):
        # Dumped without the text, which is added capped: the full text is never copied.
        record: dict[str, Any] = item.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"text"})
        record["text"] = budget.text(item.text)
        return record
    if isinstance(item, EmbeddedResource) and isinstance(item.resource, TextResourceContents):
        record = item.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"resource": {"text"}})
        record["resource"]["text"] = budget.text(item.resource.text)
        return record
    payload = _payload_size(item)
    if budget.item(payload):
        return item.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        "type": getattr(item, "type", "unknown"),
        "omitted": f"{payload:,} characters over the ledger's cap (HERMES_LEDGER_RESULT_MAX_CHARS={budget.limit:,})",
    }


def _payload_size(item: Any) -> int:
    """The bulk of a non-text item: base64 data of an image or audio clip, an embedded blob."""
    if isinstance(item, ImageContent | AudioContent):
        return len(item.data)
    if isinstance(item, EmbeddedResource) and isinstance(item.resource, BlobResourceContents):
        return len(item.resource.blob)
    return 0


def tool_error_blocks(message: str) -> list[dict[str, Any]]:
    """Content blocks for a failure on our side of the call (timeout, server down, unknown tool)."""
    return [{"type": "text", "text": message}]


def tool_error_record(kind: str, message: str, *, code: int | None = None) -> dict[str, Any]:
    """The ledger record of a call that produced no MCP result; `kind` says which failure it was,
    `code` the server's JSON-RPC error code when it refused the request."""
    error: dict[str, Any] = {"kind": kind, "message": message}
    if code is not None:
        error["code"] = code
    return {"content": [], "is_error": True, "error": error}


def _resource_text(resource: TextResourceContents | BlobResourceContents) -> str:
    if isinstance(resource, TextResourceContents):
        return resource.text
    mime = resource.mime_type or "unknown type"
    return f"[binary resource {resource.uri} ({mime}, {len(resource.blob) * 3 // 4} bytes) omitted]"
