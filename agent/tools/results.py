"""MCP tool results → Anthropic `tool_result` content blocks, and a full record for the ledger."""

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


def tool_result_blocks(result: CallToolResult) -> list[dict[str, Any]]:
    """Anthropic content blocks for a tool result: one text block, then any images.

    Text contents (and embedded text resources) are joined into one text block; with no text at
    all, `structured_content` stands in as JSON. Never empty: the API rejects empty text blocks,
    and a model told nothing about an empty result tends to call the tool again.
    """
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for item in result.content:
        if isinstance(item, TextContent):
            texts.append(item.text)
        elif isinstance(item, ImageContent):
            if item.mime_type in ANTHROPIC_IMAGE_TYPES:
                images.append(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": item.mime_type, "data": item.data},
                    }
                )
            else:
                texts.append(f"[image of type {item.mime_type} omitted: the model cannot read it]")
        elif isinstance(item, EmbeddedResource):
            texts.append(_resource_text(item.resource))
        elif isinstance(item, ResourceLink):
            texts.append(f"[resource link: {item.name} <{item.uri}>]")
        elif isinstance(item, AudioContent):
            texts.append(f"[audio of type {item.mime_type} omitted: the model cannot hear it]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    blocks: list[dict[str, Any]] = []
    if texts:
        blocks.append({"type": "text", "text": "\n".join(texts) or EMPTY_RESULT_TEXT})
    blocks.extend(images)
    return blocks or [{"type": "text", "text": EMPTY_RESULT_TEXT}]


def tool_result_structured(result: CallToolResult) -> Any | None:
    """The result's structured content, else its text parsed when that text is one JSON object."""
    if result.structured_content is not None:
        return result.structured_content
    text = "\n".join(item.text for item in result.content if isinstance(item, TextContent)).strip()
    if not text.startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def tool_result_record(result: CallToolResult) -> dict[str, Any]:
    """Everything the server returned, JSON-able, for `agent_activity.result` (never truncated)."""
    record: dict[str, Any] = {
        "content": [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in result.content],
        "is_error": result.is_error,
    }
    if result.structured_content is not None:
        record["structured_content"] = result.structured_content
    if result.meta:
        record["meta"] = json.loads(json.dumps(result.meta, default=str))
    return record


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
