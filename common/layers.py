"""What Hermes needs of a channel layer beyond the Channels API, in one place.

Both helpers here work around how channels-redis (through redis-py) behaves on cancellation; the
turn registry (`agent.live`) and the HTTP followers of a turn (`api.turn_events`) share them.
"""

from __future__ import annotations

import asyncio
from typing import Any

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
