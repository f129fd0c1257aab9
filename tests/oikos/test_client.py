"""The Oikos REST client against a real oikos_sim."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from pytest_django.fixtures import Settings

from oikos.client import (
    AlreadyDecided,
    OikosClient,
    OikosConfig,
    OikosEvent,
    OikosNotConfigured,
    OikosRefused,
    OikosUnavailable,
    api_url_from_mcp_url,
    oikos_config,
)
from oikos_sim.server import RunningSim
from tests.fakes.oikos_fixtures import AGENT_TOKEN


@pytest.mark.parametrize(
    ("mcp_url", "api_url"),
    [
        ("http://oikos:8090/mcp", "http://oikos:8090/api/v1"),
        ("https://oikos.example/mcp/", "https://oikos.example/api/v1"),
        ("https://example.net/oikos/mcp", "https://example.net/oikos/api/v1"),
        ("http://oikos:8090/rpc", ""),
        ("", ""),
    ],
)
def test_the_rest_url_is_derived_from_the_mcp_url_when_it_ends_in_mcp(mcp_url: str, api_url: str) -> None:
    assert api_url_from_mcp_url(mcp_url) == api_url


def test_an_explicit_rest_url_wins_and_without_either_oikos_is_not_configured(settings: Settings) -> None:
    settings.OIKOS_MCP_URL = "http://oikos:8090/mcp"
    settings.OIKOS_API_URL = ""
    assert oikos_config() == OikosConfig(
        "http://oikos:8090/api/v1", settings.OIKOS_API_TOKEN, settings.OIKOS_API_TIMEOUT
    )
    settings.OIKOS_API_URL = "http://elsewhere:9/api/v1/"
    assert oikos_config().api_url == "http://elsewhere:9/api/v1"  # type: ignore[union-attr]
    settings.OIKOS_API_URL = settings.OIKOS_MCP_URL = ""
    assert oikos_config() is None
    with pytest.raises(OikosNotConfigured, match="OIKOS_API_URL"):
        OikosClient.from_settings()


async def test_health_and_pending_approvals(oikos_settings: RunningSim) -> None:
    async with OikosClient.from_settings() as oikos:
        health = await oikos.health()
        assert health["counts"]["degraded"] == 1
        assert health["degraded"][0]["slug"] == "service:postgres"
        assert await oikos.approvals() == []


async def test_one_decision_wins_and_the_second_learns_who_decided(oikos_settings: RunningSim) -> None:
    parked = await request_execution(oikos_settings, "service:jellyfin", "deploy")
    async with OikosClient.from_settings() as oikos:
        pending = await oikos.approvals()
        assert [a["id"] for a in pending] == [parked["approval_id"]]

        decided = await oikos.approval_decide(parked["approval_id"], approve=True, operator="alice", reason="ok")
        assert decided["status"] == "approved" and decided["decided_by"] == "alice"
        assert decided["execution"]["execution_id"] == parked["execution_id"]

        with pytest.raises(AlreadyDecided) as second:
            await oikos.approval_decide(parked["approval_id"], approve=False, operator="bob")
        assert (second.value.decided_by, second.value.status) == ("alice", "approved")

        with pytest.raises(OikosRefused) as unknown:
            await oikos.approval_decide("apr-9999", approve=True, operator="alice")
        assert unknown.value.status == 404


async def test_the_agents_token_cannot_decide(oikos_settings: RunningSim, settings: Settings) -> None:
    settings.OIKOS_API_TOKEN = AGENT_TOKEN
    async with OikosClient.from_settings() as oikos:
        with pytest.raises(OikosRefused) as refused:
            await oikos.approval_decide("apr-0001", approve=True, operator="alice")
    assert refused.value.status == 403


async def test_the_event_stream_resumes_after_the_last_event_id(oikos_settings: RunningSim) -> None:
    await request_execution(oikos_settings, "service:jellyfin", "deploy")
    async with OikosClient.from_settings() as oikos:
        first = await _first_event(oikos, "")
        assert first.type == "approval.created" and first.data["target"] == "service:jellyfin"
        await request_execution(oikos_settings, "service:gitea", "deploy")
        resumed = await _first_event(oikos, first.id)
    assert resumed.type == "approval.created" and resumed.data["target"] == "service:gitea"
    assert int(resumed.id) > int(first.id)


async def test_an_unreachable_oikos_is_one_clear_error(settings: Settings) -> None:
    settings.OIKOS_API_URL = "http://127.0.0.1:9/api/v1"
    async with OikosClient.from_settings() as oikos:
        with pytest.raises(OikosUnavailable, match=r"unreachable at http://127\.0\.0\.1:9/api/v1"):
            await oikos.health()
        with pytest.raises(OikosUnavailable, match="event stream failed"):
            await _first_event(oikos, "")


async def _first_event(oikos: OikosClient, last_event_id: str) -> OikosEvent:
    async with asyncio.timeout(5):
        async for event in oikos.events(last_event_id=last_event_id):
            return event
    raise AssertionError("the stream ended without an event")


async def request_execution(sim: RunningSim, target: str, action: str) -> dict[str, Any]:
    """Ask oikos_sim for an execution over its REST API, as the agent would over MCP."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {AGENT_TOKEN}"}) as http:
        response = await http.post(f"{sim.api_url}/executions", json={"target": target, "action": action})
    response.raise_for_status()
    return dict(response.json())
