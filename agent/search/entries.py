"""The search index's writes: what text of a message or a tool call is searchable, and its entry.

Each entry's text goes through `common.redaction.redact` here (and again on the way to the column,
`RedactedTextField`), so the index holds only what the redacted tables hold. The highlight markers
the query asks the database for (`HIGHLIGHT_START`, `HIGHLIGHT_STOP`) are stripped from the text,
so content can never pose as a highlight.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Iterator
from typing import Any

from agent.models import Activity, AgentSession, Message, SearchEntry
from common.redaction import redact

# Control characters no text of ours contains: the database wraps matches in them, and the snippet
# renderer turns them into <mark> after escaping everything else.
HIGHLIGHT_START = "\x02"
HIGHLIGHT_STOP = "\x03"

# The part of a very long text (a tool result may hold megabytes) that is searchable: PostgreSQL's
# tsvector stops at 1 MB, and words past the first hundred thousand characters are rarely the ones
# looked for.
TEXT_MAX_CHARS = 100_000

_MARKERS = str.maketrans({HIGHLIGHT_START: " ", HIGHLIGHT_STOP: " ", "\x00": " "})


def searchable(text: str) -> str:
    """`text` as it is indexed: redacted, without highlight markers or NULs, bounded."""
    return redact(text[:TEXT_MAX_CHARS].translate(_MARKERS))


def message_text(content: Any) -> str:
    """The words of a message people read: a question's text, an answer's text blocks.

    Tool calls and results are left out (the ledger row is indexed instead, with the full result),
    and so is thinking: it is the model's scratchpad, not what it told the operator.
    """
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and block.get("text")
    )


def tool_call_text(*, tool: str, arguments: Any) -> str:
    return f"{tool}\n{_json_text(arguments)}" if arguments else tool


def tool_result_text(result: Any) -> str:
    """The readable part of a ledger result record (`agent.conversation.results`): its text content, its
    structured content, or the error that stood for it."""
    if not isinstance(result, dict):
        return ""
    parts: list[str] = []
    for item in result.get("content") or []:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif isinstance(item, dict) and isinstance(item.get("resource"), dict):
            parts.append(str(item["resource"].get("text", "")))
    if "structured_content" in result and not parts:
        parts.append(_json_text(result["structured_content"]))
    error = result.get("error")
    if isinstance(error, dict) and error.get("message"):
        parts.append(str(error["message"]))
    return "\n".join(part for part in parts if part)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def message_entry(
    *,
    session_id: Any,
    turn_id: Any,
    message_id: int,
    role: str,
    kind: str,
    content: Any,
    created_at: datetime.datetime,
) -> dict[str, Any] | None:
    """The search entry of a question or an answer, as `SearchEntry` fields; None when it holds
    nothing people search for (tool results only, or a summary for the model)."""
    if kind == Message.Kind.SUMMARY:
        return None
    text = message_text(content)
    if not text.strip():
        return None
    return {
        "session_id": session_id,
        "turn_id": turn_id,
        "message_id": message_id,
        "activity_id": None,
        "kind": SearchEntry.Kind.QUESTION if role == Message.Role.USER else SearchEntry.Kind.ANSWER,
        "server": "",
        "tool": "",
        "tool_use_id": "",
        "text": searchable(text),
        "created_at": created_at,
    }


def activity_entry(
    *,
    activity_id: int,
    session_id: Any,
    correlation_id: Any,
    server: str,
    tool: str,
    tool_use_id: str,
    arguments: Any,
    result: Any,
    started_at: datetime.datetime,
) -> dict[str, Any] | None:
    """The search entry of a ledger row (its tool, arguments and any result), as `SearchEntry`
    fields; None for a call outside any session."""
    if session_id is None:
        return None
    text = tool_call_text(tool=tool, arguments=arguments)
    result_text = tool_result_text(result)
    return {
        "session_id": session_id,
        "turn_id": correlation_id,
        "message_id": None,
        "activity_id": activity_id,
        "kind": SearchEntry.Kind.TOOL,
        "server": server,
        "tool": tool,
        "tool_use_id": tool_use_id,
        "text": searchable(f"{text}\n{result_text}" if result_text else text),
        "created_at": started_at,
    }


def search_result_addition(result: Any) -> str:
    """What a finished call's result adds at the end of its entry's text ("" when nothing)."""
    text = tool_result_text(result)
    return "\n" + searchable(text) if text.strip() else ""


# --- rebuilding --------------------------------------------------------------------------------------


def search_entries_of_messages(rows: Iterable[Message]) -> Iterator[SearchEntry]:
    for message in rows:
        entry = message_entry(
            session_id=message.session_id,
            turn_id=message.turn_id,
            message_id=message.pk,
            role=message.role,
            kind=message.kind,
            content=message.content,
            created_at=message.created_at,
        )
        if entry is not None:
            yield SearchEntry(**entry)


def search_entries_of_activity(rows: Iterable[Activity]) -> Iterator[SearchEntry]:
    for call in rows:
        entry = activity_entry(
            activity_id=call.pk,
            session_id=call.session_id,
            correlation_id=call.correlation_id,
            server=call.server,
            tool=call.tool,
            tool_use_id=call.tool_use_id,
            arguments=call.arguments,
            result=call.result,
            started_at=call.started_at,
        )
        if entry is not None:
            yield SearchEntry(**entry)


def search_reindex(*, batch: int = 2000) -> int:
    """Rebuild the whole index from the stored messages and ledger; returns the entries written.

    For data written before the index existed (or after its rules change). Runs in batches, so it
    holds no more than `batch` rows in memory.
    """
    SearchEntry.objects.all().delete()
    written = 0
    sessions = AgentSession.objects.values("pk")
    messages = Message.objects.filter(session__in=sessions).order_by("id")
    for chunk in _chunks(search_entries_of_messages(messages.iterator(chunk_size=batch)), batch):
        written += len(SearchEntry.objects.bulk_create(chunk))
    calls = Activity.objects.filter(session__isnull=False).order_by("id")
    for chunk in _chunks(search_entries_of_activity(calls.iterator(chunk_size=batch)), batch):
        written += len(SearchEntry.objects.bulk_create(chunk))
    return written


def _chunks(items: Iterable[SearchEntry], size: int) -> Iterator[list[SearchEntry]]:
    chunk: list[SearchEntry] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
