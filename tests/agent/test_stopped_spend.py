"""A stopped turn counts what it consumed: the prompt the model read and the text it streamed."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from agent.budget import spend_today
from agent.conversation.events import Done, Event, TextDelta
from agent.engine.runner import turn_start
from agent.models import Turn
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "A long, slow answer that the operator stops halfway. " * 20


async def test_a_turn_stopped_mid_stream_costs_what_it_streamed_and_counts_against_the_budget(
    llm: FakeAnthropic, hub: ToolHub
) -> None:
    before = await database_sync_to_async(spend_today)()
    llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.05))
    handle = await turn_start(text="go slowly", actor="operator:test", origin="cli", hub=hub)
    seen: list[Event] = []
    async for event in handle.events():
        seen.append(event)
        if len([e for e in seen if isinstance(e, TextDelta)]) == 5:
            handle.cancel()
    done = seen[-1]
    assert isinstance(done, Done) and done.status == "cancelled"
    streamed = "".join(e.text for e in seen if isinstance(e, TextDelta))

    # The input side as `message_start` reported it; the output estimated from what streamed, so
    # at least the streamed text's tokens and less than the whole answer's.
    read = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    assert sum(done.usage[key] for key in read) > 0
    assert math.ceil(len(streamed) / 4) <= done.usage["output_tokens"] < math.ceil(len(ANSWER) / 4)
    assert done.cost_usd is not None and Decimal(done.cost_usd) > 0

    turn = await Turn.objects.aget(pk=handle.turn_id)
    assert turn.tokens_total == sum(done.usage[key] for key in (*read, "output_tokens"))
    assert turn.cost_usd is not None and turn.cost_usd > 0
    after = await database_sync_to_async(spend_today)()
    assert after.tokens - before.tokens == turn.tokens_total
    assert after.cost_usd - before.cost_usd == turn.cost_usd
