"""Hermes's engine against `oikos_sim`: the questions an operator asks, end to end."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import Approval, Done, TextDelta, ToolResult, ToolUse
from agent.models import Activity
from agent.tools import ToolHub
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator, ExecutionRequester

pytestmark = pytest.mark.django_db(transaction=True)


async def test_whats_degraded_and_what_depends_on_it(llm: FakeAnthropic, oikos_hub: ToolHub) -> None:
    model = DegradedInvestigator()
    llm.responder = model

    handle, events = await ask("what's degraded and what depends on it?", oikos_hub)

    calls = [e for e in events if isinstance(e, ToolUse)]
    assert [c.tool for c in calls] == ["get_health_summary", "get_blast_radius"]
    assert calls[1].input == {"slug": "service:postgres"}
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert answer == model.answers[-1]
    # Dependants at depth 1 and 2, as Oikos's graph has them.
    assert "`service:authentik` (depth 1)" in answer
    assert "`service:grafana` (depth 2)" in answer
    assert isinstance(events[-1], Done)
    assert events[-1].status == "done"
    rows = await database_sync_to_async(list)(
        Activity.objects.filter(correlation_id=handle.turn_id).values_list("tool", flat=True)
    )
    assert sorted(rows) == ["get_blast_radius", "get_health_summary"]
    assert not llm.rejections


async def test_a_restart_runs_by_itself(llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim) -> None:
    llm.responder = ExecutionRequester(target="service:caddy", action="restart")

    _, events = await ask("restart caddy", oikos_hub)

    assert not [e for e in events if isinstance(e, Approval)]
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert json.loads(result.content)["status"] == "completed"
    assert "finished: **completed**" in "".join(e.text for e in events if isinstance(e, TextDelta))
    executions = list(oikos_settings.state.desk.executions.values())
    assert [(x.target, x.action, x.status, x.requested_by) for x in executions] == [
        ("service:caddy", "restart", "completed", "agent:hermes")
    ]


async def test_a_deploy_is_parked_and_raises_an_approval_event(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")

    _, events = await ask("deploy jellyfin", oikos_hub)

    (approval,) = [e for e in events if isinstance(e, Approval)]
    assert (approval.target, approval.action, approval.risk_class, approval.status) == (
        "service:jellyfin",
        "deploy",
        "config_mutation",
        "proposed",
    )
    assert approval.approval_id in oikos_settings.state.desk.approvals
    # The approval event follows the tool result it came from.
    result = next(e for e in events if isinstance(e, ToolResult))
    assert events.index(approval) == events.index(result) + 1
    assert "waiting for an operator" in "".join(e.text for e in events if isinstance(e, TextDelta))
