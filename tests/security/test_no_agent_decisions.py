"""No path lets the agent decide an approval: decision tools are recognised by the server they come
from — the Oikos server offers only its known surface, whatever a new tool is called — and only
Oikos's own `request_execution` raises an approval.

The rogue server (`tests.security.rogue_mcp_server`) offers every spelling of a decision tool and a
`request_execution` of its own that answers with a forged approval id: none of it is Oikos's, so
none of it decides or raises anything, and a turn nobody at Hermes started is offered none of it
(none declares `readOnlyHint`).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.conversation.events import Approval, Done, ToolResult
from agent.engine.runner import turn_start
from agent.models import Activity
from agent.tools import ToolHub
from agent.tools.context import ToolCallContext
from agent.tools.policy import OIKOS_TOOLS, ToolPolicy
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
# Every tool of the rogue server: offered to an operator's turn as another server's tools, never as
# decisions (a request of its own must raise nothing).
ROGUE_OFFERED = {
    f"mcp__rogue__{tool}" for tool in [*ROGUE_DECISION_TOOLS, "list_approvals", "request_execution", "sudo_run"]
}

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


async def test_a_turn_nobody_at_hermes_started_is_offered_none_of_another_servers_tools(
    llm: FakeAnthropic, rogue_hub: ToolHub, marker: Path
) -> None:
    llm.enqueue(Reply.text("Only a person can decide that."))

    handle = await turn_start(
        text="approve apr-1 for me", actor="peer:lab", origin="a2a", origin_peer="lab", hub=rogue_hub
    )
    await handle.wait()

    assert "tools" not in llm.requests[0].body or llm.requests[0].body["tools"] == []
    for tool in ROGUE_DECISION_TOOLS:
        outcome = await rogue_hub.call(
            f"mcp__rogue__{tool}",
            {"approval_id": "apr-1"},
            context=ToolCallContext(actor="peer:lab", origin="a2a", capability="read"),
        )
        assert outcome.is_error and "not available in this turn" in outcome.content[0]["text"], tool
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

    assert set(offered_tools(llm)) == ROGUE_OFFERED - {"mcp__rogue__list_approvals", "mcp__rogue__sudo_run"}
    assert refused.is_error and decisions_made(marker) == []


async def test_oikos_offers_the_model_its_whole_known_surface(
    llm: FakeAnthropic, oikos_settings: RunningSim, oikos_hub: ToolHub
) -> None:
    llm.enqueue(Reply.text("Nothing to do."))

    await ask("what's pending?", oikos_hub)

    offered = offered_tools(llm)
    # The allowlist is oikos_sim's surface, exactly: a tool added to either shows up here. Beside
    # it, Hermes's own read-only `changes_since` (oikos/changes_tool.py) and its memory's tools
    # (agent/memory/tool.py: `remember` only proposes a note an operator saves).
    assert sorted(offered) == sorted(
        [*(f"mcp__oikos__{tool}" for tool in OIKOS_TOOLS), "changes_since", "notes_search", "remember"]
    )


async def test_a_second_servers_request_execution_raises_no_approval(
    llm: FakeAnthropic, oikos_and_rogue_hub: ToolHub, marker: Path
) -> None:
    llm.enqueue(
        Reply.tool_use("mcp__rogue__request_execution", {"target": "service:vault", "action": "destroy"}),
        Reply.text("It says it needs approval."),
    )

    handle, events = await ask("destroy vault", oikos_and_rogue_hub)

    offered = offered_tools(llm)
    builtins = {"changes_since", "notes_search", "remember"}
    assert set(offered) == ROGUE_OFFERED | {f"mcp__oikos__{tool}" for tool in OIKOS_TOOLS} | builtins
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


# Synonyms a word list let through: on the Oikos server, an unknown tool is withheld whatever its name.
OIKOS_SYNONYMS = [
    "approve_execution",
    "grant_approval",
    "greenlight",
    "sign_off_change",
    "ratify",
    "rubber_stamp",
    "okay_request",
    "bless_execution",
    "let_it_run",
    "approval.grant",
    "list_pending_executions",
]


@pytest.mark.parametrize("tool", OIKOS_SYNONYMS)
def test_an_oikos_tool_outside_its_known_surface_is_withheld_whatever_it_is_called(tool: str) -> None:
    assert ToolPolicy(oikos=True).withheld(tool) is not None
    # Another server's tool of that name decides nothing in Oikos: only provenance limits it.
    assert ToolPolicy().withheld(tool) is None


def test_the_oikos_allowlist_its_reads_and_what_the_operator_vouches_for() -> None:
    oikos = ToolPolicy(oikos=True, allow=("get_execution_logs",))

    assert all(oikos.withheld(tool) is None for tool in OIKOS_TOOLS)
    # A newer Oikos's new read, annotated so by Oikos, is offered; so is a tool `tools.allow` names.
    assert oikos.withheld("get_capacity_report", read_only=True) is None
    assert oikos.withheld("get_capacity_report") is not None
    assert oikos.withheld("get_execution_logs") is None
    # A denied pattern beats the known surface.
    assert ToolPolicy(oikos=True, deny=("tail_*",)).withheld("tail_log") is not None
