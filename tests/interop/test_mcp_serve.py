"""Hermes as an MCP server: the official MCP client over stdio to `manage.py mcp_serve`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import INVALID_PARAMS, LATEST_PROTOCOL_VERSION, Implementation, TextContent

from agent.version import hermes_version
from tests.fakes import FakeAnthropic, Reply, text, thinking
from tests.fakes.mcp_fixtures import stdio_server_entry
from tests.fakes.subprocesses import REPO_ROOT, clean_environ
from tests.interop.processes import database_rows

PYPROJECT_VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture
def env(fresh_database: str, fake_llm: FakeAnthropic) -> dict[str, str]:
    return {**clean_environ(), **fake_llm.env(), "DATABASE_URL": fresh_database}


@asynccontextmanager
async def hermes_mcp(env: dict[str, str], *args: str, client: str = "garraia-test") -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_serve", *args], cwd=str(REPO_ROOT), env=env
    )
    async with Client(params, client_info=Implementation(name=client, version="1.0")) as session:
        yield session


async def ask(session: Client, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    result = await session.call_tool("hermes_ask", arguments)
    [content] = result.content
    assert isinstance(content, TextContent)
    return result.is_error, json.loads(content.text)


async def test_lists_hermes_ask_and_a_second_call_continues_the_session(
    env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    fake_llm.enqueue(Reply.text("Postgres is degraded."), Reply.text("Immich depends on it."))
    async with hermes_mcp(env) as session:
        [tool] = (await session.list_tools()).tools
        assert tool.name == "hermes_ask"
        assert tool.input_schema["required"] == ["message"]
        assert set(tool.input_schema["properties"]) == {"message", "session_id", "timeout_secs"}
        assert tool.input_schema["additionalProperties"] is False

        failed, first = await ask(session, message="what's degraded?")
        failed_again, second = await ask(session, message="what depends on it?", session_id=first["session_id"])

    assert not failed and not failed_again
    assert first["schema"] == "hermes.ask.v1" and first["ok"] is True
    assert set(first) == {"schema", "ok", "answer", "session_id", "turn_id", "usage", "latency_ms"}
    assert first["answer"] == "Postgres is degraded." and second["answer"] == "Immich depends on it."
    assert first["usage"]["output_tokens"] > 0 and first["latency_ms"] >= 0
    assert second["session_id"] == first["session_id"] and second["turn_id"] != first["turn_id"]
    history = fake_llm.requests[1].body["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[1]["content"][0]["text"] == "Postgres is degraded."
    rows = database_rows(env["DATABASE_URL"], "select actor, origin from agent_sessions")
    assert rows == [("peer:garraia-test", "mcp")]


async def test_failures_are_error_envelopes(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.enqueue(Reply.http_error(401, "authentication_error", "invalid x-api-key"))
    async with hermes_mcp(env) as session:
        failed, envelope = await ask(session, message="hello?")
        assert failed
        assert envelope["schema"] == "hermes.ask.v1" and envelope["ok"] is False
        assert envelope["error"]["kind"] == "llm_error" and "rejected the credentials" in envelope["error"]["message"]

        unknown = "00000000-0000-4000-8000-000000000000"
        failed, envelope = await ask(session, message="hello?", session_id=unknown)
        assert failed and envelope["error"]["kind"] == "session_not_found"

    no_model = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    async with hermes_mcp(no_model) as session:
        failed, envelope = await ask(session, message="hello?")
    assert failed and envelope["error"]["kind"] == "llm_not_configured"


async def test_a_peer_cannot_continue_another_peers_session(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.enqueue(Reply.text("Private answer."))
    async with hermes_mcp(env, client="peer-one") as session:
        _, first = await ask(session, message="remember this")
    async with hermes_mcp(env, client="peer-two") as session:
        failed, envelope = await ask(session, message="what did I say?", session_id=first["session_id"])
    assert failed and envelope["error"]["kind"] == "session_not_found"
    assert len(fake_llm.requests) == 1


async def test_bad_arguments_are_error_results_the_calling_model_can_read(
    env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    bad: list[tuple[dict[str, Any], str]] = [
        ({"message": "hi", "timeout_secs": 0}, "timeout_secs must be between 1 and 600"),
        ({"message": "hi", "colour": "red"}, "unknown argument 'colour'"),
        ({"message": ""}, "message must be a non-empty string"),
        ({"message": "hi", "session_id": "not-a-uuid"}, "session_id must be a session id (a UUID)"),
        ({"message": "hi", "timeout_secs": "soon"}, "timeout_secs must be an integer"),
    ]
    async with hermes_mcp(env) as session:
        for arguments, reason in bad:
            failed, envelope = await ask(session, **arguments)
            assert failed, arguments
            assert envelope["ok"] is False and envelope["error"]["kind"] == "invalid_arguments"
            assert envelope["error"]["message"].startswith("hermes_ask: ") and reason in envelope["error"]["message"]
        # A tool that does not exist is still a protocol error.
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("hermes_tell", {"message": "hi"})
        assert unknown.value.code == INVALID_PARAMS
    assert fake_llm.requests == []


async def test_hermes_introduces_itself_with_its_own_name_and_version(env: dict[str, str]) -> None:
    async with hermes_mcp(env) as session:
        info = session.server_info
    assert info is not None and info.name == "hermes"
    assert info.version == hermes_version() == PYPROJECT_VERSION


async def test_a_call_from_a_peer_never_reaches_that_peer_back(
    env: dict[str, str], fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    """With GarraIA's `garra_ask` configured, a turn GarraIA started cannot see it (the depth guard),
    nor can a turn of another peer: a peer's turn only reads, and `garra_ask` declares no readOnlyHint."""
    config = tmp_path / "mcp.json"
    garra = {
        "command": sys.executable,
        "args": ["-m", "tests.interop.garra_stand_in"],
        "cwd": str(REPO_ROOT),
        "hermes": {"envelope": "garra.ask.v1", "arguments": {"provider": "echo", "model": "echo-stub"}},
    }
    config.write_text(json.dumps({"mcpServers": {"garraia": garra}}))
    env = {**env, "HERMES_MCP_CONFIG": str(config)}
    fake_llm.responder = lambda request: Reply.text("Answered without tools.")
    async with hermes_mcp(env, "--peer", "garraia") as session:
        assert not (await ask(session, message="hello from garraia"))[0]
    async with hermes_mcp(env, "--peer", "lab") as session:
        assert not (await ask(session, message="hello from lab"))[0]
    offered = [{tool["name"] for tool in request.body.get("tools", [])} for request in fake_llm.requests]
    assert offered == [set(), set()]
    actors = database_rows(env["DATABASE_URL"], "select actor from agent_sessions order by created_at")
    assert actors == [("peer:garraia",), ("peer:lab",)]


async def test_a_peer_gets_the_answer_without_the_models_thinking(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    reasoning = "Private reasoning: the peer asks about postgres; nothing to call."
    fake_llm.enqueue(Reply.blocks([thinking(reasoning), text("Postgres is degraded.")]))
    async with hermes_mcp(env) as session:
        failed, answer = await ask(session, message="what's degraded?")

    assert not failed and answer["answer"] == "Postgres is degraded."
    assert fake_llm.requests[0].body["thinking"] == {"type": "adaptive"}
    assert reasoning not in json.dumps(answer)


def test_sigterm_stops_it_while_its_client_keeps_stdin_open(env: dict[str, str]) -> None:
    server = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_serve"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "garraia-test", "version": "1.0"},
            },
        }
        server.stdin.write(json.dumps(initialize).encode() + b"\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1  # serving, reading stdin

        server.send_signal(signal.SIGTERM)
        # The client has not closed stdin: the server must go anyway.
        status = server.wait(timeout=60)
    finally:
        server.kill()
        server.wait()
        server.stdin.close()
        server.stdout.close()
    assert status in (0, 128 + signal.SIGTERM)


async def test_a_caller_that_asks_for_progress_is_told_each_step_of_the_turn(
    env: dict[str, str], fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"oikos": stdio_server_entry()}}))
    env = {**env, "HERMES_MCP_CONFIG": str(config)}
    fake_llm.enqueue(Reply.tool_use("mcp__oikos__get_health_summary", {}), Reply.text("Postgres is degraded."))
    steps: list[tuple[float, float | None, str | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, total, message))

    async with hermes_mcp(env) as session:
        result = await session.call_tool("hermes_ask", {"message": "what's degraded?"}, progress_callback=note)

    assert not result.is_error
    assert steps == [
        (1, None, "Hermes is calling mcp__oikos__get_health_summary"),
        (2, None, "Hermes is writing its answer"),
    ]
