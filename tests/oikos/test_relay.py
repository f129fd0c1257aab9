"""The Oikos relay: one per process, following the event stream into that process's control rooms."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import BaseChannelLayer
from pytest_django.fixtures import Settings

from oikos.client import OikosClient
from oikos.relay import OikosRelay
from oikos_sim.server import RunningSim
from tests.oikos.test_client import request_execution


async def _update(layer: BaseChannelLayer, channel: str, *, about: str = "", seconds: float = 5.0) -> dict[str, Any]:
    async with asyncio.timeout(seconds):
        while True:
            message = await layer.receive(channel)
            assert message["type"] == "rail.update"
            if not about or about in message["approvals"]:
                return message


async def test_the_relay_follows_approvals_and_executions(
    channel_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    relay = OikosRelay(channel_layer)
    channel = await channel_layer.new_channel()
    await relay.subscribe(channel)
    await asyncio.wait_for(relay.connected.wait(), 5)
    assert relay.state.health is not None and relay.state.health["counts"]["degraded"] == 1

    parked = await request_execution(oikos_settings, "service:jellyfin", "deploy")
    await _update(channel_layer, channel, about=parked["approval_id"])
    [approval] = relay.state.approvals_shown()
    assert (approval.approval_id, approval.stage, approval.target) == (
        parked["approval_id"],
        "pending",
        "service:jellyfin",
    )

    await request_execution(oikos_settings, "service:caddy", "restart")
    async with asyncio.timeout(5):
        while not any(e.status == "completed" for e in relay.state.executions_shown()):
            await _update(channel_layer, channel)
    assert relay.state.executions_shown()[0].target == "service:caddy"
    assert [event.type for event in relay.state.events_shown()][:2] == ["execution.completed", "execution.started"]
    await relay.aclose()


async def test_each_socket_hears_an_event_once_however_many_processes_relay_it(
    channel_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    # Two processes, each with its relay and one open control room.
    first, second = OikosRelay(channel_layer), OikosRelay(channel_layer)
    first_room, second_room = await channel_layer.new_channel(), await channel_layer.new_channel()
    await first.subscribe(first_room)
    await second.subscribe(second_room)
    await asyncio.wait_for(asyncio.gather(first.connected.wait(), second.connected.wait()), 5)
    assert first.group != second.group

    parked = await request_execution(oikos_settings, "service:jellyfin", "deploy")

    for room in (first_room, second_room):
        await _update(channel_layer, room, about=parked["approval_id"])
        with pytest.raises(TimeoutError):
            await _update(channel_layer, room, about=parked["approval_id"], seconds=0.4)
    await first.aclose()
    await second.aclose()


async def test_without_oikos_the_rail_says_what_to_configure(
    channel_layer: BaseChannelLayer, settings: Settings
) -> None:
    settings.OIKOS_API_URL = settings.OIKOS_MCP_URL = ""
    relay = OikosRelay(channel_layer)
    await relay.subscribe(await channel_layer.new_channel())
    assert "OIKOS_API_URL" in relay.state.problem and not relay.state.connected


async def test_an_unreachable_oikos_shows_as_a_problem_and_the_relay_keeps_trying(
    channel_layer: BaseChannelLayer, settings: Settings
) -> None:
    settings.OIKOS_API_URL = "http://127.0.0.1:9/api/v1"
    relay = OikosRelay(channel_layer)
    channel = await channel_layer.new_channel()
    await relay.subscribe(channel)
    await _update(channel_layer, channel)
    assert "unreachable" in relay.state.problem
    assert relay._run_task is not None and not relay._run_task.done()
    await relay.aclose()


async def test_the_relay_stops_a_while_after_the_last_control_room_closes(
    channel_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    relay = OikosRelay(channel_layer, linger=0.05)
    channel = await channel_layer.new_channel()
    await relay.subscribe(channel)
    await asyncio.wait_for(relay.connected.wait(), 5)
    await relay.unsubscribe(channel)
    await asyncio.sleep(0.2)
    assert relay._run_task is None and not relay.connected.is_set()
    await relay.aclose()


async def test_a_relay_that_starts_late_shows_the_approvals_that_just_finished(
    channel_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    """A process just started (or back after the stream was down) draws the rail's finished
    approvals too, each at the stage its execution reached, newest first."""
    denied = await request_execution(oikos_settings, "service:jellyfin", "deploy")
    approved = await request_execution(oikos_settings, "service:gitea", "deploy")
    waiting = await request_execution(oikos_settings, "service:grafana", "deploy")
    async with OikosClient.from_settings() as oikos:
        await oikos.approval_decide(denied["approval_id"], approve=False, operator="alice")
        await oikos.approval_decide(approved["approval_id"], approve=True, operator="bob")
        # Oikos's stream from its start: the deploy's execution has ended once it says so.
        async with asyncio.timeout(10):
            async for event in oikos.events():
                if event.type == "execution.completed" and event.data["execution_id"] == approved["execution_id"]:
                    break

    relay = OikosRelay(channel_layer)
    channel = await channel_layer.new_channel()
    await relay.subscribe(channel)
    await asyncio.wait_for(relay.connected.wait(), 5)
    await _update(channel_layer, channel, about=approved["approval_id"])

    shown = [(a.approval_id, a.stage, a.decided_by) for a in relay.state.approvals_shown()]
    assert shown == [
        (waiting["approval_id"], "pending", ""),
        (approved["approval_id"], "completed", "bob"),
        (denied["approval_id"], "denied", "alice"),
    ]
    await relay.aclose()
