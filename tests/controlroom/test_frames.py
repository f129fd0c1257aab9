"""No message the control room's websocket sends is larger than Daphne's message limit: a rail or a
transcript too large for one message arrives in several, and a part too large alone is replaced by
a note that says so."""

from __future__ import annotations

import datetime
import uuid

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from agent.elicitation.bounds import MAX_DESCRIPTION_CHARS, MAX_FIELDS, MAX_LABEL_CHARS, MAX_MESSAGE_CHARS
from agent.elicitation.types import ElicitField
from agent.models import AgentSession, Elicitation, Message, Turn
from controlroom import fragments
from controlroom.frames import FRAME_LIMIT_BYTES, frames_pack
from oikos.rail import ApprovalState, RailState
from oikos_sim.server import RunningSim
from tests.controlroom.conftest import Connect, Frames


def size(frame: str) -> int:
    return len(frame.encode("utf-8"))


class TestPacking:
    def test_parts_keep_their_order_in_as_few_messages_as_fit(self) -> None:
        parts = [f'<div hx-swap-oob="beforeend:#x">{n}{"é" * 300}</div>' for n in range(10)]
        frames = frames_pack(parts, limit=2_000)
        assert all(size(frame) <= 2_000 for frame in frames)
        assert "".join(frames) == "".join(parts)
        assert len(frames) == 4  # three parts of ~640 bytes to a message

    def test_a_part_too_large_alone_becomes_a_note_in_its_place(self) -> None:
        small = '<div hx-swap-oob="innerHTML:#turn-controls">stop</div>'
        huge = '<article class="turn turn-done" id="turn-1" hx-swap-oob="true">' + "x" * 5_000 + "</article>"
        frames = frames_pack([small, huge, small], limit=1_000)
        assert all(size(frame) <= 1_000 for frame in frames)
        text = "".join(frames)
        assert text.count("stop") == 2 and "xxxx" not in text
        assert '<article class="turn turn-done" id="turn-1" hx-swap-oob="true"><p class="too-large' in text
        assert "Too large to show here (5.0\xa0KB)" in text

    def test_empty_parts_send_nothing(self) -> None:
        assert frames_pack(["", ""]) == []


class TestAHugeRail:
    def test_its_approvals_arrive_in_messages_under_the_limit(self) -> None:
        state = RailState()
        for index in range(30):
            approval_id = f"apr-{index:03d}"
            state.approvals[approval_id] = ApprovalState(
                approval_id=approval_id, target="service:caddy", action="restart", reason=f"r{index} " + "x" * 60_000
            )

        frames = frames_pack(fragments.rail_parts(state))

        assert len(frames) > 1
        assert all(size(frame) <= FRAME_LIMIT_BYTES for frame in frames), [size(frame) for frame in frames]
        text = "".join(frames)
        assert [f"r{index} " in text for index in range(30)] == [True] * 30
        assert "Too large to show" not in text and "Nothing is waiting for approval" not in text

    def test_a_small_rail_is_one_replace(self) -> None:
        [frame] = frames_pack(fragments.rail_parts(RailState()))
        assert frame.count("hx-swap-oob") == 1 and "Nothing is waiting for approval." in frame


def pending_elicitation(index: int) -> Elicitation:
    """A question as large as the bounds let one be (`agent.elicitation.bounds`)."""
    fields = [
        ElicitField(
            name=f"field_{index}_{n}",
            kind="string",
            title="T" * MAX_LABEL_CHARS,
            description="d" * MAX_DESCRIPTION_CHARS,
        ).to_dict()
        for n in range(MAX_FIELDS // 2)
    ]
    now = timezone.now()
    return Elicitation.objects.create(
        correlation_id=uuid.uuid4(),
        actor="operator:test",
        server=f"server{index}",
        tool="deploy",
        message=f"question {index} " + "m" * MAX_MESSAGE_CHARS,
        requested_schema={},
        fields=fields,
        created_at=now + datetime.timedelta(seconds=index),
        expires_at=now + datetime.timedelta(minutes=5),
    )


def session_with_long_turns(answers: list[int]) -> uuid.UUID:
    """A session of finished turns whose answers are `answers` characters long."""
    session = AgentSession.objects.create(actor="operator:test", title="long answers")
    for index, length in enumerate(answers):
        turn = Turn.objects.create(session=session, actor="operator:test", status=Turn.Status.DONE)
        Message.objects.create(
            session=session, turn=turn, role="user", content=[{"type": "text", "text": f"question {index}"}]
        )
        Message.objects.create(
            session=session, turn=turn, role="assistant", content=[{"type": "text", "text": "a" * length}]
        )
    return session.id


async def snapshot(frames: Frames) -> list[str]:
    """Every message of a socket's snapshot (its last part is the approval forms)."""
    await frames.until(lambda frame: "innerHTML:#approval-forms" in frame)
    return frames.received


@pytest.mark.django_db(transaction=True)
class TestTheSocket:
    async def test_a_rail_of_large_questions_arrives_in_messages_under_the_limit(
        self, oikos_settings: RunningSim, socket: Connect
    ) -> None:
        await database_sync_to_async(lambda: [pending_elicitation(index) for index in range(20)])()

        sent = await snapshot(await socket("/ws/ui/?rail=1"))

        assert sum(size(frame) for frame in sent) > FRAME_LIMIT_BYTES
        assert all(size(frame) <= FRAME_LIMIT_BYTES for frame in sent), [size(frame) for frame in sent]
        text = "".join(sent)
        assert [f"question {index} " in text for index in range(20)] == [True] * 20
        assert "Too large to show" not in text

    async def test_a_long_transcript_arrives_in_parts_and_a_turn_too_large_alone_says_so(
        self, oikos_settings: RunningSim, socket: Connect
    ) -> None:
        session_id = await database_sync_to_async(session_with_long_turns)([400_000, 400_000, 1_500_000, 400_000])

        sent = await snapshot(await socket(f"/ws/ui/?session={session_id}"))

        assert all(size(frame) <= FRAME_LIMIT_BYTES for frame in sent), [size(frame) for frame in sent]
        text = "".join(sent)
        assert text.count("a" * 400_000) == 3
        assert "a" * 1_500_000 not in text and text.count("Too large to show here") == 1
        assert [f"<p>question {index}</p>" in text for index in (0, 1, 3)] == [True] * 3
