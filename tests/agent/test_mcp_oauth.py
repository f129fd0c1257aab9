"""Hermes's MCP OAuth client (`agent.tools.oauth`) against a real OAuth-protected MCP server.

The server (`tests.fakes.mcp_oauth_server`) runs its own authorization server on the SDK's server
auth support; the browser that takes the authorization URL there is the conformance client's
headless one (`agent.conformance_client.HeadlessBrowser`), which the control room's Connect replaces
with the operator's (see tests/controlroom/test_servers.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from agent.conformance_client import HeadlessBrowser
from agent.models import McpCredential
from agent.tools import MCPConfigError, ToolHub
from agent.tools.config import ServerConfig, mcp_config_parse
from agent.tools.oauth.providers import oauth_auth
from agent.tools.oauth.storage import DbTokenStorage
from tests.fakes.mcp_oauth_server import OAuthMCPTestServer

pytestmark = pytest.mark.django_db(transaction=True)

REDIRECT_URI = "http://127.0.0.1:9/callback"


@pytest.fixture
def oauth_server() -> Iterator[OAuthMCPTestServer]:
    with OAuthMCPTestServer() as server:
        yield server


def config_of(url: str, oauth: dict[str, Any] | None = None, *, name: str = "notes") -> ServerConfig:
    entry: dict[str, Any] = {"type": "http", "url": url, "hermes": {"oauth": oauth or {}}}
    [config] = mcp_config_parse({"mcpServers": {name: entry}}, source="test", default_timeout=20.0, environ={})
    return config


@pytest.fixture
async def hubs() -> AsyncIterator[list[ToolHub]]:
    opened: list[ToolHub] = []
    yield opened
    for hub in opened:
        await hub.aclose()


async def whoami(hub: ToolHub) -> tuple[bool, str]:
    """Call the server's `whoami`: (whether it failed, the text it answered)."""
    specs = await hub.list_tools()
    unreachable = hub.unreachable()
    if unreachable:
        return True, unreachable[0].error
    [spec] = [spec for spec in specs if spec.tool == "whoami"]
    outcome = await hub.call(spec.name, {})
    return outcome.is_error, " ".join(block.get("text", "") for block in outcome.content)


async def connected(config: ServerConfig, hubs: list[ToolHub]) -> str:
    """Authorize Hermes to the server the way an operator's Connect does; the client id it got."""
    hub = ToolHub([config], oauth_browser=HeadlessBrowser(), oauth_redirect_uri=REDIRECT_URI)
    hubs.append(hub)
    failed, who = await whoami(hub)
    assert not failed, who
    return who


@sync_to_async
def database_text() -> str:
    """Every value of every credential row, as the database holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM agent_mcp_credentials")
        return repr(cursor.fetchall())


async def test_a_turn_calls_a_connected_server_with_tokens_no_one_can_read_in_the_database(
    oauth_server: OAuthMCPTestServer, hubs: list[ToolHub]
) -> None:
    config = config_of(oauth_server.url)
    client_id = await connected(config, hubs)
    assert client_id in oauth_server.provider.clients

    # A later turn (a new hub, as another process starts one) uses what the connect stored.
    turn = ToolHub([config])
    hubs.append(turn)
    failed, who = await whoami(turn)
    assert not failed and who == client_id
    assert oauth_server.grants == {"authorization_code": 1}

    stored = await database_text()
    for token in [*oauth_server.provider.access, *oauth_server.provider.refresh]:
        assert token not in stored
    # A tool that echoes the token shows it to no one: not the model, not the ledger.
    [echo] = [spec for spec in await turn.list_tools() if spec.tool == "echo"]
    [token] = oauth_server.provider.access
    outcome = await turn.call(echo.name, {"text": f"the header was Bearer {token}"})
    assert token not in repr(outcome.content) and "[REDACTED]" in repr(outcome.content)
    row = await McpCredential.objects.aget(server="notes")
    assert row.scope == "oikos:read" and row.refreshable and row.expires_at is not None


async def test_an_expired_token_is_refreshed_and_the_new_one_kept(
    oauth_server: OAuthMCPTestServer, hubs: list[ToolHub]
) -> None:
    config = config_of(oauth_server.url)
    await connected(config, hubs)
    # The token has expired by the time a later process starts, and the server no longer takes it.
    await McpCredential.objects.filter(server="notes").aupdate(expires_at=timezone.now())
    oauth_server.provider.access.clear()

    turn = ToolHub([config])
    hubs.append(turn)
    failed, who = await whoami(turn)
    assert not failed, who
    assert oauth_server.grants["refresh_token"] == 1

    # The refreshed token (and its rotated refresh token) is what the next process starts from.
    tokens = await DbTokenStorage("notes", config.url, grant="authorization_code").get_tokens()
    assert tokens is not None and tokens.access_token in oauth_server.provider.access
    assert tokens.refresh_token in oauth_server.provider.refresh


async def test_a_server_no_operator_connected_says_where_to_connect_it(
    oauth_server: OAuthMCPTestServer, hubs: list[ToolHub]
) -> None:
    turn = ToolHub([config_of(oauth_server.url)])
    hubs.append(turn)
    failed, error = await whoami(turn)
    assert failed and "not connected" in error and "/ui/servers/" in error
    # Nothing was registered or asked for on the operator's behalf.
    assert oauth_server.provider.clients == {} and oauth_server.grants == {}


async def test_credentials_are_not_presented_to_a_server_at_another_url(
    oauth_server: OAuthMCPTestServer, hubs: list[ToolHub]
) -> None:
    await connected(config_of(oauth_server.url), hubs)
    with OAuthMCPTestServer() as elsewhere:
        turn = ToolHub([config_of(elsewhere.url)])
        hubs.append(turn)
        failed, error = await whoami(turn)
        assert failed and "not connected" in error


async def test_a_rotated_secret_key_still_opens_what_the_old_one_sealed(
    oauth_server: OAuthMCPTestServer, hubs: list[ToolHub], settings: SettingsWrapper
) -> None:
    config = config_of(oauth_server.url)
    await connected(config, hubs)
    old = settings.SECRET_KEY
    storage = DbTokenStorage("notes", config.url, grant="authorization_code")

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-key-" + "x" * 40, [old]
    assert await storage.get_tokens() is not None

    settings.SECRET_KEY_FALLBACKS = []
    # A key that is gone opens nothing; the server then reads as not connected, nothing crashes.
    assert await storage.get_tokens() is None


def test_the_oauth_options_are_checked_and_their_secrets_redacted() -> None:
    config = config_of(
        "https://svc.example.net/mcp",
        {"grant": "client_credentials", "client_id": "svc-hermes", "client_secret": "a-client-secret-1234"},
    )
    assert config.oauth is not None and not config.oauth.interactive
    assert "a-client-secret-1234" in config.secret_values()
    assert "a-client-secret-1234" not in repr(config)
    assert oauth_auth(config) is not None

    with pytest.raises(MCPConfigError, match=r"client_secret.*private_key"):
        config_of("https://svc.example.net/mcp", {"grant": "client_credentials", "client_id": "svc"})
    with pytest.raises(MCPConfigError, match="unknown key"):
        config_of("https://svc.example.net/mcp", {"token": "x"})
    with pytest.raises(MCPConfigError, match="for HTTP servers"):
        mcp_config_parse(
            {"mcpServers": {"local": {"command": "notes-mcp", "hermes": {"oauth": {}}}}},
            source="test",
            default_timeout=20.0,
            environ={},
        )
