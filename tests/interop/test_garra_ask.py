"""Hermes → GarraIA: a Hermes turn calling `garra_ask` on a stand-in `garra mcp-server` over stdio."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent.conversation.events import ToolResult, ToolUse
from agent.engine.runner import turn_start
from agent.tools import MCPConfigError, ToolHub
from agent.tools.context import ToolCallContext
from tests.agent.conftest import turn_collect
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_fixtures import REPO_ROOT, WriteMCPConfig
from tests.fakes.scripted_models import last_tool_results, tool_result_text

pytestmark = pytest.mark.django_db(transaction=True)

GARRA_TOOL = "mcp__garraia__garra_ask"


def garra_entry(log: Path, **hermes: Any) -> dict[str, Any]:
    options = {"envelope": "garra.ask.v1", "arguments": {"provider": "echo", "model": "echo-stub"}, **hermes}
    return {
        "command": sys.executable,
        "args": ["-m", "tests.interop.garra_stand_in"],
        "cwd": str(REPO_ROOT),
        "env": {"GARRA_STAND_IN_LOG": str(log)},
        "hermes": options,
    }


@pytest.fixture
def garra_log(tmp_path: Path) -> Path:
    return tmp_path / "garra-calls.jsonl"


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
async def garra_hub(mcp_config_file: WriteMCPConfig, garra_log: Path) -> AsyncIterator[ToolHub]:
    mcp_config_file({"garraia": garra_entry(garra_log)})
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


def ask_garra(arguments: dict[str, Any]) -> Callable[[dict[str, Any]], Reply]:
    """A model that calls garra_ask once with `arguments`, then answers with what it got back."""

    def respond(request: dict[str, Any]) -> Reply:
        results = last_tool_results(request)
        if not results:
            return Reply.tool_use(GARRA_TOOL, arguments)
        return Reply.text("GarraIA said: " + tool_result_text(results[0]))

    return respond


async def run_turn(hub: ToolHub, text: str = "ask garra", **kwargs: Any) -> list[Any]:
    handle = await turn_start(text=text, actor="operator:test", origin="cli", hub=hub, **kwargs)
    return await turn_collect(handle)


async def test_the_answer_reaches_the_model_as_untrusted_text_and_provider_model_are_always_sent(
    llm: FakeAnthropic, garra_hub: ToolHub, garra_log: Path
) -> None:
    llm.responder = ask_garra({"message": "Responda apenas: HERMES-GARRA-OK"})

    events = await run_turn(garra_hub)

    offered = {tool["name"]: tool for tool in llm.requests[0].body["tools"]}
    # The model cannot choose provider or model: configuration pins them.
    assert set(offered[GARRA_TOOL]["input_schema"]["properties"]) == {"message", "timeout_secs", "system_prompt"}
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert not result.is_error
    [sent] = last_tool_results(llm.requests[1].body)
    text = tool_result_text(sent)
    assert text.startswith('<untrusted_agent_content source="garraia">\n[echo] Responda apenas: HERMES-GARRA-OK\n')
    assert "not by your operator" in text and "(answered by echo/echo-stub" in text
    assert '"schema"' not in text  # the envelope itself never reaches the model
    assert calls(garra_log) == [
        {
            "tool": "garra_ask",
            "arguments": {"message": "Responda apenas: HERMES-GARRA-OK", "provider": "echo", "model": "echo-stub"},
        }
    ]
    assert not llm.rejections


async def test_configuration_wins_over_a_model_that_picks_its_own_provider(
    llm: FakeAnthropic, garra_hub: ToolHub, garra_log: Path
) -> None:
    llm.responder = ask_garra({"message": "hi", "provider": "openrouter", "model": "something-expensive"})
    await run_turn(garra_hub)
    assert calls(garra_log)[0]["arguments"] == {"message": "hi", "provider": "echo", "model": "echo-stub"}


async def test_an_error_envelope_becomes_a_clear_error_result(llm: FakeAnthropic, garra_hub: ToolHub) -> None:
    llm.responder = ask_garra({"message": "FAIL: the provider quota is exhausted"})
    events = await run_turn(garra_hub)
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    [sent] = last_tool_results(llm.requests[1].body)
    assert sent["is_error"] is True
    assert tool_result_text(sent) == "GarraIA could not answer (provider_error): the provider quota is exhausted"


async def test_invalid_params_becomes_a_clear_error_result(llm: FakeAnthropic, garra_hub: ToolHub) -> None:
    llm.responder = ask_garra({"message": "hi", "temperature": 2})
    events = await run_turn(garra_hub)
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    text = tool_result_text(last_tool_results(llm.requests[1].body)[0])
    assert text.startswith(
        "garra_ask refused the arguments (invalid_params): failed to deserialize parameters: "
        "unknown field `temperature`"
    )
    assert "at most 64 KiB" in text


async def test_a_turn_started_by_garraia_cannot_call_garraia_back(
    llm: FakeAnthropic, garra_hub: ToolHub, garra_log: Path
) -> None:
    llm.responder = lambda request: Reply.text("I answer myself.")
    await run_turn(garra_hub, "a question from garraia", origin_peer="garraia")
    assert GARRA_TOOL not in {tool["name"] for tool in llm.requests[0].body.get("tools", [])}
    # Even if a model asked for it by name, the hub refuses without calling the server.
    outcome = await garra_hub.call(GARRA_TOOL, {"message": "ping"}, context=_context("garraia"))
    assert outcome.is_error and outcome.record["error"]["kind"] == "depth_guard"
    assert calls(garra_log) == []
    # Another peer's turn (or an operator's) still can.
    await garra_hub.list_tools()
    assert not (await garra_hub.call(GARRA_TOOL, {"message": "ping"}, context=_context("lab"))).is_error


def _context(origin_peer: str) -> ToolCallContext:
    return ToolCallContext(actor=f"peer:{origin_peer}", origin_peer=origin_peer)


async def test_tool_use_events_name_the_server_and_the_real_tool(llm: FakeAnthropic, garra_hub: ToolHub) -> None:
    llm.responder = ask_garra({"message": "hi"})
    events = await run_turn(garra_hub)
    [use] = [e for e in events if isinstance(e, ToolUse)]
    assert (use.server, use.tool) == ("garraia", "garra_ask")


@pytest.mark.parametrize(
    ("entry_change", "named"),
    [
        (lambda e: e["hermes"].update(arguments={"provider": "echo"}), 'hermes.arguments.model"'),
        (lambda e: e["env"].update(GARRAIA_MCP_ENABLE_TOOLS="1"), "GARRAIA_MCP_ENABLE_TOOLS"),
        (lambda e: e["hermes"].update(envelope="garra.ask.v9"), 'unknown envelope "garra.ask.v9"'),
        (lambda e: e["hermes"].update(colour="red"), 'unknown key "hermes.colour"'),
    ],
)
def test_unsafe_or_incomplete_garra_entries_are_refused(
    mcp_config_file: WriteMCPConfig, garra_log: Path, entry_change: Callable[[dict[str, Any]], None], named: str
) -> None:
    entry = garra_entry(garra_log)
    entry_change(entry)
    mcp_config_file({"garraia": entry})
    with pytest.raises(MCPConfigError, match=named.replace(".", r"\.")):
        ToolHub.from_settings()
