"""`POST /query`: one MCP tool for a script, its result as JSON, every call in the ledger."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from tests.api.conftest import Hermes


def query(hermes: Hermes, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(f"{hermes.url}/query", json=body, timeout=30)


def ledger_row(hermes: Hermes, correlation_id: str) -> dict[str, Any]:
    rows = hermes.database.query(
        "SELECT server, tool, arguments, is_error, actor, session_id, tool_use_id FROM agent_activity "
        "WHERE correlation_id = %s",
        (hermes.database.uuid(correlation_id),),
    )
    assert len(rows) == 1, rows
    names = ("server", "tool", "arguments", "is_error", "actor", "session_id", "tool_use_id")
    return dict(zip(names, rows[0], strict=True))


class TestAnswers:
    @pytest.mark.parametrize("name", ["mcp__oikos__get_blast_radius", "oikos/get_blast_radius", "get_blast_radius"])
    def test_runs_the_tool_by_any_of_its_names_and_logs_the_call(self, hermes: Hermes, name: str) -> None:
        response = query(hermes, {"tool": name, "args": {"slug": "service:authentik"}})

        assert response.status_code == 200
        result = response.json()
        assert (result["server"], result["tool"], result["name"]) == (
            "oikos",
            "get_blast_radius",
            "mcp__oikos__get_blast_radius",
        )
        assert result["is_error"] is False
        assert result["structured"] == {
            "slug": "service:authentik",
            "dependants": [{"slug": "service:caddy", "depth": 1, "via": "service:authentik"}],
        }
        assert result["content"][0]["type"] == "text" and "service:caddy" in result["content"][0]["text"]
        assert response.headers["x-hermes-correlation-id"] == result["correlation_id"]
        row = ledger_row(hermes, result["correlation_id"])
        assert (row["server"], row["tool"], bool(row["is_error"]), row["actor"]) == (
            "oikos",
            "get_blast_radius",
            False,
            "operator:operator",
        )
        assert _json(row["arguments"]) == {"slug": "service:authentik"}
        assert row["session_id"] is None

    def test_each_query_gets_its_own_correlation_id(self, hermes: Hermes) -> None:
        first = query(hermes, {"tool": "get_health_summary"}).json()
        second = query(hermes, {"tool": "get_health_summary", "args": None}).json()
        assert first["correlation_id"] != second["correlation_id"]
        assert first["structured"]["degraded"][0]["slug"] == "service:postgres"

    def test_a_plain_name_two_servers_share_is_ambiguous_but_server_slash_tool_is_not(self, hermes: Hermes) -> None:
        before = hermes.database.counts()
        ambiguous = query(hermes, {"tool": "get_entity", "args": {"slug": "service:caddy"}})
        assert ambiguous.status_code == 400
        error = ambiguous.json()["error"]
        assert error["code"] == "ambiguous_tool"
        assert "oikos/get_entity" in error["message"] and "mirror/get_entity" in error["message"]
        assert hermes.database.counts() == before

        chosen = query(hermes, {"tool": "mirror/get_entity", "args": {"slug": "service:caddy"}})
        assert chosen.status_code == 200 and chosen.json()["server"] == "mirror"


class TestRefusals:
    def test_without_a_tool_it_points_to_chat_and_lists_the_live_tools(self, hermes: Hermes) -> None:
        response = query(hermes, {"message": "what's degraded and what depends on it?"})

        assert response.status_code == 400
        body = response.json()
        assert body["error"]["code"] == "tool_required"
        assert "natural language belongs to /chat" in body["error"]["message"]
        tools = {(tool["server"], tool["tool"]): tool for tool in body["tools"]}
        assert ("oikos", "get_blast_radius") in tools and ("mirror", "slow") in tools
        assert ("mirror", "get_health_summary") not in tools  # the mirror's include filter holds
        blast = tools[("oikos", "get_blast_radius")]
        assert blast["name"] == "mcp__oikos__get_blast_radius"
        assert blast["description"] and blast["read_only"] is True
        assert "slug" in blast["input_schema"]["properties"]

    def test_an_unknown_tool_is_named_in_a_404(self, hermes: Hermes) -> None:
        response = query(hermes, {"tool": "restart_the_internet", "args": {}})
        assert response.status_code == 404
        body = response.json()
        assert body["error"]["code"] == "unknown_tool" and "'restart_the_internet'" in body["error"]["message"]
        assert body["tools"]


class TestToolErrors:
    def test_bad_args_return_the_tools_own_error_as_a_422_and_are_logged(self, hermes: Hermes) -> None:
        response = query(hermes, {"tool": "get_blast_radius", "args": {"slug": "service:postgres", "depth": "deep"}})

        assert response.status_code == 422
        result = response.json()
        assert result["is_error"] is True and result["error"]["code"] == "tool_error"
        assert "depth" in result["error"]["message"] and result["error"]["message"] in result["content"][0]["text"]
        row = ledger_row(hermes, result["correlation_id"])
        assert bool(row["is_error"]) and _json(row["arguments"]) == {"slug": "service:postgres", "depth": "deep"}

    def test_a_tool_that_refuses_the_request_answers_422_with_its_message(self, hermes: Hermes) -> None:
        response = query(hermes, {"tool": "get_blast_radius", "args": {"slug": "service:nope"}})
        assert response.status_code == 422
        assert "unknown entity 'service:nope'" in response.json()["error"]["message"]

    def test_a_server_that_does_not_answer_in_time_is_a_504(self, hermes: Hermes) -> None:
        response = query(hermes, {"tool": "mirror/slow", "args": {"seconds": 3}})
        assert response.status_code == 504
        result = response.json()
        assert result["error"]["code"] == "tool_timeout" and result["is_error"] is True
        assert ledger_row(hermes, result["correlation_id"])["server"] == "mirror"

    def test_a_server_that_is_down_is_a_502_until_it_is_back(self, hermes: Hermes) -> None:
        assert query(hermes, {"tool": "oikos/whoami"}).status_code == 200
        with hermes.mcp.stopped():
            # The first call finds the connection broken; later ones find the server gone.
            dropped = query(hermes, {"tool": "oikos/whoami"})
            gone = query(hermes, {"tool": "mcp__oikos__whoami"})
        for response in (dropped, gone):
            assert response.status_code == 502
            assert response.json()["error"]["code"] == "tool_unavailable"
        # Its tools stay known from its last listing, so the call is tried and says why it did not run.
        assert "'oikos'" in gone.json()["error"]["message"] and "unreachable" in gone.json()["error"]["message"]
        assert query(hermes, {"tool": "oikos/whoami"}).status_code == 200


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
