"""An execution asked in a Matrix thread gets its follow-up's verdict in that thread, once (real Synapse).

The watcher runs the follow-up turn and stores its verdict in another process; here the record is
written as it leaves it (`agent.store.changes`), and the bridge is what is under test.
"""

from __future__ import annotations

import uuid

import pytest
from channels.db import database_sync_to_async

from agent.models import AgentSession, Message, Turn
from agent.proposals import undo_propose
from agent.store.changes import (
    ChangeRequest,
    change_record,
    change_status,
    followup_claim,
    followup_started,
    verdict_record,
)
from matrix.services import thread_link
from tests.matrix.conftest import Posted, Room

pytestmark = pytest.mark.django_db(transaction=True)


def _matrix_session(*, room_id: str, root_event_id: str) -> uuid.UUID:
    session = AgentSession.objects.create(actor="operator:alice", origin="matrix", title="restart sonarr")
    thread_link(room_id=room_id, root_event_id=root_event_id, session_id=session.id)
    return session.id


def _followed_up(
    *,
    session_id: uuid.UUID,
    execution_id: str,
    action: str,
    target: str,
    verdict: str,
    detail: str,
    answer: str,
    status: str = "completed",
    error: str = "",
    asked_by: str = "operator:alice",
    offer_undo: bool = False,
) -> None:
    """An execution asked for (by alice unless `asked_by` says who) and approved by alice, finished,
    followed up by Hermes with `verdict`."""
    change_record(
        ChangeRequest(
            execution_id=execution_id,
            approval_id="",
            action=action,
            target=target,
            params={},
            reason="asked in the thread",
            risk_class="reversible_low",
            status="approved",
            asked_by=asked_by,
            session_id=session_id,
        )
    )
    change_status(execution_id=execution_id, status=status, decided_by="alice", error=error)
    assert followup_claim(execution_id=execution_id, instance=None) is not None
    turn = Turn.objects.create(session_id=session_id, actor="agent:hermes", status=Turn.Status.DONE)
    Message.objects.create(
        session_id=session_id, turn=turn, role=Message.Role.ASSISTANT, content=[{"type": "text", "text": answer}]
    )
    followup_started(execution_id=execution_id, turn_id=turn.id)
    if offer_undo:
        assert undo_propose(execution_id=execution_id, proposed_by="agent:hermes") is not None
    verdict_record(execution_id=execution_id, verdict=verdict, detail=detail)


def _starting(messages: list[Posted], head: str) -> list[Posted]:
    return [m for m in messages if m.body.startswith(head)]


async def test_a_verdict_lands_once_in_the_thread_that_asked_even_across_a_restart(room: Room, bridge_start) -> None:
    first = await bridge_start(poll_seconds=0.2)
    root = await room.alice.send(room.room_id, "sonarr is degraded again")
    session_id = await database_sync_to_async(_matrix_session)(room_id=room.room_id, root_event_id=root)

    await database_sync_to_async(_followed_up)(
        session_id=session_id,
        execution_id="x-restart",
        action="restart",
        target="service:sonarr",
        verdict="cleared",
        detail="sonarr healthy, its probes green",
        answer="I re-read **sonarr**: healthy, and nothing that depends on it is degraded.",
    )
    messages = await room.wait_for(lambda ms: bool(_starting(ms, "✅ Verified: cleared")), "the verdict")
    (verdict,) = _starting(messages, "✅ Verified: cleared")
    assert verdict.body.startswith("✅ Verified: cleared — restart service:sonarr: sonarr healthy, its probes green")
    assert "nothing that depends on it is degraded" in verdict.body
    assert "<strong>sonarr</strong>" in verdict.content["formatted_body"]  # the answer rendered, sanitised
    assert "Asked by alice, approved by alice." in verdict.body
    assert verdict.thread == root  # in the thread that asked, a new message
    assert verdict.content["msgtype"] == "m.text" and verdict.edits == 0
    assert verdict.content["m.mentions"] == {"user_ids": [room.alice.user.user_id]}
    assert verdict.event_id in await room.notified(room.alice)  # her phone rang for it

    # A restarted bridge does not post it again: it posts only what came after.
    await first.stop()
    await bridge_start(poll_seconds=0.2)
    await database_sync_to_async(_followed_up)(
        session_id=session_id,
        execution_id="x-deploy",
        action="deploy",
        target="service:jellyfin",
        verdict="not_cleared",
        detail="jellyfin still degraded after the deploy",
        answer="The deploy ran, but jellyfin is still degraded.",
        offer_undo=True,
    )
    messages = await room.wait_for(lambda ms: bool(_starting(ms, "⚠️ Not cleared")), "the second verdict")
    await room.show("follow-ups in the thread")

    assert len(_starting(messages, "✅ Verified: cleared")) == 1
    (not_cleared,) = _starting(messages, "⚠️ Not cleared")
    assert not_cleared.thread == root
    assert not_cleared.body.startswith("⚠️ Not cleared — deploy service:jellyfin: jellyfin still degraded")
    assert "↩️ The way back is offered: rollback service:jellyfin" in not_cleared.body
    assert "approval in the control room" in not_cleared.body


async def test_a_failed_execution_says_so_with_oikos_error_to_whoever_approved_it(room: Room, bridge_start) -> None:
    await bridge_start(poll_seconds=0.2)
    root = await room.alice.send(room.room_id, "deploy onto the full guest")
    session_id = await database_sync_to_async(_matrix_session)(room_id=room.room_id, root_event_id=root)

    await database_sync_to_async(_followed_up)(
        session_id=session_id,
        execution_id="x-failed",
        action="deploy",
        target="lxc:media",
        verdict="failed",
        detail="the deploy did not happen",
        answer="Nothing changed on the guest: free some space on its disk, then ask again.",
        status="failed",
        error="no space left on device",
        asked_by="agent:hermes",  # the session's own turn asked (an investigation's, say); alice approved
    )
    messages = await room.wait_for(lambda ms: bool(_starting(ms, "❌ Failed")), "the failure")

    (message,) = _starting(messages, "❌ Failed")
    assert message.body.startswith("❌ Failed — deploy lxc:media: the deploy did not happen")
    assert "Oikos said: no space left on device" in message.body
    assert "The way back" not in message.body  # nothing happened, nothing to take back
    assert "Approved by alice." in message.body and "Asked by" not in message.body
    assert message.content["m.mentions"] == {"user_ids": [room.alice.user.user_id]}
