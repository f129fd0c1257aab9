"""Investigations a stopped watcher left unfinished: run once more by the next watcher, or, already
retried, marked `interrupted` and said so on their page — never "Hermes is investigating…" forever.

The rows are what a watcher SIGKILLed leaves: its process gone (a pid that no longer runs), one
investigation's turn still `running`, another claimed but its turn never started.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient

from agent.models import AgentSession, Instance, Turn
from agent.presence import host_identity
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator
from watch.models import Investigation
from watch.policy import TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)

POLICY = TriggerPolicy(kinds=frozenset({"signal.fired"}), min_severity="warning", cooldown_seconds=1800.0, hourly_cap=6)


def _dead_watcher() -> uuid.UUID:
    """The presence of a watcher process that was killed: its pid runs no more."""
    process = subprocess.Popen(["true"])
    process.wait()
    return Instance.objects.create(role="watch", host=host_identity(), pid=process.pid, pid_started="1").pk


def _investigation(owner: uuid.UUID, *, attempts: int = 1, turn: str | None = None) -> Investigation:
    """An open investigation of `owner`; with `turn`, its session has an investigation turn in that status."""
    session = AgentSession.objects.create(actor="agent:hermes", origin="signal", title="service:postgres is down")
    turn_id = None
    if turn is not None:
        turn_id = Turn.objects.create(session=session, actor="agent:hermes", status=turn, owner=owner).pk
    return Investigation.objects.create(
        session=session,
        entity="service:postgres",
        kind="wal_archive_failing",
        severity="critical",
        title=session.title,
        first_event_id="7",
        event={"id": "7", "type": "signal.fired", "at": "2026-12-06T05:00:00Z", "data": {"summary": "archive failing"}},
        owner=owner,
        attempts=attempts,
        turn_id=turn_id,
    )


async def test_a_stopped_watchers_investigations_are_retried_once_then_marked_interrupted(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = DegradedInvestigator()

    def rows() -> tuple[Investigation, Investigation, Investigation]:
        dead = _dead_watcher()
        return (
            # Killed while its turn ran: the turn is still `running`, its process gone.
            _investigation(dead, turn=Turn.Status.RUNNING),
            # Killed between the claim and the turn's start: no turn at all.
            _investigation(dead),
            # Already the retry, and cut off again.
            _investigation(dead, attempts=2, turn=Turn.Status.INTERRUPTED),
        )

    mid_turn, never_started, retried = await database_sync_to_async(rows)()

    running = await watcher_start(POLICY)
    await running.investigations_done()

    def reload(row: Investigation) -> Investigation:
        return Investigation.objects.get(pk=row.pk)

    for row in (mid_turn, never_started):
        again = await database_sync_to_async(reload)(row)
        assert again.state == "open" and again.attempts == 2
        assert again.escalation.get("turn_status") == "done", again.escalation
        assert "service:postgres" in again.escalation["summary"]
        statuses = await database_sync_to_async(list)(
            Turn.objects.filter(session_id=row.session_id).order_by("started_at").values_list("status", flat=True)
        )
        assert statuses[-1] == "done"
    first = await database_sync_to_async(Turn.objects.get)(pk=mid_turn.turn_id)
    assert first.status == "interrupted"

    given_up = await database_sync_to_async(reload)(retried)
    assert given_up.state == "interrupted"
    html = (await AsyncClient().get(f"/ui/s/{retried.session_id}/")).content.decode()
    assert "Hermes is investigating" not in html
    assert "Not investigated: Hermes was stopped while investigating" in html
    listing = (await AsyncClient().get("/ui/investigations/")).content.decode()
    assert "not investigated: Hermes was stopped" in listing
