"""``GET /api/v1/events``: numbered SSE events, resume with Last-Event-ID, heartbeats, demo signals."""

from __future__ import annotations

import asyncio

import httpx2

from oikos_sim.events import EVENT_TYPES
from oikos_sim.server import RunningSim, serve_in_thread
from tests.oikos_sim.clients import (
    OPERATOR_TOKEN,
    events_of,
    events_read,
    mcp_session,
    rest_client,
    tool_call,
)


def _count(n: int):
    return lambda events: len(events) >= n


async def test_a_client_that_reconnects_with_last_event_id_misses_nothing(sim: RunningSim) -> None:
    async with rest_client(sim) as api:
        await api.post("/executions", json={"target": "service:jellyfin", "action": "deploy"})  # 1
        await api.post("/executions", json={"target": "service:redis", "action": "restart"})  # 2, 3
        first = await events_read(sim, until=_count(3))
        assert [e["id"] for e in first] == [1, 2, 3]
        # The client is gone; the world moves on without it.
        await api.post("/approvals/apr-0001/approve", json={"operator": "alice"})  # 4, 5, 6
        await api.post("/executions", json={"target": "lxc:redis", "action": "restart"})  # 7, 8
        observed = await events_read(sim, until=_count(8))

    resumed = await events_read(sim, last_event_id=first[-1]["id"], until=_count(5))
    assert [e["id"] for e in resumed] == [4, 5, 6, 7, 8]
    assert first + resumed == observed[:8]
    assert resumed[0]["type"] == "approval.decided"
    # The two executions run concurrently, so only each one's own order is fixed.
    assert events_of(resumed, "exe-0001") == ["approval.decided", "execution.started", "execution.completed"]
    assert events_of(resumed, "exe-0003") == ["execution.started", "execution.completed"]


async def test_resume_also_works_from_the_query_string(sim: RunningSim) -> None:
    async with rest_client(sim) as api:
        for target in ("service:caddy", "service:gitea"):
            await api.post("/executions", json={"target": target, "action": "reload"})
        await events_read(sim, until=_count(4))
        async with api.stream("GET", "/events", params={"last_event_id": 3}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = []
            async for line in response.aiter_lines():
                lines.append(line)
                if line.startswith("data:"):
                    break
    assert "id: 4" in lines
    assert "event: execution.completed" in lines


async def test_events_resumed_during_a_live_flow_arrive_in_order_without_gaps(sim: RunningSim) -> None:
    async def act() -> None:
        async with mcp_session(sim.mcp_url) as client:
            for service in ("caddy", "gitea", "grafana", "sonarr"):
                await tool_call(client, "request_execution", {"target": f"service:{service}", "action": "restart"})

    acting = asyncio.create_task(act())
    first = await events_read(sim, until=_count(3))
    rest = await events_read(sim, last_event_id=first[-1]["id"], until=lambda events: events[-1]["id"] >= 8)
    await acting
    assert [e["id"] for e in first + rest] == list(range(1, 9))
    assert {e["type"] for e in first + rest} <= set(EVENT_TYPES)


async def test_a_quiet_stream_sends_heartbeat_comments() -> None:
    with serve_in_thread(heartbeat_seconds=0.1) as quiet:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}) as http,
            http.stream("GET", f"{quiet.api_url}/events") as response,
        ):
            heartbeats = 0
            async with asyncio.timeout(5):
                async for line in response.aiter_lines():
                    heartbeats += line == ": heartbeat"
                    if heartbeats == 2:
                        break
    assert heartbeats == 2


async def test_a_malformed_last_event_id_is_refused(sim: RunningSim) -> None:
    async with rest_client(sim) as api:
        response = await api.get("/events", headers={"Last-Event-ID": "soon"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


async def test_the_demo_pulse_fires_signals_and_health_changes_that_a_restart_clears() -> None:
    with serve_in_thread(execution_seconds=0.2, signal_interval=1.0) as demo:
        events = await events_read(demo, until=_count(2))
        assert [e["type"] for e in events] == ["signal.fired", "entity.health_changed"]
        assert events[1]["data"] | {"reason": None} == {
            "slug": "service:sonarr", "from": "healthy", "to": "degraded", "reason": None,
        }  # fmt: skip
        async with mcp_session(demo.mcp_url) as client:
            summary = await tool_call(client, "get_health_summary")
            assert {d["slug"] for d in summary["degraded"]} == {"service:postgres", "service:sonarr"}
            restart = await tool_call(client, "request_execution", {"target": "service:sonarr", "action": "restart"})
            assert restart["status"] == "completed"
            assert (await tool_call(client, "get_entity", {"slug": "service:sonarr"}))["health"] == "healthy"
        recovered = await events_read(demo, last_event_id=2, until=lambda es: es[-1]["type"] == "entity.health_changed")
        assert recovered[-1]["data"]["to"] == "healthy"
