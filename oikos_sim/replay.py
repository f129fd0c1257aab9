"""Recorded worlds (`--replay FILE.json`): tools that answer what a real Oikos answered once.

An eval case saved from a real session carries the tool results that session saw; oikos_sim
replays them so the case runs against the same world. Each tool named in the recording answers
from it: the recorded call whose arguments are exactly the ones given, else the first recorded
call of that tool. Every other tool answers as the seeded world does, and the tool list is the
real one, so the model sees the same surface either way. Replayed calls go through the
agent-activity ledger like any other (the middleware sits inside `ActivityLedger`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp_types import CallToolResult, TextContent


class ReplayInvalid(ValueError):
    """A recording that cannot be replayed; the message names the file and the entry."""


@dataclass(frozen=True)
class RecordedCall:
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    is_error: bool = False


def recording_parse(data: Any, *, origin: str = "the recording") -> list[RecordedCall]:
    """Recorded calls from a JSON value: a list of {tool, arguments?, result, is_error?}."""
    if not isinstance(data, list):
        raise ReplayInvalid(f"{origin}: a recording is a JSON list of {{tool, arguments, result}} objects")
    calls = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str) or not entry["tool"]:
            raise ReplayInvalid(f"{origin}: entry {index} needs a tool name")
        unknown = set(entry) - {"tool", "arguments", "result", "is_error"}
        if unknown:
            raise ReplayInvalid(f"{origin}: entry {index} has unknown fields {', '.join(sorted(unknown))}")
        arguments = entry.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ReplayInvalid(f"{origin}: entry {index}: arguments must be an object")
        calls.append(RecordedCall(entry["tool"], arguments, entry.get("result"), bool(entry.get("is_error", False))))
    return calls


def recording_load(path: Path) -> list[RecordedCall]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ReplayInvalid(f"{path}: cannot read: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ReplayInvalid(f"{path}: not JSON: {error}") from None
    return recording_parse(data, origin=str(path))


def recorded_answer(calls: list[RecordedCall], tool: str, arguments: dict[str, Any]) -> RecordedCall | None:
    """The recorded call that answers `tool(arguments)`: an exact match, else the tool's first, else None."""
    of_tool = [call for call in calls if call.tool == tool]
    exact = next((call for call in of_tool if call.arguments == arguments), None)
    return exact or (of_tool[0] if of_tool else None)


def recorded_result(call: RecordedCall) -> CallToolResult:
    """The answer as the tool would have sent it: an object as structured content and JSON text,
    anything else as text."""
    if isinstance(call.result, dict):
        text = json.dumps(call.result, ensure_ascii=False, separators=(",", ":"))
        structured: dict[str, Any] | None = None if call.is_error else call.result
    else:
        text = call.result if isinstance(call.result, str) else json.dumps(call.result, ensure_ascii=False)
        structured = None
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=call.is_error
    )


class Replay:
    """Server middleware: a tools/call of a recorded tool answers from the recording."""

    def __init__(self, calls: list[RecordedCall]) -> None:
        self.calls = calls

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        answer = recorded_answer(self.calls, str(params.get("name", "")), dict(params.get("arguments") or {}))
        if answer is None:
            return await call_next(ctx)
        return recorded_result(answer)
