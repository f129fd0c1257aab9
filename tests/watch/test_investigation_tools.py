"""A read-only investigation is read-only: only tools that read, no `a2a_send`, no other server's
write tools — offered to its model or called by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.tools import ToolHub
from agent.tools.context import ToolCallContext
from agent.tools.provenance import origin_capability
from interop.models import PeerExchange
from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.mcp_fixtures import WriteMCPConfig, http_server_entry
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from watch.policy import TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)

# Tools the investigation is not offered; its model names them anyway.
WRITES = ("a2a_send", "mcp__other__fail", "mcp__oikos__request_execution")


@pytest.fixture
def servers(
    oikos_settings: RunningSim,
    mcp_http_server: MCPTestServer,
    mcp_config_file: WriteMCPConfig,
    settings: Settings,
    tmp_path: Path,
) -> RunningSim:
    """Oikos, a second server with a write tool (`fail`, no readOnlyHint), and a peer for `a2a_send`."""
    mcp_config_file(
        {
            "oikos": {
                "type": "http",
                "url": oikos_settings.mcp_url,
                "headers": {"Authorization": f"Bearer {AGENT_TOKEN}"},
            },
            "other": http_server_entry(mcp_http_server),
        }
    )
    peers = tmp_path / "peers.json"
    # Nothing listens there: a call that got through would be recorded as an exchange all the same.
    peers.write_text(json.dumps({"peers": {"lab": {"url": "http://127.0.0.1:9", "dialect": "a2a"}}}))
    settings.HERMES_A2A_PEERS = str(peers)
    return oikos_settings


def _policy() -> TriggerPolicy:
    return TriggerPolicy(
        kinds=frozenset({"signal.fired"}), min_severity="warning", cooldown_seconds=1800.0, hourly_cap=6
    )


async def _investigate(servers: RunningSim, watcher_start: Any) -> None:
    # The watcher's hub is made from the settings `servers` wrote.
    running = await watcher_start(_policy())
    signal_fire(servers.state.world, servers.state.events, "service:caddy", "cert_expiring", "critical", "x")
    await running.handled_next()
    await running.investigations_done()


async def test_a_read_only_investigation_is_offered_no_write_tool(
    llm: FakeAnthropic, servers: RunningSim, watcher_start: Any
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: caddy")

    await _investigate(servers, watcher_start)

    offered = [tool["name"] for tool in llm.requests[0].body["tools"]]
    assert not set(WRITES) & set(offered)
    # Reads stay: Oikos's documented reads, and another server's tools that declare readOnlyHint.
    assert {"mcp__oikos__get_health_summary", "mcp__oikos__tail_log", "mcp__other__echo"} <= set(offered)


async def test_a_call_to_a_tool_it_was_not_offered_is_refused(servers: RunningSim) -> None:
    """The model API refuses a call to a tool it was not offered; the hub refuses it anyway, should a
    model, a script or a replayed conversation name one."""
    arguments = {
        "a2a_send": {"url": "lab", "message": "EXFIL: the signal's text"},
        "mcp__other__fail": {"message": "wrote something"},
        "mcp__oikos__request_execution": {"target": "service:caddy", "action": "restart"},
    }
    context = ToolCallContext(actor="agent:hermes", origin="signal", capability=origin_capability("signal"))
    hub = ToolHub.from_settings()
    try:
        await hub.list_tools(context)
        outcomes = {name: await hub.call(name, arguments[name], context=context) for name in WRITES}
    finally:
        await hub.aclose()

    for name, outcome in outcomes.items():
        assert outcome.is_error and outcome.record["error"]["kind"] == "withheld", name
        assert "not available in this turn" in outcome.content[0]["text"]
    assert servers.state.desk.executions == {}
    assert await database_sync_to_async(PeerExchange.objects.count)() == 0
