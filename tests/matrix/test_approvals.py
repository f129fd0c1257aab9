"""Approving a parked deploy from Matrix: the card, the reactions, the execution it follows."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from matrix.models import MatrixEvent
from oikos.client import OikosClient
from oikos.models import ApprovalDecision
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import ExecutionRequester
from tests.matrix.conftest import Posted, Room

pytestmark = pytest.mark.django_db(transaction=True)


def _card(messages: list[Posted]) -> Posted | None:
    return next((m for m in messages if "Approval needed" in m.body), None)


async def _deploy_card(room: Room) -> tuple[str, Posted]:
    question = await room.alice.send(room.room_id, f"{room.bot.user_id} deploy jellyfin", mention=room.bot.user_id)
    messages = await room.wait_for(lambda ms: _card(ms) is not None, "an approval card")
    card = _card(messages)
    assert card is not None
    return question, card


async def test_deploy_posts_a_card_an_operator_approves_with_a_reaction_and_it_follows_to_completed(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    await bridge_start()
    question, card = await _deploy_card(room)

    assert card.thread == question
    assert "deploy service:jellyfin" in card.body and "config_mutation" in card.body
    assert "reason: asked by the operator" in card.body  # the agent's stated reason
    (approval,) = oikos_settings.state.desk.approvals.values()
    assert approval.status == "pending" and approval.id in card.body
    # An m.text (not a muted notice) that rang alice's phone, carrying the bot's ✅ and ❌ to tap.
    assert card.content["msgtype"] == "m.text"
    assert card.event_id in await room.notified(room.alice)
    bot_reactions = await _bot_reactions(room, card.event_id)

    # A non-operator's ✅ changes nothing: Oikos still waits, the card still asks.
    await room.mallory.react(room.room_id, card.event_id, "✅")
    await _claimed(outcome="non_operator_reaction")
    # By then the bridge has synced past its own ✅ and ❌ too: they were not taken as a decision.
    assert approval.status == "pending"
    assert "Tap ✅ to approve" in (_card(await room.from_bot()) or card).body
    claimed = await database_sync_to_async(list)(MatrixEvent.objects.values_list("event_id", flat=True))
    assert not set(bot_reactions) & set(claimed)

    # The operator's ✅: Oikos records alice's decision, Hermes records it like a control-room one.
    await room.alice.react(room.room_id, card.event_id, "✅")
    messages = await room.wait_for(
        lambda ms: "completed" in ((_card(ms) or card).body.splitlines()[-1]), "the card at completed"
    )
    await room.show("deploy thread")
    assert (approval.status, approval.decided_by) == ("approved", "alice")
    final = _card(messages)
    assert final is not None and "Approved by alice — completed." in final.body
    assert final.edits >= 2  # edited as the execution went on (approved, running, completed: some may coincide)
    decisions = await database_sync_to_async(list)(
        ApprovalDecision.objects.values_list("operator", "decision", "outcome")
    )
    assert decisions == [("alice", "approve", "decided")]
    metrics = (await AsyncClient().get("/metrics")).content.decode()
    assert 'hermes_matrix_questions{outcome="started"} 1.0' in metrics
    assert 'hermes_matrix_decisions{outcome="decided"} 1.0' in metrics
    assert 'hermes_matrix_ignored{reason="non_operator_reaction"} 1.0' in metrics


async def test_an_operator_denies_with_one_tap_on_the_bots_cross(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    await bridge_start()
    _, card = await _deploy_card(room)
    await _bot_reactions(room, card.event_id)

    # Tapping the ❌ the bot put there sends alice's own ❌ (what Element does).
    await room.alice.react(room.room_id, card.event_id, "❌")
    messages = await room.wait_for(lambda ms: "Denied" in (_card(ms) or card).body, "the card denied")
    (approval,) = oikos_settings.state.desk.approvals.values()
    assert (approval.status, approval.decided_by) == ("denied", "alice")
    final = _card(messages)
    assert final is not None and "Denied by alice." in final.body


async def test_an_operator_denies_by_replying_in_the_thread(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    await bridge_start()
    question, card = await _deploy_card(room)

    await room.alice.send(room.room_id, "deny", thread=question)
    messages = await room.wait_for(lambda ms: "Denied" in (_card(ms) or card).body, "the card denied")
    (approval,) = oikos_settings.state.desk.approvals.values()
    assert (approval.status, approval.decided_by) == ("denied", "alice")
    final = _card(messages)
    assert final is not None and "Denied by alice." in final.body
    assert len(llm.requests) == 2  # the reply was a decision, not a question for the model


async def test_a_card_decided_in_the_control_room_says_so(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    await bridge_start()
    _, card = await _deploy_card(room)
    (approval,) = oikos_settings.state.desk.approvals.values()

    # Bob denies it in the control room (which asks Oikos's REST API as he does here).
    async with OikosClient.from_settings() as oikos:
        await oikos.approval_decide(approval.id, approve=False, operator="bob")
    messages = await room.wait_for(lambda ms: "Denied" in (_card(ms) or card).body, "the card denied")
    final = _card(messages)
    assert final is not None and "Denied by bob in the control room" in final.body

    # An operator's late ✅ cannot overturn it: Oikos keeps the first decision, the thread is told.
    await room.alice.react(room.room_id, card.event_id, "✅")
    await room.wait_for(lambda ms: any("Already decided by bob" in m.body for m in ms), "the late decision refused")
    assert approval.status == "denied"


async def _bot_reactions(room: Room, event_id: str) -> list[str]:
    """The ids of the bot's ✅ and ❌ on the card, once both are there."""
    for _ in range(150):
        events = [
            event
            for event in await room.events()
            if event.get("type") == "m.reaction"
            and event.get("sender") == room.bot.user_id
            and event["content"]["m.relates_to"].get("event_id") == event_id
        ]
        if len(events) >= 2:
            assert [e["content"]["m.relates_to"]["key"] for e in events] == ["✅", "❌"]
            return [str(e["event_id"]) for e in events]
        await asyncio.sleep(0.2)
    raise AssertionError("the bot never reacted ✅ and ❌ on its card")


async def _claimed(*, outcome: str) -> None:
    for _ in range(150):
        if await database_sync_to_async(MatrixEvent.objects.filter(outcome=outcome).exists)():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no Matrix event was handled with outcome {outcome}")
