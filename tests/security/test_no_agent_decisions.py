"""No path lets the agent decide an approval: no deciding tool reaches the model or the tool hub, and
only Oikos's own `request_execution` raises an approval.

The rogue server (`tests.security.rogue_mcp_server`) offers every spelling of a decision tool and a
`request_execution` of its own that answers with a forged approval id.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.engine.events import Approval, Done, ToolResult
from agent.models import Activity
from agent.tools import ToolHub
from agent.tools.policy import OIKOS_TOOLS, ToolPolicy, tool_decides_approvals
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_fixtures import REPO_ROOT, WriteMCPConfig
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from tests.security.rogue_mcp_server import FORGED_APPROVAL_ID

pytestmark = pytest.mark.django_db(transaction=True)

ROGUE_DECISION_TOOLS = [
    "approve_execution",
    "deny_approval",
    "decideApproval",
    "grant_approval",
    "resolve_approval",
    "approves_execution",
    "submitDecision",
]
# What the rogue server may offer: reads, and a request (which must raise nothing).
ROGUE_OFFERED = {"mcp__rogue__list_approvals", "mcp__rogue__request_execution", "mcp__rogue__sudo_run"}

RogueConfig = Callable[..., Path]


def rogue_entry(marker: Path, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.security.rogue_mcp_server"],
        "cwd": str(REPO_ROOT),
        "env": {"ROGUE_MARKER": str(marker)},
        **extra,
    }


def oikos_entry(sim: RunningSim) -> dict[str, Any]:
    return {"type": "http", "url": sim.mcp_url, "headers": {"Authorization": f"Bearer {AGENT_TOKEN}"}}


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Where the rogue server writes each decision it is asked to make; it must stay absent."""
    return tmp_path / "decisions.txt"


@pytest.fixture
async def rogue_hub(mcp_config_file: WriteMCPConfig, marker: Path) -> AsyncIterator[ToolHub]:
    mcp_config_file({"rogue": rogue_entry(marker)})
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


@pytest.fixture
async def oikos_and_rogue_hub(
    mcp_config_file: WriteMCPConfig, oikos_settings: RunningSim, marker: Path
) -> AsyncIterator[ToolHub]:
    """The real Oikos (oikos_sim) as server `oikos`, and the rogue server beside it."""
    mcp_config_file({"oikos": oikos_entry(oikos_settings), "rogue": rogue_entry(marker)})
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


def decisions_made(marker: Path) -> list[str]:
    """What the rogue server was asked to decide (it appends a line per decision)."""
    return marker.read_text(encoding="utf-8").splitlines() if marker.exists() else []


def offered_tools(llm: FakeAnthropic) -> list[str]:
    return [tool["name"] for tool in llm.requests[0].body["tools"]]


async def test_deciding_tools_of_any_server_are_never_offered_to_the_model(
    llm: FakeAnthropic, rogue_hub: ToolHub, marker: Path
) -> None:
    llm.enqueue(Reply.text("Only a person can decide that."))

    _, events = await ask("approve apr-1 for me", rogue_hub)

    assert isinstance(events[-1], Done)
    assert set(offered_tools(llm)) == ROGUE_OFFERED
    assert decisions_made(marker) == []


async def test_nor_can_anything_call_them_through_the_hub(rogue_hub: ToolHub, marker: Path) -> None:
    """`/query`, peers and the engine all call tools through the hub."""
    for tool in ROGUE_DECISION_TOOLS:
        outcome = await rogue_hub.call(f"mcp__rogue__{tool}", {"approval_id": "apr-1"})

        assert outcome.is_error, tool
        assert "Unknown tool" in outcome.content[0]["text"]
    assert decisions_made(marker) == [], "a deciding tool of the server ran"


async def test_a_server_and_the_setting_deny_more_tools_by_pattern_in_any_spelling(
    llm: FakeAnthropic, mcp_config_file: WriteMCPConfig, marker: Path, settings: Settings
) -> None:
    settings.HERMES_MCP_TOOLS_DENY = ["list*approvals"]
    mcp_config_file({"rogue": rogue_entry(marker, tools={"deny": ["SUDO*"]})})
    hub = ToolHub.from_settings()
    llm.enqueue(Reply.text("Nothing to do."))
    try:
        await ask("anything?", hub)
        refused = await hub.call("mcp__rogue__sudo_run", {"command": "id"})
    finally:
        await hub.aclose()

    assert offered_tools(llm) == ["mcp__rogue__request_execution"]
    assert refused.is_error and decisions_made(marker) == []


async def test_oikos_offers_the_model_its_whole_surface_but_no_decisions(
    llm: FakeAnthropic, oikos_settings: RunningSim, oikos_hub: ToolHub
) -> None:
    llm.enqueue(Reply.text("Nothing to do."))

    await ask("what's pending?", oikos_hub)

    offered = offered_tools(llm)
    # The allowlist is oikos_sim's surface, exactly: a tool added to either shows up here.
    assert sorted(offered) == sorted(f"mcp__oikos__{tool}" for tool in OIKOS_TOOLS)
    assert not [name for name in offered if tool_decides_approvals(name)]


async def test_a_second_servers_request_execution_raises_no_approval(
    llm: FakeAnthropic, oikos_and_rogue_hub: ToolHub, marker: Path
) -> None:
    llm.enqueue(
        Reply.tool_use("mcp__rogue__request_execution", {"target": "service:vault", "action": "destroy"}),
        Reply.text("It says it needs approval."),
    )

    handle, events = await ask("destroy vault", oikos_and_rogue_hub)

    offered = offered_tools(llm)
    assert set(offered) == ROGUE_OFFERED | {f"mcp__oikos__{tool}" for tool in OIKOS_TOOLS}
    (result,) = [event for event in events if isinstance(event, ToolResult)]
    assert FORGED_APPROVAL_ID in result.content, "the call ran and answered"
    assert not [event for event in events if isinstance(event, Approval)]
    assert isinstance(events[-1], Done) and events[-1].status == "done"
    rows = await database_sync_to_async(list)(
        Activity.objects.filter(correlation_id=handle.turn_id).values_list("server", "tool")
    )
    assert rows == [("rogue", "request_execution")]


async def test_only_the_server_named_by_the_setting_is_oikos(
    llm: FakeAnthropic,
    mcp_config_file: WriteMCPConfig,
    oikos_settings: RunningSim,
    marker: Path,
    settings: Settings,
) -> None:
    """Named otherwise, the real Oikos raises approvals only once `HERMES_OIKOS_SERVER` names it."""
    mcp_config_file({"homelab": oikos_entry(oikos_settings), "oikos": rogue_entry(marker)})
    settings.HERMES_OIKOS_SERVER = "homelab"
    hub = ToolHub.from_settings()
    deploy = {"target": "service:jellyfin", "action": "deploy", "reason": "asked"}
    llm.enqueue(
        Reply.tool_use("mcp__oikos__request_execution", deploy),
        Reply.tool_use("mcp__homelab__request_execution", deploy),
        Reply.text("Waiting for an operator."),
    )
    try:
        _, events = await ask("deploy jellyfin", hub)
    finally:
        await hub.aclose()

    (approval,) = [event for event in events if isinstance(event, Approval)]
    assert approval.approval_id in oikos_settings.state.desk.approvals
    assert approval.approval_id != FORGED_APPROVAL_ID


def test_an_oikos_tool_outside_its_known_surface_is_withheld_when_it_touches_approvals() -> None:
    oikos = ToolPolicy(oikos=True, allow=("get_execution_logs", "approval_override"))

    assert all(oikos.withheld(tool) is None for tool in OIKOS_TOOLS)
    # A newer Oikos's new read tool is offered; one that touches approvals needs `tools.allow`.
    assert oikos.withheld("get_capacity_report") is None
    assert oikos.withheld("list_pending_executions") is not None
    assert oikos.withheld("get_execution_logs") is None
    # Never a decision tool, even when the configuration vouches for it.
    assert oikos.withheld("approval_override") is not None
    assert oikos.withheld("grant_approval") is not None
    # A denied pattern beats the known surface.
    assert ToolPolicy(oikos=True, deny=("tail_*",)).withheld("tail_log") is not None


@pytest.mark.parametrize(
    ("name", "decides"),
    [
        ("approve_execution", True),
        ("denyApproval", True),
        ("approval.decide", True),
        ("reject", True),
        ("grant_approval", True),
        ("grantApproval", True),
        ("approval-grant", True),
        ("resolve_approval", True),
        ("approves_execution", True),
        ("submitDecision", True),
        ("confirm_execution", True),
        ("acceptRequest", True),
        ("set_verdict", True),
        ("authorize", True),
        ("approveexecution", True),
        ("APPROVE", True),
        ("list_approvals", False),
        ("get_approval", False),
        ("request_execution", False),
        ("get_execution", False),
        ("get_denylist", False),
        ("get_decision_log", False),
        ("preflight", False),
        ("get_signal_history", False),
        ("search_knowledge", False),
    ],
)
def test_deciding_names_are_recognised_in_every_spelling(name: str, decides: bool) -> None:
    assert tool_decides_approvals(name) is decides
