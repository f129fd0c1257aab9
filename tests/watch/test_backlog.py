"""A watcher's first start on an empty database, and the history Oikos already holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async

from oikos_sim.clock import utc_now
from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from watch.models import Investigation, WatchedEvent

pytestmark = pytest.mark.django_db(transaction=True)


def _old_signal(oikos: RunningSim, slug: str, *, hours_ago: float) -> None:
    """A `signal.fired` Oikos raised before any watcher ran: history in its backlog."""
    oikos.state.events.publish(
        "signal.fired",
        {"slug": slug, "kind": "http_timeout", "severity": "critical", "summary": f"{slug} timed out"},
        at=utc_now() - timedelta(hours=hours_ago),
    )


def _investigated() -> list[str]:
    return list(Investigation.objects.order_by("id").values_list("entity", flat=True))


def _outcomes() -> dict[str, str]:
    return dict(WatchedEvent.objects.values_list("event_id", "outcome"))


async def test_by_default_a_first_start_records_history_and_investigates_only_what_comes_next(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: checked")
    _old_signal(oikos_settings, "service:sonarr", hours_ago=30)
    _old_signal(oikos_settings, "service:radarr", hours_ago=0.01)

    running = await watcher_start()
    history = await running.handled_next(2)
    signal_fire(oikos_settings.state.world, oikos_settings.state.events, "service:caddy", "cert", "critical", "expires")
    ((_, live),) = await running.handled_next()
    await running.investigations_done()

    assert [claim.outcome for _, claim in history if claim] == ["backlog", "backlog"]
    assert live is not None and live.outcome == "opened"
    assert await database_sync_to_async(_investigated)() == ["service:caddy"]
    # History opened nothing and cost nothing: the only model calls are the live investigation's.
    assert all("service:caddy" in str(request.body["messages"][0]) for request in llm.requests)
    # Recorded all the same: the newest of them is where a restarted watcher resumes.
    assert await database_sync_to_async(_outcomes)() == {"1": "backlog", "2": "backlog", "3": "opened"}


async def test_replay_investigates_the_recent_backlog_within_its_age_limit(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: checked")
    _old_signal(oikos_settings, "service:sonarr", hours_ago=30)
    _old_signal(oikos_settings, "service:radarr", hours_ago=0.5)

    running = await watcher_start(backlog="replay", backlog_max_age=3600.0)
    handled = await running.handled_next(2)
    await running.investigations_done()

    assert [claim.outcome for _, claim in handled if claim] == ["backlog", "opened"]
    assert await database_sync_to_async(_investigated)() == ["service:radarr"]


async def test_a_stored_position_is_resumed_whatever_the_backlog_setting(
    llm: FakeAnthropic, oikos_settings: RunningSim, watcher_start
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: checked")
    first = await watcher_start()
    signal_fire(oikos_settings.state.world, oikos_settings.state.events, "service:caddy", "probe", "info", "fine")
    await first.handled_next()
    await first.stop()
    # Raised while no watcher ran, after the stored position: missed by nobody, investigated.
    _old_signal(oikos_settings, "service:sonarr", hours_ago=0.1)

    second = await watcher_start()
    ((_, claim),) = await second.handled_next()
    await second.investigations_done()

    assert claim is not None and claim.outcome == "opened"
    assert await database_sync_to_async(_investigated)() == ["service:sonarr"]
