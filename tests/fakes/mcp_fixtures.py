"""Pytest fixtures for tests that need MCP servers (registered in `tests/conftest.py`).

- `mcp_http_server` — a running `MCPTestServer` (mini Oikos over Streamable HTTP, bearer token),
  shared by the run and restored (running, default token) before each test.
- `mcp_config_file(servers)` — writes an `mcpServers` file and points `settings.HERMES_MCP_CONFIG` at it.
- `mcp_oikos_settings` — `OIKOS_MCP_URL`/`OIKOS_MCP_TOKEN` pointing at `mcp_http_server`, no file.
- `mcp_hub_cleanup` — closes the running loop's `tool_hub()` after the test.

`http_server_entry()` and `stdio_server_entry()` build `mcpServers` entries for either transport.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from agent.tools import ToolHub, tool_hub_close
from tests.fakes.mcp_servers import DEFAULT_TOKEN, MCPTestServer

REPO_ROOT = Path(__file__).resolve().parents[2]

WriteMCPConfig = Callable[[dict[str, dict[str, Any]]], Path]


def http_server_entry(server: MCPTestServer, **extra: Any) -> dict[str, Any]:
    """An `mcpServers` entry for `server` with its bearer token."""
    return {
        "type": "http",
        "url": server.url,
        "headers": {"Authorization": f"Bearer {server.token}"},
        **extra,
    }


def stdio_server_entry(**extra: Any) -> dict[str, Any]:
    """An `mcpServers` entry that starts the mini Oikos over stdio with this interpreter."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_stdio_server"],
        "cwd": str(REPO_ROOT),
        **extra,
    }


@pytest.fixture(scope="session")
def _mcp_http_server_shared() -> Iterator[MCPTestServer]:
    server = MCPTestServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mcp_http_server(_mcp_http_server_shared: MCPTestServer) -> MCPTestServer:
    """The mini Oikos over HTTP, shared by the whole run (starting one costs a few hundred ms).

    A test may stop it or change its token; the next test gets it back running with the default token.
    Tests that need a server of their own (another token, the handshake-era protocol) build an
    `MCPTestServer` themselves.
    """
    server = _mcp_http_server_shared
    if server.token != DEFAULT_TOKEN:
        server.stop()
        server.token = DEFAULT_TOKEN
    if not server.running:
        server.start()
    return server


@pytest.fixture
def mcp_config_file(tmp_path: Path, settings: DjangoSettings) -> WriteMCPConfig:
    def write(servers: dict[str, dict[str, Any]]) -> Path:
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        settings.HERMES_MCP_CONFIG = str(path)
        return path

    return write


@pytest.fixture
def mcp_oikos_settings(mcp_http_server: MCPTestServer, settings: DjangoSettings) -> MCPTestServer:
    settings.HERMES_MCP_CONFIG = None
    settings.OIKOS_MCP_URL = mcp_http_server.url
    settings.OIKOS_MCP_TOKEN = mcp_http_server.token
    return mcp_http_server


@pytest.fixture
async def mcp_hub_cleanup() -> AsyncIterator[None]:
    yield
    await tool_hub_close()


@pytest.fixture
async def hub(mcp_oikos_settings: MCPTestServer) -> AsyncIterator[ToolHub]:
    """A tool hub connected to the mini Oikos as server `oikos`; closed after the test."""
    tool_hub = ToolHub.from_settings()
    yield tool_hub
    await tool_hub.aclose()
