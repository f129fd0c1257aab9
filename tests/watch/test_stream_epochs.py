"""An Oikos that restarts and numbers its events from 1 again: the watcher follows the new numbering.

A real oikos_sim is stopped and a fresh one started on the same port, as a restarted `make run`
does: the fresh one has forgotten every event, and the watcher resumes with the old `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.tools import ToolHub
from oikos.client import OikosEvent
from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim, serve_in_thread
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.oikos_fixtures import AGENT_TOKEN, OPERATOR_TOKEN
from watch import services
from watch.models import Investigation, WatchedEvent
from watch.policy import TriggerPolicy
from watch.selectors import watch_status
from watch.watcher import Backoff, Watcher

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class RestartableOikos:
    """An oikos_sim that can be restarted on its port, forgetting everything it raised."""

    sim: RunningSim

    def restart(self) -> None:
        port = urlsplit(self.sim.url).port
        assert port is not None
        self.sim.stop()
        self.sim = serve_in_thread(port=port, execution_seconds=0.2)

    def fire(self, slug: str, kind: str = "http_timeout") -> None:
        signal_fire(self.sim.state.world, self.sim.state.events, slug, kind, "warning", f"{slug} {kind}")


@pytest.fixture
def restartable(settings: Settings) -> Iterator[RestartableOikos]:
    oikos = RestartableOikos(serve_in_thread(execution_seconds=0.2))
    settings.HERMES_MCP_CONFIG = None
    settings.OIKOS_MCP_URL = oikos.sim.mcp_url
    settings.OIKOS_MCP_TOKEN = AGENT_TOKEN
    settings.OIKOS_API_URL = oikos.sim.api_url
    settings.OIKOS_API_TOKEN = OPERATOR_TOKEN
    yield oikos
    oikos.sim.stop()


@dataclass
class Following:
    watcher: Watcher
    task: asyncio.Task[None]
    handled: asyncio.Queue[tuple[OikosEvent, services.Claim | None]] = field(default_factory=asyncio.Queue)

    async def handled_next(self) -> tuple[OikosEvent, services.Claim | None]:
        return await asyncio.wait_for(self.handled.get(), 30)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        while self.watcher.investigations:
            await asyncio.gather(*self.watcher.investigations)


@pytest.fixture
async def follow(restartable: RestartableOikos) -> AsyncIterator[object]:
    hub = ToolHub.from_settings()
    running: list[Following] = []

    async def start() -> Following:
        queue: asyncio.Queue[tuple[OikosEvent, services.Claim | None]] = asyncio.Queue()
        watcher = Watcher(
            hub=hub,
            policy=TriggerPolicy(kinds=frozenset({"signal.fired"}), min_severity="warning"),
            on_claim=lambda event, claim: queue.put_nowait((event, claim)),
        )
        following = Following(watcher, asyncio.get_running_loop().create_task(watcher.run()), queue)
        running.append(following)
        await asyncio.wait_for(watcher.connected.wait(), 10)
        return following

    yield start
    for following in running:
        await following.stop()
    await hub.aclose()


def _investigated() -> list[str]:
    return list(Investigation.objects.order_by("id").values_list("entity", flat=True))


def _claims() -> list[tuple[int, str, str]]:
    return list(WatchedEvent.objects.order_by("id").values_list("epoch", "event_id", "outcome"))


async def test_after_oikos_restarts_numbering_from_1_the_next_event_opens_its_investigation(
    llm: FakeAnthropic, restartable: RestartableOikos, follow
) -> None:
    llm.responder = lambda request: Reply.text("## Escalation\nSummary: checked")
    first = await follow()
    for slug in ("service:sonarr", "service:radarr", "service:gitea"):
        restartable.fire(slug)
        await first.handled_next()
    await asyncio.gather(*first.watcher.investigations)

    # `make run` again: a fresh Oikos that numbers from 1, and the watcher resumes after id 3.
    restartable.restart()
    restartable.fire("service:caddy", "cert_expiring")
    event, claim = await first.handled_next()
    restartable.fire("service:jellyfin")
    second_event, second_claim = await first.handled_next()
    await asyncio.gather(*first.watcher.investigations)

    assert (event.id, second_event.id) == ("1", "2")
    assert claim is not None and claim.outcome == "opened"
    assert second_claim is not None and second_claim.outcome == "opened"
    assert await database_sync_to_async(_investigated)() == [
        "service:sonarr",
        "service:radarr",
        "service:gitea",
        "service:caddy",
        "service:jellyfin",
    ]
    assert first.watcher.stats.epoch == 2
    assert (await database_sync_to_async(watch_status)()).epoch == 2  # what `doctor` says

    # A watcher started afterwards resumes in the new numbering: the next id is new, not "handled".
    await first.stop()
    restartable.fire("service:grafana")
    resumed = await follow()
    third_event, third_claim = await resumed.handled_next()
    await resumed.stop()

    assert third_event.id == "3" and third_claim is not None and third_claim.outcome == "opened"
    assert await database_sync_to_async(_claims)() == [
        (1, "1", "opened"),
        (1, "2", "opened"),
        (1, "3", "opened"),
        (2, "1", "opened"),
        (2, "2", "opened"),
        (2, "3", "opened"),
    ]


def test_an_id_claimed_for_another_event_is_reused_and_one_claimed_for_the_same_event_is_taken() -> None:
    policy = TriggerPolicy(kinds=frozenset({"signal.fired"}))
    data = {"slug": "service:sonarr", "kind": "http_timeout", "severity": "warning"}
    assert services.event_claim(
        event_id="1", event_type="signal.fired", at="2026-12-01T03:00:00Z", data=data, policy=policy
    )

    # The same event again (another watcher, a resend): already claimed.
    again = services.event_claim(
        event_id="1", event_type="signal.fired", at="2026-12-01T03:00:00Z", data=data, policy=policy
    )
    assert again is None
    # Another event under the same id: Oikos numbers anew, and the claim says so.
    with pytest.raises(services.EventIdReused):
        services.event_claim(
            event_id="1", event_type="signal.fired", at="2026-12-06T10:00:00Z", data=data, policy=policy
        )
    renumbered = services.event_claim(
        event_id="1", event_type="signal.fired", at="2026-12-06T10:00:00Z", data=data, policy=policy, epoch=2
    )
    assert renumbered is not None
    assert services.watch_cursor() == services.Position(epoch=2, event_id="1")


def test_reconnects_back_off_with_jitter_up_to_the_cap_and_start_again_after_a_healthy_stream() -> None:
    backoff = Backoff(first=1.0, cap=30.0, healthy=60.0, rng=random.Random(7))

    failing = [backoff.next_delay(stream_seconds=0.1) for _ in range(8)]
    ceilings = [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert all(ceiling / 2 <= delay <= ceiling for delay, ceiling in zip(failing, ceilings, strict=True))
    # Jittered: watchers cut off together do not all come back at the same instant.
    assert len({round(delay, 6) for delay in failing[5:]}) == 3

    assert backoff.next_delay(stream_seconds=120.0) <= 1.0
    assert 1.0 <= backoff.next_delay(stream_seconds=0.1) <= 2.0
