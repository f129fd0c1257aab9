"""Built-in tools go through the hub like MCP tools: listed, offered per turn, called, failures contained."""

from __future__ import annotations

from typing import Any

import pytest

from agent.tools import ToolHub
from agent.tools.context import ToolCallContext
from agent.tools.local import LocalResult, LocalTool


class Clock(LocalTool):
    name = "clock"
    description = "What time it is."
    input_schema = {"type": "object", "properties": {}}
    read_only = True

    def __init__(self) -> None:
        self.contexts: list[ToolCallContext] = []

    def offered(self, context: ToolCallContext | None) -> bool:
        return context is None or context.origin_peer != "sundial"

    async def call(self, arguments: dict[str, Any], context: ToolCallContext) -> LocalResult:
        self.contexts.append(context)
        if arguments.get("explode"):
            raise RuntimeError("gears jammed")
        return LocalResult.text("noon")


async def test_listed_with_the_mcp_tools_offered_per_turn_and_called_with_the_turns_context() -> None:
    clock = Clock()
    hub = ToolHub([], [clock])
    [spec] = await hub.list_tools()
    assert (spec.name, spec.server, spec.tool, spec.read_only) == ("clock", "hermes", "clock", True)
    assert spec.to_anthropic() == {
        "name": "clock",
        "description": "What time it is.",
        "input_schema": clock.input_schema,
    }
    assert await hub.list_tools(ToolCallContext(origin_peer="sundial")) == []

    context = ToolCallContext(actor="operator:test", origin_peer="lab")
    outcome = await hub.call("clock", {}, context=context)
    assert (outcome.is_error, outcome.content, outcome.record) == (
        False,
        [{"type": "text", "text": "noon"}],
        {"text": "noon"},
    )
    assert clock.contexts == [context]


async def test_a_failing_built_in_tool_is_an_error_result_not_a_crashed_turn() -> None:
    hub = ToolHub([], [Clock()])
    outcome = await hub.call("clock", {"explode": True})
    assert outcome.is_error and outcome.record["error"]["kind"] == "internal"
    assert "gears jammed" in outcome.content[0]["text"]


@pytest.mark.parametrize("name", ["mcp__sneaky__tool", "has space", ""])
def test_names_that_could_pass_for_mcp_tools_or_break_the_api_are_refused(name: str) -> None:
    tool = Clock()
    tool.name = name
    with pytest.raises(ValueError, match="invalid built-in tool name"):
        ToolHub([], [tool])


def test_two_built_in_tools_cannot_share_a_name() -> None:
    with pytest.raises(ValueError, match="two built-in tools are named 'clock'"):
        ToolHub([], [Clock(), Clock()])
