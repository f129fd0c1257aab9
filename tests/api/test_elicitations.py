"""An MCP server's question during a `/chat` turn, answered through `POST /elicitations/<id>`,
under Daphne as a script uses it: accept (content checked against the form), decline, cancel."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.api.conftest import SseEvent, SseStream, hermes_env, sse_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_fixtures import http_server_entry
from tests.fakes.mcp_servers import MCPTestServer, build_asking_server


class Asking:
    def __init__(self, server: DaphneServer, model: FakeAnthropic) -> None:
        self.server = server
        self.model = model

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def asking(live_database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Asking]:
    directory = tmp_path_factory.mktemp("hermes-elicit")
    with FakeAnthropic() as model, MCPTestServer(build=build_asking_server) as deployer:
        config = directory / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"deployer": http_server_entry(deployer, timeout=60)}}))
        env = hermes_env(model, None, HERMES_MCP_CONFIG=str(config))
        with DaphneServer(database=live_database, env=env, log_path=directory / "daphne.log") as server:
            yield Asking(server, model)


def answer(asking: Asking, elicitation_id: str, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(f"{asking.url}/elicitations/{elicitation_id}", json=body, timeout=10)


def deploy_turn(asking: Asking, body: dict[str, Any], *, then: str) -> tuple[SseStream, list[httpx2.Response]]:
    """Start a turn whose tool asks a question, answer it with `body` once it shows, read to the end."""
    asking.model.enqueue(
        Reply.tool_use("mcp__deployer__deploy", {"service": "jellyfin"}, id="toolu_deploy"), Reply.text(then)
    )
    responses: list[httpx2.Response] = []
    with httpx2.stream("POST", f"{asking.url}/chat", json={"message": "deploy jellyfin"}, timeout=60) as response:
        stream = SseStream(status=response.status_code, headers=response.headers, started=time.monotonic())
        lines = response.iter_lines()
        sse_parse(lines, stream, stop=lambda event: event.event == "elicitation")
        asked = stream.events[-1].data
        assert asked["status"] == "pending"
        listed = httpx2.get(f"{asking.url}/elicitations", timeout=10).json()["elicitations"]
        assert asked["id"] in [item["id"] for item in listed]
        if body.get("action") == "accept":
            # A form that does not fit is refused, with what to fix, and the question stays open.
            wrong = answer(asking, asked["id"], {"action": "accept", "content": {"replicas": "lots"}})
            responses.append(wrong)
        responses.append(answer(asking, asked["id"], body))
        responses.append(answer(asking, asked["id"], {"action": "decline"}))  # too late
        sse_parse(lines, stream)
    return stream, responses


def elicitation_events(stream: SseStream) -> list[SseEvent]:
    return stream.of("elicitation")


def tool_text(stream: SseStream) -> str:
    return stream.of("tool_result")[0].data["content"]


def test_accept_sends_the_checked_content_to_the_server(asking: Asking) -> None:
    stream, (wrong, right, late) = deploy_turn(
        asking, {"action": "accept", "content": {"reason": "release 2.1", "replicas": 2}}, then="Deployed."
    )

    assert wrong.status_code == 400
    assert wrong.json()["error"]["code"] == "invalid_content"
    assert wrong.json()["errors"] == {"reason": "required", "replicas": "must be a number"}
    assert right.status_code == 200 and right.json()["status"] == "accept"
    assert late.status_code == 409 and late.json()["error"]["code"] == "elicitation_closed"

    asked, answered = elicitation_events(stream)
    assert asked.data["server"] == "deployer" and asked.data["tool"] == "deploy"
    assert [field["name"] for field in asked.data["fields"]] == ["reason", "environment", "replicas", "notify"]
    assert answered.data["status"] == "accept" and answered.data["answered_by"].startswith("operator:")
    # Omitted fields took their defaults; the server got exactly what was accepted.
    content = {"reason": "release 2.1", "environment": "staging", "replicas": 2, "notify": True}
    assert answered.data["content"] == content
    assert tool_text(stream) == f"deploy jellyfin: accepted {json.dumps(content, separators=(',', ':'))}"
    assert stream.events[-1].event == "done" and stream.text == "Deployed."


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_decline_and_cancel_reach_the_server(asking: Asking, action: str) -> None:
    stream, (given, late) = deploy_turn(asking, {"action": action}, then="Not deployed.")

    assert given.status_code == 200 and given.json()["status"] == action
    assert late.status_code == 409
    assert elicitation_events(stream)[-1].data["status"] == action
    assert tool_text(stream) == f"deploy jellyfin: {action}"
    assert httpx2.get(f"{asking.url}/elicitations", timeout=10).json()["elicitations"] == []


def test_bad_requests_are_refused_clearly(asking: Asking) -> None:
    assert answer(asking, "not-an-id", {"action": "decline"}).json()["error"]["code"] == "invalid_elicitation_id"
    missing = answer(asking, "00000000-0000-0000-0000-000000000000", {"action": "decline"})
    assert missing.status_code == 404
    bad_action = answer(asking, "00000000-0000-0000-0000-000000000000", {"action": "maybe"})
    assert bad_action.status_code == 400 and bad_action.json()["error"]["code"] == "invalid_action"
