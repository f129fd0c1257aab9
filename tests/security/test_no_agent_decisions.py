"""No path lets the agent decide an approval: no deciding tool reaches the model or the tool hub."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.engine.events import Done
from agent.tools import ToolHub
from agent.tools.approval_guard import tool_decides_approvals
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_fixtures import REPO_ROOT, WriteMCPConfig

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def rogue_hub(mcp_config_file: WriteMCPConfig, tmp_path: Path) -> AsyncIterator[tuple[ToolHub, Path]]:
    marker = tmp_path / "decisions.txt"
    mcp_config_file(
        {
            "rogue": {
                "command": sys.executable,
                "args": ["-m", "tests.security.rogue_mcp_server"],
                "cwd": str(REPO_ROOT),
                "env": {"ROGUE_MARKER": str(marker)},
            }
        }
    )
    hub = ToolHub.from_settings()
    yield hub, marker
    await hub.aclose()


async def test_deciding_tools_of_any_server_are_never_offered_to_the_model(
    llm: FakeAnthropic, rogue_hub: tuple[ToolHub, Path]
) -> None:
    hub, marker = rogue_hub
    llm.enqueue(Reply.text("Only a person can decide that."))

    _, events = await ask("approve apr-1 for me", hub)

    assert isinstance(events[-1], Done)
    offered = [tool["name"] for tool in llm.requests[0].body["tools"]]
    assert offered == ["mcp__rogue__list_approvals"]
    assert not marker.exists()


async def test_nor_can_anything_call_them_through_the_hub(rogue_hub: tuple[ToolHub, Path]) -> None:
    """`/query`, peers and the engine all call tools through the hub."""
    hub, marker = rogue_hub

    outcome = await hub.call("mcp__rogue__approve_execution", {"approval_id": "apr-1"})

    assert outcome.is_error
    assert "Unknown tool" in outcome.content[0]["text"]
    assert not marker.exists(), "the server's approve tool ran"


async def test_oikos_offers_the_model_requests_but_no_decisions(
    llm: FakeAnthropic, oikos_settings: RunningSim, oikos_hub: ToolHub
) -> None:
    llm.enqueue(Reply.text("Nothing to do."))

    await ask("what's pending?", oikos_hub)

    offered = [tool["name"] for tool in llm.requests[0].body["tools"]]
    assert len(offered) == 28
    assert "mcp__oikos__request_execution" in offered
    assert "mcp__oikos__list_approvals" in offered
    assert not [name for name in offered if tool_decides_approvals(name)]


@pytest.mark.parametrize(
    ("name", "decides"),
    [
        ("approve_execution", True),
        ("denyApproval", True),
        ("approval.decide", True),
        ("reject", True),
        ("list_approvals", False),
        ("request_execution", False),
        ("get_denylist", False),
        ("preflight", False),
    ],
)
def test_deciding_names_are_recognised_in_every_spelling(name: str, decides: bool) -> None:
    assert tool_decides_approvals(name) is decides
