"""Oikos unreachable when a turn starts: the tools stay defined from the last known list, calls to
them say the server is unreachable, the model is told which server is down, and every request is
one the real API accepts (the fake refuses a tool history without tools, as the API does).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from typing import Any

import pytest

from agent.conversation.events import Done, Error, ToolResult
from agent.tools import ToolHub
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from tests.fakes.scripted_models import DegradedInvestigator
from tests.fakes.subprocesses import clean_environ, manage

HEALTH = "mcp__oikos__get_health_summary"
OIKOS_TOOL_COUNT = 28


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in request.get("tools") or []]


def oikos_tool_names(request: dict[str, Any]) -> list[str]:
    """Oikos's tools offered (Hermes's built-in `changes_since` is offered beside them)."""
    return [name for name in tool_names(request) if name.startswith("mcp__oikos__")]


def system_text(request: dict[str, Any]) -> str:
    system = request["system"]
    return system if isinstance(system, str) else "\n".join(block["text"] for block in system)


def holds_tool_blocks(request: dict[str, Any]) -> bool:
    return any(
        block.get("type") in ("tool_use", "tool_result")
        for message in request["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
    )


@pytest.mark.django_db(transaction=True)
async def test_oikos_stopped_between_two_turns_keeps_its_tools_and_says_it_is_down(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    llm.responder = DegradedInvestigator()
    first, events = await ask("what's degraded and what depends on it?", oikos_hub)
    assert isinstance(events[-1], Done) and events[-1].status == "done"
    first_requests = len(llm.requests)

    oikos_settings.stop()
    llm.responder = None
    llm.enqueue(Reply.tool_use(HEALTH, {}), Reply.text("Oikos does not answer; I cannot check the fleet now."))
    _, events = await ask("is it still degraded?", oikos_hub, session_id=first.session_id)

    assert not llm.rejections
    request = llm.requests[first_requests].body
    assert holds_tool_blocks(request)  # the API would refuse this request without tools
    assert len(oikos_tool_names(request)) == OIKOS_TOOL_COUNT and HEALTH in tool_names(request)
    # The tool list and the persona keep their cache marks; the note is a block of its own after them.
    assert request["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    persona, note = request["system"]
    assert "cache_control" in persona and "cache_control" not in note
    assert "The MCP server `oikos` did not answer when this turn started" in note["text"]
    assert "cannot connect" in note["text"]
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "unreachable" in result.content and "get_health_summary was not run" in result.content
    assert isinstance(events[-1], Done) and events[-1].status == "done"


@pytest.mark.django_db(transaction=True)
async def test_nothing_known_and_no_tool_history_asks_without_tools_and_says_why(
    llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    oikos_settings.stop()
    hub = ToolHub.from_settings()
    llm.enqueue(Reply.text("Oikos does not answer, so I cannot look."))
    try:
        _, events = await ask("what's degraded?", hub)
    finally:
        await hub.aclose()

    assert not llm.rejections
    (request,) = [recorded.body for recorded in llm.requests]
    assert "tools" not in request
    assert "Hermes has never listed its tools, so none of them are offered" in system_text(request)
    assert isinstance(events[-1], Done) and events[-1].status == "done"


def ask_process(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return manage("ask", *args, "--json", env=env, timeout=120)


def json_events(run: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.fixture
def process_env(fresh_database: str, fake_llm: FakeAnthropic, oikos: RunningSim) -> dict[str, str]:
    """A `manage.py ask` process's environment: the scripted model, oikos_sim, a fresh database."""
    return {
        **clean_environ(),
        **fake_llm.env(),
        "DATABASE_URL": fresh_database,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
    }


def session_with_tool_history(env: dict[str, str], fake_llm: FakeAnthropic) -> str:
    """A session whose first turn, Oikos up, called tools; its id."""
    fake_llm.responder = DegradedInvestigator()
    run = ask_process("what's degraded and what depends on it?", env=env)
    assert run.returncode == 0, run.stderr
    fake_llm.responder = None
    return str(json_events(run)[-1]["session_id"])


def test_a_fresh_process_with_oikos_down_offers_the_stored_tool_list(
    process_env: dict[str, str], fake_llm: FakeAnthropic, oikos: RunningSim
) -> None:
    session_id = session_with_tool_history(process_env, fake_llm)
    oikos.stop()
    before = len(fake_llm.requests)
    fake_llm.enqueue(Reply.text("Oikos does not answer right now."))

    run = ask_process("is it still degraded?", "--session", session_id, env=process_env)

    assert run.returncode == 0, run.stderr
    assert not fake_llm.rejections
    (request,) = [recorded.body for recorded in fake_llm.requests[before:]]
    assert holds_tool_blocks(request)
    assert len(oikos_tool_names(request)) == OIKOS_TOOL_COUNT and HEALTH in tool_names(request)
    note = system_text(request)
    assert "The MCP server `oikos` did not answer" in note and "listed as it last offered them" in note
    assert json_events(run)[-1]["status"] == "done"


def test_nothing_known_with_a_tool_history_refuses_the_turn_with_a_clear_message(
    process_env: dict[str, str], fake_llm: FakeAnthropic, oikos: RunningSim, fresh_database: str
) -> None:
    session_id = session_with_tool_history(process_env, fake_llm)
    # As after an upgrade from a Hermes that kept no tool list: the history has tool calls, no list is known.
    with sqlite3.connect(fresh_database.removeprefix("sqlite:///")) as database:
        database.execute("DELETE FROM agent_tool_catalog")
    oikos.stop()
    before = len(fake_llm.requests)

    run = ask_process("is it still degraded?", "--session", session_id, env=process_env)

    assert run.returncode == 1, run.stderr
    assert fake_llm.requests[before:] == []  # nothing the API would refuse was sent
    events = json_events(run)
    error, done = events[-2:]
    assert error["type"] == Error.type and error["code"] == "tools_unavailable"
    assert "never listed the tools of the MCP server 'oikos', which is unreachable now" in error["message"]
    assert "Ask again once the server is back" in error["message"]
    assert done["status"] == "error" and done["stop_reason"] == "tools_unavailable"
