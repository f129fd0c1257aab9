"""What Hermes needs of a channel layer beyond the Channels API, in one place.

The turn registry (`agent.live`) and the HTTP followers of a turn (`api.turn_events`) share these:
cancelling a task blocked in channels-redis's `receive()`, and asking whether a group has members
(`groups_listened`, the one place that reads channels-redis's private storage).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from channels.layers import BaseChannelLayer, InMemoryChannelLayer

CANCEL_RETRY_SECONDS = 0.5


async def task_cancel(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait for it to end.

    Under Python 3.11, channels-redis (through redis-py) can swallow the first cancellation of a
    blocked `receive()` and go back to waiting; the cancellation is sent again until it lands.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_RETRY_SECONDS)
    await asyncio.gather(task, return_exceptions=True)


def task_cancelling() -> bool:
    """Whether the running task has been asked to stop (even if a library masked the cancel)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def groups_listened(layer: BaseChannelLayer, groups: set[str]) -> dict[str, bool]:
    """Whether any channel is in each of `groups` now; True where the layer cannot tell (then the
    caller sends, and a layer that is down reports itself there).

    Why ask at all: a group send to an empty Redis group still costs two round trips (its expiry
    sweep and member read), a real share of a busy server's time at 200 turns at once, and channels
    has no public way to ask. So this reads channels-redis's own storage: a sorted set per group,
    scored by when each channel joined (entries older than `group_expiry` no longer count), one
    ZCOUNT each, pipelined, one round trip per shard. That is private to channels-redis: the
    contract test (tests/common/test_layers.py) pins the version it was checked against. The
    in-memory layer keeps its groups in a dict, read exactly and for free.
    """
    if isinstance(layer, InMemoryChannelLayer):
        local: dict[str, Any] = getattr(layer, "groups", {})
        return {group: bool(local.get(group)) for group in groups}
    # By the class's lineage, not `isinstance`: importing channels-redis (and redis-py) where the
    # layer is not Redis would slow every start-up (`manage.py ask`).
    if not any(
        cls.__module__ == "channels_redis.core" and cls.__name__ == "RedisChannelLayer" for cls in type(layer).__mro__
    ):
        return dict.fromkeys(groups, True)
    return await _redis_groups_listened(layer, groups)


async def _redis_groups_listened(redis_layer: Any, groups: set[str]) -> dict[str, bool]:
    since = int(time.time()) - redis_layer.group_expiry
    by_shard: dict[int, list[str]] = {}
    for group in groups:
        by_shard.setdefault(redis_layer.consistent_hash(group), []).append(group)
    listened: dict[str, bool] = {}
    for shard, members in by_shard.items():
        try:
            async with redis_layer.connection(shard).pipeline(transaction=False) as pipe:
                for group in members:
                    pipe.zcount(redis_layer._group_key(group), since, "+inf")
                counts = await pipe.execute()
        except asyncio.CancelledError:
            raise
        except Exception:
            counts = [1] * len(members)  # cannot tell: the caller sends
        listened.update((group, int(count) > 0) for group, count in zip(members, counts, strict=True))
    return listened
