"""Bearer tokens map to actors; nothing answers without one; the agent can never decide."""

from __future__ import annotations

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from oikos_sim.auth import TokenConfigError, tokens_parse
from oikos_sim.server import RunningSim, serve_in_thread
from tests.oikos_sim.clients import AGENT_TOKEN, OPERATOR_TOKEN, mcp_session, rest_client, tool_call


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Basic {OPERATOR_TOKEN}", "Bearer"])
@pytest.mark.parametrize("path", ["/api/v1/health", "/api/v1/approvals", "/mcp"])
async def test_requests_without_a_valid_bearer_token_get_401(
    shared_sim: RunningSim, authorization: str | None, path: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    async with httpx2.AsyncClient() as http:
        if path == "/mcp":
            response = await http.post(
                shared_sim.url + path, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
            )
        else:
            response = await http.get(shared_sim.url + path, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert OPERATOR_TOKEN not in response.text


async def test_the_mcp_client_with_a_wrong_token_cannot_connect(shared_sim: RunningSim) -> None:
    calls_before = len(shared_sim.state.world.activity)
    with pytest.raises(ExceptionGroup) as raised:
        async with mcp_session(shared_sim.mcp_url, token="not-a-token") as client:
            await client.list_tools()
    assert raised.group_contains(MCPError, depth=None)
    assert len(shared_sim.state.world.activity) == calls_before


async def test_the_liveness_probe_needs_no_token(shared_sim: RunningSim) -> None:
    async with httpx2.AsyncClient() as http:
        response = await http.get(f"{shared_sim.url}/healthz")
    assert response.json() == {"status": "ok"}


class TestDecisions:
    async def _parked(self, sim: RunningSim) -> str:
        async with mcp_session(sim.mcp_url) as client:
            parked = await tool_call(client, "request_execution", {"target": "service:gitea", "action": "deploy"})
        return str(parked["approval_id"])

    async def test_the_agent_token_cannot_approve(self, sim: RunningSim) -> None:
        approval_id = await self._parked(sim)
        async with rest_client(sim, token=AGENT_TOKEN) as api:
            response = await api.post(f"/approvals/{approval_id}/approve", json={"operator": "alice"})
            assert response.status_code == 403
            assert response.json()["error"] == "forbidden"
            still = (await api.get(f"/approvals/{approval_id}")).json()
        assert (still["status"], still["decided_by"]) == ("pending", None)

    @pytest.mark.parametrize(
        ("body", "code"),
        [
            ({}, "operator_required"),
            ({"operator": "  "}, "operator_required"),
            ({"operator": "agent:hermes"}, "forbidden"),
        ],
    )
    async def test_a_decision_needs_a_human_operator(self, sim: RunningSim, body: dict[str, str], code: str) -> None:
        approval_id = await self._parked(sim)
        async with rest_client(sim) as api:
            response = await api.post(f"/approvals/{approval_id}/deny", json=body)
            assert (response.status_code, response.json()["error"]) == (403, code)
            assert (await api.get(f"/approvals/{approval_id}")).json()["status"] == "pending"

    async def test_unknown_approvals_and_malformed_bodies(self, sim: RunningSim) -> None:
        approval_id = await self._parked(sim)
        async with rest_client(sim) as api:
            missing = await api.post("/approvals/apr-9999/approve", json={"operator": "alice"})
            malformed = await api.post(f"/approvals/{approval_id}/approve", content=b"{not json")
            listed = await api.get("/approvals", params={"status": "maybe"})
            bad_execution = await api.post("/executions", json={"target": "service:jelyfin", "action": "restart"})
        assert (missing.status_code, missing.json()["error"]) == (404, "not_found")
        assert (malformed.status_code, malformed.json()["error"]) == (400, "invalid_request")
        assert listed.status_code == 400
        assert bad_execution.status_code == 400
        assert "service:jellyfin" in bad_execution.json()["message"]


async def test_tokens_can_be_replaced_and_name_new_actors() -> None:
    tokens = {"agent:scout": "scout-secret", "operator:alice": "alice-secret"}
    with serve_in_thread(tokens=tokens, execution_seconds=0.2) as custom:
        async with mcp_session(custom.mcp_url, token="scout-secret") as client:
            assert (await tool_call(client, "whoami"))["actor"] == "agent:scout"
        async with rest_client(custom, token=OPERATOR_TOKEN) as api:
            assert (await api.get("/health")).status_code == 401


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("agent:hermes", "must look like actor=token"),
        ("hermes=abc", "must be kind:name"),
        (" , ", "names no actor=token pairs"),
        ("agent:hermes=", "must look like actor=token"),
    ],
)
def test_bad_token_settings_are_explained_without_quoting_tokens(spec: str, message: str) -> None:
    with pytest.raises(TokenConfigError, match=message) as raised:
        tokens_parse(spec)
    assert "abc" not in str(raised.value)


def test_token_settings_parse_actor_token_pairs() -> None:
    assert tokens_parse("agent:hermes=t1, service:ui = t=2") == {"agent:hermes": "t1", "service:ui": "t=2"}
