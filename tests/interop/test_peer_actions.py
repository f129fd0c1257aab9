"""A paired peer that writes "restart service:caddy" gets nothing executed; allowed to propose, its
proposal waits in Hermes and reaches Oikos only when an operator approves it — as that operator."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer
from django.test import AsyncClient
from pytest_django.fixtures import Settings

from agent.models import Proposal
from interop.server.conversation import inbound_turn
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.scripted_models import last_tool_results, tool_result_text

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}


def obliging_model(request: dict[str, Any]) -> Reply:
    """Does what the peer asks whenever it can: restarts caddy if it is offered a way to."""
    offered = [tool["name"] for tool in request.get("tools", [])]
    executions = [name for name in offered if name.endswith("__request_execution")]
    results = last_tool_results(request)
    if executions and not results:
        arguments = {"target": "service:caddy", "action": "restart", "reason": "the peer asked"}
        return Reply.tool_use(executions[0], arguments)
    return Reply.text(f"Done: {tool_result_text(results[0])[:300]}" if results else "I can only look, not act.")


@pytest.fixture
def lab(settings: Settings, tmp_path: Path, oikos_settings: RunningSim, llm: FakeAnthropic) -> Any:
    """`lab(may_propose=...)`: the peers file lists the paired peer `lab`."""
    llm.responder = obliging_model

    def configure(*, may_propose: bool) -> None:
        path = tmp_path / "peers.json"
        entry = {"url": "http://127.0.0.1:9", "dialect": "a2a", "may_propose": may_propose}
        path.write_text(json.dumps({"peers": {"lab": entry}}))
        settings.HERMES_A2A_PEERS = str(path)

    return configure


async def _peer_says(text: str) -> str:
    reply = await inbound_turn(peer="lab", dialect="a2a", external_id=uuid.uuid4().hex, text=text)
    assert reply.state == "completed", reply
    return reply.text


def _executions(sim: RunningSim) -> list[tuple[str, str, str]]:
    return [(x.target, x.action, x.requested_by) for x in sim.state.desk.executions.values()]


async def test_a_peers_restart_executes_nothing(
    lab: Any, oikos_settings: RunningSim, llm: FakeAnthropic, mcp_hub_cleanup: None
) -> None:
    lab(may_propose=False)

    await _peer_says("restart service:caddy")

    assert _executions(oikos_settings) == []
    assert not [tool for tool in llm.requests[0].body.get("tools", []) if "request_execution" in tool["name"]]
    assert await database_sync_to_async(Proposal.objects.count)() == 0


async def test_allowed_to_propose_it_waits_for_an_operator_then_runs_as_that_operator(
    lab: Any, oikos_settings: RunningSim, memory_layer: BaseChannelLayer, mcp_hub_cleanup: None
) -> None:
    lab(may_propose=True)

    answer = await _peer_says("restart service:caddy")

    # Oikos would auto-run a restart: it has received nothing.
    assert _executions(oikos_settings) == []
    assert "Proposed, not run" in answer
    proposal = await database_sync_to_async(Proposal.objects.get)()
    assert (proposal.proposed_by, proposal.origin, proposal.status) == ("peer:lab", "a2a", "pending")
    page = (await AsyncClient().get("/ui/approvals/")).content.decode()
    assert f"/ui/proposals/{proposal.pk}/decide/" in page and "Proposed by peer:lab" in page

    decided = await AsyncClient().post(f"/ui/proposals/{proposal.pk}/decide/", {"decision": "approve"}, headers=HTMX)

    assert decided.status_code == 200
    html = decided.content.decode()
    assert "Approved by operator" in html and "sent to Oikos" in html
    assert _executions(oikos_settings) == [("service:caddy", "restart", "operator")]
    (execution,) = oikos_settings.state.desk.executions.values()
    assert "proposed by peer:lab" in (execution.reason or "")

    again = await AsyncClient().post(f"/ui/proposals/{proposal.pk}/decide/", {"decision": "reject"}, headers=HTMX)
    assert "Already approved by operator" in again.content.decode()
    assert len(_executions(oikos_settings)) == 1


async def test_a_rejected_proposal_never_reaches_oikos(
    lab: Any, oikos_settings: RunningSim, memory_layer: BaseChannelLayer, mcp_hub_cleanup: None
) -> None:
    lab(may_propose=True)
    await _peer_says("restart service:caddy")
    proposal = await database_sync_to_async(Proposal.objects.get)()

    decided = await AsyncClient().post(f"/ui/proposals/{proposal.pk}/decide/", {"decision": "reject"}, headers=HTMX)

    assert "Rejected by operator" in decided.content.decode()
    assert _executions(oikos_settings) == []
