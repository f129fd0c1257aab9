"""`agent.health`: each check exercises its component for real and reports plain data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from agent.health import channel_layer_check, database_check, health_check, llm_check, mcp_servers_check
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic
from tests.fakes.mcp_servers import MCPTestServer

pytestmark = pytest.mark.django_db(transaction=True)


async def test_the_database_is_read_through_hermes_own_table() -> None:
    result = await database_check()
    assert result.ok and result.error is None
    assert result.details["vendor"] in {"sqlite", "postgresql"}


async def test_the_channel_layer_carries_a_message_there_and_back() -> None:
    result = await channel_layer_check()
    assert result.ok, result.error
    assert result.details["backend"] in {"InMemoryChannelLayer", "RedisChannelLayer"}


async def test_a_channel_layer_that_cannot_be_reached_is_reported(settings: Settings) -> None:
    # Changing the setting resets Channels' layer cache (and so does restoring it).
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["redis://127.0.0.1:9/0"]}}
    }
    result = await channel_layer_check()
    assert not result.ok
    assert result.error and "round trip failed" in result.error
    assert result.details["backend"] == "RedisChannelLayer"


async def test_each_mcp_server_is_probed_and_a_stopped_one_is_named(
    hub: ToolHub, mcp_http_server: MCPTestServer
) -> None:
    (up,) = await mcp_servers_check(hub=hub)
    assert up.ok and up.name == "oikos" and up.details["tool_count"] >= 9
    assert up.details["target"] == mcp_http_server.url

    with mcp_http_server.stopped():
        (down,) = await mcp_servers_check(hub=hub)
    assert not down.ok and down.error


async def test_an_unusable_mcp_configuration_is_one_failed_entry(
    settings: Settings, tmp_path: Path, mcp_hub_cleanup: None
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"oikos": {"type": "http", "url": "${HERMES_TEST_UNSET_URL}"}}}))
    settings.HERMES_MCP_CONFIG = str(config)
    (entry,) = await mcp_servers_check()
    assert (entry.name, entry.ok) == ("mcp_config", False)
    assert entry.error and "HERMES_TEST_UNSET_URL" in entry.error


def test_the_model_is_never_called_only_its_configuration_reported(settings: Settings, fake_llm: FakeAnthropic) -> None:
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    missing = llm_check()
    assert not missing.ok and missing.details["configured"] is False

    settings.ANTHROPIC_BASE_URL = f"http://user:secret@127.0.0.1:{fake_llm.url.rsplit(':', 1)[1]}/v1?token=abc"
    configured = llm_check()
    assert configured.ok and configured.details["endpoint"] == fake_llm.url
    assert "secret" not in json.dumps(configured.details) and "token" not in json.dumps(configured.details)
    assert not fake_llm.requests


async def test_the_report_is_degraded_not_down_when_only_the_model_is_missing(settings: Settings, hub: ToolHub) -> None:
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    report = await health_check(hub=hub)
    assert report.status == "degraded"
    data = report.to_dict()
    json.dumps(data)  # plain data, ready for JSON
    assert data["database"]["ok"] and data["channel_layer"]["ok"] and data["mcp_servers"][0]["ok"]
    assert data["llm"]["ok"] is False
