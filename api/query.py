"""`POST /query` `{tool, args}`: run one MCP tool for a script, logged in the ledger like any call.

A tool is named the way the model sees it (`mcp__oikos__get_entity`), as `server/tool`
(`oikos/get_entity`), or by its plain name (`get_entity`) when only one server has it.

Status codes: 200 the tool answered; 422 the tool answered with an error (bad arguments, an
unknown entity…), its own message in `content`; 502/504 its server failed or did not answer in
time. Every call, failed ones included, is in the ledger under the returned `correlation_id`
(written `started` before the call is sent), and the MCP server receives that id in the request's
`_meta` (`hermes/correlation_id`). A 504 or a 502 for a lost connection means the call may have
run: its `state` is `unknown`. `structured` is null for results larger than 64 KiB: their text
`content` carries the same JSON.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse
from django.utils import timezone

from agent.conversation.outcomes import Cutoff, outcome_unknown_text
from agent.conversation.results import tool_error_record
from agent.store import ledger
from agent.tools import MCPConfigError, ToolHub, ToolOutcome, ToolSpec, tool_hub
from agent.tools.context import ToolCallContext
from api.bodies import fields_check, json_object_read
from api.errors import ApiError, api_view
from api.operator import request_actor

NATURAL_LANGUAGE_HINT = (
    "natural language belongs to /chat. /query runs one tool by name: "
    '{"tool": "<name>", "args": {...}}. The tools available now are listed in "tools".'
)

CUTOFF_CLIENT_GONE = Cutoff("client_gone", "the /query client disconnected while the call was in flight")

# Failures on Hermes's side of the call (the hub's `error.kind`) → status and error code.
HUB_FAILURES = {
    "timeout": (504, "tool_timeout"),
    "connect": (502, "tool_unavailable"),
    "connection_lost": (502, "tool_unavailable"),
    "protocol": (502, "tool_unavailable"),
    "internal": (502, "tool_unavailable"),
    "unknown_tool": (502, "tool_unavailable"),
}


@api_view("POST")
async def query(request: HttpRequest) -> JsonResponse:
    body = json_object_read(request)
    hub = _hub()
    name = body.get("tool")
    if name is None or name == "":
        specs = await hub.list_tools()
        raise ApiError(400, "tool_required", NATURAL_LANGUAGE_HINT, tools=tools_describe(specs))
    fields_check(body, allowed=("tool", "args"))
    if not isinstance(name, str):
        raise ApiError(400, "invalid_tool", '"tool" must be a tool name (a string).')
    args = {} if body.get("args") is None else body["args"]
    if not isinstance(args, dict):
        raise ApiError(400, "invalid_args", '"args" must be a JSON object of the tool\'s arguments.')
    spec = tool_resolve(await hub.list_tools(), name, servers=[server.name for server in hub.servers])

    correlation_id = uuid.uuid4()
    actor = request_actor(request)
    call = ledger.LedgerCall(
        correlation_id=correlation_id,
        session_id=None,
        actor=actor,
        tool_use_id="",
        server=spec.server,
        tool=spec.tool,
        arguments=args,
        started_at=timezone.now(),
    )
    activity_id = await database_sync_to_async(ledger.activity_start)(call=call)
    # The correlation id goes to the server too (MCP `_meta`), so both ledgers can be matched.
    context = ToolCallContext(actor=actor, turn_id=correlation_id)
    try:
        outcome = await hub.call(spec.name, args, context=context)
    except asyncio.CancelledError:
        # The client went away mid-call: the call may have run; the row must not stay `started`.
        text = outcome_unknown_text(tool=spec.tool, cause=CUTOFF_CLIENT_GONE)
        await asyncio.shield(
            database_sync_to_async(ledger.activity_finish)(
                activity_id=activity_id,
                state="unknown",
                result=tool_error_record(CUTOFF_CLIENT_GONE.kind, text),
                is_error=True,
                duration_ms=0,
            )
        )
        raise
    await database_sync_to_async(ledger.activity_finish)(
        activity_id=activity_id,
        state=outcome.state,
        result=outcome.record,
        is_error=outcome.is_error,
        duration_ms=outcome.duration_ms,
    )
    status, payload = _result(spec, outcome, correlation_id)
    response = JsonResponse(payload, status=status)
    response["X-Hermes-Correlation-Id"] = str(correlation_id)
    return response


def tool_resolve(specs: list[ToolSpec], name: str, *, servers: list[str]) -> ToolSpec:
    """The tool a script means by `name`, among the tools listed now.

    Raises `ApiError`: 400 when several servers have it, 502 when it names a configured server that
    lists no tools now (it is down), 404 when there is no such tool.
    """
    for spec in specs:
        if spec.name == name:
            return spec
    server, slash, tool = name.partition("/")
    if slash:
        matches = [spec for spec in specs if (spec.server, spec.tool) == (server, tool)]
    else:
        matches = [spec for spec in specs if spec.tool == name]
    if len(matches) == 1:
        return matches[0]
    if matches:
        choices = ", ".join(f"{spec.server}/{spec.tool}" for spec in matches)
        raise ApiError(400, "ambiguous_tool", f"Several servers have a tool {name!r}; name one of: {choices}.")
    named = next((s for s in servers if name.startswith((f"{s}/", f"mcp__{s}__"))), None)
    if named is not None and not any(spec.server == named for spec in specs):
        raise ApiError(
            502, "tool_unavailable", f"The server {named!r} is not answering, so {name!r} cannot run now; see /healthz."
        )
    raise ApiError(
        404,
        "unknown_tool",
        f'There is no tool {name!r}. The tools available now are listed in "tools" '
        "(a server that is down lists the tools it last listed, if any; see /healthz).",
        tools=tools_describe(specs),
    )


def tools_describe(specs: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "name": spec.name,
            "server": spec.server,
            "tool": spec.tool,
            "description": spec.description,
            "read_only": spec.read_only,
            "input_schema": spec.input_schema,
        }
        for spec in specs
    ]


def _hub() -> ToolHub:
    try:
        return tool_hub()
    except MCPConfigError as exc:
        raise ApiError(503, "mcp_config_error", str(exc)) from None


def _result(spec: ToolSpec, outcome: ToolOutcome, correlation_id: uuid.UUID) -> tuple[int, dict[str, Any]]:
    payload: dict[str, Any] = {
        "tool": spec.tool,
        "server": spec.server,
        "name": spec.name,
        "is_error": outcome.is_error,
        "state": outcome.state,
        "content": outcome.content,
        "structured": outcome.structured,
        "correlation_id": str(correlation_id),
        "duration_ms": outcome.duration_ms,
    }
    if not outcome.is_error:
        return 200, payload
    failure = outcome.record.get("error")
    kind = failure.get("kind") if isinstance(failure, dict) else None
    status, code = HUB_FAILURES.get(kind or "", (422, "tool_error"))
    message = "".join(block.get("text", "") for block in outcome.content if block.get("type") == "text")
    payload["error"] = {"code": code, "message": message or f"{spec.tool} failed."}
    return status, payload
