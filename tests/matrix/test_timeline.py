"""A room joined while the bridge runs: its history from before the join is recorded, never acted on
(real Synapse, real clients, a real oikos_sim where a restart runs without approval)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest
from channels.db import database_sync_to_async
from nio import JoinedMembersResponse
from pytest_django.fixtures import Settings

from agent.models import Turn
from matrix.models import MatrixEvent
from matrix.timeline import cut_at_join
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import ExecutionRequester
from tests.matrix.conftest import WAIT_SECONDS, Room, room_create

pytestmark = pytest.mark.django_db(transaction=True)

OLD_ORDERS = ("restart service:caddy", "restart service:caddy now please", "restart service:caddy, it is down")


async def _joined(room: Room, user_id: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        members = await room.alice.client.joined_members(room.room_id)
        if isinstance(members, JoinedMembersResponse) and user_id in {m.user_id for m in members.members}:
            return
        assert time.monotonic() < deadline, f"{user_id} never joined {room.room_id}"
        await asyncio.sleep(0.2)


async def _old_orders(room: Room) -> list[str]:
    return [
        await room.alice.send(room.room_id, f"{room.bot.user_id} {order}", mention=room.bot.user_id)
        for order in OLD_ORDERS
    ]


async def test_invited_while_running_it_answers_nothing_written_before_its_join(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start, settings: Settings
) -> None:
    llm.responder = ExecutionRequester(target="service:caddy", action="restart")
    # An allowlisted room the bot is not in yet, where an operator already asked for restarts.
    ops = dataclasses.replace(room, room_id=await room_create(room.homeserver, room.alice, []))
    settings.HERMES_MATRIX_ROOMS = [room.room_id, ops.room_id]
    old = await _old_orders(ops)
    await bridge_start()

    await ops.alice.client.room_invite(ops.room_id, ops.bot.user_id)
    await _joined(ops, ops.bot.user_id)
    new = await ops.alice.send(ops.room_id, f"{ops.bot.user_id} restart service:caddy", mention=ops.bot.user_id)
    messages = await ops.wait_for(
        lambda ms: any(m.thread == new and "finished" in m.body for m in ms), "the answer to the order after the join"
    )
    await ops.show("room joined while running")

    # Only the order written after the join ran: one turn, one restart, one answered thread.
    assert [m.thread for m in messages] == [new]
    assert len(oikos_settings.state.desk.executions) == 1
    assert await database_sync_to_async(Turn.objects.count)() == 1
    recorded = await database_sync_to_async(list)(
        MatrixEvent.objects.filter(room_id=ops.room_id).values_list("event_id", "kind", "outcome")
    )
    assert sorted(recorded) == sorted(
        [*((event_id, "ignored", "before_join") for event_id in old), (new, "question", "started")]
    )


async def test_a_room_first_joined_at_a_restart_answers_nothing_written_before_its_join(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start, settings: Settings
) -> None:
    llm.responder = ExecutionRequester(target="service:caddy", action="restart")
    running = await bridge_start()
    await running.stop()

    # While the bridge is down, the bot is invited to a room the allowlist gains, full of old orders.
    ops = dataclasses.replace(room, room_id=await room_create(room.homeserver, room.alice, [room.bot.user_id]))
    settings.HERMES_MATRIX_ROOMS = [room.room_id, ops.room_id]
    old = await _old_orders(ops)
    await bridge_start()  # joins the allowlisted room at start, then resumes from its stored position

    await _joined(ops, ops.bot.user_id)
    new = await ops.alice.send(ops.room_id, f"{ops.bot.user_id} restart service:caddy", mention=ops.bot.user_id)
    messages = await ops.wait_for(
        lambda ms: any(m.thread == new and "finished" in m.body for m in ms), "the answer to the order after the join"
    )

    assert [m.thread for m in messages] == [new]
    assert len(oikos_settings.state.desk.executions) == 1
    assert not set(old) & set(
        await database_sync_to_async(list)(
            MatrixEvent.objects.exclude(outcome="before_join").values_list("event_id", flat=True)
        )
    )


def _member(user_id: str, membership: str, previous: str | None) -> dict[str, Any]:
    """A membership event as Synapse's sync serves it (the former content under `unsigned`)."""
    unsigned: dict[str, Any] = {"age": 834, "membership": "join"}
    if previous:
        unsigned["prev_content"] = {"displayname": "hermes", "membership": previous}
    content = {"displayname": "Hermes (on call)", "membership": membership}
    return {"type": "m.room.member", "state_key": user_id, "sender": user_id, "content": content, "unsigned": unsigned}


def test_only_the_bots_own_joining_cuts_a_timeline_not_a_profile_change_nor_someone_elses_join() -> None:
    bot = "@hermes:hermes.test"
    question = {"type": "m.room.message", "sender": "@alice:hermes.test", "content": {"body": "hermes: restart caddy"}}
    renamed = _member(bot, "join", previous="join")
    bob_joined = _member("@bob:hermes.test", "join", previous=None)
    assert cut_at_join([question, renamed, bob_joined], bot) is None  # nothing to cut: all of it is handled

    invited_then_joined = _member(bot, "join", previous="invite")
    later = {"type": "m.room.message", "sender": "@alice:hermes.test", "content": {"body": "hermes: and now?"}}
    cut = cut_at_join([question, invited_then_joined, renamed, later], bot)
    assert cut is not None
    assert cut.before_join == [question, invited_then_joined]
    assert cut.events == [renamed, later]
