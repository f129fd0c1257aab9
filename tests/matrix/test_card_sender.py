"""Under Synapse's stock rate limits (a homeserver of this module's own, as shipped): every edit an
approval card gets moves it forward, and the decider is named from the first "running" on; with the
exemption docs/matrix.md tells operators to give the bot, nothing it sends is held back."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from channels.db import database_sync_to_async

from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.scripted_models import ExecutionRequester
from tests.matrix.conftest import Posted, Room
from tests.matrix.homeserver import Homeserver

pytestmark = pytest.mark.django_db(transaction=True)

# Approvals in a row on one bridge: the rate limit holds back more of each run's edits than the last.
RUNS = 3
# Under 0.2 messages per second, a run's dozen messages take a minute to land.
RATE_LIMITED_WAIT_SECONDS = 240.0
# Synapse's default `rc_message.burst_count`.
STOCK_BURST = 10


@pytest.fixture(scope="module")
def homeserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    """This module's rooms live on a Synapse with its stock rate limits (overrides tests/matrix/conftest.py)."""
    server = Homeserver(tmp_path_factory.mktemp("synapse-stock"), stock_rate_limits=True)
    server.start()
    yield server
    server.stop()


def _card(messages: list[Posted], question: str) -> Posted | None:
    return next((m for m in messages if m.thread == question and "Approval needed" in m.body), None)


def _answered(question: str) -> Callable[[list[Posted]], bool]:
    return lambda messages: any(m.thread == question and "formatted_body" in m.content for m in messages)


def _card_says(question: str, text: str) -> Callable[[list[Posted]], bool]:
    return lambda messages: text in getattr(_card(messages, question), "body", "")


async def test_under_stock_rate_limits_a_card_never_steps_back_and_names_its_decider_when_running(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    running = await bridge_start()
    cards: list[str] = []
    for _ in range(RUNS):
        question = await room.alice.send(room.room_id, f"{room.bot.user_id} deploy jellyfin", mention=room.bot.user_id)
        posted = await room.wait_for(
            _card_says(question, "Approval needed"), "an approval card", within=RATE_LIMITED_WAIT_SECONDS
        )
        card = _card(posted, question)
        assert card is not None
        await room.alice.react(room.room_id, card.event_id, "✅")
        await room.wait_for(
            _card_says(question, "completed"), "the card at completed", within=RATE_LIMITED_WAIT_SECONDS
        )
        cards.append(card.event_id)
    # Every edit the bridge still had to send has landed: what the room shows now is what stays.
    await running.bridge.cards.edits.idle()
    await room.show("cards under stock rate limits")

    assert running.bridge.sender.stats.rate_limited > 0  # the limits were met, not avoided
    assert [a.status for a in oikos_settings.state.desk.approvals.values()] == ["approved"] * RUNS
    for event_id in cards:
        states = [body.splitlines()[-1] for body in await room.edits(event_id)]
        assert states, "the card was never edited"
        assert states[-1].startswith("Approved by alice — completed."), states
        completed = next(i for i, state in enumerate(states) if "completed" in state)
        assert all("completed" in state for state in states[completed:]), states  # never back to running
        # Whenever the card says it runs, it says who approved it.
        assert all(state == "Approved by alice — running…" for state in states if "running" in state), states


async def test_with_the_documented_exemption_the_bot_is_never_rate_limited(
    llm: FakeAnthropic, oikos_settings: RunningSim, room: Room, bridge_start
) -> None:
    # docs/matrix.md: `override_ratelimit` with {"messages_per_second": 0, "burst_count": 0}.
    await database_sync_to_async(room.homeserver.ratelimit_override)(room.bot.user_id, per_second=0, burst=0)
    llm.responder = lambda request: Reply.text("All good. " * 24, chunk=12, delay=0.05)
    running = await bridge_start(quiet_seconds=0)  # a progress message and its edits for each answer too

    for _ in range(RUNS):
        question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is the fleet?")
        await room.wait_for(_answered(question), "the answer")
    events = [e for e in await room.events() if e.get("sender") == room.bot.user_id and "m.relates_to" in e["content"]]
    assert len(events) > STOCK_BURST  # more than stock Synapse lets a user send at once
    assert running.bridge.sender.stats.rate_limited == 0
