"""The incident note and its JSON carry Hermes's record of each execution: how it ended, what the
follow-up found and when, and the undo offered or taken."""

from __future__ import annotations

import datetime
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer
from django.test import AsyncClient
from django.utils import timezone

from agent.models import Change, Turn
from agent.proposals import undo_propose
from agent.store.changes import change_status, followup_claim, followup_started, verdict_record
from agent.tools import ToolHub
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import ExecutionRequester
from tests.transcript.test_export import _documented, _sections

pytestmark = pytest.mark.django_db(transaction=True)


def _checked(execution_id: str, session_id: uuid.UUID, verdict: str) -> Turn:
    """What the watcher writes as the execution ends and its follow-up runs."""
    finished = timezone.now() - datetime.timedelta(seconds=40)
    change_status(execution_id=execution_id, status="completed", finished_at=finished)
    turn = Turn.objects.create(session_id=session_id, actor="agent:hermes", status=Turn.Status.DONE)
    followup_claim(execution_id=execution_id, instance=None)
    followup_started(execution_id=execution_id, turn_id=turn.id)
    verdict_record(execution_id=execution_id, verdict=verdict, detail="the probe answers")
    # Forty seconds after the execution ended, whatever the machine's speed.
    change = Change.objects.get(execution_id=execution_id)
    assert change.finished_at is not None
    Change.objects.filter(pk=change.pk).update(verdict_at=change.finished_at + datetime.timedelta(seconds=40))
    return turn


async def test_the_outcome_says_what_the_follow_up_verified_and_the_undo_offered(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    llm.responder = ExecutionRequester(target="service:caddy", action="deploy")
    handle, _ = await ask("deploy caddy", oikos_hub)
    change = await Change.objects.aget()
    turn = await database_sync_to_async(_checked)(change.execution_id, handle.session_id, "not_cleared")
    proposal = await database_sync_to_async(undo_propose)(execution_id=change.execution_id, proposed_by="operator")
    assert proposal is not None

    client = AsyncClient()
    note = (await client.get(f"/sessions/{handle.session_id}/export.md")).content.decode()
    body = (await client.get(f"/sessions/{handle.session_id}/export.json")).json()

    (line,) = _sections(note)["Outcome"].split("\n")
    assert line.startswith("Completed: deploy on service:caddy")
    assert f"— verified not cleared 40 s after · undo offered (follow-up turn {turn.id})" in line
    assert f"(undo proposal {proposal.id})" in line
    _documented(body)
    (action,) = body["actions"]
    assert action["status"] == "completed"
    record = action["record"]
    assert (record["verdict"], record["verified_after_seconds"], record["followup_turn_id"]) == (
        "not_cleared",
        40,
        str(turn.id),
    )
    assert (record["undo_proposal_id"], record["undone_by"]) == (proposal.id, "")


async def test_a_skipped_follow_up_says_why_in_the_note(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    from agent.store.changes import followup_skip

    llm.responder = ExecutionRequester(target="service:caddy", action="restart")
    handle, _ = await ask("restart caddy", oikos_hub)
    change = await Change.objects.aget()
    await database_sync_to_async(change_status)(execution_id=change.execution_id, status="completed")
    await database_sync_to_async(followup_skip)(execution_id=change.execution_id, reason="today's budget is spent")

    note = (await AsyncClient().get(f"/sessions/{handle.session_id}/export.md")).content.decode()

    assert "— not checked: today's budget is spent." in _sections(note)["Outcome"]
