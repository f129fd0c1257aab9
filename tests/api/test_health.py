"""`GET /healthz` under Daphne: every component's state, 503 only when the database is down."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx2

from tests.api.conftest import Hermes, chat, hermes_env
from tests.fakes import FakeAnthropic
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_servers import MCPTestServer


def test_all_components_ok(hermes: Hermes) -> None:
    response = httpx2.get(f"{hermes.url}/healthz")

    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    health = response.json()
    assert health["status"] == "ok"
    # The server runs on what CI gives it: PostgreSQL and Redis when present.
    vendor = "postgresql" if hermes.database.is_postgres else "sqlite"
    backend = "RedisChannelLayer" if os.environ.get("REDIS_URL") else "InMemoryChannelLayer"
    assert health["database"]["ok"] and health["database"]["details"]["vendor"] == vendor
    assert health["channel_layer"]["ok"] and health["channel_layer"]["details"]["backend"] == backend
    servers = {server["name"]: server for server in health["mcp_servers"]}
    assert set(servers) == {"oikos", "mirror"}
    assert servers["oikos"]["ok"] and servers["oikos"]["details"]["tool_count"] >= 9
    assert servers["mirror"]["details"]["tool_count"] == 2
    assert servers["oikos"]["details"]["target"] == hermes.mcp.url
    assert health["llm"]["ok"] and health["llm"]["details"]["configured"] is True


def test_a_head_request_answers_without_a_body(hermes: Hermes) -> None:
    response = httpx2.head(f"{hermes.url}/healthz")
    assert response.status_code == 200 and response.content == b""


def test_an_mcp_server_that_is_down_degrades_but_does_not_fail_the_check(hermes: Hermes) -> None:
    with hermes.mcp.stopped():
        response = httpx2.get(f"{hermes.url}/healthz")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "degraded"
    oikos = next(server for server in health["mcp_servers"] if server["name"] == "oikos")
    assert oikos["ok"] is False and oikos["error"]
    assert health["database"]["ok"] and health["llm"]["ok"]


def test_without_a_model_health_says_so_and_chat_refuses_cleanly(
    daphne_server: Callable[..., DaphneServer], mcp_http_server: MCPTestServer, live_database: LiveDatabase
) -> None:
    server = daphne_server(env=hermes_env(None, mcp_http_server))
    health = httpx2.get(f"{server.url}/healthz").json()
    assert health["status"] == "degraded"
    assert health["llm"]["ok"] is False and health["llm"]["details"]["configured"] is False
    assert "ANTHROPIC_API_KEY" in health["llm"]["error"]

    before = live_database.counts()
    refused = chat(server.url, {"message": "what's degraded?"})
    assert refused.status == 503
    error = refused.events[0].data["error"]
    assert error["code"] == "llm_not_configured" and "ANTHROPIC_BASE_URL" in error["message"]
    assert live_database.counts() == before


def test_without_a_database_health_is_503_and_other_endpoints_answer_json_503(
    daphne_server: Callable[..., DaphneServer], fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    unreachable = LiveDatabase(f"sqlite:///{tmp_path / 'missing-directory' / 'hermes.sqlite3'}")
    server = daphne_server(env=hermes_env(fake_llm, None), database=unreachable)

    response = httpx2.get(f"{server.url}/healthz")
    assert response.status_code == 503
    health = response.json()
    assert health["status"] == "down"
    assert health["database"]["ok"] is False and "cannot reach the database" in health["database"]["error"]
    assert health["channel_layer"]["ok"] and health["llm"]["ok"]

    for answer in (
        httpx2.post(f"{server.url}/chat", json={"message": "hello?"}),
        httpx2.get(f"{server.url}/sessions"),
    ):
        assert answer.status_code == 503
        assert answer.json()["error"]["code"] == "database_unavailable"
    assert not fake_llm.requests
