"""A stand-in for `garra mcp-server`: the `garra_ask` contract over stdio, on the official MCP SDK.

    python -m tests.interop.garra_stand_in        (from the repository root)

What it copies from GarraIA (`crates/garraia-cli/src/mcp_server.rs` and its interop guide):
- one tool, `garra_ask {message (≤ 64 KiB), provider?, model?, timeout_secs? (1 to 600),
  system_prompt? (≤ 8 KiB)}` with `additionalProperties: false`;
- success: one text block holding `{"schema":"garra.ask.v1","ok":true,"answer","provider","model",
  "latency_ms"}`; failure: `{"schema":"garra.ask.v1","ok":false,"error":{"kind","message"}}` with
  `isError: true`; arguments that break the schema: a JSON-RPC `invalid_params` error;
- without `model` the envelope reports the release's default model, whatever was asked.

Scripted behaviour, so tests can reach every branch:
- `provider: "echo"` answers `[echo] <message>`;
- a message starting with `FAIL:` fails with kind `provider_error` and the rest as message;
- `provider: "offline"` fails with kind `provider_unavailable`.
Every call's arguments are appended as one JSON line to `$GARRA_STAND_IN_LOG` when it is set, so a
test can prove what Hermes sent.

This module must not import Django: it runs in a bare interpreter.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import anyio
from mcp import MCPError, stdio_server
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
)

SCHEMA = "garra.ask.v1"
DEFAULT_PROVIDER = "openrouter"
# The release's default model: what the envelope reports when the caller does not pass `model`.
DEFAULT_MODEL = "z-ai/glm-5.3-flash"
PROVIDERS = ["ollama", "anthropic", "openai", "openrouter", "echo", "offline"]

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "maxLength": 65536},
        "provider": {"type": "string", "enum": PROVIDERS},
        "model": {"type": "string", "minLength": 1},
        "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 600},
        "system_prompt": {"type": "string", "maxLength": 8192},
    },
    "required": ["message"],
    "additionalProperties": False,
}


def _invalid(message: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=f"failed to deserialize parameters: {message}")


def arguments_check(arguments: dict[str, Any]) -> None:
    """What serde + the schema bounds reject in the real server, as `invalid_params`."""
    unknown = sorted(set(arguments) - set(INPUT_SCHEMA["properties"]))
    if unknown:
        raise _invalid(f"unknown field `{unknown[0]}`")
    message = arguments.get("message")
    if not isinstance(message, str) or not message:
        raise _invalid("missing field `message`")
    if len(message.encode()) > 65536:
        raise _invalid("`message` is longer than 64 KiB")
    provider = arguments.get("provider")
    if provider is not None and provider not in PROVIDERS:
        raise _invalid(f"unknown variant `{provider}`")
    timeout = arguments.get("timeout_secs")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 600):
        raise _invalid("`timeout_secs` must be between 1 and 600")
    system_prompt = arguments.get("system_prompt")
    if system_prompt is not None and (not isinstance(system_prompt, str) or len(system_prompt.encode()) > 8192):
        raise _invalid("`system_prompt` is longer than 8 KiB")


def _envelope(result: dict[str, Any], *, is_error: bool) -> CallToolResult:
    text = json.dumps({"schema": SCHEMA, **result}, sort_keys=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def garra_ask(arguments: dict[str, Any]) -> CallToolResult:
    started = time.monotonic()
    provider = arguments.get("provider", DEFAULT_PROVIDER)
    model = arguments.get("model", DEFAULT_MODEL)
    message: str = arguments["message"]
    if provider == "offline":
        error = {"kind": "provider_unavailable", "message": "provider offline is not configured"}
        return _envelope({"ok": False, "error": error}, is_error=True)
    if message.startswith("FAIL:"):
        error = {"kind": "provider_error", "message": message.removeprefix("FAIL:").strip()}
        return _envelope({"ok": False, "error": error}, is_error=True)
    answer = f"[echo] {message}" if provider == "echo" else f"({provider}/{model}) {message}"
    latency_ms = round((time.monotonic() - started) * 1000)
    result = {"ok": True, "answer": answer, "provider": provider, "model": model, "latency_ms": latency_ms}
    return _envelope(result, is_error=False)


async def _list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
    tool = Tool(
        name="garra_ask",
        description="Ask the GarraIA agent a question and get its answer as a garra.ask.v1 envelope.",
        input_schema=INPUT_SCHEMA,
    )
    return ListToolsResult(tools=[tool])


async def _call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
    arguments = dict(params.arguments or {})
    log = os.environ.get("GARRA_STAND_IN_LOG")
    if log:
        line = json.dumps({"tool": params.name, "arguments": arguments}) + "\n"
        async with await anyio.open_file(log, "a", encoding="utf-8") as handle:
            await handle.write(line)
    if params.name != "garra_ask":
        raise MCPError(code=INVALID_PARAMS, message=f"unknown tool {params.name}")
    arguments_check(arguments)
    return garra_ask(arguments)


def build_server() -> Server[Any]:
    return Server("rmcp", version="2.2.0", on_list_tools=_list_tools, on_call_tool=_call_tool)


async def main() -> None:
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
