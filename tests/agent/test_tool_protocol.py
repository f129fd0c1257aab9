"""Which MCP protocol revision Hermes speaks with each server: servers other than Oikos are greeted
with the handshake (2025-11-25), whose session carries a server's own questions back to Hermes
(`ctx.elicit` on the Python SDK), unless the config pins a revision; Oikos keeps the newest."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.elicitation.types import ElicitationAnswer, ElicitationAsk
from agent.tools import ToolHub
from agent.tools.config import MCPConfigError, mcp_config_parse
from agent.tools.context import ToolCallContext
from tests.fakes.mcp_fixtures import WriteMCPConfig, http_server_entry
from tests.fakes.mcp_servers import MCPTestServer, build_session_asking_server

pytestmark = pytest.mark.django_db(transaction=True)

CONTENT = {"reason": "new release", "environment": "production", "replicas": 3, "notify": False}


@pytest.fixture(scope="module")
def deployer() -> Iterator[MCPTestServer]:
    with MCPTestServer(build=build_session_asking_server) as server:
        yield server


async def accepting(ask: ElicitationAsk) -> ElicitationAnswer:
    return ElicitationAnswer(action="accept", content=CONTENT, answered_by="operator:ada")


async def deploy(config: WriteMCPConfig, entry: dict[str, Any]) -> str:
    config({"deployer": entry})
    hub = ToolHub.from_settings()
    try:
        outcome = await hub.call(
            "mcp__deployer__deploy", {"service": "jellyfin"}, context=ToolCallContext(elicitor=accepting)
        )
    finally:
        await hub.aclose()
    return str(outcome.content[0]["text"])


async def test_a_server_asking_over_its_session_gets_the_operators_answer(
    deployer: MCPTestServer, mcp_config_file: WriteMCPConfig
) -> None:
    text = await deploy(mcp_config_file, http_server_entry(deployer))

    assert text.startswith("deploy jellyfin: accepted "), text
    assert json.loads(text.removeprefix("deploy jellyfin: accepted ")) == CONTENT


async def test_a_server_pinned_to_the_newest_revision_speaks_it(
    deployer: MCPTestServer, mcp_config_file: WriteMCPConfig
) -> None:
    deployer.post_protocols.clear()
    text = await deploy(mcp_config_file, http_server_entry(deployer, hermes={"protocol": "2026-07-28"}))

    # That revision has no way for the server to ask: the call cannot get the operator's answer.
    assert not text.startswith("deploy jellyfin: accepted ")
    assert set(deployer.post_protocols) == {"2026-07-28"}


async def test_oikos_keeps_the_newest_revision(mcp_http_server: MCPTestServer, mcp_config_file: WriteMCPConfig) -> None:
    mcp_config_file({"oikos": http_server_entry(mcp_http_server)})
    mcp_http_server.post_protocols.clear()
    hub = ToolHub.from_settings()
    try:
        outcome = await hub.call("mcp__oikos__echo", {"text": "hello"})
    finally:
        await hub.aclose()

    assert not outcome.is_error
    assert set(mcp_http_server.post_protocols) == {"2026-07-28"}


@pytest.mark.parametrize("protocol", ["2025-06-18", "2027-01-01", "latest", 7])
def test_a_revision_hermes_cannot_pin_is_a_config_error(protocol: Any, tmp_path: Path) -> None:
    document = {
        "mcpServers": {"deployer": {"type": "http", "url": "http://127.0.0.1:9/mcp", "hermes": {"protocol": protocol}}}
    }
    expected = '"hermes.protocol" must be one of auto, 2025-11-25, 2026-07-28'
    with pytest.raises(MCPConfigError, match=re.escape(expected)):
        mcp_config_parse(document, source="mcp.json", default_timeout=10.0, environ={})
