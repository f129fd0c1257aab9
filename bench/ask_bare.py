"""The bare script `bench/ask.py` compares `manage.py ask` with: one question, nothing else.

The least any agent can do for a one-shot question: the anthropic and mcp SDKs, one MCP server over
Streamable HTTP, a tool loop (stream, call the tools the model asks for, stream again) and the
answer on stdout. No persistence, no framework. Configured like Hermes, from ANTHROPIC_BASE_URL,
ANTHROPIC_API_KEY, HERMES_MODEL, OIKOS_MCP_URL and OIKOS_MCP_TOKEN.

    .venv/bin/python bench/ask_bare.py "what's degraded?" [--quiet-start]

`--quiet-start` starts it as Hermes starts (hermes_site/collector.py): no garbage collection while
the SDKs are imported, then what they built frozen out of the collector's sight. `bench/ask.py`
runs it both ways, so the figure shows what the collector alone is worth to any script.
"""

from __future__ import annotations

import gc
import sys

QUIET_START = "--quiet-start" in sys.argv[2:]
if QUIET_START:
    gc.disable()

import asyncio  # noqa: E402
import os  # noqa: E402
from typing import Any  # noqa: E402

import anthropic  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

if QUIET_START:
    gc.freeze()
    gc.enable()


async def _ask(question: str) -> None:
    headers = {"Authorization": f"Bearer {os.environ['OIKOS_MCP_TOKEN']}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(os.environ["OIKOS_MCP_URL"], http_client=http)) as mcp,
    ):
        tools = [
            {"name": tool.name, "description": tool.description or "", "input_schema": tool.input_schema}
            for tool in (await mcp.list_tools()).tools
        ]
        model = anthropic.AsyncAnthropic(base_url=os.environ.get("ANTHROPIC_BASE_URL") or None)
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": question}]}]
        while True:
            async with model.messages.stream(
                model=os.environ.get("HERMES_MODEL", "claude-sonnet-5"),
                max_tokens=4096,
                messages=messages,  # type: ignore[arg-type]
                tools=tools,  # type: ignore[arg-type]
            ) as stream:
                async for text in stream.text_stream:
                    sys.stdout.write(text)
                    sys.stdout.flush()
                message = await stream.get_final_message()
            messages.append(
                {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]}
            )
            calls = [block for block in message.content if block.type == "tool_use"]
            if not calls:
                break
            results = []
            for call in calls:
                result = await mcp.call_tool(call.name, call.input)
                text = "".join(getattr(block, "text", "") for block in result.content)
                results.append(
                    {"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": result.is_error}
                )
            messages.append({"role": "user", "content": results})
    sys.stdout.write("\n")


if __name__ == "__main__":
    asyncio.run(_ask(sys.argv[1]))
