"""`changes_since`, the built-in tool behind "what changed on caddy this week?": Hermes's record
of what it asked for merged with Oikos's change history, each execution once, newest first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import ToolResult
from agent.tools import ToolHub
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.change_rows import change_row
from tests.fakes.scripted_models import ExecutionRequester, last_tool_results, offered_tool, tool_result_text

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class ChangesAsker:
    """Calls `changes_since` with `arguments`, keeps what the tool answered, and sums it up."""

    arguments: dict[str, Any]
    answered: list[str] = field(default_factory=list)

    def __call__(self, request: dict[str, Any]) -> Reply:
        results = last_tool_results(request)
        if not results:
            return Reply.tool_use(offered_tool(request, "changes_since"), self.arguments)
        self.answered.append(tool_result_text(results[0]))
        return Reply.text("Here is what changed.")


async def test_the_model_gets_hermes_record_and_oikos_history_merged_each_execution_once(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    llm.responder = ExecutionRequester(target="service:caddy", action="restart")
    await ask("restart caddy", oikos_hub)
    (execution,) = oikos_settings.state.desk.executions.values()
    asker = ChangesAsker({"target": "service:caddy", "since": "7d"})
    llm.responder = asker

    _, events = await ask("what changed on caddy this week?", oikos_hub)

    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.name == "changes_since" and not result.is_error
    answer = json.loads(asker.answered[0])
    changes = answer["changes"]
    # Hermes's own restart, first (newest), with where it was asked; Oikos's entries of the same
    # execution (requested, then run by its actuator) are folded into it, not listed again.
    mine = changes[0]
    assert (mine["source"], mine["execution_id"], mine["action"], mine["status"]) == (
        "hermes",
        execution.id,
        "restart",
        "completed",
    )
    assert mine["asked_by"] == "operator:test" and mine["session"]["title"]
    assert [entry.split(" ")[0] for entry in mine["oikos_entries"]] == [
        audit.id for audit in reversed(oikos_settings.state.world.audit) if audit.target == "service:caddy"
    ][:2]
    # Oikos's history of caddy from before: changes Hermes did not ask for, marked as Oikos's.
    others = changes[1:]
    assert [(c["source"], c["actor"], c["action"]) for c in others] == [
        ("oikos", "service:oikos-actuator", "renew"),
        ("oikos", "operator:bob", "config"),
    ]
    assert not any(execution.id in json.dumps(c) for c in others)


async def test_a_kind_reads_hermes_record_only_and_says_so(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    await database_sync_to_async(change_row)("exe-mine", target="service:postgres", action="restart")
    asker = ChangesAsker({"target": "service:", "since": "yesterday"})
    llm.responder = asker

    await ask("what did you change on services since yesterday?", oikos_hub)

    answer = json.loads(asker.answered[0])
    assert [(c["source"], c["execution_id"]) for c in answer["changes"]] == [("hermes", "exe-mine")]
    assert "Oikos's change history is per entity" in answer["notes"][0]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"since": "last tuesday"}, "since must be an ISO 8601 date and time (2026-11-30T08:00:00Z) or a date"),
        ({"since": "24 hours"}, '"24h"'),
        ({"target": "postgres"}, "target must be a slug (service:postgres) or a kind (service:)"),
        ({"limit": 500}, "limit must be a whole number from 1 to 50"),
        ({"when": "now"}, "Unknown argument(s): when"),
    ],
)
async def test_arguments_it_cannot_read_are_an_error_that_says_what_it_takes(
    oikos_hub: ToolHub, arguments: dict[str, Any], says: str
) -> None:
    await oikos_hub.list_tools()
    outcome = await oikos_hub.call("changes_since", arguments)
    assert outcome.is_error
    assert says in outcome.content[0]["text"]
