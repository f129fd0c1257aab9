"""A peer's caller that goes away at any moment of a message's start leaves nothing half done.

The GarraIA dialect cancels `inbound_turn` when its client hangs up, and that can happen while the
exchange is being written, while the turn is being started, or while the turn registry takes the
turn over (a channel layer round trip). Wherever it lands: no turn is left running, no exchange is
left open (which would keep the conversation busy), an exchange whose turn ran names that turn (so
the task reads `canceled`, not `working` forever), and the same conversation takes its next message.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from agent.models import Turn
from interop.models import PeerExchange
from interop.server.conversation import PEER_CANCEL_REASON, inbound_turn
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)

# From "at once" (the exchange is still being written) to well after the model was asked.
CANCEL_AFTER_SECONDS = (0.0, 0.001, 0.003, 0.006, 0.01, 0.02, 0.04, 0.08, 0.2)


def _left_behind() -> tuple[list[str], list[tuple[str, str, str]]]:
    # A turn the caller's going away stopped says so, not that an operator did.
    assert {(turn.status, turn.error) for turn in Turn.objects.exclude(status="running")} <= {
        ("cancelled", PEER_CANCEL_REASON),
        ("interrupted", "The caller went away before the turn started."),
    }
    running = [str(turn.id) for turn in Turn.objects.filter(status="running")]
    exchanges = [
        (exchange.state, "open" if exchange.finished_at is None else "finished", str(exchange.turn_id or ""))
        for exchange in PeerExchange.objects.all()
    ]
    return running, exchanges


@pytest.mark.parametrize("delay", CANCEL_AFTER_SECONDS)
async def test_a_caller_gone_at_any_moment_leaves_no_turn_running_and_no_exchange_open(
    llm: FakeAnthropic, delay: float
) -> None:
    slow_answer = " ".join(["Checking every host in turn."] * 4)
    llm.enqueue(Reply.text(slow_answer, chunk=4, delay=0.05))
    asking = asyncio.create_task(inbound_turn(peer="lab", dialect="garraia", external_id="t-1", text="check it all"))
    await asyncio.sleep(delay)
    asking.cancel()
    await asyncio.gather(asking, return_exceptions=True)
    assert asking.cancelled()

    running, exchanges = await database_sync_to_async(_left_behind)()
    assert running == [], "a turn runs on for a caller that is gone"
    assert {(state, finished) for state, finished, _turn in exchanges} <= {("canceled", "finished")}, exchanges
    turns = await database_sync_to_async(lambda: sorted(str(t.id) for t in Turn.objects.all()))()
    if len(llm.requests) > 0:
        # The model was asked, so the turn ran: the peer's task must lead to it.
        assert [turn_id for _state, _finished, turn_id in exchanges] == turns

    # A caller gone before the model was asked leaves the slow reply queued: the next message gets it.
    expected = slow_answer if llm.pending else "All hosts are up."
    llm.enqueue(Reply.text("All hosts are up."))
    again = await inbound_turn(peer="lab", dialect="garraia", external_id="t-1", text="check it all, again")
    assert (again.state, again.text) == ("completed", expected)
