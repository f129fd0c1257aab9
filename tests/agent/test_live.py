"""The turn registry: what it publishes to a session's group, and what it answers for its turns."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import BaseChannelLayer, InMemoryChannelLayer
from channels_redis.core import RedisChannelLayer
from pytest_django.fixtures import Settings

from agent.broadcast import session_group
from agent.conversation.events import Done, TextDelta, TurnStart
from agent.engine.runner import TurnHandle, turn_start
from agent.live import LISTENERS_RECHECK_SECONDS, LiveTurn, TurnRegistry
from agent.models import AgentSession
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.channel_layers import live_turn
from tests.fakes.scripted_models import DegradedInvestigator

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "".join(f"{n % 10}" for n in range(600))


async def _listen(layer: BaseChannelLayer, llm: FakeAnthropic) -> tuple[uuid.UUID, str]:
    """An empty session and a channel listening to its group, as a control room on it would."""
    session = await AgentSession.objects.acreate(actor="operator:test", origin="ui")
    channel = await layer.new_channel()
    await layer.group_add(session_group(session.id), channel)
    return session.id, channel


async def _until_done(layer: BaseChannelLayer, channel: str) -> list[dict[str, Any]]:
    messages = []
    while True:
        message = await layer.receive(channel)
        messages.append(message)
        if message["events"][-1]["type"] == "done":
            return messages


def _events(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of `turn.event` messages, in order (a message carries one or a few)."""
    return [event for message in messages for event in message["events"]]


async def test_deltas_are_coalesced_numbered_and_each_block_ends_with_its_full_text(
    channel_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    session_id, channel = await _listen(channel_layer, llm)
    llm.enqueue(Reply.text(ANSWER, chunk=1))
    handle = await live_turn("count", session_id=session_id)

    messages = await _until_done(channel_layer, channel)

    # One numbering, the engine's: each message carries the events after the last one's `through`.
    assert (messages[0]["first"], messages[0]["through"]) == (0, 0)
    assert all(m["first"] == before["through"] + 1 for before, m in itertools.pairwise(messages))
    assert messages[-1]["through"] == len(handle.log)
    events = _events(messages)
    assert events[0]["type"] == "turn_start" and events[0]["question"] == "count"
    texts = [e for e in events if e["type"] == "text"]
    deltas = [e for e in handle.log if isinstance(e, TextDelta)]
    assert len(deltas) == len(ANSWER)
    assert len(texts) < len(deltas) / 20, f"{len(texts)} messages for {len(deltas)} deltas"
    assert "".join(t["text"] for t in texts) == ANSWER
    ends = [e for e in events if e["type"] == "text_end"]
    assert ends == [{"type": "text_end", "block": 0, "text": ANSWER}]
    assert events[-2] == ends[0] and events[-1]["status"] == "done"
    # What crosses the layer is plain JSON.
    assert all(json.loads(json.dumps(m)) == m for m in messages)


async def test_tool_events_arrive_in_call_order_between_text_blocks(
    channel_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    session_id, channel = await _listen(channel_layer, llm)
    llm.responder = DegradedInvestigator()
    await live_turn("what's degraded?", session_id=session_id)

    kinds = [e["type"] for e in _events(await _until_done(channel_layer, channel))]

    assert kinds[:5] == ["turn_start", "tool_use", "tool_result", "tool_use", "tool_result"]
    assert kinds[-2:] == ["text_end", "done"] and set(kinds[5:-2]) == {"text"}


async def test_the_owner_answers_a_state_request_with_the_turn_so_far(
    channel_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    session_id, channel = await _listen(channel_layer, llm)
    llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.002))
    handle = await live_turn("count slowly", session_id=session_id)
    # Wait for some text to be published, then ask as another process would.
    while True:
        message = await channel_layer.receive(channel)
        if message["events"][-1]["type"] == "text":
            break
    reply_to = await channel_layer.new_channel()
    await TurnRegistry().turn_state_request(turn_id=handle.turn_id, reply_to=reply_to)

    state = await channel_layer.receive(reply_to)

    assert state["type"] == "turn.state" and state["start"]["question"] == "count slowly"
    texts = [e for e in state["events"] if e["type"] == "text"]
    assert len(texts) == 1, "text of one block is merged into one event"
    assert ANSWER.startswith(texts[0]["text"]) and state["through"] >= 1
    handle.cancel()
    await handle.wait()


async def test_a_replay_ends_where_a_published_message_ends_so_a_follower_misses_and_repeats_nothing(
    channel_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    session_id, channel = await _listen(channel_layer, llm)
    llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.002))
    handle = await live_turn("count slowly", session_id=session_id)
    while (await channel_layer.receive(channel))["events"][-1]["type"] != "text":
        pass
    # Ask for more than has been published: the owner answers once its published messages cover it.
    after = len(handle.log) + 3
    reply_to = await channel_layer.new_channel()
    await TurnRegistry().turn_replay_request(turn_id=handle.turn_id, reply_to=reply_to, after=after)

    replay = await channel_layer.receive(reply_to)
    following = await _until_done(channel_layer, channel)

    assert replay["type"] == "turn.replay" and replay["through"] >= after
    assert replay["events"] == [event.to_dict() for event in handle.log[after : replay["through"]]]
    # Resuming = engine events 1..after (the client's) + the replay + the messages past its boundary.
    later = [e for e in _events([m for m in following if m["through"] > replay["through"]]) if e["type"] == "text"]
    client = "".join(e.text for e in handle.log[:after] if isinstance(e, TextDelta))
    replayed = "".join(e["text"] for e in replay["events"] if e["type"] == "text")
    assert client + replayed + "".join(e["text"] for e in later) == ANSWER
    throughs = [m["through"] for m in following]
    assert throughs == sorted(throughs) and throughs[-1] == len(handle.log)


async def test_a_secret_pasted_into_a_question_never_crosses_the_layer(
    channel_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    session_id, channel = await _listen(channel_layer, llm)
    llm.enqueue(Reply.text("I cannot check passwords."))
    pasted = f"is {llm.api_key} still valid?"

    await live_turn(pasted, session_id=session_id)
    messages = await _until_done(channel_layer, channel)

    assert messages[0]["events"][0]["question"] == "is [REDACTED] still valid?"
    assert llm.api_key not in json.dumps(messages)


class BrokenLayer(InMemoryChannelLayer):
    """A channel layer whose server is gone: every group operation fails, as Redis down does."""

    async def group_add(self, group: str, channel: str) -> None:
        raise ConnectionError("Error connecting to 127.0.0.1:6379. Connection refused.")

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        raise ConnectionError("Error connecting to 127.0.0.1:6379. Connection refused.")


async def test_a_broken_channel_layer_never_costs_the_turn(llm: FakeAnthropic, oikos_settings: RunningSim) -> None:
    """`/chat` must answer when Redis is down: only the live view and remote Stop are lost."""
    registry = TurnRegistry(layer=BrokenLayer())
    llm.enqueue(Reply.text("Still here."))
    handle = await turn_start(text="are you there?", actor="operator:test", origin="api")

    followed = await registry.turn_follow(handle)
    events = [event async for event in followed.events()]

    assert isinstance(events[-1], Done) and events[-1].status == "done"
    await registry.aclose()


class SlowLayer(InMemoryChannelLayer):
    """A layer whose group operations take a round trip, as Redis's do."""

    async def group_add(self, group: str, channel: str) -> None:
        await asyncio.sleep(0.05)
        await super().group_add(group, channel)


async def test_a_caller_gone_while_its_turn_is_taken_over_leaves_the_turn_published(
    llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """A client that hangs up while its question is accepted: the turn runs on, so pages on its
    session must still see it to its end (and a Stop must still reach it)."""
    layer = SlowLayer()
    registry = TurnRegistry(layer=layer)
    session_id, channel = await _listen(layer, llm)
    llm.enqueue(Reply.text("Caddy is up."))
    handle = await turn_start(text="is caddy up?", actor="operator:test", origin="ui", session_id=session_id)

    async def asker() -> None:
        await registry.turn_follow(handle)

    asking = asyncio.create_task(asker())
    await asyncio.sleep(0.01)  # inside the layer's round trip
    asking.cancel()
    await asyncio.gather(asking, return_exceptions=True)

    messages = await asyncio.wait_for(_until_done(layer, channel), timeout=10)
    assert messages[0]["events"][0]["type"] == "turn_start"
    assert messages[-1]["events"][-1]["status"] == "done"
    await registry.aclose()


class SendsRecorded(BaseChannelLayer):
    """Mixed into a real layer: records the group of every `group_send`, then sends it."""

    sent_to: list[str]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent_to.append(group)
        await super().group_send(group, message)


class CountingLayer(SendsRecorded, InMemoryChannelLayer):
    """The in-memory layer, recording the group of every `group_send`."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_to = []


async def test_a_turn_nobody_watches_sends_its_session_nothing_and_a_page_that_joins_hears_the_rest(
    llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """On the in-memory layer every send walks every group, so a turn no page follows sends none;
    a page that opens its session mid-turn still hears it to its end."""
    layer = CountingLayer()
    registry = TurnRegistry(layer=layer)
    session = await AgentSession.objects.acreate(actor="operator:test", origin="ui")
    group = session_group(session.id)
    llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.002))
    handle = await registry.turn_follow(
        await turn_start(text="count slowly", actor="operator:test", origin="ui", session_id=session.id)
    )
    async with contextlib.aclosing(handle.events()) as events:
        deltas = 0
        async for event in events:
            deltas += isinstance(event, TextDelta)
            if deltas == 10:
                break
    await asyncio.sleep(0.05)  # past the text coalescing window: some text was published meanwhile
    assert group not in layer.sent_to

    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    messages = await asyncio.wait_for(_until_done(layer, channel), timeout=10)

    assert messages[-1]["events"][-1]["status"] == "done"
    assert any(event["type"] == "text" for event in _events(messages))
    assert group in layer.sent_to
    await registry.aclose()


class CountingRedisLayer(SendsRecorded, RedisChannelLayer):
    """The Redis layer as configured, recording the group of every `group_send`."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.sent_to = []


@contextlib.asynccontextmanager
async def _counting_redis(settings: Settings) -> AsyncIterator[tuple[CountingRedisLayer, TurnRegistry]]:
    """A registry on its own Redis layer, configured as the `redis_layer` fixture configured the
    site's (its prefix too, so that fixture's flush clears what this one wrote)."""
    layer = CountingRedisLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])
    registry = TurnRegistry(layer=layer)
    try:
        yield layer, registry
    finally:
        await registry.aclose()
        await layer.close_pools()


async def _some_text_streamed(handle: TurnHandle) -> None:
    async with contextlib.aclosing(handle.events()) as events:
        deltas = 0
        async for event in events:
            deltas += isinstance(event, TextDelta)
            if deltas == 10:
                return


async def test_on_redis_a_turn_nobody_watches_sends_its_session_nothing(
    redis_layer: BaseChannelLayer, settings: Settings, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """A group send to an empty Redis group still costs two round trips: a turn no page follows
    makes none for its events, from its start to its end."""
    async with _counting_redis(settings) as (layer, registry):
        session = await AgentSession.objects.acreate(actor="operator:test", origin="ui")
        llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.01))  # ~1.2 s: past a recheck of who listens
        handle = await registry.turn_follow(
            await turn_start(text="count slowly", actor="operator:test", origin="ui", session_id=session.id)
        )
        await handle.wait()
        await asyncio.sleep(0.1)  # the pump's last publish (done) is after the handle's end

        [done] = [event for event in handle.log if isinstance(event, Done)]
        assert done.status == "done" and len(handle.log) > 100
        assert session_group(session.id) not in layer.sent_to


async def test_on_redis_a_page_that_joins_mid_turn_and_asks_for_it_hears_the_rest_without_a_gap(
    redis_layer: BaseChannelLayer, settings: Settings, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """As the control room's socket does: join the session's group, then ask the owner for the turn
    so far. Its events from then on reach the page, numbered on from the state it was sent."""
    async with _counting_redis(settings) as (layer, registry):
        session = await AgentSession.objects.acreate(actor="operator:test", origin="ui")
        llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.01))
        handle = await registry.turn_follow(
            await turn_start(text="count slowly", actor="operator:test", origin="ui", session_id=session.id)
        )
        await _some_text_streamed(handle)
        assert session_group(session.id) not in layer.sent_to

        channel = await layer.new_channel()
        await layer.group_add(session_group(session.id), channel)
        await registry.turn_state_request(turn_id=handle.turn_id, reply_to=channel)
        state = await asyncio.wait_for(layer.receive(channel), timeout=10)
        assert state["type"] == "turn.state"
        following = await asyncio.wait_for(_until_done(layer, channel), timeout=20)

        assert following[0]["first"] == state["through"] + 1
        assert all(m["first"] == before["through"] + 1 for before, m in itertools.pairwise(following))
        shown = [e for e in [*state["events"], *_events(following)] if e["type"] == "text"]
        assert "".join(event["text"] for event in shown) == ANSWER
        assert following[-1]["events"][-1]["status"] == "done"


async def test_on_redis_a_page_that_joins_as_the_turn_ends_hears_its_end_though_its_request_came_too_late(
    redis_layer: BaseChannelLayer, settings: Settings, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """A control room that opens the session as the turn ends: it joins the group, reads the turn
    from the database as running, and asks the owner for it only after the turn ended (the owner
    no longer has it and ignores the request). The turn's end must reach it all the same, before
    any recheck of who listens: otherwise the page shows the answer "Working…" for ever."""
    async with _counting_redis(settings) as (layer, registry):
        session = await AgentSession.objects.acreate(actor="operator:test", origin="ui")
        llm.enqueue(Reply.text("The lighthouse keeper.", chunk=4, delay=0.02))
        handle = await registry.turn_follow(
            await turn_start(text="remember", actor="operator:test", origin="ui", session_id=session.id)
        )
        async with contextlib.aclosing(handle.events()) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        channel = await layer.new_channel()
        await layer.group_add(session_group(session.id), channel)
        await handle.wait()

        messages = await asyncio.wait_for(_until_done(layer, channel), timeout=LISTENERS_RECHECK_SECONDS / 2)

        assert messages[-1]["events"][-1]["status"] == "done"


async def test_on_redis_a_page_that_joins_without_asking_hears_the_turn_within_a_recheck(
    redis_layer: BaseChannelLayer, settings: Settings, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    """A listener whose request for the turn was lost still hears the turn end: who listens is
    looked at again every LISTENERS_RECHECK_SECONDS."""
    async with _counting_redis(settings) as (layer, registry):
        session = await AgentSession.objects.acreate(actor="operator:test", origin="ui")
        llm.enqueue(Reply.text(ANSWER, chunk=5, delay=0.025))  # ~3 s of text
        handle = await registry.turn_follow(
            await turn_start(text="count slowly", actor="operator:test", origin="ui", session_id=session.id)
        )
        await _some_text_streamed(handle)
        channel = await layer.new_channel()
        await layer.group_add(session_group(session.id), channel)
        joined = asyncio.get_running_loop().time()

        first = await asyncio.wait_for(layer.receive(channel), timeout=10)
        heard = asyncio.get_running_loop().time() - joined
        rest = await asyncio.wait_for(_until_done(layer, channel), timeout=20)

        assert heard < LISTENERS_RECHECK_SECONDS + 0.5
        assert first["events"][-1]["type"] in ("text", "thinking", "done")
        assert rest[-1]["events"][-1]["status"] == "done"


async def test_a_look_at_who_listens_that_a_page_s_request_overtook_does_not_silence_the_turn() -> None:
    """A look at the session's group sent before a page joined may come back after that page asked
    for the turn: the turn must go on sending to it, not take the stale look's "nobody"."""
    handle = TurnHandle(session_id=uuid.uuid4(), turn_id=uuid.uuid4(), session_created=True)
    start = TurnStart(turn_id="", session_id="", question="", actor="", model="", started_at="")
    live = LiveTurn(handle=handle, start=start)
    loop = asyncio.get_running_loop()
    looked_at = loop.time()
    live.listener_asked()  # the page joined, then asked, while the look was on its way
    live.listeners_seen(False, asked_at=looked_at)
    assert live.listened

    later = loop.time() + 1
    live.listeners_seen(False, asked_at=later)  # a look sent after the ask: the page left since
    assert not live.listened
