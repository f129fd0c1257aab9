"""Clients for tests: the official MCP client and httpx2 against a running oikos_sim."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oikos_sim.auth import DEFAULT_TOKENS
from oikos_sim.server import RunningSim

AGENT_TOKEN = DEFAULT_TOKENS["agent:hermes"]
OPERATOR_TOKEN = DEFAULT_TOKENS["service:hermes-controlroom"]


@asynccontextmanager
async def mcp_session(mcp_url: str, token: str = AGENT_TOKEN) -> AsyncIterator[Client]:
    """An MCP client session, opened and closed in the calling task (anyio requires it)."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(mcp_url, http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def rest_client(sim: RunningSim, token: str = OPERATOR_TOKEN) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(
        base_url=sim.api_url, headers={"Authorization": f"Bearer {token}"}, timeout=10
    ) as client:
        yield client


async def tool_call(client: Client, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Call a tool that must succeed; returns its structured content (checked against its text)."""
    result = await client.call_tool(name, arguments or {})
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    assert not result.is_error, f"{name} failed: {text}"
    assert result.structured_content is not None
    assert json.loads(text) == result.structured_content
    return result.structured_content


async def tool_error(client: Client, name: str, arguments: dict[str, Any]) -> str:
    """Call a tool that must fail; returns the error text the model would read."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, f"{name} unexpectedly succeeded"
    return " ".join(block.text for block in result.content)  # type: ignore[union-attr]


async def events_read(
    sim: RunningSim,
    *,
    until: Callable[[list[dict[str, Any]]], bool],
    last_event_id: int | None = None,
    within: float = 5.0,
) -> list[dict[str, Any]]:
    """Read ``/events`` (resuming after ``last_event_id``) until ``until(events)`` holds.

    Each event is the parsed ``data`` with the SSE ``id``/``event`` fields checked against it.
    """
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    events: list[dict[str, Any]] = []
    async with (
        asyncio.timeout(within),
        httpx2.AsyncClient(timeout=within) as http,
        http.sse(f"{sim.api_url}/events", headers=headers) as source,
    ):
        async for sse in source:
            payload = sse.json()
            assert isinstance(payload, dict)
            assert sse.id == str(payload["id"])
            assert sse.event == payload["type"]
            events.append(payload)
            if until(events):
                return events
    return events


def events_of(events: list[dict[str, Any]], execution_id: str) -> list[str]:
    """The event types that concern one execution, in stream order."""
    return [e["type"] for e in events if e["data"].get("execution_id") == execution_id]
