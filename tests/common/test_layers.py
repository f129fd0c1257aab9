"""`groups_listened` reads channels-redis's private storage: a contract test, pinned to the version
it was checked against, so an upgrade that changes that storage fails here, not silently in
production (where the turn registry would stop sending to pages that listen)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
from typing import Any

from channels.layers import BaseChannelLayer, InMemoryChannelLayer

from common.layers import groups_listened, task_cancel

# Checked against this release; on an upgrade, run this file against Redis and move the pin.
CHANNELS_REDIS_CHECKED = "4.3.0"


def test_the_installed_channels_redis_is_the_one_checked() -> None:
    assert importlib.metadata.version("channels-redis") == CHANNELS_REDIS_CHECKED


async def test_on_redis_a_group_with_a_member_is_listened_and_one_without_is_not(
    redis_layer: BaseChannelLayer,
) -> None:
    channel = await redis_layer.new_channel()
    await redis_layer.group_add("hermes.listened", channel)
    await redis_layer.group_add("hermes.left", channel)
    await redis_layer.group_discard("hermes.left", channel)

    listened = await groups_listened(redis_layer, {"hermes.listened", "hermes.left", "hermes.never"})

    assert listened == {"hermes.listened": True, "hermes.left": False, "hermes.never": False}


async def test_on_redis_a_member_past_the_group_expiry_no_longer_counts(
    redis_layer: BaseChannelLayer,
) -> None:
    layer: Any = redis_layer
    channel = await redis_layer.new_channel()
    await redis_layer.group_add("hermes.expired", channel)
    layer.group_expiry = -1  # every member joined longer ago than that

    assert await groups_listened(redis_layer, {"hermes.expired"}) == {"hermes.expired": False}


async def test_the_in_memory_layer_is_read_exactly() -> None:
    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("hermes.listened", channel)

    assert await groups_listened(layer, {"hermes.listened", "hermes.never"}) == {
        "hermes.listened": True,
        "hermes.never": False,
    }


class OtherLayer(BaseChannelLayer):
    """A layer this module knows nothing of."""


async def test_a_layer_that_cannot_tell_counts_as_listened() -> None:
    assert await groups_listened(OtherLayer(), {"hermes.any"}) == {"hermes.any": True}


async def test_a_task_that_swallows_its_first_cancellation_is_cancelled_all_the_same() -> None:
    async def stubborn() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # as redis-py can do mid-read
            await asyncio.sleep(10)
        await asyncio.sleep(10)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)

    await asyncio.wait_for(task_cancel(task), timeout=5)

    assert task.cancelled()
