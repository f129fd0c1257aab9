"""The control room's Servers page: an operator connects an OAuth-protected MCP server once.

Against a real authorization server (`tests.fakes.mcp_oauth_server`): "Connect" sends the browser
there, the authorization server sends it back to the callback with a code, and from then on every
turn's calls carry a token that neither the page nor the database shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx2
import pytest
from django.db import connection
from django.test import Client

from agent.models import McpAuthorization
from agent.tools import ToolHub
from agent.tools.config import mcp_servers_from_settings
from agent.tools.oauth.connect import _FLOWS
from tests.fakes.mcp_fixtures import WriteMCPConfig
from tests.fakes.mcp_oauth_server import OAuthMCPTestServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def oauth_server() -> Iterator[OAuthMCPTestServer]:
    with OAuthMCPTestServer() as server:
        yield server


def authorization_server_answer(location: str) -> str:
    """What the operator's browser does at the authorization server: it is sent back with a code."""
    response = httpx2.get(location, timeout=20.0)
    assert response.is_redirect, response.text
    back = urlsplit(response.headers["location"])
    assert back.path == "/ui/servers/callback/"
    return f"{back.path}?{back.query}"


async def _call_whoami() -> tuple[bool, str]:
    hub = ToolHub(mcp_servers_from_settings())
    try:
        specs = await hub.list_tools()
        if hub.unreachable():
            return True, hub.unreachable()[0].error
        [spec] = [spec for spec in specs if spec.tool == "whoami"]
        outcome = await hub.call(spec.name, {})
        return outcome.is_error, " ".join(block.get("text", "") for block in outcome.content)
    finally:
        await hub.aclose()


def test_an_operator_connects_a_server_once_and_turns_use_it(
    client: Client, oauth_server: OAuthMCPTestServer, mcp_config_file: WriteMCPConfig
) -> None:
    mcp_config_file({"notes": {"type": "http", "url": oauth_server.url, "hermes": {"oauth": {}}}})
    page = client.get("/ui/servers/").content.decode()
    assert "notes" in page and "not connected" in page and "/ui/servers/notes/connect/" in page
    failed, error = asyncio.run(_call_whoami())
    assert failed and "/ui/servers/" in error

    connect = client.post("/ui/servers/notes/connect/")
    assert connect.status_code == 302 and connect["Location"].startswith(f"{oauth_server.issuer}/authorize?")
    finished = client.get(authorization_server_answer(connect["Location"]))
    assert finished.status_code == 302
    page = client.get(finished["Location"]).content.decode()
    assert "Connected notes" in page and "connected by" in page

    [authorization] = McpAuthorization.objects.all()
    assert authorization.status == McpAuthorization.Status.CONNECTED
    failed, who = asyncio.run(_call_whoami())
    assert not failed and who in oauth_server.provider.clients

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM agent_mcp_credentials")
        stored = repr(cursor.fetchall())
    for token in [*oauth_server.provider.access, *oauth_server.provider.refresh]:
        assert token not in stored and token not in page


def test_a_callback_nobody_here_started_completes_nothing(
    client: Client, oauth_server: OAuthMCPTestServer, mcp_config_file: WriteMCPConfig
) -> None:
    mcp_config_file({"notes": {"type": "http", "url": oauth_server.url, "hermes": {"oauth": {}}}})
    response = client.get("/ui/servers/callback/?code=stolen&state=made-up")
    assert response.status_code == 400 and "not started here" in response.content.decode()
    assert oauth_server.grants == {}


def test_an_authorization_this_process_no_longer_holds_says_to_connect_again(
    client: Client, oauth_server: OAuthMCPTestServer, mcp_config_file: WriteMCPConfig
) -> None:
    mcp_config_file({"notes": {"type": "http", "url": oauth_server.url, "hermes": {"oauth": {}}}})
    connect = client.post("/ui/servers/notes/connect/")
    back = authorization_server_answer(connect["Location"])
    [authorization] = McpAuthorization.objects.all()
    # As if Hermes restarted between "Connect" and the callback: the flow holding the verifier is gone.
    held = list(_FLOWS.flows.values())
    _FLOWS.flows.clear()

    page = client.get(client.get(back)["Location"]).content.decode()
    assert "expired" in page and "Connect it again" in page
    authorization.refresh_from_db()
    assert authorization.status == McpAuthorization.Status.EXPIRED
    assert oauth_server.grants == {}
    for flow in held:  # the orphaned flow stops waiting
        assert flow.answer is not None
        _FLOWS.loop.call_soon_threadsafe(flow.answer.cancel)
