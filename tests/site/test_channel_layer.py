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
