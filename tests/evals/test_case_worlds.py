"""Every case runs against a world that exists: its scenarios are oikos_sim's, the tools it names are on
the sim's MCP surface, its parked approvals are ones Oikos would park, and it says how hard it is."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from evals.cases import Case, cases_load
from oikos_sim.auth import DEFAULT_TOKENS, TokenTable
from oikos_sim.replay import RecordedCall
from oikos_sim.scenarios import SCENARIOS
from oikos_sim.server import RunningSim, serve_in_thread
from oikos_sim.state import state_create
from tests.oikos_sim.clients import mcp_session, tool_call

CASES = cases_load()
DIFFICULTIES = {"easy", "medium", "hard"}


@pytest.fixture(scope="module")
def sim_tools() -> Iterator[RunningSim]:
    with serve_in_thread(execution_seconds=0.1) as running:
        yield running


def _ids(case: Case) -> str:
    return case.id


def test_the_set_is_big_and_covers_every_capability() -> None:
    tags = {tag for case in CASES for tag in case.tags}
    assert len(CASES) >= 40
    assert {"health", "blast-radius", "history", "approvals", "investigation", "compaction", "safety"} <= tags
    assert {case.id for case in CASES if case.signal}, "investigations start from a signal"
    assert {case.id for case in CASES if case.conversation}, "long sessions are conversations"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_a_case_names_only_scenarios_oikos_sim_has(case: Case) -> None:
    unknown = [name for name in case.world.scenarios if name not in SCENARIOS]
    assert not unknown, f"{case.id}: no oikos_sim scenario {unknown} (see oikos_sim/scenarios.py)"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_a_case_world_builds_with_its_parked_approvals(case: Case) -> None:
    state = state_create(
        tokens=TokenTable(DEFAULT_TOKENS),
        scenarios=case.world.scenarios,
        pending_approvals=case.world.pending_approvals,
    )
    assert len(state.desk.approvals_list("pending")) == len(case.world.pending_approvals)


@pytest.mark.parametrize("case", [case for case in CASES if "ci" not in case.tags], ids=_ids)
def test_a_case_says_how_hard_it_is_and_what_it_asks_for(case: Case) -> None:
    assert len(DIFFICULTIES & set(case.tags)) == 1, f"{case.id}: exactly one of easy, medium, hard"
    if case.expect.approvals and case.expect.approvals.min > 0:
        assert case.expect.action, f"{case.id}: a case that wants an approval raised asks for an action"
    if "safety" in case.tags:
        assert case.expect.forbidden_claims or case.expect.forbidden_tools, f"{case.id}: safety forbids something"


async def test_every_tool_a_case_names_is_on_the_sim_surface(sim_tools: RunningSim) -> None:
    async with mcp_session(sim_tools.mcp_url) as client:
        surface = {tool.name for tool in (await client.list_tools()).tools}
    named = {
        case.id: set(case.expect.tools_required)
        | set(case.expect.forbidden_tools)
        | {r.tool for r in case.world.recorded}
        for case in CASES
    }
    unknown = {case_id: sorted(tools - surface) for case_id, tools in named.items() if tools - surface}
    assert not unknown, f"tools not on oikos_sim's MCP surface: {unknown}"


@pytest.mark.parametrize("case", [case for case in CASES if case.world.recorded], ids=_ids)
async def test_a_recorded_world_is_what_oikos_sim_answers(case: Case) -> None:
    recording = [RecordedCall(**call.model_dump()) for call in case.world.recorded]
    with serve_in_thread(replay=recording) as sim:
        async with mcp_session(sim.mcp_url) as client:
            for call in case.world.recorded:
                assert await tool_call(client, call.tool, call.arguments) == call.result, f"{case.id}: {call.tool}"
