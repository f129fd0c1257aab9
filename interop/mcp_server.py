"""Hermes as an MCP server (stdio), for GarraIA, Claude Code or any MCP host: `hermes_ask`.

`hermes_ask {message, session_id?, timeout_secs?}` runs a real Hermes turn — persisted as a session
whose actor is `peer:<name>` — and answers one text block holding a `hermes.ask.v1` envelope:
`{"schema":"hermes.ask.v1","ok":true,"answer","session_id","turn_id","usage","latency_ms"}`, or
`{"schema":"hermes.ask.v1","ok":false,"error":{"kind","message"}}` with `isError` — with
`"retry_after"` (seconds) beside `error` when the caller is over its rate (`rate_limited`) or its
share of the budget (`budget_exhausted`, interop/peers.py). Arguments that
break the schema are such an error too (kind `invalid_arguments`, the message saying what is wrong):
the MCP revision Hermes negotiates makes input validation errors tool results, so the calling model
can read and fix them, rather than protocol errors it never sees. An unknown tool name stays a
protocol error (`invalid_params`).

The peer's name is `--peer`, else the name the client gives in `initialize`. A turn started here can
never call that peer back (the depth guard), and `session_id` continues only sessions of that peer.

A caller that sends a `progressToken` is told the turn's steps as they happen (`interop.mcp_progress`).

A client that cancels the call (MCP `notifications/cancelled`, which the SDK's client sends when the
caller's cancel scope ends the request) cancels the turn: the SDK's server cancels the handler's
scope, and `hermes_ask` passes that on to the turn (which runs in a task of its own) and waits for
it to stop, so the turn ends `cancelled` with its partial answer kept.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import uuid
from typing import Any

import anyio
from channels.db import database_sync_to_async
from django.conf import settings
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from agent.engine.budgets import Budgets
from agent.engine.runner import TurnRejected
from agent.live import turn_start_unfollowed
from agent.version import NAME, hermes_version
from interop.mcp_progress import ProgressReport, TurnProgress
from interop.peers import peer_allowance, peer_may_propose
from interop.selectors import session_belongs_to
from interop.server.conversation import PEER_CANCEL_REASON
from interop.turns import turn_answer

SCHEMA = "hermes.ask.v1"
TOOL = "hermes_ask"
MAX_TIMEOUT_SECS = 600
FALLBACK_PEER = "mcp-client"


def input_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": settings.HERMES_MAX_MESSAGE_CHARS,
                "description": "the question or request, in plain language",
            },
            "session_id": {"type": "string", "description": "continue this session (from a previous answer)"},
            "timeout_secs": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_SECS,
                "description": "wall-clock limit of the turn; at the limit Hermes answers with what it has",
            },
        },
        "required": ["message"],
        "additionalProperties": False,
    }


def peer_name_from(client_name: str | None) -> str:
    """A peer name (as in `peer:<name>`) from whatever the client called itself."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", (client_name or "").strip()).strip("-.")[:64]
    return name or FALLBACK_PEER


class ArgumentsInvalid(Exception):
    """The arguments break `hermes_ask`'s schema; the message says how, for the calling model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _invalid(message: str) -> ArgumentsInvalid:
    return ArgumentsInvalid(f"{TOOL}: {message}")


def arguments_parse(arguments: dict[str, Any]) -> tuple[str, uuid.UUID | None, int | None]:
    """(message, session id, timeout) or `ArgumentsInvalid`."""
    unknown = sorted(set(arguments) - {"message", "session_id", "timeout_secs"})
    if unknown:
        raise _invalid(f"unknown argument {unknown[0]!r}")
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        raise _invalid("message must be a non-empty string")
    session = arguments.get("session_id")
    session_id = None
    if session is not None:
        try:
            session_id = uuid.UUID(str(session))
        except ValueError:
            raise _invalid("session_id must be a session id (a UUID) from a previous answer") from None
    timeout = arguments.get("timeout_secs")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int)):
        raise _invalid("timeout_secs must be an integer")
    if timeout is not None and not 1 <= timeout <= MAX_TIMEOUT_SECS:
        raise _invalid(f"timeout_secs must be between 1 and {MAX_TIMEOUT_SECS}")
    return message, session_id, timeout


def _envelope(payload: dict[str, Any], *, is_error: bool) -> CallToolResult:
    text = json.dumps({"schema": SCHEMA, **payload}, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def _failure(kind: str, message: str, **extra: Any) -> CallToolResult:
    return _envelope({"ok": False, "error": {"kind": kind, "message": message}, **extra}, is_error=True)


async def hermes_ask(arguments: dict[str, Any], *, peer: str, progress: ProgressReport | None = None) -> CallToolResult:
    """Run one turn for `peer` and answer its envelope; `progress` reports its steps as they happen."""
    try:
        message, session_id, timeout = arguments_parse(arguments)
    except ArgumentsInvalid as invalid:
        return _failure("invalid_arguments", invalid.message)
    started = time.monotonic()
    actor = f"peer:{peer}"
    if session_id is not None and not await database_sync_to_async(session_belongs_to)(
        session_id=session_id, actor=actor
    ):
        return _failure("session_not_found", f"There is no session with id {session_id} for {actor}.")
    budgets = Budgets.from_settings()
    if timeout is not None:
        budgets = dataclasses.replace(budgets, timeout=min(budgets.timeout, float(timeout)))
    try:
        handle = await turn_start_unfollowed(
            text=message,
            actor=actor,
            origin="mcp",
            session_id=session_id,
            budgets=budgets,
            origin_peer=peer,
            # Each `mcp_serve` is a process of its own: only the database counts a peer's questions.
            peer=peer_allowance(peer, rate_counted_here=True),
            may_propose=peer_may_propose(peer),
        )
    except TurnRejected as rejected:
        if rejected.retry_after:
            return _failure(rejected.code, rejected.message, retry_after=rejected.retry_after)
        return _failure(rejected.code, rejected.message)
    try:
        answer = await turn_answer(handle, observe=TurnProgress(progress) if progress is not None else None)
    except anyio.get_cancelled_exc_class():
        handle.cancel(PEER_CANCEL_REASON)
        # The handler's scope stays cancelled: only a shielded scope can wait for the turn to end.
        with anyio.CancelScope(shield=True):
            await handle.wait()
        raise
    ids = {"session_id": str(handle.session_id), "turn_id": str(handle.turn_id)}
    if answer.status != "done":
        return _failure(answer.error_code or answer.status, answer.error or f"the turn ended {answer.status}", **ids)
    latency_ms = round((time.monotonic() - started) * 1000)
    return _envelope(
        {"ok": True, "answer": answer.text, **ids, "usage": answer.usage, "latency_ms": latency_ms}, is_error=False
    )


def build_mcp_server(*, peer: str | None = None) -> Server[Any]:
    """The MCP server `manage.py mcp_serve` runs; `peer` overrides the client's own name."""

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        tool = Tool(
            name=TOOL,
            description=(
                "Ask Hermes, the operator agent of the Oikos homelab, a question. It investigates with Oikos's "
                "tools and answers with a hermes.ask.v1 envelope; pass its session_id to continue the conversation."
            ),
            input_schema=input_schema(),
            annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True),
        )
        return ListToolsResult(tools=[tool])

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name != TOOL:
            raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {params.name!r}; this server has {TOOL}")
        client = ctx.session.client_params
        caller = peer or peer_name_from(client.client_info.name if client else None)
        return await hermes_ask(dict(params.arguments or {}), peer=caller, progress=ctx.session.report_progress)

    return Server(NAME, version=hermes_version(), on_list_tools=list_tools, on_call_tool=call_tool)
