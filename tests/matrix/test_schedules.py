"""A schedule's run lands in its Matrix room as one message, verdict first, once (real Synapse).

The watcher runs the schedule and stores the run in another process; here the run is written as it
leaves it (a session whose turn answered, the run `done` with its verdict), and the bridge is what is
under test.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone
from pytest_django.fixtures import Settings

from agent.models import AgentSession, Message, Turn
from matrix.models import MatrixSchedulePost
from tests.matrix.conftest import Posted, Room
from watch.models import Schedule, ScheduleRun

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "2 degraded, 1 approval waiting.\n\n- **sonarr** degraded (its probes time out)\n- jellyfin degraded"
SLOT = datetime.datetime(2026, 12, 6, 7, 0, tzinfo=datetime.UTC)


def _run_done(*, room_id: str, verdict: str, answer: str, slot: datetime.datetime = SLOT) -> ScheduleRun:
    schedule, _ = Schedule.objects.get_or_create(
        name="morning digest",
        defaults={
            "kind": "digest",
            "cron": "0 7 * * *",
            "timezone": "Europe/Lisbon",
            "matrix_room": room_id,
            "owner": "alice",
        },
    )
    session = AgentSession.objects.create(actor="agent:hermes", origin="schedule", title="morning digest")
    turn = Turn.objects.create(session=session, actor="agent:hermes", status=Turn.Status.DONE)
    Message.objects.create(
        session=session, turn=turn, role=Message.Role.ASSISTANT, content=[{"type": "text", "text": answer}]
    )
    return ScheduleRun.objects.create(
        schedule=schedule,
        slot=slot,
        state=ScheduleRun.State.DONE,
        session=session,
        turn_id=turn.id,
        verdict=verdict,
        finished_at=timezone.now(),
    )


async def _another_bridge(room: Room, bridge_start: Callable[..., Any]) -> Any:
    """A bridge started beside (or after) the first. It resumes from the stored sync position and is
    ready once a sync returns: room chatter (not for Hermes) ends that long poll, and is sent until
    it does, since the first bridge may move the stored position past one message."""
    starting = asyncio.ensure_future(bridge_start(poll_seconds=0.2))
    while not starting.done():
        await room.alice.send(room.room_id, "coffee first")
        await asyncio.wait([starting], timeout=1.0)
    return starting.result()


def _digests(messages: list[Posted]) -> list[Posted]:
    return [m for m in messages if "morning digest" in m.body]


async def test_a_run_is_posted_once_verdict_first_whatever_bridges_run(
    room: Room, bridge_start, settings: Settings
) -> None:
    settings.HERMES_MATRIX_CONTROLROOM_URL = "https://hermes.example.net"
    first = await bridge_start(poll_seconds=0.2)
    run = await database_sync_to_async(_run_done)(
        room_id=room.room_id, verdict="2 degraded, 1 approval waiting.", answer=ANSWER
    )

    messages = await room.wait_for(lambda ms: bool(_digests(ms)), "the digest")
    (digest,) = _digests(messages)
    assert digest.body.startswith("2 degraded, 1 approval waiting.")
    assert digest.body.count("2 degraded, 1 approval waiting.") == 1  # the verdict said once
    assert "sonarr" in digest.body and "morning digest · Sun 6 Dec, 07:00" in digest.body
    html = digest.content["formatted_body"]
    assert html.startswith("<p><strong>2 degraded, 1 approval waiting.</strong></p>")
    assert "<strong>sonarr</strong>" in html  # the answer rendered, sanitised
    assert f'href="https://hermes.example.net/ui/s/{run.session_id}/"' in html
    assert digest.content["msgtype"] == "m.text" and digest.thread is None and digest.edits == 0

    # A second bridge, and the first restarted: neither posts it again.
    second = await _another_bridge(room, bridge_start)
    await first.stop()
    assert await second.bridge.schedule_runs_post() == 0
    third = await _another_bridge(room, bridge_start)
    assert await third.bridge.schedule_runs_post() == 0
    post = await database_sync_to_async(MatrixSchedulePost.objects.get)(run_id=run.pk)
    assert post.state == "posted" and post.event_id == digest.event_id
    # The next morning's run is posted, once.
    await database_sync_to_async(_run_done)(
        room_id=room.room_id,
        verdict="All green.",
        answer="All green.\n\nNothing needs anyone.",
        slot=SLOT + datetime.timedelta(days=1),
    )
    messages = await room.wait_for(lambda ms: len(_digests(ms)) == 2, "the second digest")
    await room.show("scheduled digests")
    assert [m.body.split("\n", 1)[0] for m in _digests(messages)] == ["2 degraded, 1 approval waiting.", "All green."]


async def test_a_skipped_run_says_so_and_a_room_the_bot_is_not_in_is_recorded_failed(room: Room, bridge_start) -> None:
    bridge = await bridge_start(poll_seconds=60)

    def runs() -> tuple[int, int]:
        budget = Schedule.objects.create(
            name="certificates",
            cron="0 9 * * sun",
            question="Which certificates expire?",
            matrix_room=room.room_id,
            owner="alice",
        )
        skipped = ScheduleRun.objects.create(
            schedule=budget, slot=SLOT, state=ScheduleRun.State.SKIPPED, skipped_reason="budget"
        )
        ScheduleRun.objects.create(
            schedule=budget,
            slot=SLOT - datetime.timedelta(days=7),
            state=ScheduleRun.State.SKIPPED,
            skipped_reason="missed",
        )
        elsewhere = Schedule.objects.create(
            name="elsewhere", cron="0 7 * * *", question="?", matrix_room="!nowhere:hermes.test", owner="alice"
        )
        lost = ScheduleRun.objects.create(
            schedule=elsewhere, slot=SLOT, state=ScheduleRun.State.FAILED, finished_at=timezone.now()
        )
        return skipped.pk, lost.pk

    skipped_id, lost_id = await database_sync_to_async(runs)()
    assert await bridge.bridge.schedule_runs_post() == 1
    messages = await room.wait_for(lambda ms: any("certificates" in m.body for m in ms), "the skipped run")
    (line,) = [m for m in messages if "certificates" in m.body]
    assert line.body.startswith("⏭️ certificates (Sun 6 Dec, 07:00 UTC) did not run: the daily token budget is spent")
    lost = await database_sync_to_async(MatrixSchedulePost.objects.get)(run_id=lost_id)
    assert lost.state == "failed" and "HERMES_MATRIX_ROOMS" in lost.error
    # Nothing is tried again, and the missed slot is not said at all.
    assert await bridge.bridge.schedule_runs_post() == 0
    assert await database_sync_to_async(MatrixSchedulePost.objects.count)() == 2
    assert skipped_id
