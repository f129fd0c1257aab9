"""`doctor`'s Matrix row and the refusal of encrypted rooms, against the real Synapse."""

from __future__ import annotations

import logging
import os

import pytest
from channels.db import database_sync_to_async
from nio import RoomCreateResponse
from pytest_django.fixtures import Settings

from agent import presence
from agent.doctor.checks import Status
from matrix.doctor import matrix_check
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.matrix.conftest import Room

pytestmark = pytest.mark.django_db(transaction=True)

ENCRYPTION = {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}


async def test_doctor_checks_the_homeserver_the_token_and_the_rooms(
    room: Room, settings: Settings, bridge_start, oikos_settings: RunningSim
) -> None:
    await bridge_start()  # it joins the room it was invited to
    # A bridge inside this test process announces no `matrix_bridge` process: everything else is fine.
    found = await matrix_check(10)
    assert found.status == Status.WARN, found.detail
    assert "token valid, 1 room(s) joined, none encrypted, 1 operator(s)" in found.detail
    assert "no `manage.py matrix_bridge` is running" in found.detail
    # Announced as `manage.py matrix_bridge` announces itself (this process: alive).
    instance = await database_sync_to_async(presence.instance_announce)(
        role="matrix",
        host=presence.host_identity(),
        pid=os.getpid(),
        pid_started=presence.process_started(os.getpid()) or "",
        lock_key=None,
    )
    try:
        ok = await matrix_check(10)
    finally:
        await database_sync_to_async(presence.instance_retire)(instance_id=instance)
    assert ok.status == Status.OK, ok.detail
    assert ok.detail.endswith("1 bridge(s) running")

    settings.HERMES_MATRIX_ACCESS_TOKEN = "syt_not_a_token_of_this_homeserver"
    rejected = await matrix_check(10)
    assert rejected.status == Status.FAIL and "access token was rejected" in rejected.detail

    settings.HERMES_MATRIX_HOMESERVER = "http://127.0.0.1:9"
    unreachable = await matrix_check(10)
    assert unreachable.status == Status.FAIL and "unreachable" in unreachable.detail

    settings.HERMES_MATRIX_HOMESERVER = ""
    assert (await matrix_check(10)).status == Status.SKIP


async def test_an_encrypted_room_is_refused_in_the_log_and_in_doctor(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, settings: Settings, bridge_start, caplog
) -> None:
    llm.responder = lambda request: Reply.text("should never be asked")
    created = await room.alice.client.room_create(name="secret", invite=[room.bot.user_id], initial_state=[ENCRYPTION])
    assert isinstance(created, RoomCreateResponse)
    settings.HERMES_MATRIX_ROOMS = [room.room_id, created.room_id]
    running = await bridge_start()

    with caplog.at_level(logging.ERROR, logger="matrix.bridge"):
        # alice's client has no encryption either: the homeserver takes the plain message.
        await room.alice.send(created.room_id, f"{room.bot.user_id} how is the fleet?")
        question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is the fleet?")
        llm.responder = lambda request: Reply.text("Healthy.")
        await room.wait_for(
            lambda ms: any(m.thread == question and "formatted_body" in m.content for m in ms), "an answer"
        )

    assert running.bridge.stats.encrypted_refused == {created.room_id}
    assert any(
        "end-to-end encrypted" in record.getMessage() and created.room_id in record.getMessage()
        for record in caplog.records
    )
    assert len(llm.requests) == 1  # only the unencrypted room's question reached the model
    check = await matrix_check(10)
    assert check.status == Status.FAIL and created.room_id in check.detail and "encryption" in check.detail
