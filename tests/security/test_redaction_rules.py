"""Which configured values count as secrets: credentials are redacted, ordinary settings are not."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.tools import ToolHub
from agent.tools.config import ServerConfig
from tests.fakes.mcp_fixtures import WriteMCPConfig, stdio_server_entry


def test_credentials_are_secrets_and_descriptive_values_are_not() -> None:
    server = ServerConfig(
        name="notes",
        transport="stdio",
        timeout=5,
        command="notes-mcp",
        headers={"Accept": "application/json", "X-Notes-Auth": "hdr-cred-4f2a9c"},
        env={"NOTES_DIR": "/srv/notes/archive", "NOTES_API_KEY": "notes-key-7d1e0b", "NOTES_SESSION": "s-9c8b7a6f"},
    )

    assert server.secret_values() == {"hdr-cred-4f2a9c", "notes-key-7d1e0b", "s-9c8b7a6f"}


@pytest.fixture
async def notes_hub(mcp_config_file: WriteMCPConfig) -> AsyncIterator[ToolHub]:
    env = {"NOTES_DIR": "/srv/notes/archive", "NOTES_API_KEY": "notes-key-7d1e0b"}
    mcp_config_file({"notes": stdio_server_entry(env=env)})
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


async def test_tool_output_keeps_ordinary_values_and_loses_credentials(notes_hub: ToolHub) -> None:
    outcome = await notes_hub.call("mcp__notes__echo", {"text": "key notes-key-7d1e0b, files in /srv/notes/archive"})

    assert outcome.content[0]["text"] == "key [REDACTED], files in /srv/notes/archive"
    assert "notes-key-7d1e0b" not in repr(outcome.record)
