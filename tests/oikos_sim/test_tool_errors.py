"""Bad slugs and bad arguments come back as tool errors a model can correct itself from."""

from __future__ import annotations

import pytest

from oikos_sim.server import RunningSim
from tests.oikos_sim.clients import mcp_session, tool_error


async def test_a_misspelt_slug_suggests_the_real_ones(shared_sim: RunningSim) -> None:
    async with mcp_session(shared_sim.mcp_url) as client:
        message = await tool_error(client, "get_blast_radius", {"slug": "service:jelyfin"})
    assert "Unknown entity 'service:jelyfin'" in message
    assert "Did you mean: service:jellyfin, lxc:jellyfin?" in message


async def test_a_bare_name_where_a_slug_is_needed_names_the_slugs(shared_sim: RunningSim) -> None:
    async with mcp_session(shared_sim.mcp_url) as client:
        message = await tool_error(client, "explain", {"slug": "caddy"})
    assert "service:caddy" in message
    assert "lxc:caddy" in message


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "request_execution",
            {"target": "service:caddy", "action": "bounce"},
            "Oikos knows: restart, reload, ping",
        ),
        (
            "request_execution",
            {"target": "lxc:caddy", "action": "reload"},
            "Reload service:caddy, or restart lxc:caddy",
        ),
        ("preflight", {"target": "service:nope", "action": "restart"}, "Unknown entity 'service:nope'"),
        ("tail_log", {"service": "jellyfinn"}, "Did you mean: service:jellyfin?"),
        ("get_lxc_state", {"lxc": "999"}, "101=lxc:caddy"),
        ("query_metrics", {"slug": "service:postgres", "metric": "iops"}, "available: connections, disk_pct"),
        ("get_execution", {"execution_id": "exe-9999"}, "No execution 'exe-9999'"),
        ("get_blast_radius", {"slug": "service:postgres", "depth": 99}, "less than or equal to 6"),
        ("search_knowledge", {"query": "the of and"}, "no searchable words"),
        ("get_entity", {}, "slug"),
    ],
)
async def test_bad_arguments_answer_is_error_with_a_reason(
    shared_sim: RunningSim, tool: str, arguments: dict[str, object], expected: str
) -> None:
    async with mcp_session(shared_sim.mcp_url) as client:
        message = await tool_error(client, tool, arguments)
    assert expected in message


async def test_a_refused_request_changes_nothing(shared_sim: RunningSim) -> None:
    before = len(shared_sim.state.desk.executions)
    async with mcp_session(shared_sim.mcp_url) as client:
        await tool_error(client, "request_execution", {"target": "service:caddy", "action": "bounce"})
        await tool_error(
            client, "request_execution", {"target": "service:caddy", "action": "deploy", "params": {"x": [1]}}
        )
    assert len(shared_sim.state.desk.executions) == before
