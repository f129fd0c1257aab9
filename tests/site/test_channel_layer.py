"""The Redis channel layer as Hermes configures it, against the Redis this machine runs (CI sets REDIS_URL)."""

from __future__ import annotations

import asyncio

from channels.layers import BaseChannelLayer


async def test_a_listener_idle_longer_than_the_blocking_wait_keeps_listening(redis_layer: BaseChannelLayer) -> None:
    """A control room left open with nothing happening must not lose its socket every 5 seconds."""
    channel = await redis_layer.new_channel()

    async def later() -> None:
        await asyncio.sleep(7)
        await redis_layer.send(channel, {"type": "turn.stop", "turn_id": "late"})

    sender = asyncio.create_task(later())
    message = await asyncio.wait_for(redis_layer.receive(channel), timeout=20)
    await sender

    assert message == {"type": "turn.stop", "turn_id": "late"}


async def test_hundreds_of_operations_at_once_all_succeed(redis_layer: BaseChannelLayer) -> None:
    """200 questions at once publish and join groups together: none may fail for want of a connection.

    redis-py's pool fails the operation past its cap at once (100 by default), so turns under load
    lost events and a page could fail to join its turn's group.
    """
    channels = [await redis_layer.new_channel() for _ in range(300)]
    await asyncio.gather(*(redis_layer.group_add("load-test", channel) for channel in channels))
    await asyncio.gather(*(redis_layer.group_send("load-test", {"type": "turn.event", "n": n}) for n in range(300)))
    first = await asyncio.wait_for(redis_layer.receive(channels[0]), timeout=10)
    assert first["type"] == "turn.event"
    await asyncio.gather(*(redis_layer.group_discard("load-test", channel) for channel in channels))
