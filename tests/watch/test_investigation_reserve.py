"""Peers cannot starve investigations of critical signals: with the budget spent down to its
reserve, a warning's investigation is skipped and a critical signal's still runs (agent/budget.py)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.models import AgentSession, Turn
from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator
from watch.models import Investigation
from watch.policy import TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)


def _peers_spent(tokens: int) -> None:
    session = AgentSession.objects.create(actor="peer:lab", origin="a2a")
    Turn.objects.create(session=session, actor="peer:lab", status="done", tokens_total=tokens)


async def test_a_critical_signal_is_investigated_on_the_reserve_a_warning_is_not(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start, settings: Settings
) -> None:
    settings.HERMES_DAILY_TOKEN_BUDGET = 1_000_000
    settings.HERMES_BUDGET_RESERVE_SHARE = 0.2
    settings.HERMES_TURN_TOKEN_BUDGET = 100_000
    await database_sync_to_async(_peers_spent)(800_000)
    llm.responder = DegradedInvestigator()
    policy = TriggerPolicy(
        kinds=frozenset({"signal.fired"}), min_severity="warning", cooldown_seconds=1800.0, hourly_cap=6
    )
    running = await watcher_start(policy)
    world, events = oikos_settings.state.world, oikos_settings.state.events

    signal_fire(world, events, "service:sonarr", "http_timeout", "warning", "slow answers")
    await running.handled_next()
    await running.investigations_done()
    signal_fire(world, events, "service:postgres", "wal_archive_failing", "critical", "archive_command failing")
    await running.handled_next()
    await running.investigations_done()

    warning, critical = await database_sync_to_async(lambda: list(Investigation.objects.order_by("id")))()
    assert (warning.state, warning.skipped_reason) == ("skipped", "budget_exhausted")
    assert critical.state != "skipped" and critical.escalation["turn_status"] == "done"
